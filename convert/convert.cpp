// MPIJob v2beta1 to TrainJob (convert.h): the job-level fields, read in the order of
// mpi-operator's MPIJobSpec (pkg/apis/kubeflow/v2beta1/types.go @ caa3c47f); the pods'
// templates are convert_pods.cpp's.
//
// The layout decides the counts. Our runtimes run the launcher as a host that runs ranks
// (runLauncherAsNode; manifests/base/runtime-openmpi.yaml), and a TrainJob's numNodes counts
// hosts, launcher included. An MPIJob's launcher runs no ranks unless runLauncherAsWorker;
// so numNodes is the number of hosts that ran ranks (Worker replicas, plus one with
// runLauncherAsWorker): the same hosts and slots, so that the user's `mpirun -np N` still
// fits, in one pod fewer. slotsPerWorker is numProcPerNode, always written: a TrainJob's
// value wins over Trainer's count of GPUs (docs/trainer-rules.md, the MPI plugin's slots).
#include <optional>
#include <set>

#include "common/choice.h"
#include "common/param_names.h"
#include "common/params.h"
#include "convert/convert_pods.h"

namespace tmpi::convert {

namespace {

constexpr std::string_view kApiVersion = "kubeflow.org/v2beta1";

// The fields of MPIJobSpec and RunPolicy (types.go).
const std::set<std::string> kSpecFields = {
    "slotsPerWorker",    "runLauncherAsWorker",   "runPolicy", "mpiReplicaSpecs", "sshAuthMountPath",
    "mpiImplementation", "launcherCreationPolicy"};
const std::set<std::string> kRunPolicyFields = {
    "cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
    "backoffLimit",   "schedulingPolicy",        "suspend",
    "managedBy"};
// Metadata the apiserver sets: a `kubectl get -o yaml` copy carries them, a new object must not.
const std::set<std::string> kServerMetadata = {
    "uid",           "resourceVersion",   "generation",        "selfLink",
    "managedFields", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"};

Status only_known(const Doc& object, const std::set<std::string>& known, const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    if (!known.contains(key))
      return make_error(Exit::kData,
                        "{}.{}: not a field of an MPIJob v2beta1 (one of {}); fix its spelling or remove it",
                        path, key, fmt::join(known, ", "));
  }
  return ok_status();
}

Status metadata(const Doc& job, Conversion& out) {
  TMPI_ASSIGN(const Doc* meta, object_at(job, "metadata", "metadata"));
  if (meta == nullptr || (!meta->contains("name") && !meta->contains("generateName")))
    return make_error(Exit::kData, "metadata.name: missing; give the MPIJob a name (the TrainJob takes it)");
  Doc target = Doc::object();
  for (const auto& [key, value] : meta->items()) {
    if (key == "name" || key == "generateName" || key == "namespace") {
      TMPI_ASSIGN(target[key], string_at_path(*meta, key, "metadata." + key));
    } else if (key == "labels" || key == "annotations") {
      target[key] = value;  // Kueue's queue-name label among them
    } else if (!kServerMetadata.contains(key)) {
      out.unmapped.push_back({"metadata." + key, std::string(advice_for("metadata"))});
    }
  }
  out.trainjob["metadata"] = std::move(target);
  return ok_status();
}

// mpi-operator's spec.mpiImplementation (v2beta1 MPIImplementation), and each one's
// spelling as mpi-launcher's --mpi (common/param_table.cpp's row; launcher/choices.h reads
// it there, and Convert.MpiSpellingsAreTheLaunchersOwn holds the two together: convert
// shares no code with the launcher's run).
enum class MpiJobMpi { kOpenMpi, kMpich, kIntel };
inline constexpr Spellings<MpiJobMpi, 3> kMpiJobImplementations{
    {{"OpenMPI", MpiJobMpi::kOpenMpi}, {"MPICH", MpiJobMpi::kMpich}, {"Intel", MpiJobMpi::kIntel}}};
inline constexpr Spellings<MpiJobMpi, 3> kLauncherMpiSpellings{
    {{"openmpi", MpiJobMpi::kOpenMpi}, {"mpich", MpiJobMpi::kMpich}, {"intel", MpiJobMpi::kIntel}}};

// The runtime of the package for the MPI, and the launcher's --mpi for a hydra one.
Status implementation(const Doc& spec, const ConvertOptions& options, Conversion& out, Doc& env) {
  TMPI_ASSIGN(std::string spelled,
              string_at_path(spec, "mpiImplementation", "spec.mpiImplementation", "OpenMPI"));
  std::optional<MpiJobMpi> mpi = choice_value(spelled, kMpiJobImplementations);
  if (!mpi)
    return make_error(Exit::kData, "spec.mpiImplementation: '{}'; one of OpenMPI, MPICH, Intel", spelled);
  out.trainjob["spec"]["runtimeRef"] = {
      {"name", options.runtime.empty() ? kOpenMpiRuntime : options.runtime}};
  out.kept.mpi = *mpi == MpiJobMpi::kOpenMpi ? "Open MPI (4 or 5)"
                 : *mpi == MpiJobMpi::kMpich ? "MPICH"
                                             : "Intel MPI";
  if (*mpi == MpiJobMpi::kOpenMpi) return ok_status();
  // The launcher would tell hydra from its install too; said, so that an Open MPI image fails at once.
  env.push_back({{"name", env_name(param::kMpi.name)},
                 {"value", std::string(choice_name(*mpi, kLauncherMpiSpellings))}});
  if (options.runtime.empty())
    out.unmapped.push_back({"spec.mpiImplementation", std::string(advice_for("mpiImplementation"))});
  return ok_status();
}

Status run_policy(const Doc& spec, Conversion& out) {
  TMPI_ASSIGN(const Doc* policy, object_at(spec, "runPolicy", "spec.runPolicy"));
  if (policy == nullptr) return ok_status();
  TMPI_CHECK(only_known(*policy, kRunPolicyFields, "spec.runPolicy"));
  Doc& target = out.trainjob["spec"];
  for (const auto& [key, value] : policy->items()) {
    if (value.is_null()) continue;  // as if absent
    std::string path = "spec.runPolicy." + key;
    if (key == "activeDeadlineSeconds") {
      TMPI_ASSIGN(target["activeDeadlineSeconds"], int_at_path(*policy, key, path, 1));
    } else if (key == "suspend") {
      TMPI_ASSIGN(target["suspend"], bool_at_path(*policy, key, path));
    } else if (key == "managedBy") {
      TMPI_ASSIGN(std::string manager, string_at_path(*policy, key, path));
      if (manager == "kueue.x-k8s.io/multikueue")
        target["managedBy"] = manager;  // the value both CRDs take
      else if (manager != "kubeflow.org/mpi-operator")
        out.unmapped.push_back({path, std::string(advice_for("runPolicy.managedBy"))});
    } else {
      out.unmapped.push_back({path, std::string(advice_for("runPolicy." + key))});
    }
  }
  return ok_status();
}

// How many hosts run ranks (the file's top comment).
Expected<long long> host_count(const Doc& spec, const Replicas& replicas) {
  TMPI_ASSIGN(bool launcher_runs_ranks,
              bool_at_path(spec, "runLauncherAsWorker", "spec.runLauncherAsWorker", false));
  long long hosts = replicas.workers + (launcher_runs_ranks ? 1 : 0);
  if (hosts < 1)
    return make_error(
        Exit::kData,
        "spec.mpiReplicaSpecs.Worker.replicas: 0 and no runLauncherAsWorker: no host would run a rank; "
        "give the Worker replicas");
  return hosts;
}

}  // namespace

std::string kept_image_notice(const KeptImage& kept) {
  return fmt::format(
      "keeps image {} ({} image) as trainer.image: the ranks run in it, so it must have /bin/sh and {}, the "
      "MPI the program was built with; mpi-launcher, which the command runs through, and trainer-mpi's other "
      "programs come from the runtime's bundle ({}, first on PATH), not from the image",
      kept.image, kept.whose, kept.mpi, kBundleBin);
}

Expected<Conversion> convert_mpijob(const Doc& mpijob, const ConvertOptions& options) {
  if (!mpijob.is_object() || string_or(mpijob, "kind") != "MPIJob" ||
      string_or(mpijob, "apiVersion") != kApiVersion)
    return make_error(
        Exit::kData,
        "apiVersion '{}', kind '{}': not an MPIJob {}; convert reads mpi-operator's v2beta1 MPIJobs "
        "(move a v1 one to v2beta1 first)",
        string_or(mpijob, "apiVersion"), string_or(mpijob, "kind"), kApiVersion);
  Conversion out;
  out.trainjob = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"}, {"kind", "TrainJob"}};
  TMPI_CHECK(metadata(mpijob, out));
  TMPI_ASSIGN(const Doc* spec, object_at(mpijob, "spec", "spec"));
  if (spec == nullptr) return make_error(Exit::kData, "spec: missing; an MPIJob has spec.mpiReplicaSpecs");
  TMPI_CHECK(only_known(*spec, kSpecFields, "spec"));
  out.trainjob["spec"] = Doc::object();
  Doc env = Doc::array();
  TMPI_CHECK(implementation(*spec, options, out, env));
  TMPI_ASSIGN(Replicas replicas, replica_specs(*spec));
  TMPI_ASSIGN(long long hosts, host_count(*spec, replicas));
  TMPI_ASSIGN(long long slots, int_at_path(*spec, "slotsPerWorker", "spec.slotsPerWorker", 1, 1));
  TMPI_CHECK(run_policy(*spec, out));
  for (std::string key : {"sshAuthMountPath", "launcherCreationPolicy"})
    if (spec->contains(key) && !(*spec)[key].is_null())
      out.unmapped.push_back({"spec." + key, std::string(advice_for(key))});
  Doc trainer = Doc::object();
  Doc patches = Doc::array();
  TMPI_CHECK(map_pods(replicas, trainer, env, patches, out));
  trainer["numNodes"] = hosts;
  trainer["numProcPerNode"] = slots;
  if (!env.empty()) trainer["env"] = std::move(env);
  out.trainjob["spec"]["trainer"] = std::move(trainer);
  if (!patches.empty()) out.trainjob["spec"]["runtimePatches"] = std::move(patches);
  return out;
}

}  // namespace tmpi::convert
