// The rank agent's side of the start gate. With `--ssh-check beside` (the default) the
// launcher starts mpirun right after its DNS step and runs the ssh step of its preflight on
// a thread of its own, so that the ssh handshakes hide behind mpirun's own daemon start
// (at 64 pods they were most of the launcher's cost over plain mpirun). No rank may
// start before that check has passed: each agent asks the coordinator (POST /v1/may-start)
// and holds its rank until the answer is "start".
//
// Only hydra's agents ask, and Open MPI's where mpirun does not start every daemon itself
// through the relay (Job::agents_ask): a hydra proxy forks its ranks as soon as the
// launch info reaches it, with no barrier across proxies (MPICH, src/pm/hydra/mpiexec/
// pmiserv_cb.c, HYD_pmcd_pmiserv_proxy_init_cb sends it to each proxy as that one connects;
// proxy/pmip_cb.c, handle_launch_procs). Open MPI holds its ranks itself: it starts a daemon on
// every host of the hostfile whatever --np (Open MPI 4.1, orte/mca/plm/base/
// plm_base_launch_support.c, orte_plm_base_setup_virtual_machine; PRRTE 3.0, the runtime of
// Open MPI 5, prte_plm_base_setup_virtual_machine in src/mca/plm/base/, with no --novm at
// all), and launches no rank before every daemon has reported (orte_plm_base_daemon_callback,
// num_reported == num_procs before DAEMONS_REPORTED, then VM_READY ... LAUNCH_APPS in
// orte/mca/state/hnp/state_hnp.c; PRRTE's progress_daemons and src/mca/state/dvm). Each daemon
// starts through the relay, which waits for that host's verdict (ssh/relay.h): no daemon, so
// no rank, before its host's check has passed. Where a daemon may start over ssh of its own
// (no relay, a deeper routing tree) the agents ask, as under hydra (job.h). Tests:
// tests/cluster/launcher_test.sh, gate-holds and gate-holds-openmpi.
//
// The agent keeps asking while the answer is "wait", with backoff and jitter (10 ms, up to
// 250 ms), since the ssh check usually ends before mpirun has started a single rank. What it
// does when the answers stop, decided as for the agent's reports (agent/agent.h):
// - "stop" (the preflight failed, or the job has ended): the rank is not started; exit 69.
// - the coordinator answered "wait" once and then nothing for --lost-after: the launcher is
//   gone or cut off, and nobody could stop this rank any more; it is not started; exit 75.
// - no answer that verifies in --lost-after: nothing listens, a NetworkPolicy is in the
//   way, a 403 (another key), a 5xx, a proxy's page, a forged or replayed body (every answer
//   is signed over the question's nonce: rendezvous/protocol.h). Each is asked again; then
//   the rank is not started: exit 75, named (the gate fails closed, docs/design.md, "The
//   session"). TMPI_GATE_FAIL_OPEN=true (--gate-fail-open) starts it instead, said on stderr.
#pragma once

#include <string>

#include "agent/agent_options.h"

namespace tmpi::launch {

enum class GateAnswer { kStart, kStop, kLost };

struct GateVerdict {
  GateAnswer answer = GateAnswer::kStart;
  std::string reason;  // kStop: the launcher's reason; kStart/kLost: what the agent saw, or ""
};

// Asks until the coordinator decides, or --lost-after passes as above. `host` is this pod's
// hostname, sent as the agents' reports send it.
GateVerdict wait_for_start(const RankAgentOptions& options, int rank, const std::string& host);

}  // namespace tmpi::launch
