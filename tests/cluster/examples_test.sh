#!/usr/bin/env bash
# An example TrainJob (MPI hello on manifests/base/runtime-openmpi.yaml, as `kubectl kustomize
# manifests/trainer-v2.3` renders it, by default; KIND below), run on the cluster in a box as
# Kubeflow Trainer v2.3 and JobSet would run it. tests/examples/render.py (the model of their
# transformation) renders the TrainJob, and the facts come from that rendering: cib's pods
# must be the rendered ones (hostnames, subdomain: the launcher, a host too, and the node
# pods); Trainer's objects are made from it (the hostfile ConfigMap as rendered, the SSH
# Secret with a fresh ECDSA P-521 PEM key, the kind Trainer makes); each pod's volumes are
# folders of that pod (tests/examples/pod_command.py; kubelet_lib.sh), as the kubelet makes
# them with the pod's fsGroup: an emptyDir root-owned, group fsGroup, 2777; a Secret's or
# ConfigMap's files root-owned, group fsGroup, the rendered modes plus group read, behind
# ..data. Each pod's /etc/passwd is the image's (mpiuser 1000, images/Dockerfile). Each pod
# then runs as the kubelet runs it: its init containers in order, a native sidecar
# (restartPolicy Always) left running, then its main container; each as the pod's user, with
# its rendered command and env (the TrainJob's command, Trainer's OMPI_MCA_* variables, fields
# from the pod's labels, nss_wrapper's) and no other variable but HOME, HOSTNAME and the
# image's PATH (this build's bundle where the image has its own). The pods start in the
# rendered order.
#
# Under `cib run --image VARIANT` (the images tests, tests/images), every pod runs from that
# image's root filesystem (cib says how), with the image's PATH (images/Dockerfile's ENV
# PATH) and nothing of the host's on it, so the image's own programs, MPI and python run it;
# the hello gets the launcher's --check mpi added.
#
# Usage (under cib run): examples_test.sh [KIND] [WHO]
# WHO, the uid that runs every pod (default runtime):
#   runtime        the rendered pods' securityContext (uid 1000, gid 1000, fsGroup 1000), every
#                  process under setpriv with no new privileges and no capabilities, as Pod
#                  Security "restricted" has them
#   root           uid 0 with every capability, fsGroup as rendered (a runtime patched to
#                  runAsUser 0 and no capability drop: sshd as root needs CAP_SYS_CHROOT)
#   arbitrary-uid  OpenShift's restricted SCC: uid 1000870000 that no passwd lists, gid 0,
#                  fsGroup 1000870000 (setpriv as in runtime)
#   nobody         uid 65534, gid 65534, fsGroup 65534: an entry whose shell is nologin and
#                  whose home does not exist (setpriv as in runtime)
# TMPI_EXAMPLES_OVERLAY: the package's overlay that installs the runtime (default trainer-v2.3:
# the built-in mpi-sshd serves every pod; openssh: OpenSSH's sshd, with nss_wrapper).
# KIND, which TrainJob (default hello: examples/trainjob-mpi-hello.yaml):
#   sdk            the TrainJob is the one Kubeflow's Python SDK makes from a
#                  CustomTrainer (tests/examples/sdk_trainjob.py): its command is the SDK's
#                  `mpirun --hostfile /etc/mpi/hostfile bash -c ...`, and the image's mpirun
#                  hand-off (launcher/mpirun_handoff.sh, first on the image's PATH as in
#                  images/Dockerfile) must give it to mpi-launcher: the preflight, the ranks
#                  under mpi-rank (the function reads RANK, which only the agent sets, and
#                  prints which python ran it: in an image, the image's), report.json. In an
#                  image the CustomTrainer also has packages_to_install (a wheel from a file
#                  index in this run's folder): every rank pip-installs it into HOME, and the
#                  function imports it from there. The
#                  function's file goes to the SDK's MPI user home: in an image the SDK's
#                  default, /home/mpiuser, with the pod's home emptyDir bound there as the
#                  kubelet mounts it; without one a tmpfs of each pod's own (this build's
#                  hand-off, and the host's python3 as `python`).
#   sdk-container  the TrainJob that the SDK makes from a CustomTrainerContainer: numNodes and
#                  an image, no command, so the runtime's own demo runs (its guard finds
#                  mpi-launcher in the image, then nccl-check under it).
#   deepspeed, megatron  examples/trainjob-{deepspeed,megatron}.yaml on
#                  manifests/base/runtime-pytorch.yaml (rendered likewise), cut down by tests/examples/cpu_smoke.py to 2 hosts
#                  of 2 CPU ranks with a torch.distributed (gloo) all-reduce as the script
#                  (DeepSpeed and Megatron-LM cannot be installed here); the runtime's pods and
#                  mpi-launcher's flags are the example's. Debian's torch stands in for the
#                  image's venv.
#   pi             mpi-operator's pi MPIJob through `mpi-launcher convert`, its program moved
#                  out of the home emptyDir as convert says; its mpirun line through the hand-off.
# Checked: the TrainJob's command exits 0; nccl-check passes over numProcPerNode ranks on each
# of numNodes hosts, the launcher included, and report.json agrees; each mpi-rendezvous exits
# 0 by itself after the job's end, and the launcher's other sidecars exit 0 when the kubelet
# stops the ended pod (SIGTERM, in reverse order); from the launcher's real exit code, the
# JobSet model (podFailurePolicy, successPolicy) calls the JobSet Completed, and its end
# deletes the node pods. And who ran it: every process of every pod has the pod's uid and
# gid, ~/.ssh is that uid's (0700). With mpi-sshd: no process preloads anything, no passwd or
# sshd file was written, and each server ran as the pod's uid and logged the job key in. With
# sshd: sshd_config has StrictModes no (HOME is a 2777 emptyDir), and sshd logged the job in
# by the uid's name (user<uid> from nss_wrapper where no passwd lists it).
source "$(dirname "$0")/lib.sh"
kind=${1:-hello} who=${2:-runtime}
mode="$kind as $who"  # for the messages
here=$(cd "$(dirname "$0")" && pwd)
# TMPI_EXAMPLES_TRAINJOB: another hello TrainJob (netpol_test.sh: short deadlines; kueue:
# runtimePatches), or for deepspeed one already cut down (netpol_test.sh: short deadlines).
trainjob=${TMPI_EXAMPLES_TRAINJOB:-$here/../../examples/trainjob-mpi-hello.yaml} rendered="$CIB_DIR/rendered.json"
image_path="$TMPI_BUILD_DIR/trainer-mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
image_root=$(cat "$CIB_DIR/image-root" 2>/dev/null || true)  # cib run --image: the pods' root
case $kind in
  hello) ;;
  sdk | sdk-container)
    # The SDK's TrainJob: a CustomTrainer's, or a CustomTrainerContainer's with an image built
    # FROM the runtime's (the box runs every pod from --image's root: that image stands for it).
    # The function's file goes to the SDK's DEFAULT_MPI_USER_HOME: in an image its default,
    # /home/mpiuser, where the runtime mounts the pod's home emptyDir (bound there below).
    # In an image, the CustomTrainer has packages_to_install, from a file index in this run's
    # folder (the pods see it at the same path; the box has no PyPI).
    user_home=/home/mpiuser trainjob="$CIB_DIR/sdk-trainjob.yaml" sdk_options=()
    [[ -n $image_root ]] || user_home="$CIB_DIR/mpiuser-home"
    if [[ $kind == sdk-container ]]; then sdk_options=(--image registry.example/team-a/my-trainer:1)
    elif [[ -n $image_root ]]; then sdk_options=(--packages-from "$CIB_DIR/pypi"); fi
    python3 "$here/../examples/sdk_trainjob.py" "$(subdomain)" 2 "$user_home" "${sdk_options[@]}" > "$trainjob" ||
      fail "sdk_trainjob.py"
    [[ -n $image_root ]] || mkdir -p "$CIB_DIR/image-bin" "$user_home" ;;
  deepspeed | megatron)
    # DeepSpeed's as the runtime's uid runs the fabric check at its defaults; the others (the
    # same runtime, the same check) cut down: they prove the uid and the TrainJob.
    if [[ -z ${TMPI_EXAMPLES_TRAINJOB:-} ]]; then
      trainjob="$CIB_DIR/smoke-trainjob.yaml" smoke_options=()
      [[ $kind == deepspeed && $who == runtime ]] || smoke_options=(--small-check)
      python3 "$here/../examples/cpu_smoke.py" "${smoke_options[@]}" "$here/../../examples/trainjob-$kind.yaml" > "$trainjob" ||
        fail "cpu_smoke.py"
    fi
    mkdir -p "$CIB_DIR/image-bin" ;;
  pi)
    # mpi-operator's pi MPIJob (tests/launcher/mpijobs/pi.yaml, as upstream has it), converted as
    # a user converts it. convert names its program's path, which the runtime's home emptyDir
    # hides, and the user installs the program elsewhere, as convert says: here this build's
    # pi (mpi_pi.c, written anew), in a folder of the pods' PATH, stands for it. convert turns
    # the MPIJob's `mpirun -n 2 ...` into `mpi-launcher run --mpirun-line -- -n 2 ...`.
    trainjob="$CIB_DIR/pi-trainjob.yaml"
    "$TMPI_BUILD_DIR/bin/mpi-launcher" convert "$here/../launcher/mpijobs/pi.yaml" > "$trainjob" 2> "$CIB_DIR/convert.log" ||
      fail "convert: $(cat "$CIB_DIR/convert.log")"
    expect_contains "$(cat "$CIB_DIR/convert.log")" "args[2] (/home/mpiuser/pi): the runtime mounts the pod's home" \
      "convert names the program that the home emptyDir hides"
    mkdir -p "$CIB_DIR/image-bin"
    install -m 755 "$TMPI_BUILD_DIR/tests/cluster/mpi_pi_openmpi" "$CIB_DIR/image-bin/pi"
    sed -i "s|/home/mpiuser/pi|/usr/local/bin/pi|" "$trainjob" ;;
  *) fail "unknown kind '$kind' (hello, sdk, sdk-container, deepspeed, megatron or pi)" ;;
