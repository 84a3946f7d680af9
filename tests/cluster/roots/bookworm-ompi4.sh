# shellcheck shell=bash disable=SC2034  # sourced by image_root.sh, which reads the variables
# Debian 12 (bookworm) minbase with Open MPI 4.1 and OpenSSH's client: a user's own image
# with the same MPI, C library and ssh client as this project's Open MPI image, and none of
# this project's programs. bench/rows/bundle.sh runs it with the bundle beside that image, so
# that the bundle is the one difference between the two launches. Sourced by image_root.sh.
kind=debootstrap
suite=bookworm
packages=openmpi-bin,openssh-client
