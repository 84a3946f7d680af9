#!/usr/bin/env bash
# trainer-mpi: mpirun hand-off (the marker that mpi-launcher's tests look for)
#
# Installed as `mpirun` in the image's first PATH folder (/opt/trainer-mpi/bin), ahead of the
# MPI's own. A TrainJob's command is often a user's own mpirun line: Kubeflow's Python SDK
# (CustomTrainer: `mpirun --hostfile /etc/mpi/hostfile bash -c "<script>"`, kubeflow/sdk
# constants.py MPI_COMMAND), or one tuned for years under mpi-operator (`mpirun -np 16
# -bind-to none -map-by slot -x NCCL_DEBUG=INFO -mca pml ob1 python train.py`). Run by the
# real mpirun, it would skip mpi-launcher and with it the preflight, the supervision and the
# TrainJob status (docs/trainer-rules.md §6).
#
# So this gives the whole line, as it is, to `mpi-launcher run --mpirun-line -- LINE`, which
# reads it with the MPI's own grammar, checks the options it owns (hostfile, hosts, -np, the
# rsh agent) against the job, refuses by name what would break the job, and passes every
# other option to mpirun in order (launcher/mpirun_line.h). The job's hosts.json: TMPI_HOSTS
# (the runtime sets it), else the one beside a --hostfile/-f given, else /etc/mpi/hosts.json.
# The real mpirun runs the line untouched instead:
#   - a call from mpi-launcher itself, or from anything it started (TMPI_LAUNCHER_PID is set
#     in its environment): the job's mpirun, the placement probe, `mpirun --version`, and
#     what a user types in `mpi-launcher shell`;
#   - mpirun's own questions (a lone --version, --help...) and an empty line;
#   - no hosts.json: not a job that mpi-init laid out (a user's shell elsewhere);
#   - TMPI_MPIRUN_HANDOFF=0.
# The real mpirun is the first one on PATH that is not a hand-off: neither this file (through
# a link) nor a copy of it, found by the marker line above (two copies on PATH would else hand
# the line to each other forever).
set -uo pipefail
readonly marker="# trainer-mpi: mpirun hand-off"
self=$(readlink -f "${BASH_SOURCE[0]}")
real=""
IFS=: read -r -a path_dirs <<<"${PATH:-}"
for dir in "${path_dirs[@]}"; do
  [[ -n $dir && -x $dir/mpirun ]] || continue
  resolved=$(readlink -f "$dir/mpirun")
  [[ $resolved == "$self" ]] && continue
  [[ $(head -c 200 "$resolved" 2>/dev/null | sed -n 2p) == "$marker"* ]] && continue
  real=$dir/mpirun
  break
done
if [[ -z $real ]]; then
  echo "mpirun (trainer-mpi hand-off): no MPI's mpirun on PATH after $(dirname "$self")" >&2
  exit 127
fi
[[ -z ${TMPI_LAUNCHER_PID:-} && ${TMPI_MPIRUN_HANDOFF:-1} != 0 ]] || exec "$real" "$@"
(($# > 1)) || [[ $# == 1 && $1 != -* ]] || exec "$real" "$@"

hosts=${TMPI_HOSTS:-}
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ -z $hosts ]] || break
  case ${args[i]} in
    --hostfile=* | -hostfile=* | --machinefile=* | -machinefile=*) hosts=$(dirname "${args[i]#*=}")/hosts.json ;;
    --hostfile | -hostfile | --machinefile | -machinefile | -f)
      ((i + 1 < ${#args[@]})) && hosts=$(dirname "${args[i + 1]}")/hosts.json ;;
  esac
done
[[ -n $hosts && -f $hosts ]] || hosts=/etc/mpi/hosts.json
[[ -f $hosts ]] || exec "$real" "$@"  # not a job that mpi-init laid out
launcher=$(dirname "$self")/mpi-launcher
[[ -x $launcher ]] || launcher=mpi-launcher
# The launcher uses the real mpirun, not this hand-off (its flavour and daemons are found
# beside it).
exec env TMPI_MPIRUN="$real" "$launcher" run --hosts "$hosts" --mpirun-line -- "$@"