esac
if [[ -n $image_root ]]; then
  [[ $kind == hello || $kind == sdk* ]] || fail "an image runs the hello and the SDK's TrainJobs only (the PyTorch image cannot be built here)"
  image_path="/opt/trainer-mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  mode+=" in the image $(basename "$image_root")"
fi
if [[ -n $image_root && $kind == hello ]]; then
  # The launcher's own MPI fabric check too (`mpi-launcher run --check mpi`), before the job.
  python3 -c 'import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
command = job["spec"]["trainer"]["command"]
assert command[:2] == ["mpi-launcher", "run"], command
command[2:2] = ["--check", "mpi"]
yaml.safe_dump(job, open(sys.argv[2], "w"))' "$trainjob" "$CIB_DIR/image-trainjob.yaml" || fail "could not add --check mpi to $trainjob"
  trainjob="$CIB_DIR/image-trainjob.yaml"
fi
if [[ -d $CIB_DIR/image-bin ]]; then  # `python`, as the PyTorch image has it (Debian's is python3)
  ln -s /usr/bin/python3 "$CIB_DIR/image-bin/python"
  image_path="$CIB_DIR/image-bin:$image_path"
fi
# The hello's nccl-check takes its step deadline (60 s, there to catch a hang, not a slow
# machine) doubled in a sanitized build, where ranks spinning on 2 cores are slow (6 of them
# took 0.7 s an iteration at 16 MiB). On its command line, which every rank gets: a variable
# in the launcher's container reaches only the ranks that mpirun starts there, and ranks
# whose deadlines differ would run different tests (nccl-check refuses them, exit 64).
if [[ ${TMPI_SANITIZED:-OFF} == ON && $kind == hello ]]; then
  python3 -c 'import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
