#!/usr/bin/env bash
# Rows: the bundle (docs/design.md, "The bundle"), what it weighs and what it costs where the
# runtimes give it: an init container's `mpi-bundle copy DEST` into an emptyDir of the user's
# own image, the programs then run from there through bin/NAME (bundle/start.c, the bundle's
# own loader). In one sitting, each figure beside a baseline measured with it:
#   size     the release build's bundle (build/release/trainer-mpi, stripped as the image's
#            install is): its total, then lib/ (the libraries and glibc) against libexec/ (the
#            programs), beside this project's Open MPI image, whose /opt/trainer-mpi it is;
#   copy     `mpi-bundle copy` (every byte hashed against MANIFEST, bin/ moved in last) into a
#            fresh tmpfs standing for the emptyDir (mounted anew each time), against `cp -a`
#            of the same folder into another: what the check costs. Goal: under 1 s;
#   start    `mpi-rank --version` 200 times through bin/mpi-rank (the static start, then the
#            bundle's loader called by hand) against libexec/mpi-rank run directly (this
#            machine's loader and libc: the build machine's), the two in turn each round;
#   launch   at 8 and 64 node pods of the cluster in a box (2 slots each; TMPI_BUNDLE_SIZES),
#            two clusters up at once, one from this project's image (`cib --image openmpi`: the
#            programs at /opt/trainer-mpi in the image) and one from a foreign root with the
#            bundle (`cib --root ROOT --bundle DIR`: copied into each pod's own volume,
#            mounted read-only at /opt/trainer-mpi). Each round runs on each cluster in turn
#            (the order swapped every other round, as rows/ssh_server.sh swaps its servers, so
#            that drift cancels): plain `mpirun --hostfile` of `true` (2 ranks a pod) and
#            `mpi-launcher run` at its defaults; every node serves mpi-sshd (the runtimes'
#            default) from /opt/trainer-mpi, and every command sees the image's PATH. Figures:
#            the medians of each, and the median of the rounds' ratios. Goal: <= 1.02.
# The foreign root (TMPI_BUNDLE_ROOT, tests/cluster/image_root.sh): bookworm-ompi4-core,
# Debian 12 with openmpi-bin and openssh-client, hwloc's plugins left out as the image leaves
# them out, and nothing of ours. Its Open MPI (4.1.4), hwloc, C library and ssh client are the
# project image's own, so the bundle is the one difference. The other roots differ in what
# dominates a launch here: bullseye's Open MPI 4.1.0 and hwloc 2.4 (orted's start is mostly
# hwloc on this VM: rows/ssh_server.sh), trixie's Open MPI 5 (prterun and prted, another
# launch altogether); TMPI_BUNDLE_ROOT=bookworm-ompi4 is Debian 12 as apt gives it, whose
# hwloc loads its GL, OpenCL and libxml2 plugins in mpirun and every orted: the image's
# cost, not the bundle's. The bundle the foreign pods get (TMPI_BUNDLE_LAUNCH): the image's
# own /opt/trainer-mpi, which is what the init container copies: both run the same bytes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pod_path=/opt/trainer-mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # the image's ENV PATH
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
if [[ ${1:-} != --in-cluster ]]; then
  bundle=${TMPI_BUNDLE:-$TMPI_BUILD_DIR/trainer-mpi}
  [[ -f $bundle/MANIFEST && -x $bundle/bin/mpi-bundle ]] || { echo "bundle: no bundle at $bundle (cmake --build --preset release)" >&2; exit 1; }
  image=$(bash "$root/images/build.sh" --root openmpi)
  foreign=$(bash "$root/tests/cluster/image_root.sh" "${TMPI_BUNDLE_ROOT:-bookworm-ompi4-core}")
  rounds=${TMPI_BUNDLE_ROUNDS:-7}
  work=$(mktemp -d "$TMPI_BUILD_DIR/bench-bundle.XXXXXX")  # not /tmp: each pod has its own
  cleanup() { umount -q "$work/fs" 2>/dev/null || true; rm -rf "$work"; }
  trap cleanup EXIT
  # --- size (bytes of the files, links as links; MB = 10^6 bytes) ---
  mb() { du -s --apparent-size -B1 "$@" | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }'; }
  printf '| bundle, release build: its size (bin/, lib/, libexec/, MANIFEST) vs this project'"'"'s Open MPI image, which holds it | %s MB | %s MB | %.2f | - |\n' \
    "$(mb "$bundle")" "$(mb -x "$image")" "$(echo "$(mb "$bundle") / $(mb -x "$image")" | bc -l)"
  printf '| bundle, release build: lib/ (libraries, glibc and its loader) vs libexec/ (the programs) | %s MB | %s MB | %.2f | - |\n' \
    "$(mb "$bundle/lib")" "$(mb "$bundle/libexec")" "$(echo "$(mb "$bundle/lib") / $(mb "$bundle/libexec")" | bc -l)"
  # --- copy into a fresh tmpfs (the emptyDir), checked, against cp -a ---
  mkdir -p "$work/fs"
  into_tmpfs() {  # into_tmpfs CMD...: seconds CMD takes with DEST a new tmpfs's folder
    mount -t tmpfs -o size=512m tmpfs "$work/fs"
    local t0 t1; t0=$(now); "$@" >/dev/null 2>&1 || { umount "$work/fs"; return 1; }; t1=$(now)
    umount "$work/fs"
    echo "$t1 - $t0" | bc -l
  }
  for round in $(seq "$rounds"); do
    if ((round % 2)); then order=(ours cp); else order=(cp ours); fi
    for way in "${order[@]}"; do
      if [[ $way == ours ]]; then into_tmpfs "$bundle/bin/mpi-bundle" copy "$work/fs/trainer-mpi" >> "$work/copy-ours" ||
          { echo "bundle: mpi-bundle copy failed" >&2; exit 1; }
      else into_tmpfs cp -a "$bundle" "$work/fs/trainer-mpi" >> "$work/copy-cp"; fi
    done
    echo "$(tail -n 1 "$work/copy-ours") / $(tail -n 1 "$work/copy-cp")" | bc -l >> "$work/copy-ratio"
  done
  printf '| bundle: copied into a fresh tmpfs (the emptyDir), `mpi-bundle copy` (checked) vs `cp -a` | %.3f s | %.3f s | %.2f | < 1 s |\n' \
    "$(median < "$work/copy-ours")" "$(median < "$work/copy-cp")" "$(median < "$work/copy-ratio")"
  # --- a program's start through the bundle ---
  [[ $("$bundle/libexec/mpi-rank" --version) == "$("$bundle/bin/mpi-rank" --version)" ]] ||
    { echo "bundle: mpi-rank --version differs through the start" >&2; exit 1; }
  times200() { local t0 t1; t0=$(now); for _ in $(seq 200); do "$1" --version >/dev/null; done; t1=$(now); echo "($t1 - $t0) * 1000 / 200" | bc -l; }
  for round in $(seq "$rounds"); do
    if ((round % 2)); then a=$(times200 "$bundle/bin/mpi-rank"); b=$(times200 "$bundle/libexec/mpi-rank")
    else b=$(times200 "$bundle/libexec/mpi-rank"); a=$(times200 "$bundle/bin/mpi-rank"); fi
    echo "$a" >> "$work/start-ours"; echo "$b" >> "$work/start-direct"; echo "$a / $b" | bc -l >> "$work/start-ratio"
  done
  printf '| bundle: one start of `mpi-rank --version` (x200 a round), bin/ (start, bundle loader) vs libexec/ run directly | %.2f ms | %.2f ms | %.2f | - |\n' \
    "$(median < "$work/start-ours")" "$(median < "$work/start-direct")" "$(median < "$work/start-ratio")"
  # --- the launch: two clusters at once, the image's and the foreign root's with the bundle ---
  # The image's root, copied: another build of the image (a test's, beside) replaces the
  # cached root, and the pods' overlays need theirs for the whole run.
  cp -a "$image" "$work/image-root"; image=$work/image-root
  launch_bundle=${TMPI_BUNDLE_LAUNCH:-$image/opt/trainer-mpi}
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  # TMPI_BUNDLE_SHARED=1: the foreign pods share one copy of the bundle, as the image's pods
  # share its files on this box (on a cluster each node holds one pod, and nothing is shared):
  # what the per-pod copies cost here, apart from the bundle itself.
  [[ -z ${TMPI_BUNDLE_SHARED:-} ]] || export CIB_BUNDLE_SHARED=1
  for n in ${TMPI_BUNDLE_SIZES:-8 64}; do
    "$root/tests/cluster/cib" run --jobset bench --nodes "$n" --root "$image" -- \
      bash -c 'CIB_IMAGE_DIR=$CIB_DIR exec "$1" run --jobset bench --nodes "$2" --root "$3" --bundle "$4" -- bash "$5" --in-cluster "$2"' \
      _ "$root/tests/cluster/cib" "$n" "$foreign" "$launch_bundle" "$0"
  done
  exit 0
