#!/usr/bin/env bash
# The bundle (cmake --install: bin/, libexec/, lib/ with its own C library and loader) in
# images this project did not build its programs into, as the runtimes give it: an init
# container's `mpi-bundle copy` into a volume mounted at /opt/trainer-mpi, /opt/trainer-mpi/bin
# first on PATH (`cib run --bundle`). Every pod runs from the image's root (image_root.sh:
# Debian's own packages, keyed, verified, cached) as the uid WHO, and nothing of this build
# is in the pods: the build tree is not even visible there (cib binds only the run's folder).
# IMAGE (the root it runs from):
#   debian11      bullseye: Open MPI 4.1, python3, glibc 2.31 (older than the build's); the
#                 hello compiled in the pod with the image's own mpicc
#   trixie        Debian 13's Open MPI 5 (PRRTE): ompi5_root.sh's root; this build's hello
#   mpich         Debian 12 minbase + MPICH, no Open MPI; this build's hello (mpicc.mpich)
#   mpi-operator  mpi-operator's pi image, from its own Dockerfiles' steps (roots/mpi-operator.sh);
#                 the job is its pi MPIJob (tests/launcher/mpijobs/pi.yaml) as `mpi-launcher
#                 convert` gives it: the converted command line runs as it is
#   busybox       no C library: busybox-static alone. Every program's --version, and
#                 mpi-sshd serving OpenSSH's client (this machine's, outside the root)
# WHO: 1000 (uid and gid 1000, fsGroup 1000), or arbitrary (OpenShift's: uid 1000740000 that no
# passwd lists, gid 0, fsGroup 1000740000).
# The MPI images run the hello as a TrainJob whose command is the user's plain
# `mpirun -np 4 ./hello` line: the bundle's hand-off (bin/mpirun) gives it to mpi-launcher,
# which runs the image's own mpirun behind the preflight and the rank agents, with mpi-init,
# mpi-sshd and the mpi-rendezvous sidecars on the nodes (launcher_lib.sh's job, its programs
# from TMPI_BIN=/opt/trainer-mpi/bin). Checked: the output and report.json (success, the wait,
# preflight and job phases, the ranks under mpi-rank, the image's mpirun); that the bundle is
# there and verifies; that every program came from it (on PATH, and /proc/PID/exe of each
# pod's mpi-sshd and sidecar is the bundle's loader, in the pod's own root); that every
# process of the pods runs as WHO. Without --bundle there is no mpi-init in the pods: it fails.
# Usage: bundle_test.sh IMAGE [WHO]. Outside a cluster it makes the root, then runs itself
# under `cib run --root ROOT --bundle BUNDLE` (TMPI_BUNDLE: default $TMPI_BUILD_DIR/trainer-mpi).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${1:?usage: bundle_test.sh IMAGE [WHO]} who=${2:-1000}
case $image in
  debian11) root_name=bullseye-ompi4 nodes=2 flavour=openmpi4 ;;
  trixie) root_name=trixie-ompi5 nodes=2 flavour=openmpi5 ;;
  mpich) root_name=bookworm-mpich nodes=2 flavour=mpich ;;
  mpi-operator) root_name=mpi-operator nodes=2 flavour=openmpi5 ;;
  busybox) root_name=busybox nodes=1 ;;
  *) echo "bundle_test: unknown image '$image' (debian11, trixie, mpich, mpi-operator, busybox)" >&2; exit 2 ;;
esac
case $who in
  1000) uid=1000 gid=1000 groups=1000 ;;
  arbitrary) uid=1000740000 gid=0 groups=0,1000740000 ;;
  *) echo "bundle_test: unknown WHO '$who' (1000 or arbitrary)" >&2; exit 2 ;;