command = job["spec"]["trainer"]["command"]
at = command.index("nccl-check") + 1
command[at:at] = ["--step-timeout", "120s"]
yaml.safe_dump(job, open(sys.argv[2], "w"))' "$trainjob" "$CIB_DIR/sanitized-trainjob.yaml" || fail "could not add --step-timeout to $trainjob"
  trainjob="$CIB_DIR/sanitized-trainjob.yaml"
fi
overlay=${TMPI_EXAMPLES_OVERLAY:-trainer-v2.3}
python3 "$here/../examples/render.py" "$trainjob" --overlay "$overlay" --json > "$rendered" ||
  fail "render.py could not render $trainjob on manifests/$overlay"
rq() { jq -r "$@" "$rendered"; }
# The pods' SSH server, as the runtime runs it: the node pods' main container.
server=$(rq '[.pods[] | select(.replicatedJob != "launcher") | .spec.containers[0].command[0] | split("/") | last] | unique | join(" ")')
[[ $server == mpi-sshd || $server == sshd ]] || fail "manifests/$overlay: the node pods run '$server', not one SSH server"
mode+=" with $server"
mapfile -t all < <(rq '.pods[].spec.hostname'); launcher=$(rq '.pods[] | select(.replicatedJob == "launcher") | .spec.hostname')
expect_eq "$(pods | sort | xargs)" "$(printf '%s\n' "${all[@]}" | sort | xargs)" "cib's pods (NODES in CMakeLists.txt) against the rendered ones"
expect_eq "$(subdomain)" "$(rq '[.pods[].spec.subdomain] | unique | join(" ")')" "cib's subdomain against the pods'"
hosts=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["trainer"]["numNodes"])' "$trainjob")
slots=$(rq .slots)  # the TrainJob's numProcPerNode, else the runtime's (the SDK sends none)
expect_eq "${#all[@]}" "$hosts" "the rendered pods: numNodes counts the launcher, a host too"

