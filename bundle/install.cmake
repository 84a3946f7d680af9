# The bundle's last install step (run by `cmake --install`, after the programs are in
# libexec/ and the start in libexec/start): makes the prefix a bundle that runs in any
# x86-64 Linux image (bundle/start.c says how).
#   bin/NAME      a link to ../libexec/start, for each program (and mpirun, the hand-off);
#   lib/glibc/    the C library and its loader, the build machine's: the programs run under
#                 this loader, never the image's (nccl-check excepted: start.c);
#   lib/          every other library the programs load, as this machine's loader resolves
#                 them (CMake's file(GET_RUNTIME_DEPENDENCIES): no list kept by hand);
#   MANIFEST      one line per file: "f SHA256 SIZE PATH", or "l TARGET PATH" for a link;
#                 `mpi-bundle copy` checks every byte against it.
# Left out on purpose, so that the image's own are used: any MPI (a program runs only under
# the MPI its daemons belong to; two Open MPIs' plugins and PMIx do not mix), NCCL and CUDA
# (the image's driver stack decides those), and the kernel's vDSO.
# Input: TMPI_BUNDLE_PROGRAMS (the program names in libexec/).
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(programs ${TMPI_BUNDLE_PROGRAMS})
set(executables "")
foreach(program IN LISTS programs)
  if(EXISTS "${prefix}/libexec/${program}")
    list(APPEND executables "${prefix}/libexec/${program}")
  endif()
endforeach()

file(REMOVE_RECURSE "${prefix}/lib")
file(MAKE_DIRECTORY "${prefix}/lib/glibc" "${prefix}/bin")
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${executables}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  PRE_EXCLUDE_REGEXES
    "^libmpi" "^libmpich" "^libopen-(pal|rte)" "^libpmix" "^libprrte" "^libnccl" "^libcuda" "^libcudart"
    "^linux-vdso")
if(unresolved)
  message(FATAL_ERROR "bundle: libraries that no path resolves: ${unresolved}")
endif()
# glibc's own libraries, which must come from one glibc, with its loader.
set(glibc_names "^(ld-linux-x86-64\\.so\\.2|libc\\.so\\.6|libm\\.so\\.6|libmvec\\.so\\.1|libpthread\\.so\\.0|libdl\\.so\\.2|librt\\.so\\.1|libresolv\\.so\\.2|libutil\\.so\\.1|libanl\\.so\\.1)$")
# All of glibc's own, whether or not a program names them: a library of the image's that a
# program loads later (its MPI, NCCL) may need any of them, and they must match this libc.
list(APPEND resolved "/lib64/ld-linux-x86-64.so.2")
foreach(name libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libutil.so.1
             libanl.so.1)
  foreach(folder /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu)
    if(EXISTS "${folder}/${name}")
      list(APPEND resolved "${folder}/${name}")
      break()
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES resolved)
foreach(library IN LISTS resolved)
  get_filename_component(name "${library}" NAME)
  if(name MATCHES "${glibc_names}")
    file(COPY_FILE "${library}" "${prefix}/lib/glibc/${name}")
  else()
    file(COPY_FILE "${library}" "${prefix}/lib/${name}")
  endif()
endforeach()
file(CHMOD_RECURSE "${prefix}/lib" FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
     GROUP_EXECUTE WORLD_READ WORLD_EXECUTE DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE
     OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

foreach(program IN LISTS programs)
  if(EXISTS "${prefix}/libexec/${program}")
    file(REMOVE "${prefix}/bin/${program}")
    file(CREATE_LINK "../libexec/start" "${prefix}/bin/${program}" SYMBOLIC)
  endif()
endforeach()

# The manifest, in a stable order; written beside, then renamed: never half a manifest.
file(GLOB_RECURSE entries LIST_DIRECTORIES false RELATIVE "${prefix}" "${prefix}/bin/*" "${prefix}/lib/*"
     "${prefix}/libexec/*")
list(SORT entries)
set(manifest "")
foreach(entry IN LISTS entries)
  if(IS_SYMLINK "${prefix}/${entry}")
    file(READ_SYMLINK "${prefix}/${entry}" target)
    string(APPEND manifest "l ${target} ${entry}\n")
  else()
    file(SHA256 "${prefix}/${entry}" sum)
    file(SIZE "${prefix}/${entry}" size)
    string(APPEND manifest "f ${sum} ${size} ${entry}\n")
  endif()
endforeach()
file(WRITE "${prefix}/MANIFEST.tmp" "${manifest}")
file(RENAME "${prefix}/MANIFEST.tmp" "${prefix}/MANIFEST")
list(LENGTH entries count)
message(STATUS "bundle: ${count} files in ${prefix} (MANIFEST)")
