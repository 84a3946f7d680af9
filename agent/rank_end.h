// How a rank's end leaves its pod, apart from the watch over the running rank (agent.cpp): the
// orphans it left, adopted by the agent as their subreaper (adopt_orphans before the fork),
// reaped as they end and ended with it; the MPI daemon told to go when nobody else will end it;
// and which ends were a kill from outside the job (supervise.h: such a kill is the cause, so
// its report must not wait behind stderr's drain).
#pragma once

#include <sys/types.h>

#include "common/clock.h"

namespace tmpi::launch {

// An orphaned rank's, then its daemon's, time to end after SIGTERM.
inline constexpr Millis kOrphanGrace(5000);
// What the rank left behind, after SIGTERM, before SIGKILL.
inline constexpr Millis kLeftoverGrace(2000);

// Reaps every child that has ended (the rank, and orphans it left: unreaped, each would hold a
// pid until the rank's end); true, with its status, once the rank `child` was one of them.
bool reap_children(pid_t child, int& status);

// A wait status of SIGKILL or SIGBUS: no teardown of MPI's sends either first.
bool killed_from_outside(int status);

// What the rank left behind (a shell's child, once MPI's SIGTERM ended the shell): SIGTERM,
// SIGKILL after kLeftoverGrace, every one reaped; so that the next attempt of a job restarted in
// place finds the pod as the first one did (its GPUs free), not only once the pod is deleted.
void end_leftovers();

// The MPI daemon that is this agent's parent, told to go (a rank cut off from the launcher).
void stop_mpi_daemon();

}  // namespace tmpi::launch