# Who the pods' processes are: one securityContext for every pod (a non-root sshd logs in
# only its own uid), none in a container; then the mode's.
read -r yaml_uid yaml_gid fs_group < <(rq '[.pods[].spec.securityContext | "\(.runAsUser // 0) \(.runAsGroup // 0) \(.fsGroup // 0)"]
  | unique | if length == 1 then .[0] else "mixed: \(join(", "))" end')
[[ $yaml_uid != mixed: ]] || fail "the pods' securityContexts differ: $yaml_gid $fs_group"
expect_eq "$(rq '[.pods[].spec | (.initContainers[]?, .containers[]) | .securityContext | (.runAsUser, .runAsGroup)? // empty] | length')" 0 \
  "the containers' own runAsUser and runAsGroup"
case $who in
  runtime) uid=$yaml_uid gid=$yaml_gid ;;
  root) uid=0 gid=0 ;;
  arbitrary-uid) uid=1000870000 gid=0 fs_group=1000870000 ;;
  nobody) uid=65534 gid=65534 fs_group=65534 ;;
  *) fail "unknown uid choice '$who' (runtime, root, arbitrary-uid or nobody)" ;;
esac
[[ $who != runtime || $uid != 0 ]] || fail "the runtime runs its pods as root"
as_pod_user=()
[[ $uid == 0 ]] || as_pod_user=(setpriv --reuid "$uid" --regid "$gid" --groups "$fs_group" --no-new-privs --bounding-set -all --inh-caps -all)
for pod in "${all[@]}"; do  # the image's /etc/passwd, in place: ip netns exec bound the inode
  f="/etc/netns/$("$CIB" ns "$pod")/passwd"
  { awk -F: '$3 != 1000 && $1 != "mpiuser"' "$f"; echo "mpiuser:x:1000:1000::/home/mpiuser:/bin/bash"; } > "$f.new"
  cat "$f.new" > "$f"; rm "$f.new"
done
login=$(in_pod "$launcher" getent passwd "$uid" | cut -d: -f1) || login=""
[[ $who != arbitrary-uid || -z $login ]] || fail "uid $uid has a passwd entry in the pods: $login"

# Trainer's MPI plugin: the Secret (a real key where the model has its kind) and the ConfigMap.
objects="$CIB_DIR/objects"; secret="$objects/$(rq .secret.metadata.name)" cm="$objects/$(rq .configmap.metadata.name)"
mkdir -p "$secret" "$cm"
ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -f "$secret/ssh-privatekey"
cut -d' ' -f1,2 "$secret/ssh-privatekey.pub" > "$secret/ssh-publickey"; rm "$secret/ssh-privatekey.pub"
for key in ssh-privatekey ssh-publickey; do
  expect_eq "$(head -c 19 "$secret/$key")" "$(rq ".secret.stringData[\"$key\"]" | head -c 19)" "the Secret's $key"
