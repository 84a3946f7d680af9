// What a rank's agent tells the launcher's coordinator (rendezvous/protocol.h): its rank's
// start, exit or misplacement (POST /v1/rank), and that the rank still runs (POST
// /v1/rank-beat). Each message is signed with the job's rendezvous key, carries this
// launch's epoch and a fresh nonce, and counts only if its answer verifies: an answer that
// does not (a proxy's page, a forgery) is no answer.
//
// When an agent speaks (agent.cpp decides): the first rank of each host (local rank 0)
// reports its start at once, since the coordinator expects a word from every host of the
// plan from the job's first report on, and a host that is down from the start says nothing;
// the other ranks report 2 s in, sparing the ranks' start-up, when every core is busy with
// MPI_Init, a storm of requests (bench row 1). Then a beat every --beat-interval.
#pragma once

#include <string>

#include "agent/agent.h"
#include "agent/agent_options.h"
#include "common/clock.h"
#include "rendezvous/protocol.h"

namespace tmpi::launch {

// This pod's host name, as the agents name their host (the coordinator finds its FQDN).
std::string hostname();

// What the coordinator made of a report or a beat. kEnding: taken, and its answer says
// jobEnded: the launcher is stopping the job (a rank failed, a host was lost, it was asked to
// stop), so this rank is to end now, as MPI's teardown would end it a moment later.
// kSuperseded: the coordinator's verified 409 for another epoch: the launcher has moved on to
// another attempt (a restart in place, launcher/restarts.h), and this rank belongs to none.
enum class Heard { kTaken, kEnding, kNotHeard, kSuperseded };

// Tells the coordinator of this rank's start or exit; `message` holds the event's fields, and
// this adds the rank, the host, the epoch and a fresh nonce, and signs it all. `patience`: how
// long to wait for the answer.
Heard tell(const RankAgentOptions& options, const RankIdentity& id, rdv::RankReport message,
           Millis patience = Millis(3000));
// tell(), where only whether it was taken matters.
bool report(const RankAgentOptions& options, const RankIdentity& id, rdv::RankReport message,
            Millis patience = Millis(3000));

// Tells the coordinator that this rank still runs, so that its host counts as alive without a
// sidecar. One short try (1 s): a beat that does not get through is made good by the next,
// and the loop that forwards signals and stderr waits at most that long.
Heard beat(const RankAgentOptions& options, const RankIdentity& id, long long seq);

}  // namespace tmpi::launch
