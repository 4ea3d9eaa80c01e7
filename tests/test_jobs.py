"""The jobs model (``python -m synth jobs``): every defect it guards against, reproduced.

Each case takes a synthesized stack, puts back what an earlier version of the platform did (or
what a controller would refuse), and checks that the model blocks it, while the stack as
shipped runs. Capacity cases check the arithmetic of quota, queue capability and guarantee,
Slurm's share and pool limits against numbers worked out here from the stack files.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from components import acceptance_gate
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.node_pools import LUSTRE_CLIENT_LABEL, POOL_LABEL
from components.requirements import catalog_types_admitted
from components.workloads import NODE_AGENT_CPU_MILLIS, NODE_AGENT_MEMORY_MIB
from synth.__main__ import main as synth_main
from synth.jobs.daemonsets import daemonset_overhead
from synth.jobs.karpenter import node_pools, volume_node_terms, with_volume_topology
from synth.jobs.model import PathReport, Stack, all_runnable, evaluate_jobs, quota_applies
from synth.jobs.placement import required_affinity_holds
from synth.jobs.rbac import allowed
from synth.jobs.report import table
from synth.jobs.trainer import Runtime, pod_requests
from synth.jobs.view import StackView, name_of, namespace_of
from synth.jobs.volcano import QueueShape, real_capability
from synth.run import StackResult, synthesize_stack
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests.conftest import STACKS, ProgramRun, stack_data
from tests.mutations import set_at
from tests.project_copies import project_copy

Edit = Callable[[StackView], None]
GPU: Final = "nvidia.com/gpu"


def _view(result: StackResult) -> StackView:
    view = StackView.from_records(result.records)
    return StackView(copy.deepcopy(view.objects), copy.deepcopy(view.releases), view.kustomizations)


def _report(reports: list[PathReport], team: str, runtime: str) -> PathReport:
    # a Katib trial is named after the runtime it runs on
    (found,) = [
        r for r in reports if r.team == team and r.runtime == runtime and r.kind != "katib-trial"
    ]
    return found


def _objects(view: StackView, kind: str, name: str | None = None) -> Iterator[dict[str, Any]]:
    for manifest in view.objects:
        if manifest.get("kind") == kind and (name is None or name_of(manifest) == name):
            yield manifest


def _drop(view: StackView, kind: str, name: str | None = None) -> None:
    doomed = [id(m) for m in _objects(view, kind, name)]
    assert doomed, f"no {kind} {name} to remove"
    view.objects[:] = [m for m in view.objects if id(m) not in doomed]


def _pods(runtime: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        yield job, job["template"]["spec"]["template"]["spec"]


def _runtime(view: StackView, namespace: str, name: str) -> dict[str, Any]:
    (found,) = [
        m
        for m in _objects(view, "TrainingRuntime", name)
        if m["metadata"]["namespace"] == namespace
    ]
    return found


def _blocked_with(view: StackView, team: str, runtime: str, words: str) -> PathReport:
    report = _report(evaluate_jobs(view), team, runtime)
    assert not report.runnable, report
    assert any(words in reason for reason in report.reasons), report.reasons
    return report


# --------------------------------------------------------------------------- shipped stacks


@pytest.mark.parametrize("stack", STACKS)
def test_every_promised_path_of_every_stack_runs(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    reports = synthesized[stack].jobs
    assert reports, "a stack with teams promises paths"
    assert [r.to_json() for r in reports if not r.runnable and r.offered] == []
    assert all(r.max_nodes >= 1 for r in reports if r.offered)
    # what a stack leaves out (Katib on MPI runtimes) is listed with the reason
    assert all(r.reasons and not r.runnable for r in reports if not r.offered)


@pytest.mark.parametrize("stack", STACKS)
def test_every_team_gets_a_path_for_each_accelerator_its_quota_holds(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    raw = stack_data(stack)
    kinds = {p["name"]: p["instanceTypes"][0].startswith("trn") for p in raw["nodePools"]}
    for team in raw["teams"]:
        # the accelerator pools (a notebook's CPU profile goes to a general pool)
        pools = {
            r.pool for r in synthesized[stack].jobs if r.team == team["name"] and r.pool in kinds
        }
        if team["quota"].get("gpus", 0):
            assert any(not kinds[p] for p in pools if p), (team["name"], pools)
        if team["quota"].get("neuronDevices", 0):
            assert any(kinds[p] for p in pools if p), (team["name"], pools)


# --------------------------------------------------------------------------- the defects


def test_trainer_webhook_needs_to_read_priority_classes(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["prod"])
    assert _report(evaluate_jobs(view), "ml-research", "torch-p5").runnable
    _drop(view, "ClusterRoleBinding", "trainingplatform:trainer-priorityclass-reader")
    _blocked_with(view, "ml-research", "torch-p5", "kubeflow/trainer#3918")


def test_a_missing_priority_class_is_refused_at_admission(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["prod"])
    _drop(view, "PriorityClass", "training-standard")
    _blocked_with(view, "ml-product", "torch-trn2", "PriorityClass training-standard")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        pytest.param(
            lambda v: v.releases["karpenter"]["values"]["settings"]["featureGates"].pop(
                "nodeOverlay"
            ),
            "offer no huge pages",
            id="feature-gate-off",
        ),
        pytest.param(lambda v: _drop(v, "NodeOverlay"), "offer no huge pages", id="no-overlays"),
        pytest.param(
            lambda v: [c["spec"].pop("userData") for c in _objects(v, "EC2NodeClass", "p5")],
            "the kubelet refuses the pod",
            id="node-reserves-none",
        ),
    ],
)
def test_huge_pages_need_an_overlay_and_nodes_that_reserve_them(
    synthesized: dict[str, StackResult], edit: Edit, words: str
) -> None:
    view = _view(synthesized["prod"])
    assert _report(evaluate_jobs(view), "ml-research", "torch-p5").runnable
    edit(view)
    _blocked_with(view, "ml-research", "torch-p5", words)


def test_an_mpi_launcher_that_waits_for_ready_workers_deadlocks_the_gang(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["staging"])
    runtime = _runtime(view, "ml-research", "mpi-p5")
    for job, _ in _pods(runtime):
        if job["name"] == "launcher":
            job["dependsOn"] = [{"name": "node", "status": "Ready"}]
    _blocked_with(view, "ml-research", "mpi-p5", "deadlock")


def test_mpi_as_root_is_refused(synthesized: dict[str, StackResult]) -> None:
    view = _view(synthesized["staging"])
    for _, pod in _pods(_runtime(view, "ml-research", "mpi-p5")):
        pod.pop("securityContext")
    _blocked_with(view, "ml-research", "mpi-p5", "as root")


def test_team_groups_need_to_read_cluster_scoped_runtimes_and_queues(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    _drop(view, "ClusterRoleBinding", "trainingplatform:training-catalog")
    report = _blocked_with(view, "ml-dev", "torch-trn1", "list ClusterTrainingRuntimes")
    assert any("ml-engineers" in reason for reason in report.reasons)


def test_team_roles_do_not_write_job_status(synthesized: dict[str, StackResult]) -> None:
    view = _view(synthesized["dev"])
    group = ("Group", "ml-engineers")
    args = ("trainer.kubeflow.org", "trainjobs/status")
    assert allowed(view, group, "get", *args, namespace="ml-dev")
    for verb in ("update", "patch", "create", "delete"):
        assert not allowed(view, group, verb, *args, namespace="ml-dev"), verb
    assert allowed(view, group, "create", "trainer.kubeflow.org", "trainjobs", namespace="ml-dev")


def test_a_trainium_runtime_without_a_cpu_limit_breaks_the_sdk(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    for _, pod in _pods(_runtime(view, "ml-dev", "torch-trn1")):
        pod["containers"][0]["resources"]["limits"].pop("cpu")
    _blocked_with(view, "ml-dev", "torch-trn1", "list_runtimes() fails")


@pytest.mark.parametrize("drop", ["requests", "both"])
def test_trainium_jobs_start_one_process_per_neuron_core(
    synthesized: dict[str, StackResult], drop: str
) -> None:
    view = _view(synthesized["dev"])
    for _, pod in _pods(_runtime(view, "ml-dev", "torch-trn1")):
        resources = pod["containers"][0]["resources"]
        resources["requests"].pop("cpu")
        if drop == "both":
            resources["limits"].pop("cpu")
    expected = "1 process(es)" if drop == "both" else "128 process(es)"
    _blocked_with(view, "ml-dev", "torch-trn1", expected)


def test_queues_without_hierarchy_cannot_start_jobs_on_an_empty_pool(
    synthesized: dict[str, StackResult],
) -> None:
    """Flat capacity queues: another team's guarantee leaves nothing for a cold pool."""
    view = _view(synthesized["staging"])
    assert _report(evaluate_jobs(view), "ml-platform-ci", "torch-p5").max_nodes == 2
    config = view.releases["volcano"]["values"]["custom"]
    scheduler = load_yaml(config["scheduler_config_override"])
    for tier in scheduler["tiers"]:
        for plugin in tier["plugins"]:
            plugin.pop("enableHierarchy", None)
    config["scheduler_config_override"] = yaml.safe_dump(scheduler)
    (research,) = _objects(view, "Queue", "ml-research")
    research["spec"]["guarantee"]["resource"][GPU] = "32"
    report = _blocked_with(view, "ml-platform-ci", "torch-p5", "scaled-to-zero")
    assert report.max_nodes == 0


