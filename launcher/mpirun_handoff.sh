#!/usr/bin/env bash
# trainer-mpi: mpirun hand-off (the marker that mpi-launcher's tests look for)
#
# Installed as `mpirun` in the image's first PATH folder (/opt/trainer-mpi/bin), ahead of the
# MPI's own. Kubeflow's Python SDK (CustomTrainer) gives an MPI runtime's launcher this
# command, which would replace mpi-launcher and with it the preflight, the supervision and
# the TrainJob status (docs/trainer-rules.md §6, kubeflow/sdk constants.py MPI_COMMAND):
#
#   mpirun --hostfile /etc/mpi/hostfile bash -c "<the user's function, as a script>"
#
# This hands exactly that form to `mpi-launcher run -- CMD...`, with the job's hosts.json
# (TMPI_HOSTS, which the runtime sets, else the one beside the hostfile), when the hostfile
# given lists the same hosts and slots as the hostfile that mpi-init wrote beside hosts.json
# (Trainer's /etc/mpi/hostfile does: mpi-init made its own from it). mpi-launcher then runs
# the same ranks on the same slots as mpirun would have. Everything else goes to the real
# mpirun untouched:
#   - a call from mpi-launcher itself, or from anything it started (TMPI_LAUNCHER_PID is set
#     in its environment): the job's mpirun, the placement probe, `mpirun --version`;
#   - no hostfile, or no hosts.json: a user at a `kubectl exec` shell, another job;
#   - a hostfile of other hosts or slots than the job's (said in one line on stderr);
#   - any option besides --hostfile, -np/-n and -x (said in one line on stderr, since the
#     preflight is then skipped);
#   - TMPI_MPIRUN_HANDOFF=0.
# The real mpirun is the next one on PATH after this file's folder.
set -uo pipefail
self=$(readlink -f "${BASH_SOURCE[0]}")
real=""
IFS=: read -r -a path_dirs <<<"${PATH:-}"
for dir in "${path_dirs[@]}"; do
  [[ -n $dir && -x $dir/mpirun ]] || continue
  [[ $(readlink -f "$dir/mpirun") == "$self" ]] && continue
  real=$dir/mpirun
  break
done
if [[ -z $real ]]; then
  echo "mpirun (trainer-mpi hand-off): no MPI's mpirun on PATH after $(dirname "$self")" >&2
  exit 127
fi
[[ -z ${TMPI_LAUNCHER_PID:-} && ${TMPI_MPIRUN_HANDOFF:-1} != 0 ]] || exec "$real" "$@"

hostfile="" np="" env=() command=() unknown=""
args=("$@")
i=0
while ((i < ${#args[@]})); do
  arg=${args[i]}
  case $arg in
    --hostfile | -hostfile | --machinefile | -machinefile)
      ((i + 1 < ${#args[@]})) || { unknown=$arg; break; }
      hostfile=${args[i + 1]}; i=$((i + 2)) ;;
    --hostfile=*) hostfile=${arg#*=}; i=$((i + 1)) ;;
    -np | -n | --np | -c)
      ((i + 1 < ${#args[@]})) && [[ ${args[i + 1]} =~ ^[1-9][0-9]{0,7}$ ]] || { unknown=$arg; break; }
      np=${args[i + 1]}; i=$((i + 2)) ;;
    -x)
      ((i + 1 < ${#args[@]})) && [[ ${args[i + 1]} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { unknown=$arg; break; }
      env+=(--env "${args[i + 1]}"); i=$((i + 2)) ;;
    --) command=("${args[@]:i+1}"); break ;;
    -*) unknown=$arg; break ;;
    *) command=("${args[@]:i}"); break ;;
  esac
done
[[ -n $hostfile ]] || exec "$real" "$@"
hosts=${TMPI_HOSTS:-$(dirname "$hostfile")/hosts.json}
[[ -f $hosts && -f $hostfile ]] || exec "$real" "$@"  # not a job that mpi-init laid out
# "host slots=N" lines, comments and blanks left out, in any order.
layout() { sed 's/#.*//' "$1" | awk 'NF { print $1, ($2 == "" ? "slots=1" : $2) }' | sort; }
job_hostfile=$(dirname "$hosts")/hostfile
if [[ ! -f $job_hostfile || $(layout "$hostfile") != "$(layout "$job_hostfile")" ]]; then
  echo "mpirun (trainer-mpi hand-off): $hostfile does not list the job's hosts and slots ($job_hostfile); running $real as it is, without mpi-launcher's preflight and supervision" >&2
  exec "$real" "$@"
fi
if [[ -n $unknown || ${#command[@]} == 0 ]]; then
  echo "mpirun (trainer-mpi hand-off): ${unknown:+option ${unknown@Q} is not one it hands on}${unknown:-no command}; running $real as it is, without mpi-launcher's preflight and supervision (call mpi-launcher run directly, or set TMPI_MPIRUN_HANDOFF=0 to silence this)" >&2
  exec "$real" "$@"
fi
launcher=$(dirname "$self")/mpi-launcher
[[ -x $launcher ]] || launcher=mpi-launcher
# The launcher uses the real mpirun, not this hand-off (its flavour and daemons are found
# beside it).
exec env TMPI_MPIRUN="$real" "$launcher" run --hosts "$hosts" ${np:+--np "$np"} "${env[@]}" -- "${command[@]}"
