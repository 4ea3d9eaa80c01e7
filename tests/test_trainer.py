"""Kubeflow Trainer under mocks: the release, its place after Volcano, and the generated runtimes.

Expected values come from the stack files (``stacks/Pulumi.<stack>.yaml``), the instance catalog
(components/catalog.py), the bill of materials (components/versions.py) and, where a stack leaves
a setting out, the documented default of that setting (components/config/ field descriptions),
never from synthesis output. Trainer and Volcano facts come from their sources at our pins (the
runtime API: https://github.com/kubeflow/trainer/blob/v2.3.0/pkg/apis/trainer/v1alpha1/trainingruntime_types.go);
resource names and labels are written out here on purpose: importing the program's constants
would let a wrong value in the program pass.
"""

from __future__ import annotations

import copy
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from kubeflow.trainer.backends.kubernetes.backend import KubernetesBackend
from kubeflow.trainer.backends.kubernetes.utils import get_trainer_cr_from_custom_trainer
from kubeflow.trainer.types.types import CustomTrainerContainer
from kubeflow_trainer_api import models

from components import versions
from components.config import ConfigError, ConfigProblem, TrainerImagesConfig, parse_platform_config
from components.software import built_tag
from components.trainer import with_gang_scheduler
from synth.engine import ResourceRecord
from synth.jobs.admission import admit
from synth.jobs.trainer import Runtime, trainer_containers
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests import docs_pages
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.kubernetes_semantics import quantity, uncovered
from tests.mutations import without_lustre
from tests.schemas import validation_errors
from tests.stack_pools import GPU, NEURON, StackPool
from tests.team_objects import team_runtimes

RELEASE: Final = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE: Final = "kubernetes:yaml/v2:ConfigFile"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"

# Trainer's pinned release and its names, written out on purpose.
TRAINER_CHART: Final = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
TRAINER_NAMESPACE: Final = "kubeflow-system"
# kubernetes-sigs/jobset: the chart's OCI home (Trainer 2.3.0 Chart.yaml's dependency repository)
# and the namespace of its upstream install.
JOBSET_CHART: Final = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_NAMESPACE: Final = "jobset-system"
RUNTIME_API: Final = "trainer.kubeflow.org/v1alpha1"
FRAMEWORK_LABEL: Final = "trainer.kubeflow.org/framework"
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
SCHEDULER: Final = "volcano"
EFA: Final = "vpc.amazonaws.com/efa"
HUGE_PAGES: Final = "hugepages-2Mi"
# The platform's own names (README: "Training with Kubeflow Trainer", storage section).
POOL_LABEL: Final = "trainingplatform.io/pool"
CLAIM_NAME: Final = "shared-lustre"
SHARED_MOUNT: Final = "/fsx"
# Documented default of platform.nodePools[].hugepagesGiB on EFA pools (config description).
DEFAULT_HUGEPAGES_GIB: Final = 5
MPI_USER: Final = 1000
GPU_FRAMEWORKS: Final = ("torch", "mpi", "jax")
NEURON_FRAMEWORKS: Final = ("torch",)


# --------------------------------------------------------------------------- expectations


class Pool(StackPool):
    """A pool with the runtimes it gets."""

    @property
    def frameworks(self) -> tuple[str, ...]:
        return GPU_FRAMEWORKS if self.gpu else NEURON_FRAMEWORKS

    @property
    def hugepages_gib(self) -> int:
        return int(self.raw.get("hugepagesGiB", DEFAULT_HUGEPAGES_GIB if self.efa else 0))


def team_nodes(team: dict[str, Any], pool: Pool) -> int:
    """Nodes of ``pool`` a team's quota and queue capability (default: quota) both allow."""
    key = "gpus" if pool.gpu else "neuronDevices"
    quota = int(team["quota"].get(key, 0))
    capability = team.get("queue", {}).get("capability")
    allowed = min(quota, int(capability.get(key, 0))) if capability is not None else quota
    return allowed // pool.instance.accelerators


def team_frameworks(team: dict[str, Any], pool: Pool) -> list[str]:
    """Runtimes a team gets on a pool (README: a node of it; MPI: two, launcher and worker)."""
    nodes = team_nodes(team, pool)
    return [fw for fw in pool.frameworks if nodes >= (2 if fw == "mpi" else 1)]


class StackCase:
    """One synthesized stack with its raw (YAML) config."""

    def __init__(self, stack: str, result: StackResult) -> None:
        self.stack = stack
        self.records = result.records
        self.run = ProgramRun(result.records)
        self.raw = stack_data(stack)

    @property
    def pools(self) -> list[Pool]:
        return [Pool(raw) for raw in self.raw.get("nodePools", [])]

    def pool(self, name: str) -> Pool:
        (pool,) = [p for p in self.pools if p.name == name]
        return pool

    @property
    def kubernetes_version(self) -> str:
        return str(
            self.raw["cluster"].get("kubernetesVersion", versions.DEFAULT_KUBERNETES_VERSION)
        )


def expected_image(raw: dict[str, Any], pool: Pool, framework: str) -> str:
    """The configured image of a runtime, else the bill of materials' default."""
    images: dict[str, str] = raw.get("trainer", {}).get("images", {})
    if not pool.gpu:
        return images["neuron"]  # required: no published image runs on the AMI's driver
    defaults = {
        "torch": versions.DEFAULT_TORCH_IMAGE,
        "mpi": versions.DEFAULT_MPI_IMAGE,
        "jax": versions.DEFAULT_JAX_IMAGE,
    }
    return images.get(framework, defaults[framework])


def _stack_pools(stack: str) -> list[Pool]:
    return [Pool(raw) for raw in stack_data(stack).get("nodePools", [])]


RUNTIME_CASES: Final = [
    (stack, team["name"], pool.name, framework)
    for stack in STACKS
    for team in stack_data(stack).get("teams", [])
    for pool in _stack_pools(stack)
    for framework in team_frameworks(team, pool)
]
MPI_CASES: Final = [case for case in RUNTIME_CASES if case[3] == "mpi"]


def _case_id(case: tuple[str, str, str, str]) -> str:
    stack, team, pool, framework = case
    return f"{stack}:{team}/{framework}-{pool}"


@pytest.fixture(scope="module")
def cases(synthesized: dict[str, StackResult]) -> dict[str, StackCase]:
    return {stack: StackCase(stack, synthesized[stack]) for stack in STACKS}