def test_two_schedulers_racing_for_one_pool_are_refused(
    synthesized: dict[str, StackResult],
) -> None:
    """The old layout: slurmd pods on the pool's one NodePool, beside Volcano's gangs."""
    view = _view(synthesized["staging"])
    _drop(view, "NodePool", "p5-slurm")
    (node_set,) = _objects(view, "NodeSet", "p5")
    template = node_set["spec"]["template"]["spec"]
    template["nodeSelector"].pop("trainingplatform.io/reserved-for")
    template["tolerations"] = [
        t for t in template["tolerations"] if t["key"] != "trainingplatform.io/reserved-for"
    ]
    _blocked_with(view, "ml-research", "torch-p5", "race")
    partition = _report(evaluate_jobs(view), "*", "p5")
    assert not partition.runnable and any("race" in r for r in partition.reasons)


def test_a_device_plugin_that_skips_slurm_nodes_leaves_slurmd_pending(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["staging"])
    values = view.releases["aws-efa-k8s-device-plugin"]["values"]
    values["tolerations"] = [
        t for t in values["tolerations"] if t["key"] != "trainingplatform.io/reserved-for"
    ]
    partition = _report(evaluate_jobs(view), "*", "p5")
    assert not partition.runnable
    assert any("vpc.amazonaws.com/efa" in r and "tolerate" in r for r in partition.reasons)


