// `mpi-launcher convert` (convert/convert.h), field by field: the counts of the layout, the
// image kept (and its notice), the command through mpi-launcher, env, resources, volumes and
// placement through runtimePatches, the run policy, the MPI's runtime; every field without a
// home named with its advice, which docs/migrating.md's table must hold; bad MPIJobs refused
// by field; hostile YAML refused without an exception; strings that look like numbers kept
// strings on the way out. The whole examples of mpi-operator are tests/launcher/mpijobs
// (examples.convert).
#include "convert/convert.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "launcher/choices.h"

namespace tmpi::convert {
namespace {

// A two-worker Open MPI job, as mpi-operator's pi example has it (examples/v2beta1/pi/pi.yaml).
constexpr const char* kPi = R"(
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: q}}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running, ttlSecondsAfterFinished: 60}
  sshAuthMountPath: /home/mpiuser/.ssh
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-launcher
            securityContext: {runAsUser: 1000}
            command: [mpirun]
            args: [-n, "2", /home/mpiuser/pi]
            resources: {limits: {cpu: 1, memory: 1Gi}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-worker
            command: [/usr/sbin/sshd]
            args: [-De, -f, /home/mpiuser/.sshd_config]
            resources: {limits: {cpu: 1, memory: 1Gi}}
)";

Conversion converted(const std::string& text, ConvertOptions options = {}) {
  auto doc = parse_manifest(text, "test.yaml");
  EXPECT_TRUE(doc) << (doc ? "" : doc.error().message);
  auto out = convert_mpijob(doc ? *doc : Doc(), options);
  EXPECT_TRUE(out) << (out ? "" : out.error().message);
  return out ? *out : Conversion{};
}

// The message of the refusal of `text` (parse or convert), with its exit code checked.
std::string refusal(const std::string& text, Exit exit = Exit::kData) {
  auto doc = parse_manifest(text, "test.yaml");
  if (!doc) {
    EXPECT_EQ(doc.error().exit, exit);
    return doc.error().message;
  }
  auto out = convert_mpijob(*doc, {});
  EXPECT_FALSE(out) << "converted: " << text;
  if (out) return "";
  EXPECT_EQ(out.error().exit, exit);
  return out.error().message;
}

