#!/usr/bin/env bash
# Installs, from Debian 12's packages, everything trainer-mpi needs to build, test and run
# its demo. Safe to re-run: it asks apt only when a package is missing.
set -euo pipefail
# --build: only what compiling the programs takes (images/Dockerfile's build stage, which
# must not carry the test tools, torch or debootstrap); ccache makes its rebuilds cheap.
build=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-dev libboost-program-options-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libssh-dev libcurl4-openssl-dev libyaml-cpp-dev libsodium-dev libseccomp-dev libsimdjson-dev libgtest-dev libgmock-dev
  libopenmpi-dev libmpich-dev
)
packages=(
  "${build[@]}" git clang-14 libclang-rt-14-dev clang-format clang-tidy openssl
  openmpi-bin mpich libpmix-dev
  openssh-server openssh-client ssh-audit libnss-wrapper iproute2 nftables util-linux procps psmisc curl bc jq time python3 python3-yaml
  rsync  # tests/cluster/nodessh_tools_test.sh: rsync over mpi-sshd
  dnsmasq-base  # tests/cluster/bundle_names_test.sh: the pods' DNS server, standing for kube-dns
  # paramiko: a client that ignores the SSH window, a stranger's gssapi and "none" requests
  # (tests/cluster); with asyncssh, the generated key as other SSH clients read it (tests/initcontainer)
  python3-paramiko python3-asyncssh
  debootstrap podman  # images/build.sh: the offline base, and the images built from images/Dockerfile
  python3-torch  # torch.distributed (gloo) under mpi-launcher: what DeepSpeed and Megatron-LM build on
)
case ${1:-} in
  --build) packages=("${build[@]}") ;;
  "") ;;
  *) echo "install-deps: unknown option '$1' (none, or --build)" >&2; exit 2 ;;
esac
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
