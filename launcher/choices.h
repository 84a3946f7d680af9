// The launcher's choice parameters as enums, each beside the spellings of its row
// (common/choice.h): launcher_options() reads them once, and the pieces below it act on the
// enum. The rows, with what each value does, are in common/param_table.cpp and the README's
// parameter table; tests/unit/choice_test.cpp holds each table against its row.
#pragma once

#include "common/choice.h"

namespace tmpi::launch {

// --wait: what the launcher waits for before its preflight.
enum class WaitFor { kSidecar, kSsh, kNone };
inline constexpr Spellings<WaitFor, 3> kWaitForSpellings{
    {{"sidecar", WaitFor::kSidecar}, {"ssh", WaitFor::kSsh}, {"none", WaitFor::kNone}}};

// --placement: who checks that ranks run where the hostfile says.
enum class PlacementCheck { kAgents, kProbe, kNone };
inline constexpr Spellings<PlacementCheck, 3> kPlacementCheckSpellings{{{"agents", PlacementCheck::kAgents},
                                                                        {"probe", PlacementCheck::kProbe},
                                                                        {"none", PlacementCheck::kNone}}};

// --ssh-check: the preflight's ssh step beside the launch, or before it.
enum class SshCheckWhen { kBeside, kBefore };
inline constexpr Spellings<SshCheckWhen, 2> kSshCheckWhenSpellings{
    {{"beside", SshCheckWhen::kBeside}, {"before", SshCheckWhen::kBefore}}};

// --check: the fabric check's backend; kAuto is resolved per job (fabric_check.h).
enum class FabricBackend { kNone, kMpi, kNccl, kAuto };
inline constexpr Spellings<FabricBackend, 4> kFabricBackendSpellings{{{"none", FabricBackend::kNone},
                                                                      {"mpi", FabricBackend::kMpi},
                                                                      {"nccl", FabricBackend::kNccl},
                                                                      {"auto", FabricBackend::kAuto}}};

// --mpi: which MPI runs the job; kAuto detects it (job.cpp).
enum class MpiWanted { kAuto, kOpenMpi, kMpich, kIntel };
inline constexpr Spellings<MpiWanted, 4> kMpiWantedSpellings{{{"auto", MpiWanted::kAuto},
                                                              {"openmpi", MpiWanted::kOpenMpi},
                                                              {"mpich", MpiWanted::kMpich},
                                                              {"intel", MpiWanted::kIntel}}};

// --status: what goes to Trainer's status server.
enum class StatusMode { kAuto, kFailures, kOff };
inline constexpr Spellings<StatusMode, 3> kStatusModeSpellings{
    {{"auto", StatusMode::kAuto}, {"failures", StatusMode::kFailures}, {"off", StatusMode::kOff}}};

// --events: the TrainJob's Kubernetes Events.
enum class EventsMode { kAuto, kOff };
inline constexpr Spellings<EventsMode, 2> kEventsModeSpellings{
    {{"auto", EventsMode::kAuto}, {"off", EventsMode::kOff}}};

}  // namespace tmpi::launch