def test_a_node_set_that_grows_past_slurms_node_pool_leaves_some_pending(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["prod"])
    (scaler,) = _objects(view, "ScaledObject", "p5en")
    scaler["spec"]["maxReplicaCount"] += 1
    partition = _report(evaluate_jobs(view), "*", "p5en")
    assert not partition.runnable
    assert any("grows to 5 nodes but the NodePools allow 4" in r for r in partition.reasons)


def test_a_partition_reports_what_one_job_gets_cold_and_warm(
    synthesized: dict[str, StackResult],
) -> None:
    raw = stack_data("prod")
    (node_set,) = [s for s in raw["slurm"]["nodeSets"] if s["pool"] == "p5en"]
    partition = _report(synthesized["prod"].jobs, "*", "p5en")
    assert partition.runnable and partition.max_nodes == node_set["maxNodes"] == 4
    assert any(r.startswith("cold: up to 4 node(s)") for r in partition.reasons)
    assert any(r.startswith("warm: 0 node(s)") for r in partition.reasons)
    # a warm floor: the ScaledObject keeps its minimum while idle
    view = _view(synthesized["prod"])
    (scaler,) = _objects(view, "ScaledObject", "p5en")
    del scaler["spec"]["idleReplicaCount"]
    scaler["spec"]["minReplicaCount"] = 2
    warm = _report(evaluate_jobs(view), "*", "p5en")
    assert any(r.startswith("warm: 2 node(s)") for r in warm.reasons)