done
for key in $(rq '.configmap.data | keys[]'); do jq -j --arg k "$key" '.configmap.data[$k]' "$rendered" > "$cm/$key"; done

source "$here/kubelet_lib.sh"  # spec, make_volumes, start_pod (pid[POD/CONTAINER]), ended, sidecars

if [[ $kind == sdk* && -z $image_root ]]; then
  for pod in "${all[@]}"; do in_pod "$pod" mount -t tmpfs -o mode=1777,size=1m tmpfs "$user_home"; done
elif [[ $kind == sdk* ]]; then  # the pod's home emptyDir at its mountPath, as the kubelet mounts it
  for pod in "${all[@]}"; do
    home_dir=$(spec "$pod" | jq -r '.volumes[] | select(.name == "home") | .dir')
    [[ -n $home_dir ]] || fail "$pod has no volume 'home' for /home/mpiuser"
    mkdir -p "$home_dir" && in_pod "$pod" mount --bind "$home_dir" "$user_home" || fail "$pod: could not mount its home at $user_home"
  done
fi
[[ $server != sshd ]] || { mkdir -p /run/sshd && chmod 755 /run/sshd; }  # the image's sshd privilege-separation folder
# What the image adds on the pods' PATH (python, the user's program): in its /usr/local/bin,
# one of the folders that the runtime's PATH names (the runtime sets PATH: the image's own is
# not seen), bound there in each pod's own mount namespace.
if [[ -z $image_root && -d $CIB_DIR/image-bin ]]; then
  for pod in "${all[@]}"; do in_pod "$pod" mount --bind "$CIB_DIR/image-bin" /usr/local/bin || fail "$pod: could not bind the image's /usr/local/bin"; done
fi
for pod in "${all[@]}"; do start_pod "$pod"; done
main=$(rq --arg h "$launcher" '.pods[] | select(.spec.hostname == $h) | .spec.containers[0].name')
logs() { tail -n 8 "$CIB_DIR"/pods/*/*.log; }
ended "${pid[$launcher/$main]}" 240 || fail "the TrainJob's command still runs after 240 s:"$'\n'"$(logs)"
rc=0; wait "${pid[$launcher/$main]}" || rc=$?
out=$(cat "$CIB_DIR/pods/$launcher/$main.log")
[[ $rc == 0 ]] || fail "$mode: the TrainJob's command exited $rc: $out"$'\n'"$(logs)"
# Who ran it, while every pod's sshd still runs: each process of the pods (not cib's pause).
users=$(for pod in "${all[@]}"; do ip netns pids "$("$CIB" ns "$pod")"; done | xargs ps -o ruid=,euid=,rgid=,egid=,comm= -p |
        awk '$5 != "sleep" && $5 != "unshare" { print $1, $2, $3, $4 }' | sort -u)
expect_eq "$users" "$uid $uid $gid $gid" "$mode: the real and effective uid and gid of the pods' processes"
if [[ $server == mpi-sshd ]]; then  # nothing preloaded (nss_wrapper) into any of them
  for pod in "${all[@]}"; do
    for p in $(ip netns pids "$("$CIB" ns "$pod")"); do
      comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
      [[ $comm == sleep || $comm == unshare ]] && continue  # cib's pause
      preload=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep '^LD_PRELOAD=') || continue
      fail "$mode: $pod's $comm runs with $preload"
    done
  done
fi
# trainer-mpi's programs in the pods run from the bundle, under its own loader (bundle/start.c),
# never from this build's bin/; and the node pods' SSH server from the copy in their volume.
bundle_runs=0
for pod in "${all[@]}"; do
  for p in $(ip netns pids "$("$CIB" ns "$pod")"); do
    exe=$(readlink "/proc/$p/exe") || continue
    [[ $exe != "$TMPI_BUILD_DIR"/bin/* ]] || fail "$mode: $pod runs $exe, this build's program, not the bundle's"
    [[ $exe != */lib/glibc/ld-linux-x86-64.so.2 ]] || bundle_runs=$((bundle_runs + 1))
  done