// `kPi` with `from` replaced by `to` (once).
std::string pi_with(const std::string& from, const std::string& to) {
  std::string text = kPi;
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::vector<std::string> fields(const Conversion& out) {
  std::vector<std::string> names;
  for (const auto& field : out.unmapped) names.push_back(field.field);
  return names;
}

bool named(const Conversion& out, const std::string& field, const std::string& advice_part = "") {
  return std::any_of(out.unmapped.begin(), out.unmapped.end(), [&](const Unmapped& u) {
    return u.field == field && u.advice.find(advice_part) != std::string::npos;
  });
}

const Doc& patch_of(const Conversion& out, const std::string& job) {
  for (const auto& rjob :
       out.trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"])
    if (rjob["name"] == job) return rjob["template"]["spec"]["template"];
  static const Doc none;
  ADD_FAILURE() << "no patch for " << job;
  return none;
}

TEST(Convert, PiBecomesATrainJobOnTheOpenMpiRuntime) {
  auto out = converted(kPi);
  const Doc& job = out.trainjob;
  EXPECT_EQ(job["apiVersion"], "trainer.kubeflow.org/v1alpha1");
  EXPECT_EQ(job["kind"], "TrainJob");
  EXPECT_EQ(job["metadata"]["name"], "pi");
  EXPECT_EQ(job["metadata"]["namespace"], "team-a");
  EXPECT_EQ(job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "q");
  EXPECT_EQ(job["spec"]["runtimeRef"]["name"], kOpenMpiRuntime);
  const Doc& trainer = job["spec"]["trainer"];
  // The MPIJob's own image (the Launcher's and the Worker's), named with what it must have.
  EXPECT_EQ(trainer["image"], "mpioperator/mpi-pi:openmpi");
  EXPECT_EQ(out.kept.image, "mpioperator/mpi-pi:openmpi");
  EXPECT_EQ(out.kept.whose, "the Launcher's and the Worker's");
  // The mpirun line through the bundle's mpi-launcher (never the image's mpirun alone), the
  // rest of the line as it is (command, then args), "2" a string.
  EXPECT_EQ(trainer["command"],
            Doc::array({"mpi-launcher", "run", "--mpirun-line", "--", "-n", "2", "/home/mpiuser/pi"}));
  EXPECT_EQ(trainer["numNodes"], 2);  // the two hosts that ran ranks; the launcher is one of them now
  EXPECT_EQ(trainer["numProcPerNode"], 1);
  EXPECT_EQ(trainer["resourcesPerNode"], Doc::parse(R"({"limits": {"cpu": 1, "memory": "1Gi"}})"));
  EXPECT_FALSE(job["spec"].contains("runtimePatches"));  // nothing the patches would carry
  for (const auto* field :
       {"spec.runPolicy.cleanPodPolicy", "spec.runPolicy.ttlSecondsAfterFinished", "spec.sshAuthMountPath",
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].securityContext",
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command",
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].args"})
    EXPECT_TRUE(named(out, field)) << field;
  EXPECT_TRUE(named(out, "spec.sshAuthMountPath", "/etc/mpi-ssh"));
  EXPECT_TRUE(named(out, "spec.runPolicy.cleanPodPolicy", "ends every rank"));
  // The program lives in the image's /home/mpiuser, which the runtime's home emptyDir hides.
  EXPECT_TRUE(named(out,
                    "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].args[2] (/home/mpiuser/pi)",
                    "emptyDir, at /home/mpiuser"));
  EXPECT_EQ(out.unmapped.size(), 7U) << ::testing::PrintToString(fields(out));
}

// The notice on stderr: the image, whose it was, and the contract it must meet.
TEST(Convert, TheKeptImageIsNamedWithWhatItMustHave) {
  std::string notice = kept_image_notice(converted(kPi).kept);
  for (const auto* part : {"keeps image mpioperator/mpi-pi:openmpi (the Launcher's and the Worker's image)",
                           "/bin/sh", "Open MPI (4 or 5)", "runtime's bundle (/opt/trainer-mpi/bin"})
    EXPECT_NE(notice.find(part), std::string::npos) << part << " not in: " << notice;
  auto intel = converted(pi_with("slotsPerWorker: 1", "mpiImplementation: Intel"));
  EXPECT_NE(kept_image_notice(intel.kept).find("/bin/sh and Intel MPI,"), std::string::npos);
  auto mpich = converted(pi_with("slotsPerWorker: 1", "mpiImplementation: MPICH"));
  EXPECT_NE(kept_image_notice(mpich.kept).find("/bin/sh and MPICH,"), std::string::npos);
}

// One image for the TrainJob: the Worker's, where ranks run; the Launcher's named when it
// differs. With no worker running ranks, the Launcher's.
TEST(Convert, DifferentImagesKeepTheWorkersAndNameTheLaunchers) {
  std::string text = kPi;
  text.replace(text.find("mpioperator/mpi-pi:openmpi"), 26, "mpioperator/mpi-launcher:slim");
  auto out = converted(text);
  EXPECT_EQ(out.trainjob["spec"]["trainer"]["image"], "mpioperator/mpi-pi:openmpi");
  EXPECT_EQ(out.kept.whose, "the Worker's");
  EXPECT_TRUE(named(out,
                    "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image "
                    "(mpioperator/mpi-launcher:slim)",
                    "runs the Worker's"));
  std::string alone = pi_with("slotsPerWorker: 1", "runLauncherAsWorker: true");
  alone.erase(alone.find("    Worker:"));
  auto launcher_only = converted(alone);
  EXPECT_EQ(launcher_only.trainjob["spec"]["trainer"]["image"], "mpioperator/mpi-pi:openmpi");
  EXPECT_EQ(launcher_only.kept.whose, "the Launcher's");
  EXPECT_NE(refusal(pi_with("          - image: mpioperator/mpi-pi:openmpi\n            name: mpi-worker",
                            "          - name: mpi-worker"))
                .find("Worker.template.spec.containers[0].image: missing"),
            std::string::npos);
}

// Every mpirun line goes through mpi-launcher: one named by its path keeps that MPI's
// mpirun; a command that is no mpirun line runs as it is, and that is named.
TEST(Convert, TheCommandRunsThroughMpiLauncher) {
  auto by_path = converted(pi_with("command: [mpirun]", "command: [/opt/openmpi/bin/mpiexec]"));
  EXPECT_EQ(by_path.trainjob["spec"]["trainer"]["command"],
            Doc::array({"mpi-launcher", "run", "--mpirun", "/opt/openmpi/bin/mpiexec", "--mpirun-line", "--",
                        "-n", "2", "/home/mpiuser/pi"}));
  auto script =
      converted(pi_with("            command: [mpirun]\n            args: [-n, \"2\", /home/mpiuser/pi]",
                        "            command: [bash, -c, 'cd /data && mpirun -n 2 /opt/pi']"));
  EXPECT_EQ(script.trainjob["spec"]["trainer"]["command"],
            Doc::array({"bash", "-c", "cd /data && mpirun -n 2 /opt/pi"}));
  EXPECT_TRUE(named(script, "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command",
                    "not an mpirun line"));
  EXPECT_FALSE(named(converted(kPi), "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command"));
}

TEST(Convert, TheLayoutCountsHostsThatRunRanks) {
  auto with_launcher =
      converted(pi_with("slotsPerWorker: 1", "slotsPerWorker: 4\n  runLauncherAsWorker: true"));
  EXPECT_EQ(with_launcher.trainjob["spec"]["trainer"]["numNodes"], 3);
  EXPECT_EQ(with_launcher.trainjob["spec"]["trainer"]["numProcPerNode"], 4);
  EXPECT_EQ(refusal(pi_with("replicas: 2", "replicas: 0")).find("spec.mpiReplicaSpecs.Worker.replicas"), 0U);
  // No worker: the launcher alone runs ranks, and its own resources are every host's.
  std::string alone = pi_with("slotsPerWorker: 1", "runLauncherAsWorker: true");
  alone.erase(alone.find("    Worker:"));
  auto launcher_only = converted(alone);
  EXPECT_EQ(launcher_only.trainjob["spec"]["trainer"]["numNodes"], 1);
  EXPECT_EQ(launcher_only.trainjob["spec"]["trainer"]["numProcPerNode"], 1);  // mpi-operator's default
  EXPECT_EQ(launcher_only.trainjob["spec"]["trainer"]["resourcesPerNode"]["limits"]["memory"], "1Gi");
  EXPECT_FALSE(named(launcher_only, "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].resources"));
}

// Both templates with env, volumes and placement: the Worker's reach every pod, the
// Launcher's own volume and mount join on the launcher pod, its other values are named.
constexpr const char* kRich = R"(
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: rich}
spec:
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          volumes: [{name: scripts, configMap: {name: s}}]
          nodeSelector: {pool: cpu}
          containers:
          - image: img
            command: [mpirun, python, /scripts/train.py]
            env: [{name: MODE, value: launcher}, {name: OMPI_MCA_pml, value: ob1}]
            volumeMounts: [{name: scripts, mountPath: /scripts}]
    Worker:
      replicas: 4
      template:
        metadata: {annotations: {sidecar.istio.io/inject: "false"}}
        spec:
          volumes: [{name: data, persistentVolumeClaim: {claimName: training-data}}]
          nodeSelector: {pool: gpu}
          tolerations: [{key: nvidia.com/gpu, operator: Exists}]
          containers:
          - image: img
            env: [{name: NCCL_DEBUG, value: INFO}, {name: MODE, value: worker}]
            volumeMounts: [{name: data, mountPath: /data}]
            resources: {limits: {nvidia.com/gpu: 8}}
)";