esac
if [[ -z ${CIB_DIR:-} ]]; then
  : "${TMPI_BUILD_DIR:?set by ctest: the build folder with the project binaries}"
  root=$(bash "$here/image_root.sh" "$root_name")
  bundle=${TMPI_BUNDLE:-$TMPI_BUILD_DIR/trainer-mpi}
  exec "$here/cib" run --jobset train --nodes "$nodes" --root "$root" --bundle "$bundle" -- "$0" "$@"
fi

export TMPI_BIN=/opt/trainer-mpi/bin TMPI_NODE_SERVER=mpi-sshd CIB_EXEC_USER="$uid:$gid:$groups"
source "$here/lib.sh"
mode="$image as uid $uid"
loader=/opt/trainer-mpi/lib/glibc/ld-linux-x86-64.so.2
launcher=$(launcher_pod); mapfile -t nodes < <(node_pods)
# HOME (cib's pod folder) and the folders that the pods' programs write are the uid's, as an
# emptyDir with fsGroup lets them be.
work=$CIB_DIR/work
mkdir -p "$ETC_MPI" "$work"
for pod in $(pods); do chown -R "$uid:$gid" "$CIB_DIR/pods/$pod/home"; done
chown "$uid:$gid" "$ETC_MPI" "$work"

# The bundle is in every pod, as the runtimes give it, and it is what PATH finds.
for pod in $(pods); do
  out=$(in_pod "$pod" /opt/trainer-mpi/bin/mpi-bundle verify /opt/trainer-mpi 2>&1) ||
    fail "$mode: no verified bundle at /opt/trainer-mpi in $pod (cib run --bundle): $out"
  found=$(in_pod "$pod" sh -c 'command -v mpi-init; command -v mpi-launcher; command -v mpirun') || found=""
  expect_eq "$found" $'/opt/trainer-mpi/bin/mpi-init\n/opt/trainer-mpi/bin/mpi-launcher\n/opt/trainer-mpi/bin/mpirun' \
    "$mode: the programs on $pod's PATH"
  [[ -z $(in_pod "$pod" sh -c "grep ':$uid:' /etc/passwd" || true) || $who == 1000 ]] || fail "$mode: uid $uid has a passwd entry"
done

# from_bundle POD PID WHAT: PID runs in POD's own root, under the bundle's loader, as the uid.
from_bundle() {
  local seen exe owner
  for _ in $(seq 50); do  # a sidecar's pid is cib exec's until it has entered the pod's root
    seen=$(readlink "/proc/$2/root") || fail "$mode: $3 ($2) in $1 is gone"
    [[ $seen == / ]] || break
    sleep 0.1
  done
  expect_eq "$seen" "$CIB_DIR/pods/$1/image/root" "$mode: the root of $1's $3"
  exe=$(CIB_EXEC_USER="" in_pod "$1" readlink "/proc/$2/exe") || fail "$mode: cannot read $1's $3's exe"
  expect_eq "$exe" "$loader" "$mode: the program that $1's $3 ($2) runs"
  owner=$(awk '/^Uid:/ { print $2 }' "/proc/$2/status")
  expect_eq "$owner" "$uid" "$mode: $1's $3's uid"
}
# pod_processes POD: "pid comm" of every process of the pod but cib's pause.
pod_processes() {
  local p comm
  for p in $(ip netns pids "$("$CIB" ns "$1")"); do
    comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    case $comm in sleep | unshare | nsenter | chroot) ;; *) echo "$p $comm" ;; esac  # cib's pause, cib exec's way in
  done
}

