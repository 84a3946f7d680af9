#!/usr/bin/env bash
# Prints the Debian mirror that this machine's apt uses (deb822 sources or one-line ones),
# for the debootstrap calls of images/base.sh and tests/cluster/image_root.sh, so that a
# root they make comes from where the host's packages come from. TMPI_DEBIAN_MIRROR, when
# set, wins. Exits 2, saying so, when no source names a Debian mirror.
set -euo pipefail
if [[ -n ${TMPI_DEBIAN_MIRROR:-} ]]; then echo "$TMPI_DEBIAN_MIRROR"; exit 0; fi
uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }' | grep -E '/debian/?$' | head -n 1 || true)
[[ -n $uri ]] || uri=$(grep -hsE '^deb ' /etc/apt/sources.list | awk '{ print $2 }' | grep -E '/debian/?$' | head -n 1 || true)
[[ -n $uri ]] || { echo "no Debian mirror in /etc/apt/sources.list{,.d}: add one, or set TMPI_DEBIAN_MIRROR" >&2; exit 2; }
echo "$uri"