TEST(Convert, EnvVolumesAndPlacementReachEveryPodThatRunsRanks) {
  auto out = converted(kRich);
  const Doc& env = out.trainjob["spec"]["trainer"]["env"];
  ASSERT_EQ(env.size(), 3U) << env.dump();
  EXPECT_EQ(env[1], Doc::parse(R"({"name": "MODE", "value": "worker"})"));  // the ranks' value
  EXPECT_EQ(env[2]["name"], "OMPI_MCA_pml");
  EXPECT_TRUE(
      named(out, "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env[MODE]", "Worker's is kept"));
  EXPECT_EQ(out.trainjob["spec"]["trainer"]["numNodes"], 4);
  const Doc& node = patch_of(out, "node");
  EXPECT_EQ(node["metadata"]["annotations"]["sidecar.istio.io/inject"], "false");
  EXPECT_EQ(node["spec"]["nodeSelector"]["pool"], "gpu");
  EXPECT_EQ(node["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(node["spec"]["volumes"].size(), 1U);
  EXPECT_EQ(node["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/data");
  const Doc& launcher = patch_of(out, "launcher");
  EXPECT_EQ(launcher["spec"]["nodeSelector"]["pool"], "gpu");  // a host like the others
  EXPECT_TRUE(named(out, "spec.mpiReplicaSpecs.Launcher.template.spec.nodeSelector", "placed as the Worker"));
  EXPECT_EQ(launcher["spec"]["volumes"].size(), 2U);  // the data, and the launcher's own scripts
  EXPECT_EQ(launcher["spec"]["containers"][0]["name"], "node");
  EXPECT_EQ(launcher["spec"]["containers"][0]["volumeMounts"].size(), 2U);
  EXPECT_EQ(out.trainjob["spec"]["runtimePatches"][0]["manager"], kPatchManager);
}

TEST(Convert, RunPolicyFieldsWithAHome) {
  auto out =
      converted(pi_with("ttlSecondsAfterFinished: 60",
                        "activeDeadlineSeconds: 3600, suspend: true, managedBy: kueue.x-k8s.io/multikueue, "
                        "backoffLimit: 2, schedulingPolicy: {queue: q}"));
  const Doc& spec = out.trainjob["spec"];
  EXPECT_EQ(spec["activeDeadlineSeconds"], 3600);
  EXPECT_EQ(spec["suspend"], true);
  EXPECT_EQ(spec["managedBy"], "kueue.x-k8s.io/multikueue");
  EXPECT_TRUE(named(out, "spec.runPolicy.backoffLimit", "maxRestarts"));
  EXPECT_TRUE(named(out, "spec.runPolicy.schedulingPolicy", "queue-name"));
}

TEST(Convert, HydraMpisTellTheLauncherAndSayThereIsNoRuntime) {
  auto out = converted(pi_with("slotsPerWorker: 1", "slotsPerWorker: 1\n  mpiImplementation: MPICH"));
  EXPECT_EQ(out.trainjob["spec"]["trainer"]["env"][0],
            Doc::parse(R"({"name": "TMPI_MPI", "value": "mpich"})"));
  EXPECT_TRUE(named(out, "spec.mpiImplementation", "no MPICH or Intel MPI runtime"));
  auto intel =
      converted(pi_with("slotsPerWorker: 1", "slotsPerWorker: 1\n  mpiImplementation: Intel"), {"my-hydra"});
  EXPECT_EQ(intel.trainjob["spec"]["trainer"]["env"][0]["value"], "intel");
  EXPECT_EQ(intel.trainjob["spec"]["runtimeRef"]["name"], "my-hydra");
  EXPECT_FALSE(named(intel, "spec.mpiImplementation"));
}

// convert shares no code with the launcher (convert/CMakeLists.txt): the TMPI_MPI it writes
// must still be a spelling that the launcher's --mpi reads, and the MPI meant.
TEST(Convert, MpiSpellingsAreTheLaunchersOwn) {
  for (const auto& [mpijob, wanted] :
       {std::pair{"MPICH", launch::MpiWanted::kMpich}, std::pair{"Intel", launch::MpiWanted::kIntel}}) {
    auto out = converted(pi_with("slotsPerWorker: 1", fmt::format("mpiImplementation: {}", mpijob)));
    const Doc& env = out.trainjob["spec"]["trainer"]["env"][0];
    EXPECT_EQ(env["name"], "TMPI_MPI");
    EXPECT_EQ(choice_value(env["value"].get<std::string>(), launch::kMpiWantedSpellings), wanted) << mpijob;
  }
}

TEST(Convert, ArgsWithoutCommandAreTheCommand) {
  auto out = converted(
      pi_with("            command: [mpirun]\n            args: [-n,", "            args: [mpirun, -n,"));
  EXPECT_EQ(out.trainjob["spec"]["trainer"]["command"],
            Doc::array({"mpi-launcher", "run", "--mpirun-line", "--", "-n", "2", "/home/mpiuser/pi"}));
  EXPECT_TRUE(named(out, "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command", "ENTRYPOINT"));
}

TEST(Convert, BadMpiJobsAreRefusedByField) {
  EXPECT_NE(refusal("apiVersion: kubeflow.org/v1\nkind: MPIJob\n").find("not an MPIJob kubeflow.org/v2beta1"),
            std::string::npos);
  EXPECT_NE(refusal(pi_with("slotsPerWorker: 1", "slotPerWorker: 1")).find("spec.slotPerWorker: not a field"),
            std::string::npos);
  EXPECT_NE(refusal(pi_with("slotsPerWorker: 1", "slotsPerWorker: \"1\""))
                .find("spec.slotsPerWorker: a whole number"),
            std::string::npos);
  EXPECT_NE(refusal(pi_with("slotsPerWorker: 1", "slotsPerWorker: 0")).find("out of range"),
            std::string::npos);
  EXPECT_NE(refusal(pi_with("      replicas: 1", "      replicas: 2")).find("Launcher.replicas: 2"),
            std::string::npos);
  EXPECT_NE(
      refusal(pi_with("            command: [mpirun]\n            args: [-n, \"2\", /home/mpiuser/pi]\n", ""))
          .find("neither command nor args"),
      std::string::npos);
  EXPECT_NE(
      refusal(pi_with("            args: [-n, \"2\",", "            args: [-n, 2,")).find("must be a string"),
      std::string::npos);
  EXPECT_NE(
      refusal(pi_with("mpiReplicaSpecs:", "mpiReplicaSpecs:\n    Master: {}")).find("not a replica type"),
      std::string::npos);
  EXPECT_NE(refusal(pi_with("slotsPerWorker: 1", "mpiImplementation: MVAPICH"))
                .find("spec.mpiImplementation: 'MVAPICH'"),
            std::string::npos);
  EXPECT_NE(refusal(pi_with("  runPolicy: {", "  runPolicy: {cleanPodPolicies: All, "))
                .find("spec.runPolicy.cleanPodPolicies"),
            std::string::npos);
  EXPECT_NE(refusal("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\nspec: "
                    "{mpiReplicaSpecs: {}}\n")
                .find("Launcher: missing"),
            std::string::npos);
}

TEST(Convert, HostileYamlIsRefusedWithoutAnException) {
  EXPECT_NE(refusal("a: [1, 2\n").find("not YAML or JSON"), std::string::npos);
  EXPECT_NE(refusal(std::string(20000, '[')).find("test.yaml"), std::string::npos);
  EXPECT_NE(refusal(std::string(kMaxManifestBytes + 1, ' ')).find("at most"), std::string::npos);
  EXPECT_NE(refusal("a: 1\n---\nb: 2\n").find("2 documents"), std::string::npos);
  EXPECT_NE(refusal("a: !!binary aGk=\nb: !custom x\n").find("the tag !custom"), std::string::npos);
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string alias = fmt::format("*{}", static_cast<char>(c - 1));
    laughs += fmt::format("{0}: &{0} [{1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}]\n", c, alias);
  }
  EXPECT_NE(refusal(laughs).find("more than 20000 YAML nodes"), std::string::npos);
}

TEST(Convert, StringsThatLookLikeNumbersStayStrings) {
  Doc doc = {
      {"args", {"-n", "2", "yes", "0x1F", "1e3", "", "~", "1:30", ".5", "plain"}}, {"n", 2}, {"b", true}};
  std::string yaml = emit_yaml(doc);
  auto back = parse_manifest(yaml, "emitted");
  ASSERT_TRUE(back) << yaml;
  EXPECT_EQ(*back, doc) << yaml;
  auto json = parse_manifest(R"({"kind": "MPIJob", "n": 2, "s": "2", "t": true})", "json");
  ASSERT_TRUE(json);
  EXPECT_EQ((*json)["s"], "2");
  EXPECT_EQ((*json)["n"], 2);
}

// docs/migrating.md and the converter say the same: each advice's key is a row there.
TEST(Convert, EveryAdviceIsInMigratingMd) {
  std::ifstream file(std::string(TMPI_SOURCE_DIR) + "/docs/migrating.md");
  std::stringstream text;
  text << file.rdbuf();
  for (const auto& row : no_home_table())
    EXPECT_NE(text.str().find(fmt::format("`{}`", row.key)), std::string::npos) << row.key << " has no row";
}

}  // namespace
}  // namespace tmpi::convert
