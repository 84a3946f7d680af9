#!/usr/bin/env python3
"""sdk_snippet_test.py: examples/sdk_train.py (and README's copy of it) against Kubeflow's SDK.

The SDK cannot be installed here (no PyPI), so its public surface is written down below from
its source, and the snippet runs against a stand-in `kubeflow.trainer` made of exactly that:
a name the SDK does not export fails the import, an argument it does not take fails the call
(the types are dataclasses with the SDK's fields, the methods have its parameters). What
train() submits is built as the SDK builds it (sdk_trainjob.py, the rules of
docs/trainer-rules.md §6) and rendered by render.py on the package's runtime, as Trainer v2.3
would: it must name one of this package's ClusterTrainingRuntimes, and Trainer must accept it.
From kubeflow/sdk:
  - kubeflow/trainer/__init__.py @ 1a2864db: the exported names (EXPORTS);
  - kubeflow/trainer/types/types.py @ 02adc8ed: CustomTrainer(func, func_args,
    packages_to_install, pip_index_urls, num_nodes, resources_per_node, env),
    CustomTrainerContainer(image, num_nodes, resources_per_node, env);
  - kubeflow/trainer/api/trainer_client.py @ 02adc8ed: TrainerClient(backend_config=None),
    get_runtime(name), train(runtime=None, initializer=None, trainer=None, options=None),
    wait_for_job_status(name, status={"Complete"}, timeout=600, polling_interval=2),
    get_job_logs(name, step="node-0", follow=False);
  - kubeflow/trainer/backends/kubernetes/backend.py @ 020e475b: KubernetesBackendConfig's
    fields as the backend reads them (namespace, config_file, context, client_configuration);
    get_runtime reads the runtime by name (an error where there is none); train puts
    runtime.name in spec.runtimeRef; wait_for_job_status takes a subset of Created, Running,
    Complete, Failed; without a runtime, train uses the SDK's default (torch-distributed).
usage: sdk_snippet_test.py [SNIPPET.py]  (default examples/sdk_train.py, then README's copy)
"""
import dataclasses
import os
import re
import runpy
import sys
import types
from typing import Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render  # noqa: E402
import sdk_trainjob  # noqa: E402
from model_fixtures import ROOT, package  # noqa: E402

EXPORTS = {"BuiltinTrainer", "CustomTrainer", "CustomTrainerContainer", "DataCacheInitializer", "DataFormat",
           "DATASET_PATH", "DataType", "Event", "HuggingFaceDatasetInitializer", "HuggingFaceModelInitializer",
           "Initializer", "LoraConfig", "Loss", "MODEL_PATH", "Runtime", "RuntimeKind", "TorchTuneConfig",
           "TorchTuneInstructDataset", "RuntimeTrainer", "S3DatasetInitializer", "S3ModelInitializer",
           "TrainJobTemplate", "TrainerClient", "TrainerType", "LocalProcessBackendConfig",
           "ContainerBackendConfig", "KubernetesBackendConfig", "TrainingRuntimeSource", "update_trainjob_status"}
SDK_DEFAULT_RUNTIME = "torch-distributed"
JOB_STATUSES = {"Created", "Running", "Complete", "Failed"}


@dataclasses.dataclass
class CustomTrainer:
    func: Callable
    func_args: Optional[dict] = None
    packages_to_install: Optional[list] = None
    pip_index_urls: list = dataclasses.field(default_factory=lambda: ["https://pypi.org/simple"])
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[dict] = None


@dataclasses.dataclass
class CustomTrainerContainer:
    image: str
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[dict] = None


@dataclasses.dataclass
class KubernetesBackendConfig:
    namespace: Optional[str] = None
    config_file: Optional[str] = None
    context: Optional[str] = None
    client_configuration: Optional[object] = None


@dataclasses.dataclass
class Runtime:
    name: str


