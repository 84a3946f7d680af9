#!/usr/bin/env bash
# Open MPI 5 (PRRTE) for real (extended label): every node runs its SSH server (SERVER:
# mpi-sshd, the runtimes' default, or openssh), and the launcher runs mpi-launcher and
# mpirun 5, all from a Debian 13 root (tests/cluster/ompi5_root.sh),
# bound into each pod's own mount namespace with the pod's /tmp, /etc/hosts and passwd.
# The libraries the root lacks come from root_libs.sh, on LD_LIBRARY_PATH (which the
# launcher forwards to every rank), never copied into the cached root.
# The job is the allreduce program (libmpi.so.40 resolves to Open MPI 5's inside the
# root); the launcher must detect Open MPI 5, pass PRRTE's parameters, and the placement
# check must pass: no rank may run on the launcher (Trainer #4028). Then a hostfile that puts
# every rank on the launcher: the agents must refuse to start them (exit 69).
# Usage (under cib run): ompi5_test.sh [mpi-sshd|openssh]
source "$(dirname "$0")/lib.sh"
server=${1:-mpi-sshd}
[[ $server == mpi-sshd || $server == openssh ]] || fail "unknown server '$server' (mpi-sshd or openssh)"
root=$(bash "$(dirname "$0")/ompi5_root.sh")
# What our programs need and the root lacks, from their dependency closure, checked to load.
libs=$(bash "$(dirname "$0")/root_libs.sh" "$root" "$CIB_DIR/ompi5-libs" "$TMPI_BUILD_DIR"/bin/*)
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
repo=$(cd "$(dirname "$0")/../.." && pwd)
# enter_root POD: bind what the pod sees into the root, in the pod's own mount namespace.
enter_root() {
  in_pod "$1" bash -c '
    root=$1; shift
    for dir in proc dev sys tmp run/sshd; do mkdir -p "$root/$dir"; done
    mountpoint -q "$root/sys" || mount --rbind /sys "$root/sys"
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    mountpoint -q "$root/dev" || mount --rbind /dev "$root/dev"
    mountpoint -q "$root/tmp" || mount --bind /tmp "$root/tmp"
    for file in /etc/hosts /etc/passwd /etc/resolv.conf; do touch "$root$file"; mount --bind "$file" "$root$file"; done
    for dir in "$@"; do mkdir -p "$root$dir"; mountpoint -q "$root$dir" || mount --bind "$dir" "$root$dir"; done
  ' _ "$root" "$repo" "$TMPI_BUILD_DIR" "$CIB_DIR"
}
init_launcher --slots 2
for pod in $(pods); do enter_root "$pod"; done
for node in "${nodes[@]}"; do
  in_pod "$node" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-server "$server" --ssh-secret "$SECRET" --log-level warn
  # The server inside the root, so that the commands it runs (prted) are the root's.
  if [[ $server == mpi-sshd ]]; then
    "$CIB" exec "$node" -- chroot "$root" env LD_LIBRARY_PATH="$libs" "$TMPI_BUILD_DIR/bin/mpi-sshd" \
      > "$CIB_DIR/pods/$node/sshd.log" 2>&1 &
  else
    "$CIB" exec "$node" -- chroot "$root" /usr/sbin/sshd -D -e -f "$CIB_DIR/pods/$node/home/.ssh/sshd_config" \
      > "$CIB_DIR/pods/$node/sshd.log" 2>&1 &
  fi
  start_sidecar "$node" --deadline 60s
done
out=$(in_pod "$launcher" chroot "$root" env LD_LIBRARY_PATH="$libs" "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" \
        --iface eth0 --report "$CIB_DIR/report.json" --beat-interval 1s --rendezvous-timeout 120s -- \
        "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi" 2>&1) || fail "the Open MPI 5 run failed: $out"
echo "$out"
expect_contains "$out" "launching 4 ranks (openmpi5)" "Open MPI 5 detected"
expect_contains "$out" "--prtemca plm_ssh_agent $TMPI_BUILD_DIR/bin/mpi-ssh" "PRRTE parameters"
# prterun's daemons started over the ssh check's connections (ssh/relay.h).
expect_contains "$out" "ssh relay: 2 command(s) ran over the check's connections, 0 went to ssh, 0 failed" "the relay"
expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "allreduce"
for rank in 0 1; do expect_contains "$out" "rank $rank/4 on ${nodes[0]}" "placement"; done
for rank in 2 3; do expect_contains "$out" "rank $rank/4 on ${nodes[1]}" "placement"; done
[[ $(jq -r '[.phases[].name] | join(",")' "$CIB_DIR/report.json") == "wait,preflight,job" ]] || fail "the preflight did not run"
# A user's own line, as a TrainJob's command, through the image's hand-off
# (launcher/mpirun_handoff.sh) and read with PRRTE's grammar: Horovod's options (docs/mpi.rst),
# then --map-by ppr:1:node --bind-to none (one rank a node).
mkdir -p "$CIB_DIR/image-bin"
install -m 755 "$repo/launcher/mpirun_handoff.sh" "$CIB_DIR/image-bin/mpirun"
ln -sf "$TMPI_BUILD_DIR/bin/mpi-launcher" "$CIB_DIR/image-bin/mpi-launcher"
hello=$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi
user_mpirun() {
  in_pod "$launcher" chroot "$root" env LD_LIBRARY_PATH="$libs" PATH="$CIB_DIR/image-bin:/usr/bin:/bin" \
    TMPI_HOSTS="$ETC_MPI/hosts.json" TMPI_WAIT=ssh TMPI_IFACE=eth0 TMPI_REPORT="$CIB_DIR/report.json" mpirun "$@"
}
out=$(user_mpirun -np 4 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH -mca pml ob1 \
        -mca btl '^openib' "$hello" 2>&1) || fail "Horovod's line under Open MPI 5: $out"
expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "Horovod's line under Open MPI 5"
expect_contains "$(jq -r '.command | join(" ")' "$CIB_DIR/report.json")" \
  "-bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH -mca pml ob1 -mca btl ^openib" "its options on prterun's line"
out=$(user_mpirun --map-by ppr:1:node --bind-to none "$hello" 2>&1) || fail "--map-by ppr:1:node under Open MPI 5: $out"
expect_contains "$out" "allreduce sum 1 over 2 ranks: ok" "--map-by ppr:1:node --bind-to none under Open MPI 5"
# Trainer #4028's misplacement, made on purpose: a hostfile that puts every rank on the
# launcher, as prterun does when it reads none. Each rank's agent finds itself there, not
# on its node, and does not start it: exit 69, every rank named.
printf 'localhost slots=2\n' > "$ETC_MPI/hostfile"  # 2 ranks: this machine has 2 cores to bind them to
rc=0
out=$(in_pod "$launcher" chroot "$root" env LD_LIBRARY_PATH="$libs" "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" \
        --iface eth0 --report "$CIB_DIR/report.json" --wait none --np 2 -- sh -c "touch $CIB_DIR/started-\$RANK" 2>&1) || rc=$?
[[ $rc == 69 ]] || fail "every rank on the launcher: expected exit 69, got $rc: $out"
# The first report stops the job at once: one row at least (the other agent may not have
# reported yet), and no rank started.
grep -qE "rank [01] ran on $launcher, the hostfile puts it here" <<<"$out" || fail "no misplaced rank named: $out"
for rank in 0 1; do
  [[ ! -e $CIB_DIR/started-$rank ]] || fail "rank $rank started on the launcher: $out"
done
pass "Open MPI 5.0.7 (PRRTE): detected, placement checked, allreduce across the node pods, a user's own mpirun lines through the hand-off; every rank on the launcher is refused"
