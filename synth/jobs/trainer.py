"""Kubeflow Trainer's, JobSet's and the Kubeflow SDK's decisions about one training runtime.

Modelled on kubeflow/trainer v2.3.0, kubernetes-sigs/jobset v0.12.0 and kubeflow/sdk 0.5.0; each
function cites the file it mirrors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from synth.jobs.view import Manifest, StackView, limits_of, requests_of

ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
TRAINER_RELEASE: Final = "kubeflow-trainer"
SYSTEM_PRIORITY_CLASSES: Final = ("system-cluster-critical", "system-node-critical")
SDK_DEVICE_KEYS: Final = ("nvidia.com/gpu", "google.com/tpu", "huawei.com/Ascend910", "cpu")
SDK_MIG_PREFIX: Final = "nvidia.com/mig-"


@dataclass(frozen=True)
class ReplicatedJob:
    """One replicated job of a runtime's JobSet template."""

    name: str
    pod: dict[str, Any]
    trainer_step: bool
    depends_on: list[dict[str, Any]]
    parallelism: int
    replicas: int
    ancestor: str | None
    """Its ``trainer.kubeflow.org/trainjob-ancestor-step`` label, if any."""

    @property
    def trainer_container(self) -> dict[str, Any] | None:
        """Its container named ``node`` (the one Trainer and the SDK read)."""
        return next((c for c in self.pod.get("containers") or [] if c.get("name") == "node"), None)


@dataclass(frozen=True)
class Runtime:
    """A TrainingRuntime or ClusterTrainingRuntime as Trainer reads it."""

    manifest: Manifest
    kind: str
    name: str
    namespace: str | None
    framework: str
    """The ``mlPolicy`` framework key: torch, mpi, jax, ..."""
    ml_policy: dict[str, Any]
    gang: bool
    """``podGroupPolicy.volcano``: Trainer creates a Volcano PodGroup of every pod."""
    annotations: dict[str, str]
    jobs: list[ReplicatedJob]
    jobset: dict[str, Any]

    @classmethod
    def parse(cls, manifest: Manifest) -> Runtime:
        """Read a runtime manifest."""
        spec = manifest.get("spec") or {}
        ml_policy = dict(spec.get("mlPolicy") or {})
        framework = next((k for k in ml_policy if k != "numNodes"), "")
        template = spec.get("template") or {}
        jobset = dict(template.get("spec") or {})
        jobs = []
        for job in jobset.get("replicatedJobs") or []:
            job_template = job.get("template") or {}
            job_spec = job_template.get("spec") or {}
            labels = (job_template.get("metadata") or {}).get("labels") or {}
            jobs.append(
                ReplicatedJob(
                    name=str(job.get("name")),
                    pod=dict((job_spec.get("template") or {}).get("spec") or {}),
                    trainer_step=labels.get(ANCESTOR_LABEL) == "trainer",
                    depends_on=list(job.get("dependsOn") or []),
                    parallelism=int(job_spec.get("parallelism", 1)),
                    replicas=int(job.get("replicas", 1)),
                    ancestor=labels.get(ANCESTOR_LABEL),
                )
            )
        metadata = manifest.get("metadata") or {}
        return cls(
            manifest=manifest,
            kind=str(manifest.get("kind")),
            name=str(metadata.get("name")),
            namespace=metadata.get("namespace"),
            framework=framework,
            ml_policy=ml_policy,
            gang="volcano" in (spec.get("podGroupPolicy") or {}),
            annotations={
                str(k): str(v)
                for k, v in ((template.get("metadata") or {}).get("annotations") or {}).items()
            },
            jobs=jobs,
            jobset=jobset,
        )

    @property
    def trainer_job(self) -> ReplicatedJob | None:
        """The replicated job Trainer sizes from the TrainJob.

        The one labelled trainer, else ``node`` (pkg/runtime/runtime.go,
        ExtractResourcePerNodeFromRuntime).
        """
        return next((j for j in self.jobs if j.trainer_step), None) or next(
            (j for j in self.jobs if j.name == "node"), None
        )

    def gang_pods(self, num_nodes: int) -> list[tuple[ReplicatedJob, int]]:
        """(replicated job, pods) of a TrainJob with ``trainer.numNodes: num_nodes``.

        The trainer step gets ``numNodes`` pods; with MPI's ``runLauncherAsNode`` the launcher
        is node 0 and keeps the runtime's count while ``node`` gets ``max(numNodes - 1, 1)``
        (pkg/runtime/framework/plugins/mpi/mpi.go, EnforceMLPolicy; pkg/runtime/core/
        trainingruntime.go). Other jobs run their parallelism.
        """
        mpi = self.ml_policy.get("mpi") or {}
        as_node = self.framework == "mpi" and bool(mpi.get("runLauncherAsNode"))
        counts = []
        for job in self.jobs:
            if as_node and job.name == "node":
                counts.append((job, max(num_nodes - 1, 1)))
            elif as_node and job.trainer_step:
                counts.append((job, int(self.ml_policy.get("numNodes", 1))))
            elif job is self.trainer_job:
                counts.append((job, num_nodes))
            else:
                counts.append((job, job.parallelism))
        return counts


