// The MPIJob's pod templates on the TrainJob (convert_pods.h). Where each part goes follows
// what Trainer v2.3 lets a TrainJob reach (docs/trainer-rules.md):
// - image and command go to trainer.image and trainer.command: the ranks' image (the
//   Worker's; the Launcher's when no worker runs ranks), the Launcher's first container's
//   command, an mpirun line through `mpi-launcher run --mpirun-line` (launcher_command);
// - env and resourcesPerNode reach the `node` container of every pod (runLauncherAsNode);
// - the rest goes through runtimePatches, whose schema (tests/examples/crds) takes, per pod,
//   labels and annotations, affinity, imagePullSecrets, nodeSelector, schedulingGates,
//   serviceAccountName, terminationGracePeriodSeconds, tolerations and volumes, and per
//   container only volumeMounts (env is Trainer's, securityContext the runtime's).
// The launcher pod runs ranks here, so "the ranks' template" (the Worker's, or the Launcher's
// when no worker runs) gives every pod its resources, env, placement, volumes and mounts;
// the Launcher's own volumes and mounts join on the launcher pod, since its command may need
// them. Every other field is named, with its advice (convert_fields.cpp).
#include "convert/convert_pods.h"

#include <set>

namespace tmpi::convert {

namespace {

const std::set<std::string> kReplicaFields = {"replicas", "template", "restartPolicy"};
// The pod fields a runtimePatch takes, besides containers (the CRD's schema of runtimePatches).
const std::set<std::string> kPatchPodFields = {"affinity",           "imagePullSecrets",
                                               "nodeSelector",       "schedulingGates",
                                               "serviceAccountName", "terminationGracePeriodSeconds",
                                               "tolerations",        "volumes"};
const std::set<std::string> kPlacement = {"affinity",           "nodeSelector",
                                          "schedulingGates",    "tolerations",
                                          "serviceAccountName", "terminationGracePeriodSeconds"};
const std::set<std::string> kProbes = {"ports", "readinessProbe", "livenessProbe", "startupProbe"};

Expected<const Doc*> replica(const Doc& specs, const std::string& role) {
  std::string path = "spec.mpiReplicaSpecs." + role;
  TMPI_ASSIGN(const Doc* replica, object_at(specs, role, path));
  if (replica == nullptr) return replica;
  for (const auto& [key, value] : replica->items())
    if (!kReplicaFields.contains(key))
      return make_error(Exit::kData,
                        "{}.{}: not a field of a ReplicaSpec (replicas, template, restartPolicy)", path, key);
  TMPI_ASSIGN(const Doc* pod, object_at(*replica, "template", path + ".template"));
  const Doc* pod_spec = nullptr;
  if (pod != nullptr) {
    TMPI_ASSIGN(pod_spec, object_at(*pod, "spec", path + ".template.spec"));
  }
  const Doc* containers = nullptr;
  if (pod_spec != nullptr) {
    TMPI_ASSIGN(containers, array_at(*pod_spec, "containers", path + ".template.spec.containers"));
  }
  if (containers == nullptr || containers->empty())
    return make_error(Exit::kData, "{}.template.spec.containers: missing; the {} needs a container", path,
                      role);
  for (const auto& container : *containers)
    if (!container.is_object())
      return make_error(Exit::kData, "{}.template.spec.containers: a list of maps expected", path);
  return replica;
}

const Doc& pod_spec(const Doc& replica) {
  return replica["template"]["spec"];
}

// `list` with `more`'s entries added by name (or mountPath); an entry whose key is taken
// with other content is named under `key`.
Status join_named(Doc& list, const Doc* more, const std::string& field, const std::string& path,
                  const std::string& key, Conversion& out) {
  if (more == nullptr) return ok_status();
  for (const auto& item : *more) {
    if (!item.is_object() || !item.contains(field) || !item[field].is_string())
      return make_error(Exit::kData, "{}: each entry needs a {} (a string)", path, field);
    auto same =
        std::find_if(list.begin(), list.end(), [&](const Doc& old) { return old[field] == item[field]; });
    if (same == list.end())
      list.push_back(item);
    else if (*same != item)
      out.unmapped.push_back(
          {path + "[" + item[field].get<std::string>() + "]", std::string(advice_for(key))});
  }
  return ok_status();
}

// What one replicated job of the runtime gets through runtimePatches.
struct PodPatch {
  Doc metadata = Doc::object();
  Doc spec = Doc::object();
  Doc mounts = Doc::array();