def test_a_gpu_pool_the_nvidia_plugin_skips_never_offers_gpus(
    synthesized: dict[str, StackResult],
) -> None:
    """The plugin's default affinity needs nvidia.com/gpu.present on the node: without the label
    on the NodePool, Karpenter still launches p5 nodes (it simulates GPUs) that never get any."""
    view = _view(synthesized["prod"])
    (pool,) = _objects(view, "NodePool", "p5")
    pool["spec"]["template"]["metadata"]["labels"].pop("nvidia.com/gpu.present")
    view.releases["nvidia-device-plugin"]["values"].pop("nodeSelector")
    report = _blocked_with(view, "ml-research", "torch-p5", "ever offers nvidia.com/gpu")
    assert any("NodePool p5" in r for r in report.reasons)


def test_a_pool_whose_nodes_lack_the_lustre_client_label_cannot_take_a_job_with_claims(
    synthesized: dict[str, StackResult],
) -> None:
    """The team's Lustre volumes require the label: a NodePool without it never gets the job's
    pods (kube-scheduler's VolumeBinding filter, Karpenter's volume topology)."""
    view = _view(synthesized["prod"])
    (pool,) = _objects(view, "NodePool", "p5")
    pool["spec"]["template"]["metadata"]["labels"].pop(LUSTRE_CLIENT_LABEL)
    _blocked_with(view, "ml-research", "torch-p5", "volumes' node affinity")
    # as shipped the pool is a Lustre client and the job runs
    assert _report(evaluate_jobs(_view(synthesized["prod"])), "ml-research", "torch-p5").runnable


@pytest.mark.parametrize("stack", STACKS)
def test_a_plain_pod_with_a_team_claim_lands_only_on_lustre_clients(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A pod of a user's own, naming no pool, with the team's checkpoints claim: Karpenter
    may only add a node of a pool that mounts the file system, never plain ``general``."""
    view = _view(synthesized[stack])
    pools = node_pools(view)
    clients = {p.name for p in pools if p.labels.get(LUSTRE_CLIENT_LABEL) == {"true"}}
    assert GENERAL_LUSTRE_POOL in clients and GENERAL_POOL not in clients
    team = next(t["name"] for t in stack_data(stack)["teams"] if t.get("sharedFileSystem", True))
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "lustre-checkpoints"}}
    pod = {"containers": [{"name": "c"}], "volumes": [claim]}
    placed = with_volume_topology(pod, volume_node_terms(view, team, pod))

    def allowed(spec: dict[str, Any]) -> set[str]:
        # the CPU pools' types are not in the catalog: their labels decide
        return {p.name for p in pools if required_affinity_holds(spec.get("affinity"), p.labels)}

    assert allowed(pod) >= {GENERAL_POOL, GENERAL_LUSTRE_POOL}
    assert allowed(placed) == clients
    # the accelerator pools among them stay behind their taints
    untainted = {p.name for p in pools if not p.taints}
    assert allowed(placed) & untainted == {GENERAL_LUSTRE_POOL}


def test_a_bottlerocket_node_never_runs_the_huge_pages_script(
    synthesized: dict[str, StackResult],
) -> None:
    """Karpenter reads a Bottlerocket class's user data as TOML: the shell part never runs."""
    view = _view(synthesized["prod"])
    (node_class,) = _objects(view, "EC2NodeClass", "p5")
    node_class["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@v1.40.0"}]
    _blocked_with(view, "ml-research", "torch-p5", "the kubelet refuses the pod")


