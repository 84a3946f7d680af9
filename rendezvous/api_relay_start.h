// The relay's start in the sidecar (mpi-rendezvous), apart from main.cpp so that the node
// sidecar's own path is unchanged: the relay runs only where this container has an API token
// (the runtimes mount one in the launcher pod's sidecar alone) and --api-relay-port is not 0.
// Without a token it returns nullptr and says so at debug level: a node pod's sidecar.
#pragma once

#include <memory>

#include "common/error.h"
#include "common/params.h"
#include "rendezvous/api_relay_server.h"

namespace tmpi::rdv {

// The relay, serving on 127.0.0.1:--api-relay-port, Events about --trainjob (the sidecar's
// own JobSet's TrainJob: the runtimes pass $(JOBSET_NAME)); nullptr where it does not run.
// `private_key`: the job key's text. An error only for a relay that should run and cannot
// (no TrainJob named, the port taken). Its last word, at the pod's stop, says a launcher
// container OOM-killed whole (rendezvous/launcher_end.h); `ranks_here`: the launcher pod is a
// host too (its sidecar registers: runLauncherAsNode).
Expected<std::unique_ptr<ApiRelay>> start_api_relay(const Params& params, const std::string& private_key,
                                                    bool ranks_here);

}  // namespace tmpi::rdv