fi
# In both clusters: CIB_IMAGE_DIR the image's, CIB_DIR the foreign root's with the bundle.
n=$2 foreign_dir=$CIB_DIR image_dir=$CIB_IMAGE_DIR
export TMPI_BIN=/opt/trainer-mpi/bin TMPI_NODE_SERVER=mpi-sshd PATH=$pod_path
source "$root/tests/cluster/lib.sh"
# on SIDE: the cluster whose pods the lib's helpers reach (image or foreign).
on() {
  if [[ $1 == image ]]; then CIB_DIR=$image_dir; else CIB_DIR=$foreign_dir; fi
  # shellcheck disable=SC2034  # SECRET: read by lib.sh's init_launcher and init_node
  ETC_MPI=$CIB_DIR/etc-mpi SECRET=$CIB_DIR/secret
  export CIB_DIR
}
for side in image foreign; do
  on "$side"
  init_launcher --slots 2
  for node in $(node_pods); do init_node "$node"; done
done
on foreign
[[ -f $CIB_DIR/bundle && ! -f $image_dir/bundle ]] || { echo "bundle: the clusters are not the image's and the bundle's" >&2; exit 1; }
in_pod "$(launcher_pod)" /opt/trainer-mpi/bin/mpi-bundle verify /opt/trainer-mpi >/dev/null ||
  { echo "bundle: no verified bundle in the foreign root's launcher" >&2; exit 1; }
