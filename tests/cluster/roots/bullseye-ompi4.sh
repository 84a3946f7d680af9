# shellcheck shell=bash disable=SC2034  # sourced by image_root.sh, which reads the variables
# Debian 11 (bullseye) with its own Open MPI 4.1 and python3: a C library older than the
# build's (2.31 against 2.36). gcc and libopenmpi-dev so that the hello is compiled inside
# the root with its own mpicc: a program built on this machine would need GLIBC_2.34
# (__libc_start_main) and not start there. Sourced by image_root.sh (see there).
kind=debootstrap
suite=bullseye
packages=openmpi-bin,libopenmpi-dev,gcc,libc6-dev,python3
