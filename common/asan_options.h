// In a sanitized build (the asan preset), ASan wants its runtime first among the loaded
// libraries; a pod that preloads nss_wrapper (LD_PRELOAD, a non-root uid with no passwd
// entry: docs/design.md, "Non-root") puts that library first, which nss_wrapper needs and
// ASan need not mind. Included once per program: by cli.cpp, which every program but mpi-ssh
// links (main calls cli::run), and by mpi-ssh's own main. Weak, so that a program with
// options of its own (nccl-check) keeps them, and says this one too.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TMPI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TMPI_ASAN 1
#endif
#endif
#ifdef TMPI_ASAN
extern "C" __attribute__((weak)) const char*
__asan_default_options() {  // NOLINT(bugprone-reserved-identifier,misc-definitions-in-headers)
  return "verify_asan_link_order=0";
}
// The loader's own records of a library that nss_wrapper dlopens (libc, for its real NSS
// calls) are kept for the process's life and never freed; under the bundle's loader, called
// by hand (bundle/start.c), LeakSanitizer reports them as a leak of glibc's dlopen
// (_dl_map_object_deps). Nothing of ours allocates there.
extern "C" __attribute__((weak)) const char*
__lsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier,misc-definitions-in-headers)
  return "leak:_dl_map_object_deps\n";
}
#endif