np=$((2 * n)) rounds=${TMPI_BUNDLE_LAUNCH_ROUNDS:-$((n > 8 ? 5 : 7))}
export OMPI_MCA_btl=tcp,self  # both sides alike (bench/rows/launcher.sh says why)
timed() { sleep 1; local t0; t0=$(now); in_pod "$(launcher_pod)" "$@" >/dev/null 2>&1 || return 1; echo "$(now) - $t0" | bc; }
run_plain() {
  timed mpirun.openmpi --hostfile "$ETC_MPI/hostfile" -np "$np" --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --allow-run-as-root true
}
run_ours() {
  timed /opt/trainer-mpi/bin/mpi-launcher run --hosts "$ETC_MPI/hosts.json" --wait none --iface eth0 \
    --report "$CIB_DIR/r.json" -- true && jq -e '.exit.code == 0' "$CIB_DIR/r.json" >/dev/null
}
out=$foreign_dir/bench-out
mkdir -p "$out"
sync  # the pods' bundle copies and overlays written back now, not during the rounds
load0=$(cut -d' ' -f1 /proc/loadavg)
for round in $(seq "$rounds"); do
  order=(image foreign); ((round % 2)) || order=(foreign image)
  for side in "${order[@]}"; do
    on "$side"
    run_plain >> "$out/plain-$side" || { echo "bundle: plain mpirun failed on the $side cluster at $n pods" >&2; exit 1; }
    t=$(run_ours) || { echo "bundle: mpi-launcher run failed on the $side cluster at $n pods: $(cat "$CIB_DIR/r.json" 2>/dev/null)" >&2; exit 1; }
    echo "$t" | head -n 1 >> "$out/ours-$side"
  done
  [[ -z ${TMPI_BUNDLE_VERBOSE:-} ]] || for side in image foreign; do
    echo "bundle: $n pods, round $round, $side: plain $(tail -n 1 "$out/plain-$side") s, ours $(tail -n 1 "$out/ours-$side") s" >&2
  done
  for way in plain ours; do
    echo "$(tail -n 1 "$out/$way-foreign") / $(tail -n 1 "$out/$way-image")" | bc -l >> "$out/ratio-$way"
  done
done
copies=""; [[ -z ${CIB_BUNDLE_SHARED:-} ]] || copies=" (one copy shared by every pod)"
printf '| launch, %d pods: the box'"'"'s load average (1 min) as the rounds began, both clusters idle (2 cores: what else ran on the box) | %s | - | - | - |\n' \
  "$n" "$load0"
printf '| launch, %d pods (%d ranks, %d rounds): plain mpirun of `true`, foreign root (%s) with the bundle%s vs this project'"'"'s image | %.2f s | %.2f s | %.2f | <= 1.02 |\n' \
  "$n" "$np" "$rounds" "${TMPI_BUNDLE_ROOT:-bookworm-ompi4-core}" "$copies" "$(median < "$out/plain-foreign")" "$(median < "$out/plain-image")" "$(median < "$out/ratio-plain")"
printf '| launch, %d pods (%d ranks, %d rounds): mpi-launcher run at its defaults, foreign root (%s) with the bundle%s vs this project'"'"'s image | %.2f s | %.2f s | %.2f | <= 1.02 |\n' \
  "$n" "$np" "$rounds" "${TMPI_BUNDLE_ROOT:-bookworm-ompi4-core}" "$copies" "$(median < "$out/ours-foreign")" "$(median < "$out/ours-image")" "$(median < "$out/ratio-ours")"
