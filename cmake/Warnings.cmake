# Warnings for our own targets only (tmpi_warnings), so that Debian's headers stay quiet.
add_library(tmpi_warnings INTERFACE)
target_compile_options(tmpi_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
  -Wimplicit-fallthrough -Wformat=2)
# GCC 12 at -O3 reports false -Wrestrict on std::string concatenation (GCC bug 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(tmpi_warnings INTERFACE -Wno-restrict)
endif()
if(TMPI_WERROR)
  target_compile_options(tmpi_warnings INTERFACE -Werror)
endif()
if(TMPI_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TMPI_FUZZ)
  # Coverage instrumentation for everything the fuzzers link; the fuzz targets add
  # -fsanitize=fuzzer themselves (it brings libFuzzer's main).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