@pytest.fixture(params=STACKS)
def case(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> StackCase:
    return cases[request.param]


class RuntimeCase:
    """One expected runtime: the stack, its pool and framework, and the recorded resource."""

    def __init__(self, stack: StackCase, team: str, pool: str, framework: str) -> None:
        self.stack = stack
        self.team = team
        self.pool = stack.pool(pool)
        self.framework = framework
        self.name = f"{framework}-{pool}"
        self.record = _runtime(stack.run, team, self.name)
        self.spec: dict[str, Any] = self.record.inputs["spec"]

    @property
    def team_raw(self) -> dict[str, Any]:
        (team,) = [t for t in self.stack.raw["teams"] if t["name"] == self.team]
        found: dict[str, Any] = team
        return found


@pytest.fixture(params=RUNTIME_CASES, ids=_case_id)
def runtime(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> RuntimeCase:
    stack, team, pool, framework = request.param
    return RuntimeCase(cases[stack], team, pool, framework)


@pytest.fixture(params=MPI_CASES, ids=_case_id)
def mpi_runtime(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> RuntimeCase:
    stack, team, pool, framework = request.param
    return RuntimeCase(cases[stack], team, pool, framework)


# --------------------------------------------------------------------------- helpers


def _release(run: ProgramRun, name: str) -> ResourceRecord:
    found = [r for r in run.of_type(RELEASE) if r.name == name]
    assert len(found) == 1, f"expected one release {name}: {found}"
    return found[0]


def _runtime(run: ProgramRun, team: str, name: str) -> ResourceRecord:
    found = [
        r
        for r in run.of_type(RUNTIME)
        if r.inputs["metadata"]["name"] == name and r.inputs["metadata"]["namespace"] == team
    ]
    assert len(found) == 1, f"expected one TrainingRuntime {team}/{name}: {found}"
    return found[0]


def _runtime_names(run: ProgramRun) -> list[tuple[str, str]]:
    return sorted(
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in team_runtimes(run.records)
    )


def _node_pool(run: ProgramRun, pool: str) -> ResourceRecord:
    found = [r for r in run.of_type(NODE_POOL) if r.inputs["metadata"]["name"] == pool]
    assert len(found) == 1, f"expected one NodePool {pool}: {found}"
    return found[0]


def _node_pool_taints(run: ProgramRun, pool: str) -> list[dict[str, Any]]:
    taints: list[dict[str, Any]] = (
        _node_pool(run, pool).inputs["spec"]["template"]["spec"].get("taints", [])
    )
    return taints


def _jobs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = spec["template"]["spec"]["replicatedJobs"]
    assert jobs
    return jobs


def _pods(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(replicated job name, pod spec) of every replicated job."""
    for job in _jobs(spec):
        yield job["name"], job["template"]["spec"]["template"]["spec"]


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    """The training container: Trainer finds it by the name ``node``.

    https://github.com/kubeflow/trainer/blob/v2.3.0/pkg/runtime/framework/plugins/torch/torch.go
    """
    found: list[dict[str, Any]] = [c for c in pod["containers"] if c["name"] == "node"]
    assert len(found) == 1, pod["containers"]
    return found[0]


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _missing_keys(values: Any, defaults: Any, prefix: str = "") -> list[str]:
    """Keys of ``values`` (dotted paths) that the chart's default values do not define.

    Below an empty mapping (``nodeSelector: {}``), a list or a scalar the chart takes anything.
    """
    if not isinstance(defaults, dict) or not defaults:
        return []
    if not isinstance(values, dict):
        return [f"{prefix.rstrip('.')} (a mapping in the chart)"]
    missing: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            missing.append(path)
        else:
            missing += _missing_keys(value, defaults[key], f"{path}.")
    return missing


def _manifest(record: ResourceRecord) -> dict[str, Any]:
    """A copy of the record's object: tests may edit it; the session's synthesis is shared."""
    return copy.deepcopy(
        {key: record.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}
    )


def _problems(data: dict[str, Any]) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    return caught.value.problems


def _with_trainer(**trainer: Any) -> dict[str, Any]:
    """dev with these trainer settings; images are added to dev's own (its Neuron image)."""
    data = stack_data("dev")
    images = {**data.get("trainer", {}).get("images", {}), **trainer.pop("images", {})}
    data["trainer"] = {**trainer, "images": images}
    return data


# --------------------------------------------------------------------------- the release


def test_trainer_release_chart_and_values(case: StackCase) -> None:
    release = _release(case.run, "kubeflow-trainer")
    inputs = release.inputs
    assert inputs["chart"] == TRAINER_CHART
    assert inputs["version"] == versions.TRAINER_VERSION
    assert inputs["namespace"] == TRAINER_NAMESPACE
    values = inputs["values"]
    assert values["crds"]["enabled"] is True
    # JobSet is its own release (below); Trainer's README: false where JobSet is installed.
    assert values["jobset"]["install"] is False
    assert values["runtimes"]["defaultEnabled"] is False


def test_trainer_release_waits_for_volcano(case: StackCase) -> None:
    trainer = _release(case.run, "kubeflow-trainer")
    volcano = _release(case.run, "volcano")
    assert volcano.urn in trainer.dependencies


def test_trainer_release_is_protected_exactly_where_the_stack_protects(case: StackCase) -> None:
    expected = bool(case.raw.get("protectStatefulResources", False))
    assert _release(case.run, "kubeflow-trainer").protect is expected


def _trainer_chart_yaml(reference_dir: Path) -> dict[str, Any]:
    path = reference_dir / "charts" / "kubeflow-trainer" / versions.TRAINER_VERSION / "Chart.yaml"
    found: dict[str, Any] = load_yaml(path.read_text())
    return found


def test_jobset_is_the_version_trainer_names(case: StackCase, reference_dir: Path) -> None:
    (dependency,) = [
        d for d in _trainer_chart_yaml(reference_dir)["dependencies"] if d["name"] == "jobset"
    ]
    # The key that turns the subchart off is the dependency's condition.
    assert dependency["condition"] == "jobset.install"
    jobset = _release(case.run, "jobset").inputs
    assert jobset["chart"] == JOBSET_CHART
    assert jobset["chart"] == f"{dependency['repository']}/{dependency['name']}"
    assert jobset["version"] == dependency["version"] == versions.JOBSET_VERSION
    assert jobset["namespace"] == JOBSET_NAMESPACE


def test_jobset_crds_are_applied_by_the_stack_at_the_pinned_tag(
    case: StackCase, reference_dir: Path
) -> None:
    """The chart keeps its CRD under crds/ (kubernetes-sigs/jobset v0.12.0 charts/jobset/crds/),
    which Helm installs once and never upgrades: the stack applies the file at the tag instead
    and tells Helm to leave crds/ alone."""
    (crds,) = [r for r in case.run.of_type(CONFIG_FILE) if "jobset" in r.name]
    url = crds.inputs["file"]
    crd_dir = reference_dir / "crds" / "jobset" / f"v{versions.JOBSET_VERSION}"
    (crd,) = [path.name for path in crd_dir.glob("*.yaml")]
    assert url == (
        "https://raw.githubusercontent.com/kubernetes-sigs/jobset/"
        f"v{versions.JOBSET_VERSION}/charts/jobset/crds/{crd}"
    )
    jobset = _release(case.run, "jobset")
    assert jobset.inputs["skipCrds"] is True
    assert crds.urn in jobset.dependencies
    assert crds.urn in _release(case.run, "kubeflow-trainer").dependencies
    assert crds.protect is bool(case.raw.get("protectStatefulResources", False))


def test_jobset_crds_take_over_the_crd_a_bundled_jobset_left(case: StackCase) -> None:
    """A stack whose Trainer bundled JobSet has its CRD from the subchart's crds/, which Helm
    keeps when ``jobset.install`` turns false. pulumi-kubernetes 4.x refuses to create an
    object that exists unless its provider upserts (pulumi-kubernetes provider.py,
    upsertExistingObjects), so the CRD goes through a provider that does, and nothing else
    does: upserting hides a rename's create-then-delete of the same object."""
    (crds,) = [r for r in case.run.of_type(CONFIG_FILE) if "jobset" in r.name]
    providers = {r.urn: r for r in case.run.of_type("pulumi:providers:kubernetes")}
    assert crds.provider is not None
    adopting = providers[crds.provider]
    assert adopting.inputs.get("upsertExistingObjects") == "true"
    assert adopting.inputs.get("enableServerSideApply") == "true"
    users = [r.name for r in case.run.records if r.provider == adopting.urn]
    # Besides the CRD, only the metrics stack's namespace, which Helm made outside Pulumi's
    # state on stacks that had Slurm (components/observability/stack.py).
    assert sorted(users) == sorted([crds.name, "observability-namespace"])
    others = [p for urn, p in providers.items() if urn != adopting.urn]
    assert others and all("upsertExistingObjects" not in p.inputs for p in others)


def test_jobset_installs_after_trainer_and_before_the_runtimes(case: StackCase) -> None:
    """After Trainer: its upgrade from bundling JobSet must remove the subchart's webhook
    configurations first, whose names are fixed (jobset v0.12.0 templates/webhook/
    _helpers.tpl), or Helm refuses to install objects another release owns."""
    trainer = _release(case.run, "kubeflow-trainer")
    jobset = _release(case.run, "jobset")
    assert trainer.urn in jobset.dependencies
    runtimes = case.run.of_type(RUNTIME)
    assert runtimes
    for record in runtimes:
        assert jobset.urn in record.dependencies, record.name


def test_trainer_and_jobset_are_retained_exactly_where_protected(case: StackCase) -> None:
    protected = bool(case.raw.get("protectStatefulResources", False))
    trainer = _release(case.run, "kubeflow-trainer")
    (crds,) = [r for r in case.run.of_type(CONFIG_FILE) if "jobset" in r.name]
    assert trainer.protect is protected
    assert trainer.retain_on_delete is protected
    assert crds.retain_on_delete is protected
    jobset = _release(case.run, "jobset")
    assert not jobset.protect and not jobset.retain_on_delete  # its CRD is not in the release


NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _trainer_records(run: ProgramRun) -> list[ResourceRecord]:
    """The Trainer component's resources, and the NetworkPolicies of the namespaces it makes."""
    (component,) = run.of_type("trainingplatform:index:Trainer")
    namespaces = {TRAINER_NAMESPACE, JOBSET_NAMESPACE}
    return [
        r for r in run.records
        if r.parent == component.urn
        or (r.type == NETWORK_POLICY and r.inputs["metadata"].get("namespace") in namespaces)
    ]  # fmt: skip


def _by_urn(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {
        r.urn: {"inputs": r.inputs, "dependencies": r.dependencies, "protect": r.protect}
        for r in run.records
    }


def test_switching_trainer_off_and_on_again_in_dev(
    run_platform: Callable[..., ProgramRun],
) -> None:
    """Off removes the releases, the JobSet CRD and every runtime and changes nothing else; on
    brings back the same URNs and inputs. Dev does not retain them, so off uninstalls them and
    on installs afresh (a retained release would still hold its name: Helm refuses a second)."""
    data = stack_data("dev")
    assert not data.get("protectStatefulResources", False)
    # Katib runs its trials as TrainJobs, so it goes first (config refuses it without Trainer).
    data["katib"] = {"enabled": False}
    before = run_platform(data, "dev")
    owned = _trainer_records(before)
    assert {"kubeflow-trainer", "jobset"} <= {r.name for r in owned if r.type == RELEASE}
    assert not [r.name for r in owned if r.retain_on_delete]
    data["trainer"] = {**data.get("trainer", {}), "enabled": False}
    off = run_platform(data, "dev")
    assert _trainer_records(off) == []
    assert [r.name for r in off.of_type(RELEASE) if r.name in ("kubeflow-trainer", "jobset")] == []
    # KubeRay's CRDs are applied the same way but belong to Ray, which stays on.
    assert [r for r in off.of_type(CONFIG_FILE) if not r.name.startswith("kuberay-")] == []
    assert off.of_type(RUNTIME) == []
    # The gang-size policy lists the runtimes' node limits, so it follows Trainer by design.
    gang_sizes = {r.urn for r in before.records if r.name == "teams-gang-sizes"}
    assert gang_sizes
    kept = {urn for urn in _by_urn(before) if urn not in {r.urn for r in owned} | gang_sizes}
    assert {urn: v for urn, v in _by_urn(off).items() if urn not in gang_sizes} == {
        urn: v for urn, v in _by_urn(before).items() if urn in kept
    }
    data["trainer"]["enabled"] = True
    assert _by_urn(run_platform(data, "dev")) == _by_urn(before)


def test_trainer_values_are_chart_keys(case: StackCase, reference_dir: Path) -> None:
    path = reference_dir / "charts" / "kubeflow-trainer" / versions.TRAINER_VERSION / "values.yaml"
    defaults = load_yaml(path.read_text())
    values = _release(case.run, "kubeflow-trainer").inputs["values"]
    assert values
    assert _missing_keys(values, defaults) == []


def test_volcano_then_trainer_then_runtimes_in_resource_order(case: StackCase) -> None:
    position = {record.urn: index for index, record in enumerate(case.records)}
    volcano = position[_release(case.run, "volcano").urn]
    trainer = position[_release(case.run, "kubeflow-trainer").urn]
    runtimes = [position[r.urn] for r in case.run.of_type(RUNTIME)]
    assert runtimes
    assert volcano < trainer < min(runtimes)


def test_runtimes_wait_for_the_trainer_release(case: StackCase) -> None:
    """The release installs the ClusterTrainingRuntime CRD (crds.enabled)."""
    trainer = _release(case.run, "kubeflow-trainer")
    for record in case.run.of_type(RUNTIME):
        assert trainer.urn in record.dependencies, record.name


# --------------------------------------------------------------------------- runtimes


def test_each_team_gets_the_runtimes_its_quota_can_run(case: StackCase) -> None:
    expected = sorted(
        (team["name"], f"{fw}-{pool.name}")
        for team in case.raw["teams"]
        for pool in case.pools
        for fw in team_frameworks(team, pool)
    )
    assert expected
    assert _runtime_names(case.run) == expected
    assert case.run.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime") == []


def test_a_team_without_a_node_of_a_pool_gets_no_runtime_there() -> None:
    dev = _stack_pools("dev")
    (trn1,) = [p for p in dev if p.name == "trn1"]
    assert team_frameworks({"quota": {"neuronDevices": 8}}, trn1) == []
    assert team_frameworks({"quota": {"neuronDevices": 16}}, trn1) == ["torch"]
    (small,) = [p for p in dev if p.name == "gpu-small"]
    assert team_frameworks({"quota": {"gpus": 1}}, small) == ["torch", "jax"]
    capped = {"quota": {"gpus": 8}, "queue": {"capability": {"gpus": 1}}}
    assert team_frameworks(capped, small) == ["torch", "jax"]


def test_runtime_labels(runtime: RuntimeCase) -> None:
    metadata = runtime.record.inputs["metadata"]
    assert runtime.record.inputs["apiVersion"] == RUNTIME_API
    assert runtime.record.inputs["kind"] == "TrainingRuntime"
    assert metadata["namespace"] == runtime.team
    assert metadata["labels"][FRAMEWORK_LABEL] == runtime.framework
    assert metadata["labels"][POOL_LABEL] == runtime.pool.name


def test_runtime_is_gang_scheduled_in_the_team_queue(runtime: RuntimeCase) -> None:
    """The queue comes from the runtime template's annotation (Trainer's volcano plugin); each
    team's queue is named after the team (README, teams and queues)."""
    assert isinstance(runtime.spec["podGroupPolicy"]["volcano"], dict)
    annotations = runtime.spec["template"]["metadata"]["annotations"]
    assert annotations[QUEUE_ANNOTATION] == runtime.team


def test_runtime_ml_policy_matches_framework(runtime: RuntimeCase) -> None:
    policy = runtime.spec["mlPolicy"]
    policies = {"torch", "mpi", "jax", "xgboost", "flux"} & set(policy)
    assert policies == {runtime.framework}


def test_every_pod_is_pinned_to_its_pool_and_volcano(runtime: RuntimeCase) -> None:
    taints = _node_pool_taints(runtime.stack.run, runtime.pool.name)
    assert taints, "an accelerator pool always carries its accelerator taint"
    pool_labels = _node_pool(runtime.stack.run, runtime.pool.name).inputs["spec"]["template"][
        "metadata"
    ]["labels"]
    assert pool_labels[POOL_LABEL] == runtime.pool.name
    for job, pod in _pods(runtime.spec):
        assert pod["schedulerName"] == SCHEDULER, job
        assert pod["nodeSelector"][POOL_LABEL] == runtime.pool.name, job
        assert uncovered(pod.get("tolerations", []), taints) == [], job


def test_every_pod_takes_every_accelerator_of_the_node(runtime: RuntimeCase) -> None:
    pool = runtime.pool
    for job, pod in _pods(runtime.spec):
        resources = _container(pod)["resources"]
        requests, limits = dict(resources["requests"]), dict(resources["limits"])
        requests.pop("cpu", None), limits.pop("cpu", None)
        assert requests == limits, job
        assert quantity(requests[pool.accelerator_resource]) == pool.instance.accelerators, job
        other = NEURON if pool.gpu else GPU
        assert other not in requests, job


def test_trainium_pods_ask_one_cpu_per_neuron_core_and_may_use_every_vcpu(
    runtime: RuntimeCase,
) -> None:
    """Trainer's torch plugin starts one process per requested CPU when no GPU is requested
    (https://github.com/kubeflow/trainer/blob/v2.3.0/pkg/runtime/framework/plugins/torch/torch.go),
    and the Kubeflow SDK reads a device from the CPU limit."""
    for job, pod in _pods(runtime.spec):
        resources = _container(pod)["resources"]
        if runtime.pool.gpu:
            assert "cpu" not in resources["requests"], job
            continue
        assert quantity(resources["requests"]["cpu"]) == runtime.pool.instance.neuron_cores, job
        assert quantity(resources["limits"]["cpu"]) == runtime.pool.instance.vcpu, job


def test_every_runtime_is_readable_by_the_kubeflow_sdk(runtime: RuntimeCase) -> None:
    """The SDK's own parser, which list_runtimes() runs on every labelled runtime."""
    manifest = _manifest(runtime.record)
    parsed = models.TrainerV1alpha1TrainingRuntime.from_dict(manifest)
    backend = object.__new__(KubernetesBackend)
    found = backend._KubernetesBackend__get_runtime_from_cr(parsed)  # type: ignore[attr-defined]
    assert found.name == runtime.name
    assert found.kind.value == "TrainingRuntime"
    assert found.trainer.framework == runtime.framework


def test_the_sdk_refuses_a_trainium_runtime_without_a_cpu_limit(
    cases: dict[str, StackCase],
) -> None:
    """What the CPU limit is for: without it the SDK raises on the runtime (and so on every
    list_runtimes() of the namespace)."""
    manifest = _manifest(_runtime(cases["dev"].run, "ml-dev", "torch-trn1"))
    for _, pod in _pods(manifest["spec"]):
        _container(pod)["resources"]["limits"].pop("cpu")
    backend = object.__new__(KubernetesBackend)
    with pytest.raises(Exception, match="Unknown device type"):
        backend._KubernetesBackend__get_runtime_from_cr(  # type: ignore[attr-defined]
            models.TrainerV1alpha1TrainingRuntime.from_dict(manifest)
        )


def test_efa_pods_take_every_interface_and_huge_pages(runtime: RuntimeCase) -> None:
    pool = runtime.pool
    hugepages = pool.hugepages_gib
    for job, pod in _pods(runtime.spec):
        requests = _container(pod)["resources"]["requests"]
        if pool.efa:
            assert pool.instance.efa_interfaces > 0
            assert quantity(requests[EFA]) == pool.instance.efa_interfaces, job
            assert quantity(requests[HUGE_PAGES]) == hugepages * 2**30, job
            # Kubernetes requires a memory (or CPU) request beside huge pages.
            assert quantity(requests["memory"]) > 0, job
        else:
            assert EFA not in requests, job
            assert HUGE_PAGES not in requests, job


def test_non_efa_pool_exists_in_dev(cases: dict[str, StackCase]) -> None:
    """dev's gpu-small pool is the non-EFA case the resource tests rely on."""
    pool = cases["dev"].pool("gpu-small")
    assert not pool.efa
    requests = _container(
        next(_pods(_runtime(cases["dev"].run, "ml-dev", "torch-gpu-small").inputs["spec"]))[1]
    )["resources"]["requests"]
    assert EFA not in requests
    assert HUGE_PAGES not in requests


def test_every_pod_has_shared_memory_in_ram(runtime: RuntimeCase) -> None:
    for job, pod in _pods(runtime.spec):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = [
            m for m in _container(pod).get("volumeMounts", []) if m["mountPath"] == "/dev/shm"
        ]
        assert len(mounts) == 1, job
        assert volumes[mounts[0]["name"]]["emptyDir"]["medium"] == "Memory", job


def test_every_pod_mounts_the_shared_file_system(runtime: RuntimeCase) -> None:
    assert runtime.stack.raw.get("storage", {}).get("lustre"), "every stack has a file system"
    assert runtime.team_raw.get("sharedFileSystem", True), "every shipped team mounts it"
    lustre = parse_platform_config(runtime.stack.raw).storage.lustre
    assert lustre is not None
    for job, pod in _pods(runtime.spec):
        # Lustre's claims (the model store's are tests/test_model_store.py's)
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod.get("volumes", [])
            if "persistentVolumeClaim" in v
            and not v["persistentVolumeClaim"]["claimName"].startswith("model-store")
        }
        # one claim per team root, none on the whole file system
        assert sorted(claims.values()) == sorted(r.claim_name for r in lustre.team_roots), job
        assert CLAIM_NAME not in claims.values(), job
        mounts = {
            m["mountPath"] for m in _container(pod).get("volumeMounts", []) if m["name"] in claims
        }
        assert mounts == {
            f"{SHARED_MOUNT}{root.path}/{runtime.team}" for root in lustre.team_roots
        }, job


def test_efa_pods_use_the_efa_libfabric_provider(runtime: RuntimeCase) -> None:
    for job, pod in _pods(runtime.spec):
        environment = _env(_container(pod))
        if runtime.pool.efa:
            assert environment.get("FI_PROVIDER") == "efa", job
        else:
            assert "FI_PROVIDER" not in environment, job


def test_trainer_step_label_on_the_trainer_job(runtime: RuntimeCase) -> None:
    # Upstream runtimes: the `node` job trains for torch and jax; for MPI the launcher does.
    trainer_job = "launcher" if runtime.framework == "mpi" else "node"
    labelled = [
        job["name"]
        for job in _jobs(runtime.spec)
        if job["template"].get("metadata", {}).get("labels", {}).get(ANCESTOR_LABEL) == "trainer"
    ]
    assert labelled == [trainer_job]


def test_runtime_image_comes_from_config(runtime: RuntimeCase) -> None:
    expected = expected_image(runtime.stack.raw, runtime.pool, runtime.framework)
    for job, pod in _pods(runtime.spec):
        assert _container(pod)["image"] == expected, job


def test_neuron_image_is_in_the_stack_region(cases: dict[str, StackCase]) -> None:
    checked = 0
    for case in cases.values():
        for pool in case.pools:
            if pool.gpu:
                continue
            team = case.raw["teams"][0]["name"]
            image = _container(
                next(_pods(_runtime(case.run, team, f"torch-{pool.name}").inputs["spec"]))[1]
            )["image"]
            assert f".dkr.ecr.{case.raw['region']}.amazonaws.com/" in image, case.stack
            checked += 1
    assert checked >= len(STACKS), "every stack has a Trainium pool"


def test_mpi_runtime_policy(mpi_runtime: RuntimeCase) -> None:
    mpi = mpi_runtime.spec["mlPolicy"]["mpi"]
    assert mpi["numProcPerNode"] == mpi_runtime.pool.instance.accelerators
    assert mpi["runLauncherAsNode"] is True
    assert sorted(job["name"] for job in _jobs(mpi_runtime.spec)) == ["launcher", "node"]


def test_mpi_workers_run_the_ssh_daemon(mpi_runtime: RuntimeCase) -> None:
    """mpirun reaches the `node` workers over SSH; Trainer's MPI plugin mounts the keys but
    does not start sshd (upstream deepspeed-distributed runs ``/usr/sbin/sshd -De``)."""
    (worker,) = [pod for job, pod in _pods(mpi_runtime.spec) if job == "node"]
    command = [*_container(worker).get("command", []), *_container(worker).get("args", [])]
    assert command, "the node workers run the image's default command, not sshd"
    assert command[0].endswith("sshd"), command
    assert any(arg.startswith("-D") for arg in command[1:]), "sshd must stay in the foreground"


MPI_IMAGE_POLICY: Final = "trainingplatform-mpi-job-image"
OTHER_IMAGE: Final = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm/train:2026.11.1"


def _mpi_trainjob(runtime: RuntimeCase, trainer: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime.name, "kind": "TrainingRuntime"}}
    if trainer is not None:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": runtime.team},
        "spec": spec,
    }


def _sdk_trainer(image: str) -> dict[str, Any]:
    """``spec.trainer`` as the Kubeflow SDK 0.5.0 writes it for ``CustomTrainerContainer``
    (kubeflow/trainer/backends/kubernetes/utils.py, get_trainer_cr_from_custom_trainer)."""
    container = CustomTrainerContainer(image=image, num_nodes=2)
    cr = get_trainer_cr_from_custom_trainer(None, container)  # type: ignore[arg-type]
    trainer: dict[str, Any] = cr.to_dict()
    return trainer


def test_mpi_workers_run_the_image_the_launcher_runs(
    mpi_runtime: RuntimeCase, synthesized: dict[str, StackResult]
) -> None:
    """Every MPI TrainJob admission lets through renders workers on the launcher's image.

    Trainer v2.3.0 gives ``spec.trainer.image`` to the launcher only (plugins/jobset/
    builder.go, ``Trainer``), and a runtime patch cannot name an image (trainjob_types.go,
    ``ContainerPatch``), so the admission policy refuses another image than the runtime's, by
    hand or through the SDK, on CREATE and UPDATE.
    """
    (record,) = [
        r
        for r in synthesized[mpi_runtime.stack.stack].records
        if r.type.endswith(":ValidatingAdmissionPolicy")
        and r.inputs["metadata"]["name"] == MPI_IMAGE_POLICY
    ]
    policy = record.inputs["spec"]
    runtime = Runtime.parse(
        {"kind": "TrainingRuntime", "metadata": mpi_runtime.record.inputs["metadata"],
         "spec": mpi_runtime.spec}
    )  # fmt: skip
    (launcher,) = [job for job in runtime.jobs if job.name == "launcher"]
    assert launcher.trainer_container is not None
    own = launcher.trainer_container["image"]
    shapes: list[tuple[dict[str, Any] | None, bool]] = [
        (None, True),
        ({"numNodes": 2}, True),
        ({"image": own, "command": ["mpirun", "python", "train.py"]}, True),
        ({"image": OTHER_IMAGE, "command": ["mpirun", "python", "train.py"]}, False),
        (_sdk_trainer(OTHER_IMAGE), False),
        (_sdk_trainer(own), True),
    ]
    for trainer, admitted in shapes:
        job = _mpi_trainjob(mpi_runtime, trainer)
        for old in (None, job):
            ok, message = admit(policy, job, old=old)
            assert ok is admitted, (trainer, message)
        containers = trainer_containers(runtime, (job["spec"].get("trainer")))
        same = containers["node"]["image"] == containers["launcher"]["image"]
        # What admission refuses is exactly what would split the job across two images.
        assert same is admitted, (trainer, containers["node"]["image"])
        if not ok:
            assert message is not None and own in message and mpi_runtime.name in message
        else:
            assert containers["node"]["command"][0].endswith("sshd")


@pytest.mark.parametrize("case", [c for c in RUNTIME_CASES if c[3] != "mpi"], ids=_case_id)
def test_the_mpi_image_policy_leaves_other_runtimes_alone(
    case: tuple[str, str, str, str],
    cases: dict[str, StackCase],
    synthesized: dict[str, StackResult],
) -> None:
    runtime = RuntimeCase(cases[case[0]], *case[1:])
    policies = [
        r.inputs["spec"]
        for r in synthesized[runtime.stack.stack].records
        if r.type.endswith(":ValidatingAdmissionPolicy")
        and r.inputs["metadata"]["name"] == MPI_IMAGE_POLICY
    ]
    for policy in policies:
        assert admit(policy, _mpi_trainjob(runtime, {"image": OTHER_IMAGE})) == (True, None)


def test_mpi_ranks_copy_through_shared_memory_not_process_vm_readv(
    mpi_runtime: RuntimeCase,
) -> None:
    """Hardened pods hold no CAP_SYS_PTRACE, without which RuntimeDefault seccomp refuses
    process_vm_readv (containerd contrib/seccomp/seccomp_default.go): Open MPI 4's single-copy
    path would fail on every node with more than one rank, so it is off on launcher and
    workers alike."""
    for _job, pod in _pods(mpi_runtime.spec):
        env = {e["name"]: e.get("value") for e in _container(pod)["env"]}
        assert env["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
        assert "SYS_PTRACE" not in _container(pod)["securityContext"]["capabilities"].get("add", [])


def test_mpi_jobset_succeeds_when_the_launcher_does(mpi_runtime: RuntimeCase) -> None:
    """Workers serve SSH until killed: the JobSet must finish with the launcher (upstream
    deepspeed-distributed: successPolicy All over targetReplicatedJobs [launcher])."""
    policy = mpi_runtime.spec["template"]["spec"].get("successPolicy")
    assert policy == {"operator": "All", "targetReplicatedJobs": ["launcher"]}


def test_mpi_gang_is_created_whole(mpi_runtime: RuntimeCase) -> None:
    """Under a Volcano gang (minMember = every pod) JobSet's dependsOn would never create the
    launcher, which JobSet creates only once the job it depends on is ready:
    https://github.com/kubernetes-sigs/jobset/blob/v0.12.0/pkg/controllers/depends_on.go
    So no replicated job waits for another."""
    for job in _jobs(mpi_runtime.spec):
        assert "dependsOn" not in job, job["name"]
    assert "startupPolicy" not in mpi_runtime.spec["template"]["spec"]
    assert mpi_runtime.spec["template"]["spec"]["network"]["publishNotReadyAddresses"] is True


def test_mpi_launcher_waits_for_every_workers_ssh(mpi_runtime: RuntimeCase) -> None:
    """The launcher waits in an init container reading the hostfile Trainer mounts."""
    (launcher,) = [pod for job, pod in _pods(mpi_runtime.spec) if job == "launcher"]
    # after the first-step exporter, a native sidecar that starts first
    exporter, init = launcher["initContainers"]
    assert exporter["name"] == "first-step-exporter"
    assert init["volumeMounts"] == [{"name": "mpi-hostfile", "mountPath": "/etc/mpi"}]
    assert init["command"][:2] == ["/bin/bash", "-c"]
    assert "/etc/mpi/hostfile" in init["command"][2] and "2222" in init["command"][2]


def test_mpi_runs_as_mpiuser(mpi_runtime: RuntimeCase) -> None:
    """Upstream MPI runtimes run as uid 1000 (mpiuser) with fsGroup 1000; OpenMPI refuses root."""
    for job, pod in _pods(mpi_runtime.spec):
        context = pod["securityContext"]
        assert context["runAsUser"] == MPI_USER, job
        assert context["fsGroup"] == MPI_USER, job
        assert context["runAsNonRoot"] is True, job


def _launcher_script(spec: dict[str, Any]) -> str:
    (launcher,) = [pod for job, pod in _pods(spec) if job == "launcher"]
    script: str = launcher["initContainers"][-1]["command"][2]
    return script


@pytest.fixture
def dev_mpi_spec(cases: dict[str, StackCase]) -> dict[str, Any]:
    spec: dict[str, Any] = _runtime(cases["dev"].run, "ml-dev", "mpi-gpu-small").inputs["spec"]
    return spec


def test_every_mpi_runtime_waits_with_the_same_script(
    mpi_runtime: RuntimeCase, dev_mpi_spec: dict[str, Any]
) -> None:
    """So the two behaviour tests below, which run dev's, speak for every MPI runtime."""
    assert _launcher_script(mpi_runtime.spec) == _launcher_script(dev_mpi_spec)


def _wait_script(spec: dict[str, Any], hostfile_dir: Path, port: int, deadline: int) -> str:
    return (
        _launcher_script(spec)
        .replace("/etc/mpi", str(hostfile_dir))
        .replace("2222", str(port))
        .replace("SECONDS + 900", f"SECONDS + {deadline}")
    )


def test_the_wait_script_returns_once_every_worker_answers(
    dev_mpi_spec: dict[str, Any], tmp_path: Path
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        hostname = socket.gethostname()
        # Its own line (the launcher is node 0) is skipped; the worker is this machine.
        (tmp_path / "hostfile").write_text(f"{hostname}.job slots=8\n127.0.0.1 slots=8\n")
        done = subprocess.run(
            ["bash", "-c", _wait_script(dev_mpi_spec, tmp_path, port, 20)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sshd on 127.0.0.1 answers" in done.stdout
    assert hostname not in done.stdout


def test_the_wait_script_fails_the_job_when_a_worker_never_answers(
    dev_mpi_spec: dict[str, Any], tmp_path: Path
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening
        (tmp_path / "hostfile").write_text("127.0.0.1 slots=8\n")
        done = subprocess.run(
            ["bash", "-c", _wait_script(dev_mpi_spec, tmp_path, port, 2)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    assert done.returncode == 1
    assert "did not answer" in done.stderr


def test_runtime_validates_against_its_crd(runtime: RuntimeCase, reference_dir: Path) -> None:
    manifest = _manifest(runtime.record)
    errors = validation_errors(manifest, runtime.stack.kubernetes_version, reference_dir / "crds")
    assert errors == []


# --------------------------------------------------------------------------- changed config


def test_disabled_trainer_installs_nothing(run_platform: Callable[..., ProgramRun]) -> None:
    data = _with_trainer(enabled=False)
    data["katib"] = {"enabled": False}  # its trials are TrainJobs: refused without Trainer
    run = run_platform(data, "dev")
    assert [r.name for r in run.of_type(RELEASE) if r.name == "kubeflow-trainer"] == []
    assert run.of_type(RUNTIME) == []
    # Volcano stays: it is the scheduler of the team queues, not a part of Trainer.
    assert _release(run, "volcano")


def test_configured_torch_image_reaches_the_torch_runtimes(
    run_component: RunComponent,
) -> None:
    image = "registry.example.com/ml/training-torch:" + built_tag("training-cuda", "torch")
    data = _with_trainer(images={"torch": image})
    run = run_component(parts.trainer, data, "dev")
    pools = [Pool(raw) for raw in data["nodePools"]]
    gpu_pools = [p for p in pools if p.gpu]
    assert gpu_pools
    for pool in gpu_pools:
        for framework in team_frameworks(data["teams"][0], pool):
            for job, pod in _pods(
                _runtime(run, "ml-dev", f"{framework}-{pool.name}").inputs["spec"]
            ):
                expected = image if framework == "torch" else expected_image(data, pool, framework)
                assert _container(pod)["image"] == expected, (framework, job)
    # Trainium pools run the Neuron image, whatever the GPU torch image is.
    for pool in (p for p in pools if not p.gpu):
        for _, pod in _pods(_runtime(run, "ml-dev", f"torch-{pool.name}").inputs["spec"]):
            assert _container(pod)["image"] == expected_image(data, pool, "torch")


def test_configured_huge_pages_reach_the_efa_runtimes(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    efa_pools = [p for p in (Pool(raw) for raw in data["nodePools"]) if p.efa]
    assert efa_pools
    for pool in efa_pools:
        pool.raw["hugepagesGiB"] = 8
    run = run_component(parts.trainer, data, "dev")
    for pool in efa_pools:
        for _, pod in _pods(_runtime(run, "ml-dev", f"torch-{pool.name}").inputs["spec"]):
            resources = _container(pod)["resources"]
            assert quantity(resources["requests"][HUGE_PAGES]) == 8 * 2**30
            assert quantity(resources["limits"][HUGE_PAGES]) == 8 * 2**30


def test_runtimes_tolerate_an_extra_pool_taint(run_platform: Callable[..., ProgramRun]) -> None:
    taint = {"key": "example.com/reserved-for", "value": "research", "effect": "NoExecute"}
    data = stack_data("dev")
    (pool,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    pool["taints"] = [taint]
    run = run_platform(data, "dev")
    taints = _node_pool_taints(run, "gpu-small")
    assert taint in taints
    for framework in team_frameworks(data["teams"][0], Pool(pool)):
        for job, pod in _pods(_runtime(run, "ml-dev", f"{framework}-gpu-small").inputs["spec"]):
            assert uncovered(pod.get("tolerations", []), taints) == [], (framework, job)
    # The toleration must be real: without it the extra taint would be uncovered.
    assert uncovered([], [taint]) == [taint]


def test_runtimes_without_lustre_mount_no_shared_volume(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    without_lustre(data)
    run = run_component(parts.trainer, data, "dev")
    runtimes = run.of_type(RUNTIME)
    assert runtimes
    for record in runtimes:
        for job, pod in _pods(record.inputs["spec"]):
            claims = [
                v["persistentVolumeClaim"]["claimName"]
                for v in pod.get("volumes", [])
                if "persistentVolumeClaim" in v
            ]
            # the model store's claims only: EFS needs no Lustre client
            assert sorted(claims) == ["model-store", "model-store-shared"], job
            mounts = [m["mountPath"] for m in _container(pod).get("volumeMounts", [])]
            assert not [m for m in mounts if m.startswith(SHARED_MOUNT)], job
            assert "/dev/shm" in mounts, job


# --------------------------------------------------------------------------- config errors

IMAGE_PATH: Final = "platform.trainer.images.torch"


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("pytorch/pytorch:latest", ":latest"),
        ("pytorch/pytorch", "tag or digest"),
    ],
    ids=["latest", "no-tag"],
)
def test_unpinned_image_is_refused(image: str, allowed: str) -> None:
    problems = _problems(_with_trainer(images={"torch": image}))
    assert [p.path for p in problems] == [IMAGE_PATH]
    assert problems[0].value == image
    assert allowed in problems[0].allowed


@pytest.mark.parametrize("tag", ["main", "HEAD"])
def test_floating_branch_tag_is_refused(tag: str) -> None:
    """Pin every chart and image, never `latest`, `main` or `HEAD`."""
    problems = _problems(
        _with_trainer(images={"mpi": f"ghcr.io/kubeflow/trainer/deepspeed-runtime:{tag}"})
    )
    assert [p.path for p in problems] == ["platform.trainer.images.mpi"]


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/pytorch:25.10-py3",
        "registry.example.com:5000/ml/train:2026.11.1",
        "ghcr.io/acme/train@sha256:" + "0" * 64,
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/ml_team/train:1.0",
    ],
    ids=["tag", "registry-port", "digest", "underscore-in-path"],
)
def test_pinned_image_is_accepted(image: str) -> None:
    """Docker references allow `_` and `__` between path characters (distribution grammar)."""
    assert TrainerImagesConfig.model_validate({"torch": image}).torch == image


def _with_pool_hugepages(gib: int) -> dict[str, Any]:
    data = stack_data("dev")
    (trn1,) = [p for p in data["nodePools"] if p["name"] == "trn1"]
    trn1["hugepagesGiB"] = gib
    return data


def test_too_many_huge_pages_are_refused() -> None:
    problems = _problems(_with_pool_hugepages(65))
    assert [p.path for p in problems] == ["platform.nodePools[1].hugepagesGiB"]
    assert problems[0].value == 65
    assert "64" in problems[0].allowed
    (trn1,) = [p for p in parse_platform_config(_with_pool_hugepages(64)).node_pools
               if p.name == "trn1"]  # fmt: skip
    assert trn1.hugepages == 64


def test_huge_pages_beyond_half_a_small_node_are_refused() -> None:
    data = stack_data("dev")
    (small,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    small["hugepagesGiB"] = 9  # g5.xlarge and g6.xlarge have 16 GiB
    problems = _problems(data)
    assert [p.path for p in problems] == ["platform.nodePools[0].hugepagesGiB"]
    assert "8 GiB" in problems[0].allowed


def test_huge_pages_need_an_al2023_alias() -> None:
    """The pages are reserved by an AL2023 cloud-init script; Bottlerocket reads TOML."""
    data = stack_data("dev")
    (trn1,) = [p for p in data["nodePools"] if p["name"] == "trn1"]
    trn1["amiAlias"] = "bottlerocket@v1.40.0"
    problems = _problems(data)
    assert {p.path for p in problems} == {"platform.nodePools[1].amiAlias"}
    assert any("hugepagesGiB: 0" in p.allowed for p in problems)
    trn1["hugepagesGiB"] = 0
    # What remains is the bill of materials: it records the drivers of AL2023 releases only.
    (left,) = _problems(data)
    assert "bill of materials" in left.allowed


@pytest.mark.parametrize("section", ["trainer", "slurm"])
def test_the_old_huge_pages_keys_say_where_the_setting_went(section: str) -> None:
    data = stack_data("dev")
    data.setdefault(section, {})["hugepagesGiB"] = 5
    problems = _problems(data)
    assert [p.path for p in problems] == [f"platform.{section}.hugepagesGiB"]
    assert "nodePools[].hugepagesGiB" in problems[0].allowed


def test_unknown_trainer_key_is_refused() -> None:
    problems = _problems(_with_trainer(queue="ml-research"))
    assert [p.path for p in problems] == ["platform.trainer.queue"]
    for key in ("enabled", "images", "legacyTrainingOperator"):
        assert key in problems[0].allowed


# --------------------------------------------------------------------------- legacy operator

KUSTOMIZE = "kubernetes:kustomize/v2:Directory"


def _deployment(name: str, args: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kubeflow"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "training-operator", "args": args}]}}
        },
    }


def test_legacy_operator_only_where_config_asks(synthesized: dict[str, StackResult]) -> None:
    for stack in STACKS:
        run = ProgramRun(synthesized[stack].records)
        wanted = stack_data(stack).get("trainer", {}).get("legacyTrainingOperator", False)
        directories = [d for d in run.of_type(KUSTOMIZE) if d.name == "training-operator"]
        assert len(directories) == (1 if wanted else 0), stack
        for directory in directories:
            assert directory.inputs["directory"] == versions.TRAINING_OPERATOR_KUSTOMIZATION
            assert directory.inputs["directory"].endswith("?ref=v1.9.4")
            volcano = run.one(RELEASE, "volcano")
            assert volcano.urn in directory.dependencies
            assert directory.providers.get("kubernetes") or directory.provider


def test_gang_scheduler_flag_is_added_once_to_the_operator_only() -> None:
    deployment = _deployment("training-operator", ["--enable-scheme=pytorchjob"])
    changed = with_gang_scheduler("kubernetes:apps/v1:Deployment", deployment)
    assert changed is not None
    args = changed["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--enable-scheme=pytorchjob", "--gang-scheduler-name=volcano"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--enable-scheme=pytorchjob"
    ], "the input is left untouched"
    again = with_gang_scheduler("kubernetes:apps/v1:Deployment", changed)
    assert again is not None
    assert (
        again["spec"]["template"]["spec"]["containers"][0]["args"].count(
            "--gang-scheduler-name=volcano"
        )
        == 1
    )
    replaced = with_gang_scheduler(
        "kubernetes:apps/v1:Deployment",
        _deployment("training-operator", ["--gang-scheduler-name=scheduler-plugins"]),
    )
    assert replaced is not None
    assert replaced["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--gang-scheduler-name=volcano"
    ]
    assert with_gang_scheduler("kubernetes:apps/v1:Deployment", _deployment("other", [])) is None
    assert (
        with_gang_scheduler(
            "kubernetes:core/v1:Service", {"metadata": {"name": "training-operator"}}
        )
        is None
    )


def _readme_documents(kind: str) -> list[dict[str, Any]]:
    """Every YAML example of ``kind`` on the documentation's pages."""
    blocks = docs_pages.fenced(docs_pages.all_pages(), "yaml")
    documents = [load_yaml(block) for block in blocks]
    return [d for d in documents if isinstance(d, dict) and d.get("kind") == kind]


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_docs_job_examples_are_valid(kind: str, reference_dir: Path) -> None:
    examples = _readme_documents(kind)
    assert examples, f"the docs show a {kind}"
    for example in examples:
        assert validation_errors(example, "1.34", reference_dir / "crds") == []


def _node_env(runtime: ResourceRecord) -> dict[str, str]:
    pod = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]
    return {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}


def test_trainium_runtimes_compile_into_the_teams_shared_cache(
    synthesized: dict[str, StackResult],
) -> None:
    run = ProgramRun(synthesized["prod"].records)
    for team in ("ml-research", "ml-product"):
        assert _node_env(_runtime(run, team, "torch-trn2"))["NEURON_COMPILE_CACHE_URL"] == (
            f"/fsx/teams/{team}/neuron-compile-cache"
        )
        assert "NEURON_COMPILE_CACHE_URL" not in _node_env(_runtime(run, team, "torch-p5"))


def test_without_the_shared_file_system_the_cache_stays_on_the_node(
    run_component: RunComponent,
) -> None:
    data = copy.deepcopy(stack_data("prod"))
    for team in data["teams"]:
        team["sharedFileSystem"] = False
    run = run_component(parts.trainer, data, "prod")
    assert "NEURON_COMPILE_CACHE_URL" not in _node_env(_runtime(run, "ml-research", "torch-trn2"))
