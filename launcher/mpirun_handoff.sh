#!/bin/sh
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
# (the runtime sets it), else the one beside a --hostfile/-f given, else /etc/trainer-mpi/hosts.json
# (where the runtimes' mpi-init writes it).
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
# POSIX sh and its builtins (readlink -f where the image has it): it runs in the user's image,
# which is asked for /bin/sh and nothing more.
set -u
folder_of() {  # dirname, without the program: "a/b" -> "a", "b" -> ".", "/b" -> ""
  case $1 in */*) printf '%s\n' "${1%/*}" ;; *) echo . ;; esac
}
readonly marker="# trainer-mpi: mpirun hand-off"
self=$(readlink -f "$0" 2>/dev/null) || self=$0
real=""
saved_ifs=$IFS
set -f  # PATH's folders are split on ":" and taken as they are, never globbed
IFS=:
for dir in ${PATH:-}; do
  if [ -z "$dir" ] || [ ! -x "$dir/mpirun" ]; then continue; fi
  resolved=$(readlink -f "$dir/mpirun" 2>/dev/null) || resolved=$dir/mpirun
  [ "$resolved" = "$self" ] && continue
  second_line=""
  { read -r _ && read -r second_line; } <"$resolved" 2>/dev/null
  case $second_line in "$marker"*) continue ;; esac
  real=$dir/mpirun
  break
done
IFS=$saved_ifs
set +f
if [ -z "$real" ]; then
  echo "mpirun (trainer-mpi hand-off): no MPI's mpirun on PATH after ${self%/*} (see docs/troubleshooting.md#mpi-not-found)" >&2
  exit 127
fi
if [ -n "${TMPI_LAUNCHER_PID:-}" ] || [ "${TMPI_MPIRUN_HANDOFF:-1}" = 0 ]; then exec "$real" "$@"; fi
case $#:${1:-} in
  0:* | 1:-*) exec "$real" "$@" ;;  # mpirun's own questions (--version, --help) and an empty line
esac

hosts=${TMPI_HOSTS:-}
if [ -z "$hosts" ]; then
  next_is_hostfile=0
  for arg in "$@"; do
    if [ "$next_is_hostfile" = 1 ]; then
      hosts=$(folder_of "$arg")/hosts.json
      break
    fi
    case $arg in
      --hostfile=* | -hostfile=* | --machinefile=* | -machinefile=*) hosts=$(folder_of "${arg#*=}")/hosts.json; break ;;
      --hostfile | -hostfile | --machinefile | -machinefile | -f) next_is_hostfile=1 ;;
    esac
  done
fi
if [ -z "$hosts" ] || [ ! -f "$hosts" ]; then hosts=/etc/trainer-mpi/hosts.json; fi
[ -f "$hosts" ] || exec "$real" "$@"  # not a job that mpi-init laid out
launcher=$(folder_of "$self")/mpi-launcher
[ -x "$launcher" ] || launcher=mpi-launcher
# The launcher uses the real mpirun, not this hand-off (its flavour and daemons are found
# beside it).
export TMPI_MPIRUN="$real"
exec "$launcher" run --hosts "$hosts" --mpirun-line -- "$@"
