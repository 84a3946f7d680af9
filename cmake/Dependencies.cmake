# Every dependency is a Debian package (see scripts/install-deps.sh and ARCHITECTURE.md).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(libssh REQUIRED)            # target: ssh
find_package(OpenSSL 3 REQUIRED)         # libcrypto: mpi-sshd's monitor verifies a login itself (nodessh/login_proof.h)
find_package(CURL REQUIRED)
find_package(yaml-cpp REQUIRED)        # kubeconfig files
find_package(simdjson 3.0 REQUIRED)   # pod lists (common/json_filter.cpp); target: simdjson::simdjson
find_package(PkgConfig REQUIRED)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)  # HMAC-SHA256 proofs, nonces
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)  # mpi-sshd's session sandbox (nodessh/sandbox.h)
find_package(GTest REQUIRED)
# Static archives for the rank agent (common/CMakeLists.txt: tmpi_common_lean).
find_library(TMPI_SODIUM_STATIC libsodium.a REQUIRED)
find_library(TMPI_BOOST_PO_STATIC libboost_program_options.a REQUIRED)

# MPI: Debian installs Open MPI and MPICH side by side; tests build the same program
# with each implementation's own compiler wrapper (mpicc.openmpi, mpicc.mpich).
find_program(TMPI_MPICC_OPENMPI mpicc.openmpi)
find_program(TMPI_MPICC_MPICH mpicc.mpich)
find_program(TMPI_MPIRUN_OPENMPI mpirun.openmpi)
find_program(TMPI_MPIEXEC_HYDRA mpiexec.hydra)

# NCCL, for tests only: nccl-check builds without it and loads the image's at run time
# (ncclcheck/gpu_libraries.h). Where this machine has one (this machine and CI: CUDA's
# /usr/local/cuda), the tests run nccl-check with it, as in an image with NCCL.
set(TMPI_CUDA_ROOT "/usr/local/cuda" CACHE PATH "Where CUDA and NCCL live")
find_file(TMPI_NCCL_LIB libnccl.so.2 HINTS ${TMPI_CUDA_ROOT}/lib64 NO_DEFAULT_PATH)
if(TMPI_NCCL_LIB)
  set(TMPI_HAVE_NCCL ON)
else()
  set(TMPI_HAVE_NCCL OFF)
endif()
message(STATUS "trainer-mpi: NCCL for the tests ${TMPI_HAVE_NCCL} (${TMPI_CUDA_ROOT})")

# Link only the libraries a binary really uses (Debian's linker does not by default): the
# rank agent starts once per rank, and every shared library costs it load time.
add_link_options(-Wl,--as-needed)