  Doc as_patch(const std::string& job) const {
    Doc pod = spec;
    if (!mounts.empty()) pod["containers"] = Doc::array({{{"name", "node"}, {"volumeMounts", mounts}}});
    Doc templ = {{"spec", pod}};
    if (!metadata.empty()) templ = {{"metadata", metadata}, {"spec", pod}};
    return {{"name", job}, {"template", {{"spec", {{"template", templ}}}}}};
  }
  bool empty() const { return metadata.empty() && spec.empty() && mounts.empty(); }
};

// A template's pod fields and its metadata into `patch`. `ranks` marks the ranks' template.
Status pod_fields(const Doc& replica, const std::string& path, bool ranks, PodPatch& patch, Conversion& out) {
  const Doc& spec = pod_spec(replica);
  for (const auto& [key, value] : spec.items()) {
    std::string where = fmt::format("{}.template.spec.{}", path, key);
    if (key == "containers" || value.is_null()) continue;  // null: as if absent, as the apiserver reads it
    if (key == "volumes" || key == "imagePullSecrets") {
      if (!patch.spec.contains(key)) patch.spec[key] = Doc::array();
      TMPI_ASSIGN(const Doc* list, array_at(spec, key, where));
      TMPI_CHECK(join_named(patch.spec[key], list, "name", where, "volumes", out));
    } else if (kPlacement.contains(key)) {
      if (ranks)
        patch.spec[key] = value;
      else if (!patch.spec.contains(key) || patch.spec[key] != value)
        out.unmapped.push_back({where, std::string(advice_for("Launcher.placement"))});
    } else if (key == "initContainers") {
      out.unmapped.push_back({where, std::string(advice_for("containers"))});
    } else if (key == "securityContext" || key == "restartPolicy") {
      out.unmapped.push_back({where, std::string(advice_for(key))});
    } else {
      out.unmapped.push_back({where, std::string(advice_for("pod"))});
    }
  }
  TMPI_ASSIGN(const Doc* meta, object_at(replica["template"], "metadata", path + ".template.metadata"));
  for (std::string key : {"labels", "annotations"}) {
    if (meta == nullptr) break;
    TMPI_ASSIGN(const Doc* values, object_at(*meta, key, fmt::format("{}.template.metadata.{}", path, key)));
    if (values != nullptr) patch.metadata[key].update(*values);
  }
  if (spec["containers"].size() > 1)
    out.unmapped.push_back({path + ".template.spec.containers[1:]", std::string(advice_for("containers"))});
  return ok_status();
}

// One container's fields other than image, command and args (the launcher's, mapped by the caller).
Status container_fields(const Doc& container, const std::string& path, bool ranks, Doc& trainer, Doc& env,
                        PodPatch& patch, Conversion& out) {
  for (const auto& [key, value] : container.items()) {
    std::string where = fmt::format("{}.{}", path, key);
    if (key == "name" || key == "image" || key == "command" || key == "args" || value.is_null()) continue;
    if (key == "env") {
      TMPI_ASSIGN(const Doc* list, array_at(container, key, where));
      TMPI_CHECK(join_named(env, list, "name", where, "env", out));
    } else if (key == "volumeMounts") {
      TMPI_ASSIGN(const Doc* list, array_at(container, key, where));
      TMPI_CHECK(join_named(patch.mounts, list, "mountPath", where, "volumes", out));
    } else if (key == "resources") {
      TMPI_ASSIGN(const Doc* resources, object_at(container, key, where));
      if (ranks && resources != nullptr)
        trainer["resourcesPerNode"] = *resources;
      else if (!ranks && (!trainer.contains("resourcesPerNode") || trainer["resourcesPerNode"] != value))
        out.unmapped.push_back({where, std::string(advice_for("Launcher.resources"))});
    } else if (key == "envFrom" || key == "securityContext" || key == "imagePullPolicy" ||
               key == "workingDir") {
      out.unmapped.push_back({where, std::string(advice_for(key))});
    } else {
      out.unmapped.push_back(
          {where, std::string(advice_for(kProbes.contains(key) ? "probes" : "container"))});
    }
  }
  return ok_status();
}

// The names an MPI gives the program that starts a job: a command that starts with one (its
// basename) is an mpirun line, which the launcher reads with the MPI's own grammar.
bool starts_mpi(std::string_view program) {
  std::string_view name = program.substr(program.rfind('/') + 1);  // npos + 1 is 0
  return name == "mpirun" || name == "mpiexec" || name == "mpiexec.hydra" || name == "orterun" ||
         name == "prterun";
}

// The launcher's command and args as one list of words, each a string; a program under the
// runtime's HOME named (the home emptyDir hides it at run time).
Expected<Doc> launcher_words(const Doc& container, const std::string& path, Conversion& out) {
  TMPI_ASSIGN(const Doc* command, array_at(container, "command", path + ".command"));
  TMPI_ASSIGN(const Doc* args, array_at(container, "args", path + ".args"));
  Doc words = Doc::array();
  for (const auto& [part, name] : {std::pair{command, "command"}, std::pair{args, "args"}}) {
    std::size_t index = 0;
    for (const auto& word : part != nullptr ? *part : Doc::array()) {
      if (!word.is_string())
        return make_error(Exit::kData, "{}: every word of command and args must be a string (quote it)",
                          path);
      if (std::string_view text = word.get_ref<const std::string&>();
          text.starts_with(std::string(kRuntimeHome) + "/"))
        out.unmapped.push_back(
            {fmt::format("{}.{}[{}] ({})", path, name, index, text), std::string(advice_for("home"))});
      words.push_back(word);
      ++index;
    }
  }
  if (words.empty())
    return make_error(Exit::kData,
                      "{}: neither command nor args; give the launcher's command (the mpirun line)", path);
  if (command == nullptr || command->empty())
    out.unmapped.push_back({path + ".command", std::string(advice_for("Launcher.command"))});
  return words;
}

// The TrainJob's command: an mpirun line goes to `mpi-launcher run --mpirun-line`, which
// checks it against the job and runs it under the preflight, the rank agents and the report
// (the same as the bundle's mpirun hand-off does, with no escape to the MPI's own mpirun:
// where the bundle is missing, the pod fails at once). An mpirun named by its path keeps
// that MPI (--mpirun). Any other command (a shell script, a Python driver) runs as it is:
// its own `mpirun` reaches the launcher only through the hand-off on PATH, which is named.
Status launcher_command(const Doc& container, const std::string& path, Doc& trainer, Conversion& out) {
  TMPI_ASSIGN(Doc words, launcher_words(container, path, out));
  const auto& program = words[0].get_ref<const std::string&>();
  if (!starts_mpi(program)) {
    out.unmapped.push_back({path + ".command", std::string(advice_for("Launcher.script"))});
    trainer["command"] = std::move(words);
    return ok_status();
  }
  Doc command = Doc::array({std::string(kLauncherProgram), "run"});
  if (program.find('/') != std::string::npos) command.insert(command.end(), {"--mpirun", program});
  command.insert(command.end(), {"--mpirun-line", "--"});
  command.insert(command.end(), words.begin() + 1, words.end());
  trainer["command"] = std::move(command);
  return ok_status();
}

// The TrainJob's one image: the ranks' template's (the Worker's, or the Launcher's when no
// worker runs ranks). The launcher pod runs ranks here, so it needs the ranks' program and
// the MPI their daemons run; the launcher's own tools come from the bundle. A Launcher image
// that differs is named, not refused: mpi-operator's launcher images are often the workers'
// less the program, which the Worker's image has.
Status kept_image(const Replicas& replicas, bool workers_run_ranks, Doc& trainer, Conversion& out) {
  auto image_of = [](const Doc& replica, const std::string& role) -> Expected<std::string> {
    std::string path = fmt::format("spec.mpiReplicaSpecs.{}.template.spec.containers[0].image", role);
    TMPI_ASSIGN(std::string image, string_at_path(pod_spec(replica)["containers"][0], "image", path));
    if (image.empty())
      return make_error(Exit::kData, "{}: missing; the TrainJob keeps the MPIJob's image", path);
    return image;
  };
  TMPI_ASSIGN(std::string launcher, image_of(*replicas.launcher, "Launcher"));
  out.kept = {launcher, "the Launcher's", out.kept.mpi};
  if (!workers_run_ranks) {
    trainer["image"] = launcher;
    return ok_status();
  }
  TMPI_ASSIGN(std::string worker, image_of(*replicas.worker, "Worker"));
  out.kept = {worker, worker == launcher ? "the Launcher's and the Worker's" : "the Worker's", out.kept.mpi};
  if (worker != launcher)
    out.unmapped.push_back(
        {fmt::format("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image ({})", launcher),
         std::string(advice_for("Launcher.image"))});
  trainer["image"] = worker;
  return ok_status();
}

}  // namespace

Expected<Replicas> replica_specs(const Doc& spec) {
  TMPI_ASSIGN(const Doc* specs, object_at(spec, "mpiReplicaSpecs", "spec.mpiReplicaSpecs"));
  if (specs == nullptr)
    return make_error(Exit::kData, "spec.mpiReplicaSpecs: missing; an MPIJob has a Launcher");
  for (const auto& [key, value] : specs->items())
    if (key != "Launcher" && key != "Worker")
      return make_error(Exit::kData, "spec.mpiReplicaSpecs.{}: not a replica type (Launcher, Worker)", key);
  Replicas out;
  TMPI_ASSIGN(out.launcher, replica(*specs, "Launcher"));
  if (out.launcher == nullptr)
    return make_error(Exit::kData, "spec.mpiReplicaSpecs.Launcher: missing; give the launcher's template");
  TMPI_ASSIGN(long long launchers,
              int_at_path(*out.launcher, "replicas", "spec.mpiReplicaSpecs.Launcher.replicas", 1));
  if (launchers != 1)
    return make_error(Exit::kData, "spec.mpiReplicaSpecs.Launcher.replicas: {}; an MPIJob has one launcher",
                      launchers);
  TMPI_ASSIGN(out.worker, replica(*specs, "Worker"));
  if (out.worker != nullptr) {
    TMPI_ASSIGN(out.workers, int_at_path(*out.worker, "replicas", "spec.mpiReplicaSpecs.Worker.replicas", 0));
  }
  return out;
}

Status map_pods(const Replicas& replicas, Doc& trainer, Doc& env, Doc& patches, Conversion& out) {
  const std::string launcher_path = "spec.mpiReplicaSpecs.Launcher";
  const std::string worker_path = "spec.mpiReplicaSpecs.Worker";
  const Doc& launcher = pod_spec(*replicas.launcher)["containers"][0];
  bool workers_run_ranks = replicas.worker != nullptr && replicas.workers > 0;
  TMPI_CHECK(kept_image(replicas, workers_run_ranks, trainer, out));
  TMPI_CHECK(launcher_command(launcher, launcher_path + ".template.spec.containers[0]", trainer, out));
  PodPatch ranks_patch;
  PodPatch launcher_patch;
  if (workers_run_ranks) {
    const Doc& worker = pod_spec(*replicas.worker)["containers"][0];
    std::string path = worker_path + ".template.spec.containers[0]";
    for (std::string key : {"command", "args"})
      if (worker.contains(key) && !worker[key].is_null())
        out.unmapped.push_back({fmt::format("{}.{}", path, key), std::string(advice_for("Worker.command"))});
    TMPI_CHECK(pod_fields(*replicas.worker, worker_path, true, ranks_patch, out));
    TMPI_CHECK(container_fields(worker, path, true, trainer, env, ranks_patch, out));
    if (replicas.worker->contains("restartPolicy"))
      out.unmapped.push_back({worker_path + ".restartPolicy", std::string(advice_for("restartPolicy"))});
  }
  launcher_patch = ranks_patch;  // the launcher pod is a host like the others
  TMPI_CHECK(pod_fields(*replicas.launcher, launcher_path, !workers_run_ranks, launcher_patch, out));
  TMPI_CHECK(container_fields(launcher, launcher_path + ".template.spec.containers[0]", !workers_run_ranks,
                              trainer, env, launcher_patch, out));
  if (replicas.launcher->contains("restartPolicy"))
    out.unmapped.push_back({launcher_path + ".restartPolicy", std::string(advice_for("restartPolicy"))});
  if (!workers_run_ranks) ranks_patch = launcher_patch;
  Doc jobs = Doc::array();
  if (!launcher_patch.empty()) jobs.push_back(launcher_patch.as_patch("launcher"));
  if (!ranks_patch.empty()) jobs.push_back(ranks_patch.as_patch("node"));
  if (!jobs.empty())
    patches = Doc::array({{{"manager", kPatchManager},
                           {"trainingRuntimeSpec", {{"template", {{"spec", {{"replicatedJobs", jobs}}}}}}}}});
  return ok_status();
}

}  // namespace tmpi::convert
