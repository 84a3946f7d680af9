# shellcheck shell=bash disable=SC2034  # sourced by image_root.sh, which reads the variables
# Debian 13 (trixie) with its own Open MPI 5 (PRRTE): the extended tests' root
# (ompi5_test.sh, ompi5_loads_test.sh) and bundle_test.sh's "trixie" image. Sourced by
# image_root.sh (see there for the variables).
kind=debootstrap
suite=trixie
packages=openmpi-bin,openssh-server,openssh-client,procps,iproute2