if [[ $image == busybox ]]; then
  [[ ! -e $CIB_DIR/pods/$launcher/image/root/lib/x86_64-linux-gnu/libc.so.6 ]] || fail "the busybox root has a C library"
  # Every program's --version, under the bundle's loader: the image has none. nccl-check (and
  # nccl-check.mpich) load the image's MPI, NCCL and CUDA, which the bundle leaves to the image
  # (bundle/install.cmake): here they must fail naming the library, not start half-loaded.
  programs=$(in_pod "$launcher" ls /opt/trainer-mpi/bin)
  [[ $(wc -l <<<"$programs") -ge 10 ]] || fail "the bundle's bin/: $programs"
  for program in $programs; do
    rc=0; out=$(in_pod "$launcher" "$program" --version 2>&1) || rc=$?
    case $program in
      mpirun)  # the hand-off, under busybox's sh: no MPI in this image, said so
        expect_eq "$rc" 127 "$mode: mpirun (the hand-off) --version with no MPI in the image"
        expect_contains "$out" "no MPI's mpirun on PATH" "$mode: the hand-off under busybox sh" ;;
      nccl-check*)
        [[ $rc != 0 ]] || fail "$mode: $program started with no MPI library: $out"
        grep -qE 'lib(mpi|mpich|nccl|cudart)[^ ]*\.so.*(cannot open|No such file)' <<<"$out" ||
          fail "$mode: $program did not name the image library it lacks: $out" ;;
      *) expect_eq "$rc" 0 "$mode: $program --version ($out)"
         [[ $out == "${program%%.*} "[0-9]* ]] || fail "$mode: $program --version printed: $out" ;;
    esac
  done
  pass "$mode: every program's --version from the bundle with no C library in the image (nccl-check names the MPI it needs)"
  # mpi-sshd from the job key (the Secret), serving OpenSSH's client from this machine.
  node=${nodes[0]}; mkdir -p "$SECRET"
  ssh-keygen -q -t ed25519 -N '' -C job -f "$CIB_DIR/job-key"
  cp "$CIB_DIR/job-key" "$SECRET/ssh-privatekey"; cut -d' ' -f1,2 "$CIB_DIR/job-key.pub" > "$SECRET/ssh-publickey"
  chmod 444 "$SECRET"/*; chmod 555 "$SECRET"
  init_node "$node"
  # Pinned: the host key mpi-sshd derives from the job key, as mpi-init wrote it beside the key.
  echo "[$node.$(subdomain)]:2222 $(cut -d' ' -f1,2 "$CIB_DIR/pods/$node/home/.ssh/ssh_host_ed25519_key.pub")" > "$CIB_DIR/known_hosts"
  client=(ip netns exec "$("$CIB" ns "$launcher")" ssh -F none -i "$CIB_DIR/job-key" -p 2222 -o BatchMode=yes
          -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$CIB_DIR/known_hosts" -l "u$uid" "$node.$(subdomain)")
  rc=0
  # shellcheck disable=SC2016  # expanded by the pod's sh
  out=$(timeout 30 "${client[@]}" 'echo "uid=$(id -u) home=$HOME"; readlink /bin/sh; echo err >&2; exit 7' 2>"$CIB_DIR/ssh.err") || rc=$?
  expect_eq "$rc" 7 "$mode: the command's exit status over mpi-sshd (stderr: $(cat "$CIB_DIR/ssh.err"))"
  expect_eq "$out" "uid=$uid home=$CIB_DIR/pods/$node/home"$'\n'"/bin/busybox" "$mode: the command's output"
  expect_contains "$(cat "$CIB_DIR/ssh.err")" "err" "$mode: the command's stderr"
  from_bundle "$node" "$(server_pid "$node")" mpi-sshd
  pass "$mode: mpi-sshd from the bundle served OpenSSH's client (exit 7, stdout and stderr apart, /bin/sh is busybox)"
  exit 0
fi

# The MPI images: the job, on launcher_lib.sh's pods (mpi-init, mpi-sshd, the sidecars).
report=$work/report.json
case $image in
  mpi-operator)
    # The MPIJob as a user converts it, run as the TrainJob's command line.
    "$(cat "$CIB_DIR/bundle")/bin/mpi-launcher" convert "$here/../launcher/mpijobs/pi.yaml" > "$work/pi-trainjob.yaml" 2> "$work/convert.log" ||
      fail "convert: $(cat "$work/convert.log")"
    mapfile -t line < <(/usr/bin/python3 -c 'import sys, yaml
trainer = yaml.safe_load(open(sys.argv[1]))["spec"]["trainer"]
print("\n".join(trainer["command"] + trainer.get("args", [])))
print(trainer["numProcPerNode"], file=sys.stderr)' "$work/pi-trainjob.yaml" 2> "$work/slots")
    # The MPIJob's `mpirun -n 2 /home/mpiuser/pi`: as it is (the hand-off takes it), or as
    # `mpi-launcher run --mpirun-line -- ...` (convert hands it over itself).
    if ! [[ ${line[0]} == mpirun || "${line[*]:0:4}" == "mpi-launcher run --mpirun-line --" ]] ||
       [[ "${line[*]}" != *" -n 2 /home/mpiuser/pi" ]]; then
      fail "$mode: the converted command line: ${line[*]}"
    fi
    export TMPI_SLOTS; TMPI_SLOTS=$(cat "$work/slots")
    cwd=/home/mpiuser ranks=2  # the image's WORKDIR
    if [[ $who == arbitrary ]]; then
      # The image's /home/mpiuser (its WORKDIR, and the program in it) is 0700 and uid 1000's
      # (trixie's useradd -m: HOME_MODE 0700): another uid reaches neither, under mpi-operator
      # as under Trainer. A container whose WORKDIR its uid cannot enter does not start, so the
      # line runs from the pod's HOME, and the job must fail through the whole path, and say
      # why: the preflight passed, then each rank's program refused (EACCES), in report.json.
      [[ $(stat -c '%a %u' "$(cat "$CIB_DIR/image-root")/home/mpiuser") == "700 1000" ]] ||
        fail "$mode: the image's /home/mpiuser is no longer 0700 uid 1000: run pi as the other images run the hello"
      cwd=$CIB_DIR/pods/$(launcher_pod)/home refused=1
    fi ;;  *)
    cp "$here/mpi_hello.c" "$work/"; chown "$uid:$gid" "$work/mpi_hello.c"
    line=(mpirun -np 4 ./hello) cwd=$work ranks=4 ;;
esac
source "$here/launcher_lib.sh" "$image"
report=$work/report.json
case $image in
  debian11) in_pod "$launcher" mpicc -O2 -o "$work/hello" "$work/mpi_hello.c" || fail "$mode: the image's mpicc" ;;
  trixie) install -o "$uid" -m 755 "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi" "$work/hello" ;;
  mpich) install -o "$uid" -m 755 "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_mpich" "$work/hello" ;;
esac
with_sidecars
for node in "${nodes[@]}"; do
  from_bundle "$node" "$(server_pid "$node")" mpi-sshd
  from_bundle "$node" "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" mpi-rendezvous
done
# The TrainJob's command in the launcher pod, with the runtime's variables, from the image's
# working folder. Its uid, while it runs: every process of every pod.
rc=0
# shellcheck disable=SC2016  # expanded by the pod's sh
in_pod "$launcher" timeout -k 5 240 env TMPI_HOSTS="$ETC_MPI/hosts.json" TMPI_REPORT="$report" TMPI_IFACE=eth0 TMPI_EVENTS=off \
  sh -c 'cd "$1" && shift && exec "$@"' sh "$cwd" "${line[@]}" > "$work/job.log" 2>&1 &
job=$!
users=""
while kill -0 "$job" 2>/dev/null; do
  for pod in $(pods); do
    while read -r p comm; do
      [[ -n $p ]] || continue
      ids=$(awk '/^Uid:/ { print $2, $3 }' "/proc/$p/status" 2>/dev/null) || continue  # ended meanwhile
      users+="$ids $comm"$'\n'
    done < <(pod_processes "$pod")
  done
  sleep 0.2
done
wait "$job" || rc=$?
out=$(cat "$work/job.log")
echo "$out"
expect_contains "$out" "launching $ranks ranks ($flavour)" "$mode: mpi-launcher found the image's MPI"
if [[ -n ${refused:-} ]]; then
  [[ $rc != 0 ]] || fail "$mode: pi ran from the image's 0700 home: $out"
  expect_eq "$(jq -r '[.phases[].name] | join(",")' "$report")" "wait,preflight,job" "$mode: report.json's phases"
  expect_contains "$out" "/home/mpiuser/pi" "$mode: the refused program named"
  expect_contains "$out" "Permission denied" "$mode: why it was refused"
  pass "$mode: \`${line[*]}\` through the bundle's mpi-launcher, failed as it must: the image's home is 0700 uid 1000 (exit $rc)"
  exit 0
fi
[[ $rc == 0 ]] || fail "$mode: \`${line[*]}\` exited $rc"$'\n'"$(tail -n 5 "$CIB_DIR"/pods/*/sidecar.log)"
others=$(grep -v "^$uid $uid " <<<"$users" | sort -u || true)
[[ -z $others ]] || fail "$mode: processes of the pods ran as another uid: $others"
grep -q "^$uid $uid ld-linux" <<<"$users" || fail "$mode: none of the bundle's programs seen running in the pods"
# The job: through the hand-off to mpi-launcher, the image's mpirun behind it.
expect_eq "$(jq -r .exit.code "$report")" 0 "$mode: report.json's exit code"
expect_eq "$(jq -r '[.phases[].name] | join(",")' "$report")" "wait,preflight,job" "$mode: report.json's phases"
expect_eq "$(jq '.ranks | length' "$report")" "$ranks" "$mode: report.json's ranks"
command=$(jq -r '.command | join(" ")' "$report")
expect_contains "$command" "/opt/trainer-mpi/bin/mpi-rank -- " "$mode: the ranks under the bundle's rank agent"
case $(jq -r '.command[0]' "$report") in
  /usr/bin/mpirun* | /usr/bin/prterun | /usr/bin/mpiexec*) ;;
  *) fail "$mode: mpi-launcher ran $(jq -r '.command[0]' "$report"), not the image's mpirun" ;;
