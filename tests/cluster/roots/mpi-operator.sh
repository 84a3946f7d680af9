# shellcheck shell=bash disable=SC2034,SC2154  # sourced by image_root.sh: it reads the variables, gives $here
# An mpi-operator image: the steps of mpi-operator's own Dockerfiles for its pi example
# (github.com/kubeflow/mpi-operator at caa3c47fc42eb762635f78045ec0fcd1a89eb038, Apache-2.0):
#   build/base/Dockerfile         FROM debian:trixie; apt install --no-install-recommends
#                                 openssh-server openssh-client (and libcap2-bin, removed after
#                                 its one use: setcap CAP_NET_BIND_SERVICE=+eip /usr/sbin/sshd);
#                                 mkdir -p /var/run/sshd; ssh_config: StrictHostKeyChecking no,
#                                 UserKnownHostsFile /dev/null, Port 2222; sshd_config:
#                                 StrictModes no, Port 2222; useradd -m mpiuser (uid 1000);
#                                 /home/mpiuser/.sshd_config (build/base/sshd_config + Port 2222)
#   build/base/openmpi.Dockerfile apt install --no-install-recommends openmpi-bin (Open MPI 5)
#   examples/v2beta1/pi/Dockerfile  the program, built in a builder image (trixie, g++,
#                                 libopenmpi-dev), copied to /home/mpiuser/pi
# The image has no compiler, and stays so: the program (tests/cluster/mpi_pi.c, written anew
# for upstream's pi.cc) is built on this machine with mpicc.openmpi, as the builder stage
# builds it apart (Debian 12's C library is older than trixie's: it runs there). setcap is the
# host's, on the root's sshd (the file capability is what the Dockerfile leaves).
# Sourced by image_root.sh (see there for the variables).
kind=debootstrap
suite=trixie
packages=openssh-server,openssh-client,openmpi-bin
inputs=(mpi_pi.c)
extra=(home/mpiuser/pi home/mpiuser/.sshd_config)
finish() {
  local root=$1 port=2222
  mkdir -p "$root/var/run/sshd"
  setcap CAP_NET_BIND_SERVICE=+eip "$root/usr/sbin/sshd"
  sed -i "s/[ #]\(.*StrictHostKeyChecking \).*/ \1no/g" "$root/etc/ssh/ssh_config"
  echo "    UserKnownHostsFile /dev/null" >> "$root/etc/ssh/ssh_config"
  sed -i "s/[ #]\(.*Port \).*/ \1$port/g" "$root/etc/ssh/ssh_config"
  sed -i "s/#\(StrictModes \).*/\1no/g" "$root/etc/ssh/sshd_config"
  sed -i "s/#\(Port \).*/\1$port/g" "$root/etc/ssh/sshd_config"
  chroot "$root" useradd -m mpiuser
  [[ $(chroot "$root" id -u mpiuser) == 1000 ]] || { echo "mpi-operator: mpiuser is not uid 1000" >&2; return 1; }
  printf 'PidFile /home/mpiuser/sshd.pid\nHostKey /home/mpiuser/.ssh/id_rsa\nStrictModes no\nPort %s\n' "$port" \
    > "$root/home/mpiuser/.sshd_config"
  chroot "$root" chown mpiuser /home/mpiuser/.sshd_config
  mpicc.openmpi -O2 -o "$root/home/mpiuser/pi" "$here/mpi_pi.c" -lm
}
