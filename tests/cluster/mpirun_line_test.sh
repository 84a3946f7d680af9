#!/usr/bin/env bash
# A user's own mpirun line, as a TrainJob's command, through the image's mpirun hand-off
# (launcher/mpirun_handoff.sh first on PATH) in the cluster in a box: 1 launcher, 2 nodes,
# 2 slots each, real sshd and MPI. One case per MPI:
#   openmpi   Horovod's line (docs/mpi.rst: -np, -bind-to none, -map-by slot, -x, -mca pml
#             ob1, -mca btl ^openib), then --map-by ppr:1:node --bind-to none (one rank a node)
#   mpich     the same lines in hydra's words (-genv, -genvlist; -ppn 1 -bind-to none)
# Each runs under mpi-launcher (its report.json is written, the ranks run under the agent),
# with the user's options on mpirun's command line.
source "$(dirname "$0")/launcher_lib.sh"
bin=$CIB_DIR/image-bin mpi_bin=$CIB_DIR/mpi-bin
mkdir -p "$bin" "$mpi_bin"
install -m 755 "$(dirname "$0")/../../launcher/mpirun_handoff.sh" "$bin/mpirun"
ln -sf "$L" "$bin/mpi-launcher"
real=/usr/bin/mpirun.openmpi; [[ $case_name == mpich ]] && real=/usr/bin/mpiexec.hydra
ln -sf "$real" "$mpi_bin/mpirun"
# hydra starts its proxy from the folder it was called from, as an image's MPICH has it.
[[ $case_name != mpich ]] || ln -sf /usr/bin/hydra_pmi_proxy "$mpi_bin/hydra_pmi_proxy"
scratch=$CIB_DIR/scratch; mkdir -p "$scratch"
hello=$TMPI_BUILD_DIR/tests/cluster/mpi_hello_$case_name
# user_mpirun ARGS...: the line as a TrainJob's command runs it in the launcher pod.
user_mpirun() {
  rm -f "$report"
  in_pod "$launcher" timeout -k 5 240 env PATH="$bin:$mpi_bin:$PATH" TMPDIR="$scratch" TMPI_HOSTS="$ETC_MPI/hosts.json" \
    TMPI_WAIT=ssh TMPI_IFACE=eth0 TMPI_REPORT="$report" TMPI_MPI="$case_name" TMPI_LOG_LEVEL=debug mpirun "$@"
}
# check_run OUT RANKS WORDS...: the job ran under mpi-launcher with RANKS ranks, and mpirun's
# command line held WORDS in order.
check_run() {
  local out=$1 ranks=$2 sum=$(( $2 * ($2 - 1) / 2 )); shift 2
  expect_contains "$out" "allreduce sum $sum over $ranks ranks: ok" "the ranks ran"
  [[ $(jq -r .exit.code "$report") == 0 && $(jq '.ranks | length' "$report") == "$ranks" ]] ||
    fail "report.json: $(cat "$report" 2>/dev/null)"
  local command; command=$(jq -r '.command | join(" ")' "$report")
  expect_contains "$command" "$*" "the user's options on mpirun's line"
  expect_contains "$command" "mpi-rank -- $hello" "the ranks under the rank agent"
}
case $case_name in
  openmpi)
    out=$(user_mpirun -np 4 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH \
            -mca pml ob1 -mca btl '^openib' "$hello" 2>&1) || fail "Horovod's line failed: $out"
    check_run "$out" 4 "-bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH -mca pml ob1 -mca btl ^openib"
    out=$(user_mpirun --map-by ppr:1:node --bind-to none "$hello" 2>&1) || fail "the ppr line failed: $out"
    check_run "$out" 2 "--map-by ppr:1:node --bind-to none"
    expect_contains "$out" "places ranks other than by slot" "the placement check is off, and said"
    pass "Open MPI 4: Horovod's line and --map-by ppr:1:node --bind-to none under mpi-launcher" ;;
  mpich)
    out=$(user_mpirun -np 4 -bind-to none -genv NCCL_DEBUG INFO -genvlist LD_LIBRARY_PATH "$hello" 2>&1) ||
      fail "Horovod's line in hydra's words failed: $out"
    check_run "$out" 4 "-bind-to none -genv NCCL_DEBUG INFO"
    expect_contains "$(jq -r '.command | join(" ")' "$report")" "LD_LIBRARY_PATH" "-genvlist joined the launcher's"
    out=$(user_mpirun -ppn 1 -bind-to none "$hello" 2>&1) || fail "the -ppn line failed: $out"
    check_run "$out" 2 "-ppn 1 -bind-to none"
    pass "MPICH: Horovod's line in hydra's words and -ppn 1 -bind-to none under mpi-launcher" ;;
  *) fail "unknown case $case_name" ;;
esac
