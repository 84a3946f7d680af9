#!/usr/bin/env bash
# nccl-check's MPI backend on this machine alone: 4 ranks of one host under Open MPI's
# mpirun (shared memory, so a rank's buffers are read in place by its peers). In the asan
# preset this is the ASan run of the MPI backend.
#   defaults      no flag but --backend mpi: the default sizes (all-reduces of 1 to 64 MiB,
#                 the MPI backend's default, and 64 MiB pair tests), threshold, iterations and
#                 deadline; passes, data right. Where this machine gives the 4 ranks fewer
#                 than 4 CPUs, their pairs take turns on a CPU and measure the scheduler:
#                 nccl-check must say so and judge only their data (ncclcheck/cpus.h)
#   busy-timeout  a step whose deadline passes while every peer is still moving data: the
#                 requests stay pending, and MPI goes on using their buffers while the rank
#                 pings its peers and aborts. It must end with the timeout report and exit 69
#                 (not localised: every rank answered), not a segfault or a peer's failed read
#                 of freed memory (the bug this catches)
#   init-hang     rank 3 stopped before MPI_Init: the other ranks wait in MPI_Init's fence,
#                 which no deadline of nccl-check's polls. The watchdog (ncclcheck/watchdog.h)
#                 must end them after 10 s (its floor): each names its step on a line of its
#                 own, rank 3 never does, rank 0 gives its timeout report, exit 75
#   verdict       a failing check with --json - (as mpi-launcher runs it): the verdict and the
#                 report reach stdout in one write and nothing of nccl-check's follows on
#                 stderr, which mpirun's forwarding was seen to splice into the report's line
#   options-differ  two ranks with another --step-timeout: exit 64 naming it (ncclcheck/options.h)
#   links-no-gpu-library  readelf: nccl-check and nccl-check.mpich need no NCCL or CUDA library
#   nccl-no-gpu   --backend nccl with this machine's NCCL in LD_LIBRARY_PATH (an image with
#                 NVIDIA's NCCL) and no GPU: NCCL named by its version (nccl.h's) and path,
#                 exit 69, no crash (TMPI_NCCL_DIR: where ctest found NCCL)
#   no-nccl       --backend nccl where no NCCL is found: one line naming libnccl.so.2, where it
#                 was looked for and the fix; exit 78, which the runtimes do not restart on
set -euo pipefail
: "${TMPI_BUILD_DIR:?set by ctest: the build folder}"
fail() { echo "FAIL: $*" >&2; exit 1; }
nc=${TMPI_NCCL_CHECK:-$TMPI_BUILD_DIR/bin/nccl-check}  # or the bundle's (ncclcheck.bundle.*)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"   # any core file or report lands here, and goes
mpirun=(mpirun.openmpi --oversubscribe -np 4)  # 4 ranks on however many cores this machine has
case ${1:?case} in
  defaults)
    rc=0; out=$("${mpirun[@]}" "$nc" --backend mpi --json "$work/report.json" 2>&1) || rc=$?
    echo "$out" | grep -E '^#|^ +[0-9]'
    [[ $rc == 0 ]] || fail "nccl-check at its defaults exited $rc: $out"
    grep -q '^# result: pass' <<<"$out" || fail "no pass: $out"
    jq -e '[.allreduce[].bytes] == [1048576, 4194304, 16777216, 67108864] and .pair_bytes == 67108864' \
      "$work/report.json" >/dev/null || fail "not the default sizes: $(jq -c '{sizes: [.allreduce[].bytes], pair_bytes}' "$work/report.json")"
    jq -e '([.allreduce[].wrong, .intra_node[].wrong, .gpu_links[].wrong] | add) == 0 and (.gpu_links | length) == 6' \
      "$work/report.json" >/dev/null || fail "wrong data, or not every pair of the 4 ranks: $(jq -c . "$work/report.json")"
    cpus=$(nproc)  # the CPUs this test (and so each rank, unbound when oversubscribed) may use
    if (( cpus < 4 )); then
      grep -q "^# host $(hostname): 4 ranks share $cpus CPU(s): bandwidth within it is the scheduler's, shown, not judged" <<<"$out" \
        || fail "4 ranks on $cpus CPUs, and no word that their bandwidth is not judged: $out"
      jq -e --argjson cpus "$cpus" '.hosts[0].cpus == $cpus and .hosts[0].bandwidth_judged == false' "$work/report.json" >/dev/null \
        || fail "report.json does not say the host's bandwidth went unjudged: $(jq -c .hosts "$work/report.json")"
    else
      jq -e '.hosts[0].bandwidth_judged == true' "$work/report.json" >/dev/null || fail "4 ranks on $cpus CPUs went unjudged"
    fi
    echo "ok: 4 ranks on one host at the defaults: every size and pair measured, data right" ;;
  busy-timeout)
    rc=0; out=$("${mpirun[@]}" "$nc" --backend mpi --min-bytes 256M --max-bytes 256M --step-timeout 1s 2>&1) || rc=$?
    echo "$out" | grep -vE '^\s*$' | tail -n 20
    # A peer's single-copy read of freed memory fails with EFAULT (errno 14); one of a peer
    # that the abort has already killed fails with ESRCH (3), which is no fault of ours.
    if grep -qE 'Segmentation fault|Read -1, expected [0-9]+, errno = 14|ERROR: AddressSanitizer' <<<"$out"; then
      fail "a buffer was used after it was freed: $out"
    fi
    # Every rank stays alive and answers the pings, so no host is to blame by its silence: the
    # timeout is not localised, exit 69 (a slow fabric, not a retry's matter: docs/design.md,
    # nccl-check's Deadlines). The sweep's budget skips the 256 MiB all-reduce that would not
    # fit (it says so), so the deadline passes mid-transfer in the step within the host.
    [[ $rc == 69 ]] || fail "expected exit 69 (a timeout no rank's silence explains), got $rc"
    grep -qE '^# TIMEOUT in .* after 1.0 s' <<<"$out" || fail "no timeout report: $out"
    grep -q '^# result: not localised' <<<"$out" || fail "a timeout with every rank alive was blamed on a host: $out"
    echo "ok: a deadline passed mid-transfer: the timeout report and exit 69, no use of freed buffers" ;;
  init-hang)
    # Rank 3 stops itself before nccl-check starts; mpirun's teardown (SIGCONT, SIGTERM)
    # ends it.
    cat >"$work/stop-rank-3.sh" <<'SCRIPT'