done
if [[ $server == mpi-sshd ]]; then  # its servers outlive the job
  ((bundle_runs >= ${#all[@]})) || fail "$mode: $bundle_runs processes of the pods run under the bundle's loader; every pod has one at least"
  node=$(rq '.pods[] | select(.replicatedJob != "launcher") | .spec.hostname' | head -n 1)
  sshd_exe=$(readlink "/proc/$(pgrep -f -n "mpi-sshd" --ns "$(cut -d' ' -f1 <<<"$(ip netns pids "$("$CIB" ns "$node")")")" --nslist net)/exe") || sshd_exe=""
  [[ $sshd_exe == */volumes/trainer-mpi-bundle/lib/glibc/ld-linux-x86-64.so.2 ]] ||
    fail "$mode: $node's mpi-sshd runs $sshd_exe, not the bundle that the init container copied into its volume"
fi
# And from where: in an image, every process of a pod (not the pause) sees the pod's image
# root as its /, and none runs a program of this build.
if [[ -n $image_root ]]; then
  for pod in "${all[@]}"; do
    for p in $(ip netns pids "$("$CIB" ns "$pod")"); do
      comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
      [[ $comm == sleep || $comm == unshare ]] && continue
      seen=$(readlink "/proc/$p/root") exe=$(readlink "/proc/$p/exe") || continue
      expect_eq "$seen" "$CIB_DIR/pods/$pod/image/root" "$mode: the root of $pod's $comm ($p)"
      # The image's own file, or the bundle that the init container copied from the image into
      # the pod's volume; nothing else of this run's folder or this build.
      inside=${exe#"$seen"} bundle_copy="$CIB_DIR/pods/$pod/volumes/trainer-mpi-bundle/"
      [[ $exe == "$seen"/* && ($inside == "$bundle_copy"* || ($inside != "$TMPI_BUILD_DIR"/* && $inside != "$CIB_DIR"/*)) ]] ||
        fail "$mode: $pod's $comm runs $exe, not the image's"
    done
  done
fi
ranks=$((hosts * slots))
if [[ $kind == sdk ]]; then
  expect_contains "$out" "launching $ranks ranks" "mpi-launcher took the SDK's mpirun"
  # `python` as the pods' PATH finds it, links followed: in an image, a file of the image's
  # root, and that PATH names no folder of the host's (this build's, this run's).
  python=$(in_pod "$launcher" env -i PATH="$image_path" sh -c 'readlink -f "$(command -v python)"') || fail "$mode: no python on the pods' PATH"
  if [[ -n $image_root ]]; then
    [[ -x $image_root$python && $image_path != *"$CIB_DIR"* && $image_path != *"$TMPI_BUILD_DIR"* ]] ||
      fail "$mode: python ($python on $image_path) is not the image's own"
  fi
  # With packages_to_install, every rank installed the package with pip --user, into the
  # pod's home (its emptyDir), and the function imported it from there.
  installed=""
  if [[ -n $image_root ]]; then
    installed=", tmpi_probe 1\.0 from [^ ]+/\.local/lib/python3\.[0-9]+/site-packages/tmpi_probe/__init__\.py"
    expect_eq "$(grep -c '^Successfully installed Python packages (user): tmpi-probe$' <<<"$out")" "$ranks" "$mode: the SDK's pip install --user, by every rank"
    for pod in "${all[@]}"; do
      home_dir=$(spec "$pod" | jq -r '.volumes[] | select(.name == "home") | .dir')
      compgen -G "$home_dir/.local/lib/python3.*/site-packages/tmpi_probe/__init__.py" >/dev/null ||
        fail "$mode: the package is not in $pod's home emptyDir: $(find "$home_dir" -maxdepth 4 | head -n 20)"
    done
  fi
  for ((r = 0; r < ranks; r++)); do
    grep -qxE "sdk hello from rank $r of $ranks on [^ ]+ with $python$installed" <<<"$out" ||
      fail "$mode: rank $r did not run the function under mpi-rank with $python${installed:+ and the package}: $out"
  done
elif [[ $kind == sdk-container ]]; then
  # No command: the TrainJob's image (the launcher's node container) ran the runtime's demo.
  expect_eq "$(spec "$launcher" "$main" | jq -r '"\(.argv[0]) \(.argv[-1])"')" "/bin/sh trainer-mpi" "$mode: the runtime's own command"
  expect_eq "$(rq --arg h "$launcher" '.pods[] | select(.spec.hostname == $h) | .spec.containers[0].image')" \
    registry.example/team-a/my-trainer:1 "$mode: the launcher's node container's image"
  expect_contains "$out" "result: pass" "$mode: the demo's nccl-check"
  expect_contains "$out" "$ranks rank(s) on $hosts host(s)" "$mode: every slot of every host"
elif [[ $kind == pi ]]; then
  expect_contains "$out" "launching $ranks ranks" "$mode: mpi-launcher took the MPIJob's mpirun line"
  for ((r = 0; r < ranks; r++)); do expect_contains "$out" "pi worker $r of $ranks on " "$mode: rank $r"; done
  grep -qE "^pi is approximately 3\.14159265[0-9]*, error [0-9.e+-]+: ok$" <<<"$out" || fail "$mode: no estimate of pi: $out"
elif [[ $kind == deepspeed || $kind == megatron ]]; then
  expect_contains "$out" "fabric check: nccl-check --backend mpi over $ranks ranks" "$mode: the example's --check mpi"
  for ((r = 0; r < ranks; r++)); do
    expect_contains "$out" "torch gloo: rank $r of $ranks, local rank $((r % slots)), sum $((ranks * (ranks + 1) / 2))" "$mode: rank $r's all-reduce"
  done
  # Every rank's checkpoint file, in the one folder of the claim that every pod mounts
  # (the example's runtimePatches), written by the pods' uid.
  checkpoints=$(spec "$launcher" "$main" | jq -r '.argv[-1]')
  for ((r = 0; r < ranks; r++)); do
    [[ -s $checkpoints/rank-$r.pt ]] || fail "$mode: rank $r wrote no checkpoint in $checkpoints (the shared PVC)"
    expect_eq "$(stat -c %u "$checkpoints/rank-$r.pt")" "$uid" "$mode: the owner of rank $r's checkpoint"
  done
else
  [[ -z $image_root ]] || expect_contains "$out" "fabric check: nccl-check --backend mpi over $ranks ranks" "$mode: --check mpi"
  expect_contains "$out" "result: pass" "nccl-check's verdict"
  expect_contains "$out" "$ranks rank(s) on $hosts host(s)" "every slot of every host, the launcher's too"
fi
report=$(spec "$launcher" "$main" | jq -r .env.TMPI_REPORT)
expect_eq "$(jq -r .exit.code "$report")" 0 "report.json's exit code"
[[ $kind != sdk ]] || expect_eq "$(jq -r '[.phases[].name] | join(" ")' "$report")" "wait preflight job" "sdk: mpi-launcher's phases"
expect_eq "$(jq -r '[.ranks[].host] | group_by(.) | map("\(.[0])x\(length)") | join(" ")' "$report")" \
  "$(printf "%s\n" "${all[@]}" | sort | sed "s/\$/x$slots/" | xargs)" "report.json's ranks, per host"

# After the job's end: each mpi-rendezvous exits 0 by itself (the kubelet would restart it
# until its pod ends); then the launcher's pod ends, and the kubelet stops its other
# sidecars with SIGTERM, last started first.
for pod in "${all[@]}"; do
  for name in $(sidecars "$pod"); do
    [[ $name == mpi-rendezvous ]] || continue
    ended "${pid[$pod/$name]}" 15 || fail "$pod: $name still runs 15 s after the job's end: $(cat "$CIB_DIR/pods/$pod/$name.log")"
    wait "${pid[$pod/$name]}" || fail "$pod: $name exited $?: $(cat "$CIB_DIR/pods/$pod/$name.log")"
  done
done
for name in $(sidecars "$launcher" | tac); do
  [[ $name == mpi-rendezvous ]] && continue
  kill -TERM "${pid[$launcher/$name]}"
  ended "${pid[$launcher/$name]}" 10 || fail "$launcher: $name did not stop on SIGTERM"
  wait "${pid[$launcher/$name]}" || fail "$launcher: $name exited $? on SIGTERM: $(cat "$CIB_DIR/pods/$launcher/$name.log")"
done

# JobSet: the launcher's Job from its pod's real exit code (podFailurePolicy), then the
# successPolicy over the Jobs whose every pod has ended so.
verdict=$(PYTHONPATH="$here/../examples" python3 -c '
import json, sys, jobset_model as jm
out, ended = json.load(open(sys.argv[1])), {sys.argv[2]: int(sys.argv[3])}
done, outcomes = {}, []
for job in jm.jobs(out["jobset"]):
    mine = [p for p in out["pods"] if p["job"] == job["metadata"]["name"]]
    if all(p["spec"]["hostname"] in ended for p in mine):
        pods = [jm.pod_failure(job, p["spec"]["containers"][0]["name"], ended[p["spec"]["hostname"]])[0] for p in mine]
        outcomes += pods
        if set(pods) == {"Succeeded"}:
            done[job["replicatedJob"]] = done.get(job["replicatedJob"], 0) + 1
print(" ".join(outcomes), "Completed" if jm.succeeded(out["jobset"], done) else "not completed")
' "$rendered" "$launcher" "$rc")
expect_eq "$verdict" "Succeeded Completed" "the launcher's Job and the JobSet, by the model"
home=$(spec "$launcher" "$main" | jq -r .env.HOME)
expect_eq "$(stat -c '%u %a' "$home/.ssh")" "$uid 700" "$mode: the owner and mode of ~/.ssh"
if [[ $server == sshd ]]; then
  expect_contains "$(cat "$home/.ssh/sshd_config")" "StrictModes no" "$mode: sshd_config under a 2777 HOME"
  name=$(awk -F: -v u="$uid" '$3 == u { print $1; exit }' "$home/.nss_wrapper/passwd")
  expect_eq "$name" "${login:-user$uid}" "$mode: nss_wrapper's name for uid $uid"
  grep -qh "Accepted publickey for $name " "$CIB_DIR"/pods/*/*.log || fail "$mode: no sshd logged $name in: $(logs)"
else
  # Nothing for OpenSSH, no passwd of nss_wrapper's; every server as the pod's uid, and the
  # job key logged in on every host (the launcher's own ranks through its sidecar).
  left=$(for pod in "${all[@]}"; do
           h=$(spec "$pod" "$main" | jq -r .env.HOME)
           for f in "$h/.ssh/sshd_config" "$h/.ssh/authorized_keys" "$h/.nss_wrapper"; do [[ ! -e $f ]] || echo "$f"; done
         done)
  [[ -z $left ]] || fail "$mode: files that only OpenSSH reads: $left"
  for log in "$CIB_DIR/pods/$launcher/sshd.log" $(for pod in "${all[@]}"; do [[ $pod == "$launcher" ]] || echo "$CIB_DIR/pods/$pod/$main.log"; done); do
    grep -q "mpi-sshd on port 2222 .*, uid $uid," "$log" || fail "$mode: $log: not mpi-sshd as uid $uid: $(head -n 3 "$log")"
    grep -q "logged in as .* with the job key" "$log" || fail "$mode: $log: the job key never logged in: $(tail -n 5 "$log")"
  done
fi
# JobSet deletes the Jobs left (TMPI_EXAMPLES_KEEP_NODES: not yet; netpol_test.sh reads their counters).
[[ -n ${TMPI_EXAMPLES_KEEP_NODES:-} ]] || for pod in "${all[@]}"; do [[ $pod == "$launcher" ]] || "$CIB" delete "$pod" 10; done

grep -E "mpi-launcher|result" <<<"$out"
echo "phases: $(jq -r '[.phases[] | "\(.name) \(.seconds * 10 | round / 10) s"] | join(", ")' "$report")"
pass "$mode (uid $uid, gid $gid, fsGroup $fs_group): the TrainJob as Trainer renders it: $ranks ranks on $hosts hosts (launcher included), an all-reduce checked, every sidecar done, the JobSet completed"
