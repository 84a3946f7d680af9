#!/usr/bin/env bash
# Installs, from Debian 12's packages, everything trainer-mpi needs to build, test and run
# its demo. Safe to re-run: it asks apt only when a package is missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git clang-14 libclang-rt-14-dev
  clang-format clang-tidy
  libboost-dev libboost-program-options-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libssh-dev libcurl4-openssl-dev libyaml-cpp-dev libsodium-dev libsimdjson-dev openssl libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev mpich libmpich-dev libpmix-dev
  openssh-server openssh-client libnss-wrapper iproute2 util-linux procps psmisc curl bc jq time python3 python3-yaml debootstrap
  python3-torch  # torch.distributed (gloo) under mpi-launcher: what DeepSpeed and Megatron-LM build on
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ $(id -u) == 0 ]] || { echo "install-deps: run as root to install: ${missing[*]}" >&2; exit 2; }
  echo "install-deps: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