def test_overlays_of_one_weight_that_set_the_same_resource_cancel(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["prod"])
    (overlay,) = _objects(view, "NodeOverlay", "p5-hugepages")
    twin = copy.deepcopy(overlay)
    twin["metadata"]["name"] = "p5-hugepages-again"
    twin["spec"]["capacity"]["hugepages-2Mi"] = "4Gi"
    view.objects.append(twin)
    _blocked_with(view, "ml-research", "torch-p5", "offer no huge pages")
    twin["spec"]["weight"] = 20  # a heavier overlay wins: 4Gi, less than the pods request
    _blocked_with(view, "ml-research", "torch-p5", "hugepages-2Mi")


def test_trainers_runtime_webhook_refuses_a_trainer_step_with_two_replicas(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    (job, _), *_ = _pods(_runtime(view, "ml-dev", "torch-gpu-small"))
    job["replicas"] = 2
    _blocked_with(view, "ml-dev", "torch-gpu-small", "Trainer's webhook needs 1")


def test_a_mount_of_a_volume_the_pod_lacks_is_refused(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["staging"])
    for job, pod in _pods(_runtime(view, "ml-research", "mpi-p5")):
        if job["name"] == "launcher":
            pod["initContainers"][0]["volumeMounts"][0]["name"] = "hostfile"
    _blocked_with(view, "ml-research", "mpi-p5", "mounts volume hostfile")
    # the hostfile volume Trainer's MPI plugin adds to the launcher is enough as it ships
    assert _report(evaluate_jobs(_view(synthesized["staging"])), "ml-research", "mpi-p5").runnable


# --------------------------------------------------------------------------- capacity arithmetic


def test_the_pool_limit_less_slurms_share_caps_a_gang(
    synthesized: dict[str, StackResult],
) -> None:
    raw = stack_data("prod")
    (pool,) = [p for p in raw["nodePools"] if p["name"] == "p5en"]
    (held,) = [s["maxNodes"] for s in raw["slurm"]["nodeSets"] if s["pool"] == "p5en"]
    report = _report(synthesized["prod"].jobs, "ml-research", "torch-p5en")
    assert report.max_nodes == pool["maxNodes"] - held == 10
    assert any("p5en-slurm" in r for r in report.reasons)


def test_the_queue_capability_caps_a_gang(synthesized: dict[str, StackResult]) -> None:
    raw = stack_data("prod")
    (team,) = [t for t in raw["teams"] if t["name"] == "ml-product"]
    # ml-product's queue has no capability of its own: its quota, 96 GPUs, 12 p5 nodes.
    report = _report(synthesized["prod"].jobs, "ml-product", "torch-p5")
    assert report.max_nodes == team["quota"]["gpus"] // 8 == 12
    assert any("queue ml-product" in r for r in report.reasons)


def test_the_namespace_quota_caps_a_gang(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("staging")
    # EFA quota for one and a half p5 nodes: a second node's 32 interfaces do not fit.
    set_at("teams", data["teams"])(data)
    data["teams"][0]["quota"]["efaInterfaces"] = 48
    run = run_platform(data, "staging")
    reports = evaluate_jobs(StackView.from_records(run.records))
    report = _report(reports, "ml-research", "torch-p5")
    assert report.max_nodes == 1
    assert any("vpc.amazonaws.com/efa 48" in r for r in report.reasons)


@pytest.mark.parametrize(
    ("total", "guarantees", "own", "capability", "hierarchy", "expected"),
    [
        # flat: what exists, less everyone's guarantee, plus the queue's own, under its cap
        (Decimal(0), Decimal(0), Decimal(0), Decimal(64), False, Decimal(0)),
        (Decimal(16), Decimal(0), Decimal(0), Decimal(64), False, Decimal(16)),
        (Decimal(16), Decimal(64), Decimal(0), Decimal(64), False, Decimal(0)),
        (Decimal(16), Decimal(64), Decimal(64), Decimal(96), False, Decimal(64)),
        (Decimal(200), Decimal(64), Decimal(64), Decimal(96), False, Decimal(96)),
        # hierarchy: the queue's capability alone, once some node offers the resource
        (Decimal(8), Decimal(64), Decimal(0), Decimal(64), True, Decimal(64)),
        # ... and before that, only what the queue itself is guaranteed
        (Decimal(0), Decimal(64), Decimal(0), Decimal(64), True, Decimal(0)),
        (Decimal(0), Decimal(64), Decimal(16), Decimal(64), True, Decimal(16)),
    ],
)
def test_capacity_plugin_real_capability(
    total: Decimal,
    guarantees: Decimal,
    own: Decimal,
    capability: Decimal,
    hierarchy: bool,
    expected: Decimal,
) -> None:
    queue = QueueShape("q", capability={GPU: capability}, guarantee={GPU: own})
    got = real_capability(queue, GPU, total=total, all_guarantees=guarantees, hierarchy=hierarchy)
    assert got == expected


def test_the_default_queue_has_no_bound_under_hierarchy() -> None:
    queue = QueueShape("default")
    assert (
        real_capability(queue, GPU, total=Decimal(8), all_guarantees=Decimal(8), hierarchy=True)
        is None
    )


# --------------------------------------------------------------------------- what Volcano compares


def _torch_runtime(view: StackView) -> dict[str, Any]:
    """The first team's first PyTorch runtime."""
    return next(m for m in _objects(view, "TrainingRuntime") if name_of(m).startswith("torch-"))


@pytest.mark.parametrize("stack", STACKS)
def test_the_queue_check_covers_every_resource_of_the_pod_group(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    """A queue capability below one pod's EFA, huge pages, cpu or memory holds no gang.

    Volcano's capacity plugin compares every resource of minResources but ``pods``
    (volcano v1.15.1 pkg/scheduler/api/resource_info.go, LessEqualWithDimensionAndResourcesName).
    """
    view = _view(synthesized[stack])
    manifest = _torch_runtime(view)
    team, name = manifest["metadata"]["namespace"], name_of(manifest)
    runtime = Runtime.parse(manifest)
    assert runtime.trainer_job is not None
    requests = pod_requests(runtime.trainer_job.pod, {})
    compared = [r for r in requests if r != "pods" and requests[r] > 0]
    assert set(compared) - {GPU, "aws.amazon.com/neuron"}, compared
    for resource in compared:
        edited = _view(synthesized[stack])
        (queue,) = _objects(edited, "Queue", team)
        capability = queue["spec"].setdefault("capability", {})
        capability[resource] = str(requests[resource] / 2)
        report = _blocked_with(edited, team, name, resource)
        assert report.max_nodes == 0, (resource, report)


@pytest.mark.parametrize("stack", STACKS)
def test_a_runtime_the_queue_cannot_hold_is_listed_as_not_runnable(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    """The platform leaves out a pool's runtimes a team's queue never holds one node of
    (components.trainer team_runtimes); the report still lists them, with the reason."""
    view = _view(synthesized[stack])
    manifest = _torch_runtime(view)
    team, pool = manifest["metadata"]["namespace"], manifest["metadata"]["labels"][POOL_LABEL]
    runtime = Runtime.parse(manifest)
    assert runtime.trainer_job is not None
    requests = pod_requests(runtime.trainer_job.pod, {})
    accelerator = next(r for r in (GPU, "aws.amazon.com/neuron") if requests.get(r))
    (queue,) = _objects(view, "Queue", team)
    queue["spec"]["capability"][accelerator] = str(requests[accelerator] - 1)
    dropped = [  # every runtime of the team on a pool of that accelerator, as the program does
        name_of(m)
        for m in _objects(view, "TrainingRuntime")
        if m["metadata"]["namespace"] == team and _requests(m).get(accelerator)
    ]
    assert any(name.endswith(f"-{pool}") for name in dropped)
    for name in dropped:
        _drop_runtime(view, team, name)
    # config refuses the team's standing Ray clusters that such a queue cannot hold
    view.objects[:] = [
        m for m in view.objects if not (m.get("kind") == "RayCluster" and namespace_of(m) == team)
    ]
    # and the hub leaves out the notebook profiles it cannot hold (components/notebooks.py
    # pool_profiles, as the program does): the smaller ones on those pools stay
    capability = requests[accelerator] - 1
    kept = _drop_notebook_profiles(view, team, accelerator, capability)
    reports = evaluate_jobs(view)
    for name in dropped:
        report = _report(reports, team, name)
        assert not report.runnable and not report.offered, report
        assert f"queue {team}'s capability is {capability}" in report.reasons[0]
    notebooks = {r.runtime: r for r in reports if r.kind == "notebook" and r.team == team}
    assert set(notebooks) == kept
    assert all_runnable(reports)
    assert "not offered" in table(stack, reports)


def _drop_notebook_profiles(
    view: StackView, team: str, accelerator: str, capability: Decimal
) -> set[str]:
    """Drop the team's profiles asking more of ``accelerator`` than ``capability``; the rest."""
    values = view.releases.get("jupyterhub")
    if values is None:
        return set()
    (entry,) = [e for e in values["values"]["custom"]["teamProfiles"] if e["team"] == team]
    entry["profiles"] = [
        p
        for p in entry["profiles"]
        if Decimal(p["kubespawner_override"]["extra_resource_guarantees"].get(accelerator, 0))
        <= capability
    ]
    return {p["slug"] for p in entry["profiles"]}


def _requests(manifest: dict[str, Any]) -> dict[str, Decimal]:
    runtime = Runtime.parse(manifest)
    assert runtime.trainer_job is not None
    return pod_requests(runtime.trainer_job.pod, {})


def _drop_runtime(view: StackView, namespace: str, name: str) -> None:
    doomed = id(_runtime(view, namespace, name))
    view.objects[:] = [m for m in view.objects if id(m) != doomed]


# --------------------------------------------------------------------------- the command


@pytest.mark.usefixtures("replay_synthesis")
def test_jobs_command_prints_a_table_and_exits_zero_for_prod(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    status = synth_main(["jobs", "prod", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "ml-research" in out and "slurm:p5en" in out
    assert "not runnable" in out.splitlines()[-1]


@pytest.mark.usefixtures("replay_synthesis")
def test_jobs_command_prints_json_with_the_promised_keys(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    status = synth_main(["jobs", "dev", "--json", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 0, err
    rows = json.loads(out)
    assert rows and all(
        {"team", "runtime", "pool", "maxNodes", "runnable", "reasons"} <= set(row) for row in rows
    )


@pytest.mark.slow
def test_jobs_command_exits_one_when_a_promised_path_cannot_run(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = project_copy(tmp_path)
    # Both commands synthesize the same edited project into the same folder: the second
    # reuses the first's synthesis (deterministic, tests/test_synth.py), judged by its own code.
    made: dict[tuple[str, str, str], StackResult] = {}

    def once(stack: str, out: Path, root: Path = REPOSITORY_ROOT) -> StackResult:
        key = (stack, str(out), str(root))
        if key not in made:
            made[key] = synthesize_stack(stack, out, root)
        return made[key]

    monkeypatch.setattr("synth.__main__.synthesize_stack", once)
    stack = project / "stacks" / "Pulumi.dev.yaml"
    text = stack.read_text()
    # Slurm takes every trn1 node (and the team no longer counts on a share of them): the
    # team's Trainium runtime has no node left.
    text = text.replace("        maxNodes: 2\n", "        maxNodes: 1\n", 1)
    stack.write_text(
        re.sub(r"deserved: \{gpus: (\d+), neuronDevices: 16\}", r"deserved: {gpus: \1}", text)
    )
    out = str(tmp_path / "out")
    status = synth_main(["jobs", "dev", "--project-dir", str(project), "--out", out])
    result = capsys.readouterr()
    assert status == 1, result.out + result.err
    assert "NO" in result.out
    assert synth_main(["dev", "--project-dir", str(project), "--out", out]) == 1
    assert "NOT RUNNABLE ml-dev/torch-trn1" in capsys.readouterr().out


def test_jobs_command_exits_two_on_a_bad_stack(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert synth_main(["jobs", "no-such-stack", "--out", str(tmp_path)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_quota_scoped_to_other_priority_classes_does_not_bound_a_job() -> None:
    # Each team namespace's no-system-priority quota (pods: 0, scoped to the system classes)
    # counts no training pod; a quota scoped to the job's class does (Kubernetes' PriorityClass
    # scope of scopeSelector).
    def scoped(operator: str, values: list[str] | None = None) -> dict[str, Any]:
        expression: dict[str, Any] = {"scopeName": "PriorityClass", "operator": operator}
        if values is not None:
            expression["values"] = values
        return {
            "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [expression]}}
        }

    system = scoped("In", ["system-node-critical", "system-cluster-critical"])
    assert not quota_applies(system, "training-standard")
    assert not quota_applies(system, None)
    assert quota_applies(system, "system-node-critical")
    assert quota_applies(scoped("NotIn", ["system-node-critical"]), "training-standard")
    assert not quota_applies(scoped("DoesNotExist"), "training-standard")
    assert quota_applies(scoped("Exists"), "training-standard")
    assert quota_applies({"spec": {"hard": {"pods": "10"}}}, "training-standard")


def test_the_acceptance_agent_is_overhead_on_each_pool_of_its_vendor(
    synthesized: dict[str, StackResult],
) -> None:
    """Karpenter counts a DaemonSet the stack creates on every pool it lands on: the agent of
    each vendor on that vendor's pools (their Slurm shares too), nowhere else, and not on a pool
    whose taint it stops tolerating."""
    view = _view(synthesized["prod"])
    agents = [
        o
        for o in view.objects
        if o.get("kind") == "DaemonSet" and namespace_of(o) == acceptance_gate.NAMESPACE
    ]
    assert {name_of(a) for a in agents} == {
        acceptance_gate.agent_name("nvidia"), acceptance_gate.agent_name("neuron")
    }  # fmt: skip
    view.objects[:] = [o for o in view.objects if not any(o is a for a in agents)]
    before = {pool.name: daemonset_overhead(pool, Stack(view).plugins) for pool in node_pools(view)}
    view.objects.extend(agents)
    stack = Stack(view)
    added = {
        pool.name: {
            resource: amount - before[pool.name].get(resource, Decimal(0))
            for resource, amount in daemonset_overhead(pool, stack.plugins).items()
            if amount != before[pool.name].get(resource, Decimal(0))
        }
        for pool in stack.pools
    }
    agent = {
        "cpu": Decimal(NODE_AGENT_CPU_MILLIS) / 1000,
        "memory": Decimal(NODE_AGENT_MEMORY_MIB * 2**20),
    }
    gated = {
        record.inputs["metadata"]["name"]
        for record in synthesized["prod"].records
        if record.type == "kubernetes:karpenter.sh/v1:NodePool"
        and catalog_types_admitted(record.inputs["spec"]["template"]["spec"]["requirements"])
    }
    assert gated and len(gated) < len(added), "prod has accelerator and other pools"
    assert {name for name, extra in added.items() if extra} == gated
    assert all(added[name] == agent for name in gated), added
    # An agent that does not tolerate its pools' taint does not land there, nor cost anything.
    for manifest in agents:
        manifest["spec"]["template"]["spec"]["tolerations"] = []
    stack = Stack(view)
    assert all(daemonset_overhead(p, stack.plugins) == before[p.name] for p in stack.pools)
