// Inside the MPIJob converter (convert.h): the typed readers every step checks its fields
// with (a field of the wrong shape is one Exit::kData error naming its path and what it
// should be), the advice for fields without a home, and the pods' templates.
#pragma once

#include <string>
#include <string_view>

#include "convert/convert.h"

namespace tmpi::convert {

// Each reader: the field `key` of `parent`, which `path` names in errors. Absent or null
// gives the fallback (nullptr for the object and array readers).
Expected<const Doc*> object_at(const Doc& parent, const std::string& key, const std::string& path);
Expected<const Doc*> array_at(const Doc& parent, const std::string& key, const std::string& path);
Expected<std::string> string_at_path(const Doc& parent, const std::string& key, const std::string& path,
                                     std::string fallback = {});
Expected<long long> int_at_path(const Doc& parent, const std::string& key, const std::string& path,
                                long long fallback, long long min = 0);
Expected<bool> bool_at_path(const Doc& parent, const std::string& key, const std::string& path,
                            bool fallback = false);
// The string at `key`, or "" for anything else (for messages about a document of unknown shape).
std::string string_or(const Doc& parent, const std::string& key);
// The advice of no_home_table() for `key`; a key missing there is a bug of ours.
std::string_view advice_for(std::string_view key);

// mpiReplicaSpecs, checked: the Launcher's (always) and the Worker's (may be absent) ReplicaSpec.
struct Replicas {
  const Doc* launcher = nullptr;
  const Doc* worker = nullptr;
  long long workers = 0;
};
Expected<Replicas> replica_specs(const Doc& spec);

// The templates into `trainer` (image, command, resourcesPerNode), `env`, and `patches` (the
// TrainJob's runtimePatches, empty when none is needed); what has no home into out.unmapped.
Status map_pods(const Replicas& replicas, Doc& trainer, Doc& env, Doc& patches, Conversion& out);

}  // namespace tmpi::convert
