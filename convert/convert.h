// `mpi-launcher convert`: an MPIJob (kubeflow.org/v2beta1, mpi-operator's) as a TrainJob
// (trainer.kubeflow.org/v1alpha1) on this package's runtimes, and the MPIJob's fields that
// have no home there, each named with what to do instead. docs/migrating.md's table of
// homes is the same mapping in prose: a row there for every field named here (a unit test
// holds both to it).
//
// Three steps, so that the mapping is a pure function: parse_manifest (YAML or JSON text,
// bounded in size, depth and node count, its scalars typed as Kubernetes' YAML reader types
// them; yaml-cpp's exceptions end here), convert_mpijob (document in, TrainJob and the
// unmapped fields out; every field's shape checked), emit_yaml (strings that would read back
// as numbers or booleans quoted). The I/O is launcher/main.cpp's.
//
// The pods run the user's own image, with trainer-mpi's programs brought in by the runtime
// as a bundle (kBundleBin): so the TrainJob keeps the MPIJob's image, and its command runs
// through the bundle's mpi-launcher (the preflight, the rank agents, the report), never
// through the image's own mpirun alone (convert_pods.cpp says how each is chosen).
//
// The MPIJob's field list is mpi-operator's pkg/apis/kubeflow/v2beta1/types.go (commit
// caa3c47f); Trainer's side is docs/trainer-rules.md (v2.3.0), which says what reaches which pod.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tmpi::convert {

using Doc = nlohmann::ordered_json;

// The package's runtimes (manifests/base): only Open MPI has one of its own.
inline constexpr std::string_view kOpenMpiRuntime = "trainer-mpi-openmpi-v0-1";
// The runtimes' HOME, where they mount the pod's home emptyDir (manifests/base, the `home`
// volume): whatever an image has there is hidden at run time, as mpi-operator's example
// images keep their programs (/home/mpiuser/pi).
inline constexpr std::string_view kRuntimeHome = "/home/mpiuser";
// What the converter's runtimePatches are managed by (a domain-prefixed path, as Trainer's
// webhook requires).
inline constexpr std::string_view kPatchManager = "trainer-mpi.kubeflow.org/convert";
// An MPIJob is a Kubernetes object: etcd keeps at most 1.5 MiB of one.
inline constexpr std::size_t kMaxManifestBytes = 1536U * 1024U;

// A field of the MPIJob that the TrainJob does not carry, and what to do instead.
struct Unmapped {
  std::string field;   // its path in the MPIJob: spec.runPolicy.cleanPodPolicy
  std::string advice;  // one line
};

struct ConvertOptions {
  std::string runtime;  // the runtimeRef; empty: the package's runtime for mpiImplementation
};

// The converted command runs through the launcher, found on PATH: the runtime's bundle puts
// its bin/ (kBundleBin) first there. A bare name, as the runtimes' own advice spells it
// (`[mpi-launcher, run, --, ...]`), so that a bundle elsewhere on PATH serves too; where
// there is none, the pod fails at once ("not found") instead of running the MPI's own mpirun.
inline constexpr std::string_view kLauncherProgram = "mpi-launcher";
inline constexpr std::string_view kBundleBin = "/opt/trainer-mpi/bin";

// The MPIJob's image that the TrainJob keeps as its one trainer.image, and what it must
// have: the ranks run in it, and trainer-mpi's programs come from the runtime's bundle.
struct KeptImage {
  std::string image;
  std::string whose;  // "the Launcher's and the Worker's", "the Worker's", "the Launcher's"
  std::string mpi;    // the MPI it must have: "Open MPI (4 or 5)", "MPICH", "Intel MPI"
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json may allocate in its destructor
struct Conversion {
  Doc trainjob;
  KeptImage kept;
  std::vector<Unmapped> unmapped;
};

// One line for stderr that names the kept image and what it must have (the edge prints it
// on every conversion: a user's image is now what the pods run, so its needs are said).
std::string kept_image_notice(const KeptImage& kept);

// `text` (YAML or JSON, one document) as a typed tree. A document over kMaxManifestBytes,
// nested deeper than 64 levels, of more than 20000 nodes (aliases counted as often as they
// are used), or not YAML at all is an Exit::kData error naming `source`.
Expected<Doc> parse_manifest(std::string_view text, std::string_view source);

// The TrainJob for `mpijob`. A document that is no MPIJob v2beta1, or a field of the wrong
// shape, is an Exit::kData error naming the field and the fix.
Expected<Conversion> convert_mpijob(const Doc& mpijob, const ConvertOptions& options);

// `doc` as a YAML document (block style).
std::string emit_yaml(const Doc& doc);

// The advice for each kind of field without a home, by its key in docs/migrating.md's table
// (`runPolicy.cleanPodPolicy`, `sshAuthMountPath`, ...): the converter words its messages
// from here, and a test finds every key in that table.
struct NoHome {
  std::string_view key;
  std::string_view advice;
};
const std::vector<NoHome>& no_home_table();

}  // namespace tmpi::convert
