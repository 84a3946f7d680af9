// The converter's typed readers and its table of fields without a home (convert_pods.h).
// The readers never throw (nlohmann's get<> would, on a field of another type): the shape
// is checked first and a wrong one named by its MPIJob path. The table's keys are the
// rows of docs/migrating.md, "MPIJob v2beta1 fields", which says the same at more length.
#include <cstdlib>

#include "convert/convert_pods.h"

namespace tmpi::convert {

namespace {

std::string type_name(const Doc& value) {
  return value.type_name();  // "object", "array", "string", "number", "boolean", "null"
}

}  // namespace

Expected<const Doc*> object_at(const Doc& parent, const std::string& key, const std::string& path) {
  auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return static_cast<const Doc*>(nullptr);
  if (!found->is_object())
    return make_error(Exit::kData, "{}: a map expected, found a {}", path, type_name(*found));
  return &*found;
}

Expected<const Doc*> array_at(const Doc& parent, const std::string& key, const std::string& path) {
  auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return static_cast<const Doc*>(nullptr);
  if (!found->is_array())
    return make_error(Exit::kData, "{}: a list expected, found a {}", path, type_name(*found));
  return &*found;
}

Expected<std::string> string_at_path(const Doc& parent, const std::string& key, const std::string& path,
                                     std::string fallback) {
  auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return fallback;
  if (!found->is_string())
    return make_error(Exit::kData, "{}: a string expected, found a {} (quote it)", path, type_name(*found));
  return found->get<std::string>();
}

Expected<long long> int_at_path(const Doc& parent, const std::string& key, const std::string& path,
                                long long fallback, long long min) {
  auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return fallback;
  if (!found->is_number_integer())
    return make_error(Exit::kData, "{}: a whole number expected, found a {}", path, type_name(*found));
  auto value = found->get<long long>();
  constexpr long long kInt32Max = 2147483647;  // the API's int32 fields
  if (value < min || value > kInt32Max)
    return make_error(Exit::kData, "{}: {} is out of range ({} to {})", path, value, min, kInt32Max);
  return value;
}

Expected<bool> bool_at_path(const Doc& parent, const std::string& key, const std::string& path,
                            bool fallback) {
  auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return fallback;
  if (!found->is_boolean())
    return make_error(Exit::kData, "{}: true or false expected, found a {}", path, type_name(*found));
  return found->get<bool>();
}

std::string string_or(const Doc& parent, const std::string& key) {
  if (!parent.is_object()) return "";
  auto found = parent.find(key);
  return found != parent.end() && found->is_string() ? found->get<std::string>() : "";
}

const std::vector<NoHome>& no_home_table() {
  static const std::vector<NoHome> table = {
      {"runPolicy.cleanPodPolicy",
       "not needed: mpi-launcher ends every rank before it exits, on success and on the first failure; the "
       "pods "
       "follow the JobSet's lifecycle"},
      {"runPolicy.ttlSecondsAfterFinished",
       "a JobSet ttlSecondsAfterFinished in a runtime of your own (runtimePatches cannot set it)"},
      {"runPolicy.backoffLimit",
       "the runtime's failurePolicy.maxRestarts (3): exit 69 or 75 or a disrupted pod restarts the JobSet "
       "with "
       "fresh hosts, any other exit fails it; another count needs a runtime of your own"},
      {"runPolicy.schedulingPolicy",
       "Kueue: the label kueue.x-k8s.io/queue-name on the TrainJob; gang scheduling: podGroupPolicy in a "
       "runtime "
       "of your own"},
      {"runPolicy.managedBy", "only kueue.x-k8s.io/multikueue carries over; the TrainJob is Trainer's"},
      {"sshAuthMountPath",
       "not needed: the runtime mounts Trainer's SSH Secret at /etc/mpi-ssh and mpi-init copies the key to "
       "~/.ssh"},
      {"launcherCreationPolicy",
       "not needed: the launcher waits in its rendezvous for every host's sshd, then checks DNS and ssh "
       "before a "
       "rank starts"},
      {"mpiImplementation",
       "the package has no MPICH or Intel MPI runtime: the TrainJob names trainer-mpi-openmpi-v0-1, whose "
       "node pods "
       "run Open MPI; make a runtime of your own from it with images/build.sh's trainer-mpi:mpich image and "
       "give it "
       "with --runtime"},
      {"metadata", "not carried: only name, generateName, namespace, labels and annotations are"},
      {"restartPolicy",
       "not needed: the runtime's failure policy restarts on infrastructure faults (exit 69, 75) and fails "
       "on "
       "the program's"},
      {"Launcher.image",
       "not kept: the TrainJob has one image, and the launcher pod runs ranks here, so it runs the Worker's "
       "(which must have the Launcher's mpirun, its MPI): mpi-launcher and the rest of trainer-mpi come from "
       "the runtime's bundle, not from the launcher's image"},
      {"home",
       "the runtime mounts the pod's home, an emptyDir, at /home/mpiuser (HOME), which hides what the image "
       "has there: install the program elsewhere in the image (/opt/NAME, /usr/local/bin) and name that "
       "path"},
      {"Worker.command", "not needed: the runtime's node pods run sshd, mpi-init and the rendezvous sidecar"},
      {"Launcher.command",
       "the Launcher had args and no command (the image's ENTRYPOINT ran them); the TrainJob runs the args "
       "as its "
       "command: put an ENTRYPOINT wrapper first if the image had one"},
      {"Launcher.script",
       "not an mpirun line: it runs as it is; an `mpirun` it calls by name reaches mpi-launcher through "
       "the runtime's bundle (its mpirun hand-off, first on PATH), one called by its path skips the "
       "preflight and the report: put the mpirun line itself in the command"},
      {"Launcher.resources",
       "the launcher pod runs ranks here and gets resourcesPerNode (the Worker's), as every host does"},
      {"Launcher.placement",
       "the launcher pod runs ranks here, so it is placed as the Worker is (its nodeSelector, tolerations, "
       "affinity)"},
      {"env", "one value per name in trainer.env, which every pod gets: the Worker's is kept"},
      {"volumes",
       "one volume per name on the launcher pod, which holds both templates': the Worker's is kept"},
      {"envFrom", "list the variables in env (trainer.env): runtimePatches take no envFrom"},
      {"securityContext",
       "the runtime runs every pod as uid 1000 (Pod Security restricted; any uid on OpenShift): one uid for "
       "every "
       "pod, since a non-root sshd logs in only its own"},
      {"imagePullPolicy", "the runtime's (Kubernetes' default): push a new tag for a new image"},
      {"workingDir", "cd in the command (bash -c 'cd DIR && ...') or set WORKDIR in the image"},
      {"probes",
       "not needed: the rendezvous sidecar is each node pod's readiness probe, and sshd's ports are the "
       "runtime's"},
      {"containers",
       "runtimePatches change only the runtime's own containers: a sidecar or init container needs a runtime "
       "of "
       "your own"},
      {"container", "no home in a TrainJob: set it in a runtime of your own"},
      {"pod", "no home in a TrainJob: set it in a runtime of your own"},
  };
  return table;
}

std::string_view advice_for(std::string_view key) {
  for (const auto& row : no_home_table())
    if (row.key == key) return row.advice;
  std::abort();  // every key the converter names is in the table (ConvertTest.EveryAdviceIsInMigratingMd)
}

}  // namespace tmpi::convert
