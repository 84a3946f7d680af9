# shellcheck shell=bash disable=SC2034  # sourced by image_root.sh, which reads the variables
# No C library at all: Debian's busybox-static (this machine's apt, `apt-get download`; its
# sha256 recorded) as /bin/busybox, with its applet links (sh, env, readlink, id, ...), and
# the few files a pod's root needs (cib binds the pod's hosts, resolv.conf and passwd over
# them; /proc, /dev, /sys and /tmp are mounted on the folders). Sourced by image_root.sh.
kind=busybox
finish() {
  local root=$1
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,dev,sys,tmp,root,home,opt}
  chmod 1777 "$root/tmp"
  chroot "$root" /bin/busybox --install -s
  [[ -L $root/bin/sh ]] || { echo "busybox: no /bin/sh applet link" >&2; return 1; }
  echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
  echo 'root:x:0:' > "$root/etc/group"
  : > "$root/etc/hosts"; : > "$root/etc/resolv.conf"
  if [[ -n $(find "$root" -name 'libc.so*' -o -name 'ld-linux*') ]]; then echo "busybox: a C library came in" >&2; return 1; fi
}