#!/usr/bin/env bash
[[ $OMPI_COMM_WORLD_RANK != 3 ]] || kill -STOP $$
exec "$@"
SCRIPT
    chmod +x "$work/stop-rank-3.sh"
    t0=$SECONDS
    rc=0; out=$(timeout 120 "${mpirun[@]}" "$work/stop-rank-3.sh" "$nc" --backend mpi --step-timeout 2s --json - 2>&1) || rc=$?
    echo "$out" | grep -E '^#|^nccl-check' | grep -v '^nccl-check report' || true
    [[ $rc == 75 ]] || fail "expected exit 75 (a timeout), got $rc after $((SECONDS - t0)) s: $out"
    spoke=$(sed -n 's/^nccl-check timeout: //p' <<<"$out" | jq -s -c '[.[].rank] | sort')
    [[ $spoke == "[0,1,2]" ]] || fail "ranks 0, 1 and 2, not 3, should say where they gave up; said: $spoke: $out"
    sed -n 's/^nccl-check timeout: //p' <<<"$out" | jq -e -s 'all(.step == "MPI_Init" and .after_seconds == 10)' >/dev/null ||
      fail "each line names MPI_Init and the 10 s floor: $out"
    grep -q '^# TIMEOUT in MPI_Init after 10.0 s (seen by rank 0' <<<"$out" || fail "no timeout report from rank 0: $out"
    sed -n 's/^nccl-check report: //p' <<<"$out" | jq -e '.result == "timeout"' >/dev/null || fail "no report line: $out"
    (( SECONDS - t0 < 60 )) || fail "took $((SECONDS - t0)) s"
    echo "ok: a rank that never reached MPI_Init: the others gave up after 10 s, named it by their silence, exit 75" ;;
  verdict)
    rc=0
    "${mpirun[@]}" "$nc" --backend mpi --min-bytes 64K --max-bytes 256K --pair-bytes 64K --min-busbw 100000 \
      --json - >"$work/out" 2>"$work/err" || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69 (below --min-busbw), got $rc: $(cat "$work/out" "$work/err")"
    ! grep -q 'nccl-check' "$work/err" || fail "nccl-check wrote on stderr beside its report: $(cat "$work/err")"
    grep -q '^nccl-check: .*culprit(s) below threshold' "$work/out" || fail "no verdict on stdout: $(cat "$work/out")"
    sed -n 's/^nccl-check report: //p' "$work/out" | jq -e '.result == "fail"' >/dev/null ||
      fail "no whole report line: $(cat "$work/out")"
    [[ $(grep -n '^nccl-check: ' "$work/out" | cut -d: -f1) -lt $(grep -n '^nccl-check report: ' "$work/out" | cut -d: -f1) ]] ||
      fail "the verdict must come before the report: $(cat "$work/out")"
    echo "ok: a failing check says why and gives its report on stdout, nothing after it on stderr" ;;
  options-differ)
    # Two of the ranks with another --step-timeout (as a TMPI_ variable set where mpirun
    # runs reaches only the ranks it starts there): their sweep would choose other iteration
    # counts than their peers', and post collectives that no peer matches. Init compares
    # the options first: exit 64, the flag and both values named, nothing measured.
    rc=0
    out=$(mpirun.openmpi --oversubscribe -np 2 "$nc" --backend mpi --max-bytes 4M --step-timeout 2m \
            : -np 2 "$nc" --backend mpi --max-bytes 4M 2>&1) || rc=$?
    echo "$out" | grep -E '^#' || true
    [[ $rc == 64 ]] || fail "expected exit 64 (options that differ between ranks), got $rc: $out"
    grep -qF -- '--step-timeout is 2m on rank 0 but 1m on rank 2 (2 of 4 rank(s) differ from rank 0)' <<<"$out" ||
      fail "the flag and both values are not named: $out"
    ! grep -q '^# all-reduce' <<<"$out" || fail "ranks that disagree measured something: $out"
    ! grep -qE 'Segmentation fault|ERROR: AddressSanitizer' <<<"$out" || fail "a crash: $out"
    echo "ok: ranks given different options: exit 64 naming --step-timeout and both values, nothing run" ;;
  links-no-gpu-library)
    for program in "$nc" "$nc.mpich"; do
      [[ -e $program ]] || continue
      needed=$(readelf -d "$program" | awk '/NEEDED/ { print $NF }' | xargs)
      ! grep -qE 'libnccl|libcudart|libcuda' <<<"$needed" || fail "$program links NCCL or CUDA: $needed"
    done
    echo "ok: nccl-check links neither NCCL nor CUDA: it loads the image's at run time" ;;
  nccl-no-gpu)
    : "${TMPI_NCCL_DIR:?set by ctest where this machine has NCCL}"
    header=$TMPI_NCCL_DIR/../include/nccl.h
    version=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) / { v = v (v ? "." : "") $3 } END { print v }' "$header")
    [[ -n $version ]] || fail "no NCCL version in $header"
    rc=0; out=$(LD_LIBRARY_PATH=$TMPI_NCCL_DIR mpirun.openmpi --oversubscribe -np 2 -x LD_LIBRARY_PATH \
                "$nc" --backend nccl --json - 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69 (no GPU), got $rc: $out"
    grep -qF "NCCL $version ($(realpath "$TMPI_NCCL_DIR")/libnccl.so.2)" <<<"$out" ||
      grep -qF "NCCL $version ($TMPI_NCCL_DIR/libnccl.so.2)" <<<"$out" || fail "NCCL $version and its path not named: $out"
    grep -qE 'no (GPU driver|CUDA device is visible) for rank 0|no CUDA device is visible to rank 0' <<<"$out" ||
      fail "not the no-GPU line: $out"
    ! grep -qE 'Segmentation fault|signal|core dumped|ERROR: AddressSanitizer' <<<"$out" || fail "a crash: $out"
    [[ -z $(find "$work" -name 'core*') ]] || fail "a core file: $(find "$work" -name 'core*')"
    echo "ok: with NCCL $version and no GPU: NCCL named by version and path, exit 69, no crash" ;;
  no-nccl)
    # The library named and missing; then, where a user namespace may be made, the search
    # itself with this machine's NCCL hidden (the loader's cache and CUDA's folder).
    runs=("$nc --backend nccl --json - --nccl-library $work/none/libnccl.so.2")
    if unshare -rm true 2>/dev/null; then
      cuda_lib=$(realpath /usr/local/cuda/lib64 2>/dev/null || true)
      hide="mount --bind /dev/null /etc/ld.so.cache"
      [[ -d $cuda_lib ]] && hide+=" && mount -t tmpfs none $cuda_lib"
      runs+=("unshare -rm sh -c '$hide && exec \"\$0\" \"\$@\"' $nc --backend nccl --json -")
    fi
    for run in "${runs[@]}"; do
      rc=0; out=$(LD_LIBRARY_PATH=$work/empty eval "${mpirun[0]} --oversubscribe -np 2 $run" 2>&1) || rc=$?
      [[ $rc == 78 ]] || fail "expected exit 78 (the image lacks NCCL), got $rc: $out"
      # The verdict, nccl-check's last word before its report: one line that says it all.
      [[ $(grep -c '^nccl-check: no NCCL in this image' <<<"$out") == 1 ]] || fail "no verdict line saying so: $out"
      grep -qE 'libnccl.so.2 not found: looked in .*; use an image with NCCL.*or use --check mpi' <<<"$out" ||
        fail "not what was looked for, where, and the fix: $out"
      ! grep -qE 'Segmentation fault|core dumped|ERROR: AddressSanitizer' <<<"$out" || fail "a crash: $out"
    done
    echo "ok: without NCCL: one line naming libnccl.so.2, where it was looked for and the fix; exit 78 (${#runs[@]} way(s))" ;;
  *) fail "unknown case $1" ;;
esac
