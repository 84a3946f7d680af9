// The job's end where a person looks first, read from report.json as it was written, pure:
// - the launcher container's termination message, which `kubectl describe pod` shows as the
//   container's "Message" after it ends (the kubelet reads terminationMessagePath,
//   /dev/termination-log by default, and keeps at most 4096 bytes of it: kubelet's
//   kuberuntime_container.go, maxContainerTerminationMessageLength);
// - the last lines of the launcher's log, which `kubectl logs` shows, and which survive the
//   report's emptyDir once the pod has ended (`kubectl logs --previous`).
// Both say the same: how the job ended and whose fault that was (the exit's class, as the
// failure policy reads it), the reason with the first failed rank or host and its
// troubleshooting key (docs/troubleshooting.md#KEY), how many ranks failed, and where the
// whole report is.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tmpi::launch {

inline constexpr std::size_t kTerminationMessageMax = 4096;

// The verdict's lines, each one line of text (no control byte), from report.json.
// `report_path` is where the report was written, for the last line.
std::vector<std::string> verdict_lines(const nlohmann::json& report, const std::string& report_path);

// The lines as a termination message: at most kTerminationMessageMax bytes, cut at a whole
// UTF-8 character, the first lines kept whole before any later one.
std::string termination_message(const std::vector<std::string>& lines);

// Writes the message into `path` in place (the kubelet bind-mounts that file: a rename onto it
// would fail), only where it exists; a missing file (not in a pod) is not an error.
Status write_termination_message(const std::string& path, const std::string& message);

}  // namespace tmpi::launch