class TrainerClient:
    """The SDK's client, its methods' parameters as the SDK has them; what it submits is kept."""
    submitted = []

    def __init__(self, backend_config=None):
        self.namespace = getattr(backend_config, "namespace", None) or "default"

    def get_runtime(self, name):
        runtimes = {d["metadata"]["name"]: d for d in package() if d["kind"] == "ClusterTrainingRuntime"}
        if name not in runtimes:
            raise RuntimeError(f"Failed to get clustertrainingruntimes: {self.namespace}/{name}")
        return Runtime(name=name)

    def train(self, runtime=None, initializer=None, trainer=None, options=None):
        assert initializer is None and options is None, "the snippet should need neither initializer nor options"
        name = runtime.name if runtime is not None else SDK_DEFAULT_RUNTIME
        spec = {"numNodes": trainer.num_nodes} if trainer is not None and trainer.num_nodes else {}
        if isinstance(trainer, CustomTrainer):
            spec["command"] = sdk_trainjob.command(trainer.func, "/home/mpiuser", trainer.func_args)
        elif isinstance(trainer, CustomTrainerContainer):
            spec["image"] = trainer.image
        job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": f"j{len(self.submitted)}sdk", "namespace": self.namespace, "uid": "u"},
               "spec": {"runtimeRef": {"name": name}, **({"trainer": spec} if spec else {})}}
        self.submitted.append(job)
        return job["metadata"]["name"]

    def wait_for_job_status(self, name, status=frozenset({"Complete"}), timeout=600, polling_interval=2):
        if not set(status) <= JOB_STATUSES:
            raise ValueError(f"Expected status {status} must be a subset of {JOB_STATUSES}")
        if polling_interval > timeout:
            raise ValueError(f"Polling interval {polling_interval} must be less than timeout: {timeout}")

    def get_job_logs(self, name, step="node-0", follow=False):
        if not re.fullmatch(r"node-\d+", step):  # an MPI TrainJob's steps: node-0 the launcher
            raise AssertionError(f"step {step!r} is no step of an MPI TrainJob (node-0 is the launcher)")
        return iter(())


def install_stand_in():
    module = types.ModuleType("kubeflow.trainer")
    given = {"CustomTrainer": CustomTrainer, "CustomTrainerContainer": CustomTrainerContainer,
             "KubernetesBackendConfig": KubernetesBackendConfig, "TrainerClient": TrainerClient, "Runtime": Runtime}
    for name in EXPORTS:
        setattr(module, name, given.get(name, object()))
    sys.modules["kubeflow"] = types.ModuleType("kubeflow")
    sys.modules["kubeflow.trainer"] = module


def check(path, argv):
    TrainerClient.submitted.clear()
    sys.argv = [path] + argv
    runpy.run_path(path, run_name="__main__")
    assert len(TrainerClient.submitted) == 1, f"{path} {argv}: {len(TrainerClient.submitted)} TrainJobs submitted"
    job = TrainerClient.submitted[0]
    ours = {d["metadata"]["name"]: d for d in package() if d["kind"] == "ClusterTrainingRuntime"}
    name = job["spec"]["runtimeRef"]["name"]
    assert name in ours, f"{path} {argv}: the TrainJob selects runtime {name!r}, none of this package's {sorted(ours)}"
    out = render.render(job, ours[name])
    pods = [p["replicatedJob"] for p in out["pods"]]
    assert "launcher" in pods, f"{path} {argv}: no launcher pod rendered: {pods}"
    shown = "README.md's snippet" if path.endswith("readme_sdk_snippet.py") else os.path.relpath(path, ROOT)
    print(f"ok: {shown} {' '.join(argv) or '(CustomTrainer)'}: on {name}, "
          f"{len(pods)} pods rendered ({', '.join(sorted(set(pods)))})")


def readme_snippet(folder):
    """README's ```python block that opens with the SDK's import, as a file."""
    with open(os.path.join(ROOT, "README.md")) as stream:
        blocks = re.findall(r"```python\n(.*?)```", stream.read(), re.S)
    found = [b for b in blocks if "from kubeflow.trainer import" in b]
    assert len(found) == 1, f"README.md has {len(found)} python blocks with the SDK's import; expected 1"
    path = os.path.join(folder, "readme_sdk_snippet.py")
    with open(path, "w") as stream:
        stream.write(re.sub(r"(?m)^ {3}", "", found[0]))  # a list item's indent
    return path


def main():
    install_stand_in()
    given = sys.argv[1:]
    for path in given or [os.path.join(ROOT, "examples", "sdk_train.py")]:
        check(path, [])
        check(path, ["container"])
    if not given:
        import tempfile
        with tempfile.TemporaryDirectory() as folder:
            check(readme_snippet(folder), [])


if __name__ == "__main__":
    main()