def pod_requests(pod: Mapping[str, Any], defaults: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """A pod's effective requests, per resource.

    The containers' sum (LimitRange defaults filled in) plus the sidecars' (init containers with
    ``restartPolicy: Always``, which run beside them: the first-step exporter), or the largest
    init container with the sidecars started before it, whichever is more (kubernetes
    pkg/api/v1/resource/helpers.go, PodRequests).
    """
    total: dict[str, Decimal] = {}
    for container in pod.get("containers") or []:
        requests = {**defaults, **requests_of(container)}
        for resource, amount in requests.items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    sidecars: dict[str, Decimal] = {}
    init: dict[str, Decimal] = {}
    for container in pod.get("initContainers") or []:
        requests = {**defaults, **requests_of(container)}
        if container.get("restartPolicy") == "Always":
            for resource, amount in requests.items():
                total[resource] = total.get(resource, Decimal(0)) + amount
                sidecars[resource] = sidecars.get(resource, Decimal(0)) + amount
            requests = dict(sidecars)
        else:
            requests = {
                resource: requests.get(resource, Decimal(0)) + sidecars.get(resource, Decimal(0))
                for resource in {*requests, *sidecars}
            }
        for resource, amount in requests.items():
            init[resource] = max(init.get(resource, Decimal(0)), amount)
    for resource, amount in init.items():
        total[resource] = max(total.get(resource, Decimal(0)), amount)
    return total


def dependency_deadlocks(runtime: Runtime) -> Iterator[str]:
    """Replicated jobs that JobSet creates only after others are Ready, under a gang.

    JobSet creates a replicated job with ``dependsOn`` only once its dependency reached the
    status (kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go,
    reconcileReplicatedJobs; ``startupPolicy: InOrder`` likewise), while the Volcano PodGroup
    counts every pod of every replicated job (Trainer's volcano plugin, minMember): the
    dependency's pods never bind, so the dependent job is never created.
    """
    if not runtime.gang:
        return
    for job in runtime.jobs:
        for dependency in job.depends_on:
            yield (
                f"replicated job {job.name} waits for {dependency.get('name')} to be "
                f"{dependency.get('status')}, but the gang (minMember = every pod) binds none "
                "until all exist: deadlock; remove dependsOn under a gang"
            )
    if (runtime.jobset.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
        yield "startupPolicy InOrder starts replicated jobs one by one: deadlock under a gang"


ANCESTOR_CONTAINERS: Final = {
    "trainer": "node",
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}
PLUGIN_VOLUMES: Final = {"node": {"mpi-ssh-auth"}, "launcher": {"mpi-ssh-auth", "mpi-hostfile"}}
"""Volumes Trainer's MPI plugin adds to the pods of these replicated jobs
(pkg/runtime/framework/plugins/mpi/mpi.go, EnforceMLPolicy)."""


def runtime_webhook_problems(runtime: Runtime) -> Iterator[str]:
    """Why Trainer's runtime webhook refuses the runtime itself (so ``pulumi up`` fails on it).

    A replicated job labelled as a TrainJob ancestor has one replica and the container its step
    needs (pkg/webhooks/trainingruntime_webhook.go, validateReplicatedJobs).
    """
    for job in runtime.jobs:
        if job.ancestor not in ANCESTOR_CONTAINERS:
            continue
        if job.replicas != 1:
            yield f"replicated job {job.name}: {job.replicas} replicas; Trainer's webhook needs 1"
        names = [str(c.get("name")) for c in job.pod.get("containers") or []]
        if ANCESTOR_CONTAINERS[job.ancestor] not in names:
            yield (
                f"replicated job {job.name} ({job.ancestor}) has no container named "
                f"{ANCESTOR_CONTAINERS[job.ancestor]}, which Trainer's webhook requires"
            )


def unresolved_mounts(runtime: Runtime) -> Iterator[str]:
    """Volume mounts that name no volume of the pod Trainer builds (the Job API refuses it)."""
    for job in runtime.jobs:
        volumes = {str(v.get("name")) for v in job.pod.get("volumes") or []}
        if runtime.framework == "mpi":
            volumes |= PLUGIN_VOLUMES.get(job.name, set())
        for container in [
            *(job.pod.get("initContainers") or []),
            *(job.pod.get("containers") or []),
        ]:
            for mount in container.get("volumeMounts") or []:
                if str(mount.get("name")) not in volumes:
                    yield (
                        f"replicated job {job.name}: container {container.get('name')} mounts "
                        f"volume {mount.get('name')}, which the pod does not have"
                    )


def unganged_pods(runtime: Runtime) -> Iterator[str]:
    """Replicated jobs whose pods Volcano would not schedule although Trainer made a PodGroup.

    Trainer never sets ``schedulerName`` (its volcano plugin only annotates pods).
    """
    if not runtime.gang:
        return
    for job in runtime.jobs:
        if job.pod.get("schedulerName") != "volcano":
            scheduler = job.pod.get("schedulerName") or "the default scheduler"
            yield f"replicated job {job.name} is scheduled by {scheduler}, outside its gang"


def admission_problems(view: StackView, runtime: Runtime, manager_reads: bool) -> Iterator[str]:
    """Why Trainer's TrainJob webhook would refuse every job of this runtime.

    With ``podGroupPolicy.volcano`` the webhook gets each pod template's PriorityClass through
    the manager's cached client (pkg/runtime/framework/plugins/volcano/volcano.go, Validate);
    a missing class, or one the manager may not list and watch, refuses the job.

    Args:
        view: the stack.
        runtime: the runtime a TrainJob names.
        manager_reads: whether the manager may get, list and watch priorityclasses.
    """
    if view.values(TRAINER_RELEASE) is None:
        yield "Kubeflow Trainer is not installed: nothing admits or runs TrainJobs"
        return
    if not runtime.gang:
        return
    if runtime.annotations.get("scheduling.volcano.sh/queue-name", None) == "":
        yield "the runtime names an empty Volcano queue, which the webhook refuses"
    for job in runtime.jobs:
        priority = job.pod.get("priorityClassName")
        if not priority or priority in SYSTEM_PRIORITY_CLASSES:
            continue
        if view.named("PriorityClass", str(priority)) is None:
            yield f"PriorityClass {priority} (replicated job {job.name}) does not exist"
        elif not manager_reads:
            yield (
                f"Trainer's webhook cannot read PriorityClass {priority}: its manager may not "
                "list and watch priorityclasses, so every TrainJob times out at admission "
                "(kubeflow/trainer#3918)"
            )


def sdk_problem(runtime: Runtime) -> str | None:
    """Why the Kubeflow SDK cannot read this runtime (which fails ``list_runtimes()`` whole).

    The SDK parses every runtime with the framework label; it reads the trainer container's
    limits and raises unless they hold a GPU, TPU, MIG, NPU or ``cpu`` key (kubeflow/sdk 0.5.0
    kubeflow/trainer/backends/kubernetes/utils.py, get_container_devices; backend.py,
    list_runtimes re-raises).
    """
    if FRAMEWORK_LABEL not in ((runtime.manifest.get("metadata") or {}).get("labels") or {}):
        return None
    job = next((j for j in runtime.jobs if j.trainer_step), None)
    container = job.trainer_container if job else None
    if container is None:
        return None
    if not container.get("image"):
        return "the Kubeflow SDK cannot read it: its trainer container names no image"
    limits = (container.get("resources") or {}).get("limits")
    if limits is None:
        return None
    if any(key in limits for key in SDK_DEVICE_KEYS) or any(
        str(key).startswith(SDK_MIG_PREFIX) for key in limits
    ):
        return None
    return (
        "the Kubeflow SDK cannot read its device (limits hold none of "
        + ", ".join(SDK_DEVICE_KEYS)
        + f" but {', '.join(sorted(limits))}): list_runtimes() fails for the whole namespace"
    )


def torch_processes(runtime: Runtime) -> int | str | None:
    """Processes per node Trainer's torch plugin gives a TrainJob that names none.

    ``auto`` (one per GPU) when a resource name holds ``gpu``, else the CPU request, else the
    CPU limit, at least 1 (pkg/runtime/framework/plugins/torch/torch.go, EnforceMLPolicy;
    pkg/runtime/runtime.go, GetNumGPUPerNode). None for runtimes of other frameworks.
    """
    if runtime.framework != "torch":
        return None
    job = runtime.trainer_job
    container = job.trainer_container if job else None
    if container is None:
        return 1
    requests = requests_of(container)
    limits = limits_of(container)
    if any("gpu" in name.lower() for name in (*requests, *limits)):
        return "auto"
    cpu = requests.get("cpu") or limits.get("cpu") or Decimal(0)
    return max(1, math.ceil(cpu))


def runs_as_root(pod: Mapping[str, Any]) -> list[str]:
    """Containers of a pod that run as root (no non-zero ``runAsUser`` on them or the pod)."""
    pod_user = (pod.get("securityContext") or {}).get("runAsUser")
    found = []
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        user = (container.get("securityContext") or {}).get("runAsUser", pod_user)
        if not user:
            found.append(str(container.get("name")))
    return found


def trainer_containers(
    runtime: Runtime, trainer: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """The container ``node`` of each replicated job's pods once Trainer applied a TrainJob.

    ``image``, ``command`` and ``args`` of the TrainJob's ``spec.trainer`` go only to replicated
    jobs labelled as the trainer ancestor; ``env`` also to MPI's ``node`` job where the launcher
    runs as a node (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/jobset/builder.go,
    ``Trainer``: lines 120-141 and 142-155). On an MPI runtime the workers (``node``) therefore
    keep the runtime's image whatever the TrainJob names.

    Args:
        runtime: the runtime the TrainJob names.
        trainer: the TrainJob's ``spec.trainer`` (None: the TrainJob has none).

    Returns:
        replicated job name -> its ``node`` container, for every job that has one.
    """
    trainer = trainer or {}
    mpi = runtime.ml_policy.get("mpi") or {}
    as_node = runtime.framework == "mpi" and bool(mpi.get("runLauncherAsNode"))
    rendered: dict[str, dict[str, Any]] = {}
    for job in runtime.jobs:
        container = job.trainer_container
        if container is None:
            continue
        container = dict(container)
        if job.ancestor == "trainer":
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    container[key] = trainer[key]
        if (job.ancestor == "trainer" or (as_node and job.name == "node")) and trainer.get("env"):
            names = {str(variable.get("name")) for variable in trainer["env"]}
            container["env"] = [
                *(v for v in container.get("env") or [] if str(v.get("name")) not in names),
                *trainer["env"],
            ]
        rendered[job.name] = container
    return rendered