esac
if [[ $image == mpi-operator ]]; then
  expect_contains "$out" "pi is approximately" "$mode: pi"
  expect_contains "$out" ": ok" "$mode: pi's value"
else
  expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "$mode: the allreduce"
  for rank in 0 1; do expect_contains "$out" "rank $rank/4 on ${nodes[0]}" "$mode: placement"; done
  for rank in 2 3; do expect_contains "$out" "rank $rank/4 on ${nodes[1]}" "$mode: placement"; done
fi
# A person's tools from the bundle, as `kubectl exec -it LAUNCHER` gives them: the shell's
# ssh (mpi-ssh with the job's options; mpi-ssh-client where the image has no ssh, or passwd no
# entry for the uid) to a node, whose mpi-sshd runs the command in the image's /bin/sh.
if [[ $image != mpi-operator ]]; then
  # shellcheck disable=SC2016  # expanded by the pods' shells
  out=$(printf '%s\n' "ssh ${nodes[1]}.$(subdomain) 'echo \"on \$(hostname) as \$(id -u)\"' </dev/null; echo \"ssh: \$?\"" exit |
    in_pod "$launcher" env SHELL=/bin/sh TMPDIR="$work" mpi-launcher shell --hosts "$ETC_MPI/hosts.json" 2>&1) ||
    fail "$mode: mpi-launcher shell from the bundle: $out"
  expect_contains "$out" "ssh HOST [COMMAND]: to the job's pods, as MPI reaches them" "$mode: the shell's banner"
  expect_contains "$out" "on ${nodes[1]} as $uid" "$mode: a person's ssh in the shell"
  expect_contains "$out" "ssh: 0" "$mode: the ssh's exit status"
fi
pass "$mode: \`${line[*]}\` ($( [[ ${line[0]} == mpirun ]] && echo "through the bundle's hand-off" || echo "the bundle's mpi-launcher")), the image's $(jq -r '.command[0]' "$report") under mpi-launcher; every program from /opt/trainer-mpi"
