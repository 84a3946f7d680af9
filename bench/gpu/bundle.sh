#!/usr/bin/env bash
# bench/gpu/bundle.sh: nccl-check and the Open MPI it runs under, packed to run on a GPU
# machine that has CUDA and NCCL but no Debian packages and no network (the device lent to
# some tasks: an image with CUDA, PyTorch and NCCL, nothing of Debian's).
#
# What it packs, into DIR (default build/gpu-bundle, which git ignores):
#   trainer-mpi/  the bundle itself (the release build's `cmake --install`, docs/design.md "The
#               bundle"): nccl-check with its own loader and libraries, which loads the
#               machine's MPI, NCCL (found on LD_LIBRARY_PATH, CUDA's folders) and CUDA driver;
#   mpi/        Open MPI 4.1 as Debian ships it, for a machine without an Open MPI 4 of its own:
#               orterun (as mpirun.openmpi), orted, every library they and their plugins load,
#               and the plugin trees (openmpi/, pmix2/, share/), which env.sh puts back where
#               Debian's build reads them from. A machine with its own Open MPI 4 (libmpi.so.40,
#               the same ABI) runs with that one: two Open MPIs' plugins and PMIx do not mix
#               (seen there: a symbol of its PMIx missing from ours);
#   env.sh      sourced there: the paths, and where CUDA's and NCCL's libraries are found.
# bench/gpu/run.sh and device_checks.sh use the bundle when TMPI_GPU_BUNDLE names it.
# Usage: bash bench/gpu/bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gpu-bundle}
multiarch=/usr/lib/x86_64-linux-gnu
cmake --preset release >/dev/null
cmake --build --preset release --target bundle >/dev/null
rm -rf "$dir"
mkdir -p "$dir/mpi/bin" "$dir/mpi/lib" "$dir/mpi/share"
build/release/trainer-mpi/bin/mpi-bundle copy "$dir/trainer-mpi" >/dev/null
cp "$(readlink -f /usr/bin/orterun)" "$dir/mpi/bin/mpirun.openmpi"
cp "$(readlink -f /usr/bin/orted)" "$dir/mpi/bin/orted"
cp -a "$multiarch/openmpi" "$dir/mpi/openmpi"
[[ -d $multiarch/pmix2 ]] && cp -a "$multiarch/pmix2" "$dir/mpi/pmix2"
cp -a /usr/share/openmpi "$dir/mpi/share/openmpi"
[[ -d /usr/share/pmix ]] && cp -a /usr/share/pmix "$dir/mpi/share/pmix"

# libraries_of FILE...: the shared libraries they load, by path, less the C and C++ runtimes
# and CUDA's and NCCL's.
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libnccl|libcudart|libcuda|linux-vdso)\.'
libraries_of() {
  { ldd "$@" || true; } 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    while read -r lib; do [[ $(basename "$lib") =~ $skip ]] || echo "$lib"; done
}
# MPI's: those of Open MPI's programs and of every plugin (a plugin whose library is missing
# fails to load, and Open MPI goes on without that component: so all of them are packed).
mapfile -t plugins < <(find "$dir/mpi/openmpi" "$dir/mpi/pmix2" -name '*.so' 2>/dev/null)
libraries_of "$dir/mpi/bin/mpirun.openmpi" "$dir/mpi/bin/orted" "${plugins[@]}" "$multiarch/libmpi.so.40" |
  xargs -r cp -L -t "$dir/mpi/lib"
cp -L "$multiarch/libmpi.so.40" "$dir/mpi/lib/"

cat >"$dir/env.sh" <<'ENV'
# Sourced on the GPU machine: Open MPI 4 (the machine's own, else the bundle's, put back
# where Debian's build reads its plugins from), and CUDA's and NCCL's libraries (the
# machine's: its CUDA toolkit's, or the wheels PyTorch came with).
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
multiarch=/usr/lib/x86_64-linux-gnu
mpi_path="" mpi_libs=""
if [[ -e $multiarch/libmpi.so.40 ]] && { command -v mpirun.openmpi || command -v mpirun; } >/dev/null; then
  if ! command -v mpirun.openmpi >/dev/null; then  # only the alternatives' name
    mkdir -p "$bundle/shim" && ln -sf "$(command -v mpirun)" "$bundle/shim/mpirun.openmpi"
    mpi_path="$bundle/shim:"
  fi
  echo "env.sh: the machine's own Open MPI: $(PATH="$mpi_path$PATH" mpirun.openmpi --version 2>&1 | head -n 1)"
else
  for tree in openmpi pmix2; do
    [[ -d $bundle/mpi/$tree && ! -e $multiarch/$tree ]] && mkdir -p "$multiarch" && cp -a "$bundle/mpi/$tree" "$multiarch/$tree"
  done
  for tree in openmpi pmix; do
    [[ -d $bundle/mpi/share/$tree && ! -e /usr/share/$tree ]] && cp -a "$bundle/mpi/share/$tree" "/usr/share/$tree"
  done
  mpi_path="$bundle/mpi/bin:" mpi_libs="$bundle/mpi/lib:"
  echo "env.sh: the bundle's Open MPI (Debian 12's)"
fi
# NCCL's folder, where the machine has one (nccl-check looks on LD_LIBRARY_PATH first).
cuda_libs=""
for soname in libnccl.so.2; do
  found=$(find -H /usr/local/cuda /usr/local/lib /usr/lib /opt -name "$soname" -print -quit 2>/dev/null || true)
  [[ -n $found ]] && cuda_libs+="$(dirname "$found"):"
done
export PATH="$bundle/trainer-mpi/bin:$mpi_path$PATH"
export LD_LIBRARY_PATH="$mpi_libs${cuda_libs}${LD_LIBRARY_PATH:-}"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
du -sh "$dir"
