"""``synth jobs`` proves the Ray and Katib paths (issue 42, item 4).

The PodGroup arithmetic is checked against KubeRay's own test cases (ray-project/kuberay v1.7.0
ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler_test.go); each refusal the
model makes of a RayJob path is reproduced by changing one thing of a synthesized view.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any, Final

import pytest
import yaml

from components import kuberay as kuberay_component
from components import versions
from components.katib import CONFIG_KEY, CONFIG_MAP, METRICS_COLLECTOR_INJECTION, TRAINJOB_TRIAL
from components.platform import validated_config
from synth.jobs import kuberay, trainer
from synth.jobs.model import (
    PYTORCHJOB_TRIAL,
    PathReport,
    _limit_range_defaults,
    all_runnable,
    evaluate_jobs,
)
from synth.jobs.report import table
from synth.jobs.trainer import Runtime
from synth.jobs.view import StackView, name_of, quantity
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS, stack_data

GPU: Final = "nvidia.com/gpu"
MI: Final = Decimal(1024 * 1024)


# --- the PodGroup KubeRay builds ---------------------------------------------------------------


def _container(name: str, *, gpu: bool = False) -> dict[str, Any]:
    limits = {"cpu": "500m", "memory": "512Mi", **({GPU: "1"} if gpu else {})}
    return {"name": name, "resources": {"limits": limits, "requests": {"cpu": "256m", "memory": "256Mi"}}}  # fmt: skip


def _go_cluster(hosts: int, *, gpu: bool) -> dict[str, Any]:
    """createTestRayCluster / createTestRayJob's cluster spec (volcano_scheduler_test.go)."""
    return {
        "headGroupSpec": {"template": {"spec": {"containers": [_container("ray-head")]}}},
        "workerGroupSpecs": [
            {
                "template": {"spec": {"containers": [_container("ray-worker", gpu=gpu)]}},
                "replicas": 2,
                "numOfHosts": hosts,
                "minReplicas": 1,
                "maxReplicas": 4,
            }
        ],
    }


def _go_job(hosts: int, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rayjob-sample",
            "namespace": "default",
            "labels": {kuberay.QUEUE_LABEL: "test-queue", kuberay.PRIORITY_LABEL: "test-priority"},
        },
        "spec": {"submissionMode": mode, "rayClusterSpec": _go_cluster(hosts, gpu=False)},
    }


@pytest.mark.parametrize(
    ("hosts", "members", "cpu", "memory", "gpus"),
    [(1, 3, "768m", "768Mi", "2"), (2, 5, "1280m", "1280Mi", "4")],
    ids=["TestCreatePodGroupForRayCluster", "TestCreatePodGroupForRayCluster_NumOfHosts2"],
)
def test_a_rayclusters_podgroup_is_kuberays(
    hosts: int, members: int, cpu: str, memory: str, gpus: str
) -> None:
    cluster = {
        "kind": "RayCluster",
        "metadata": {"name": "raycluster-sample", "namespace": "default"},
        "spec": _go_cluster(hosts, gpu=True),
    }
    group = kuberay.pod_group(cluster)
    assert group is not None
    assert group.name == "ray-raycluster-sample-pg"
    assert group.min_member == members
    assert group.min_resources == {
        "cpu": quantity(cpu),
        "memory": quantity(memory),
        GPU: quantity(gpus),
    }
    assert group.queue is None  # no label: Volcano's default queue


@pytest.mark.parametrize(
    ("hosts", "mode", "members", "cpu", "memory"),
    [
        (1, "HTTPMode", 3, "768m", "768Mi"),
        (1, "K8sJobMode", 3, "1268m", "968Mi"),
        (1, "SidecarMode", 3, "1268m", "968Mi"),
        (2, "HTTPMode", 5, "1280m", "1280Mi"),
        (2, "K8sJobMode", 5, "1780m", "1480Mi"),
        (2, "SidecarMode", 5, "1780m", "1480Mi"),
    ],
)
def test_a_rayjobs_podgroup_adds_the_submitter_to_resources_not_members(
    hosts: int, mode: str, members: int, cpu: str, memory: str
) -> None:
    """TestCreatePodGroupForRayJob and _NumOfHosts2: the default submitter requests 500m, 200Mi."""
    group = kuberay.pod_group(_go_job(hosts, mode))
    assert group is not None
    assert (group.name, group.queue, group.priority_class) == (
        "ray-rayjob-sample-pg",
        "test-queue",
        "test-priority",
    )
    assert group.min_member == members
    assert group.min_resources == {"cpu": quantity(cpu), "memory": quantity(memory)}


def test_autoscaling_counts_min_replicas() -> None:
    """TestCalculatePodGroupParams: with in-tree autoscaling, head plus minReplicas."""
    spec = _go_cluster(1, gpu=False)
    assert kuberay.cluster_params(spec) == (3, {"cpu": quantity("768m"), "memory": 768 * MI})
    spec["enableInTreeAutoscaling"] = True
    assert kuberay.cluster_params(spec) == (2, {"cpu": quantity("512m"), "memory": 512 * MI})
    spec["workerGroupSpecs"][0]["suspend"] = True
    assert kuberay.cluster_params(spec) == (1, {"cpu": quantity("256m"), "memory": 256 * MI})


def test_no_podgroup_for_a_rayjobs_own_cluster_or_a_job_on_an_existing_one() -> None:
    made = {
        "kind": "RayCluster",
        "metadata": {"name": "c", "labels": {kuberay.ORIGIN_KIND_LABEL: "RayJob"}},
        "spec": _go_cluster(1, gpu=True),
    }
    assert kuberay.pod_group(made) is None
    selecting = {
        "kind": "RayJob",
        "metadata": {"name": "j"},
        "spec": {"clusterSelector": {"a": "b"}},
    }
    assert kuberay.pod_group(selecting) is None


# --- Ray paths on the synthesized stacks -------------------------------------------------------


def _view(result: StackResult) -> StackView:
    view = StackView.from_records(result.records)
    return StackView(copy.deepcopy(view.objects), copy.deepcopy(view.releases), view.kustomizations)


def _ray(reports: list[PathReport], kind: str = "rayjob") -> dict[tuple[str, str], PathReport]:
    return {(r.team, r.runtime): r for r in reports if r.kind == kind}


def _dev(result: StackResult, view: StackView | None = None) -> dict[tuple[str, str], PathReport]:
    return _ray(evaluate_jobs(view or _view(result), config=result.config))


def test_dev_offers_a_runnable_rayjob_on_each_pool_its_team_holds(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    rays = _ray(result.jobs)
    trainjobs = {(r.team, r.pool): r for r in result.jobs if r.kind == "trainjob" and r.offered}
    assert set(rays) == {(team, f"raytrain-{pool}") for team, pool in trainjobs}
    for (team, _), report in rays.items():
        assert report.runnable, report
        # one worker per node: the gang is as big as the team's TrainJobs on the pool
        assert report.max_nodes == trainjobs[(team, report.pool)].max_nodes >= 1
        # the PodGroup of the largest gang: the head and every worker, the submitter not counted
        members = f"minMember {report.max_nodes + 1} "
        assert any("PodGroup ray-raytrain-" in r and members in r for r in report.reasons)
    assert "rayjob:raytrain-gpu-small" in table("dev", result.jobs)


def test_staging_proves_its_ray_paths_and_prod_reports_none(
    synthesized: dict[str, StackResult],
) -> None:
    staging = _ray(synthesized["staging"].jobs)
    assert staging and all(r.runnable for r in staging.values())
    # prod runs neither KubeRay nor Katib: nothing about them in its report
    assert not synthesized["prod"].config.ray.enabled
    assert [r for r in synthesized["prod"].jobs if r.kind in ("rayjob", "raycluster", "katib-trial")] == []  # fmt: skip


def test_a_rayjob_beyond_its_queues_deserved_share_says_it_runs_on_borrowed_capacity(
    synthesized: dict[str, StackResult],
) -> None:
    """Staging's ml-research RayJob on p5 wants more GPUs than its queue deserves, as its
    TrainJobs there do; both say so with the same note, and a deserved share raised past
    the gang takes the note away."""
    result = synthesized["staging"]
    view = _view(result)
    reports = evaluate_jobs(view, config=result.config)
    ray = _ray(reports)[("ml-research", "raytrain-p5")]
    borrowed = [r for r in ray.reasons if "runs on borrowed capacity" in r]
    assert borrowed and ray.runnable, ray.reasons
    assert "queue ml-research's deserved share" in borrowed[0]
    trainjob_notes = {
        reason
        for r in reports
        if r.kind == "trainjob" and r.team == "ml-research" and r.pool == ray.pool and r.offered
        for reason in r.reasons
        if "runs on borrowed capacity" in reason
    }
    assert set(borrowed) & trainjob_notes, "the same note as the TrainJob rows"
    (queue,) = [q for q in view.of_kind("Queue") if name_of(q) == "ml-research"]
    queue["spec"]["deserved"][GPU] = "100000"
    ray = _ray(evaluate_jobs(view, config=result.config))[("ml-research", "raytrain-p5")]
    assert not [r for r in ray.reasons if "runs on borrowed capacity" in r], ray.reasons


def _gpu_path(paths: dict[tuple[str, str], PathReport]) -> PathReport:
    return paths[("ml-dev", "raytrain-gpu-small")]


def _refused(result: StackResult, view: StackView, words: str) -> PathReport:
    report = _gpu_path(_dev(result, view))
    assert not report.runnable and report.max_nodes == 0, report
    assert any(words in reason for reason in report.reasons), report.reasons
    return report


def test_a_queue_that_cannot_hold_one_worker_refuses_the_rayjob(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    view = _view(result)
    (queue,) = [q for q in view.of_kind("Queue") if name_of(q) == "ml-dev"]
    queue["spec"]["capability"][GPU] = "0"
    _refused(result, view, "queue ml-dev: capability 0 nvidia.com/gpu")


def test_a_pool_without_room_refuses_the_rayjob(synthesized: dict[str, StackResult]) -> None:
    result = synthesized["dev"]
    view = _view(result)
    (pool,) = [p for p in view.of_kind("NodePool") if name_of(p) == "gpu-small"]
    pool["spec"]["limits"]["nodes"] = 0
    _refused(result, view, "NodePool gpu-small allows 0 nodes")


def test_members_without_ray_rbac_cannot_submit(synthesized: dict[str, StackResult]) -> None:
    result = synthesized["dev"]
    view = _view(result)
    for role in view.of_kind("ClusterRole"):
        role["rules"] = [
            r for r in role.get("rules") or [] if "ray.io" not in r.get("apiGroups", [])
        ]
    _refused(result, view, "may not create rayjobs in ml-dev (403)")


def test_a_head_no_nodepool_takes_refuses_the_rayjob(synthesized: dict[str, StackResult]) -> None:
    result = synthesized["dev"]
    view = _view(result)
    view.objects[:] = [
        o
        for o in view.objects
        if not (o.get("kind") == "NodePool" and name_of(o).startswith("general"))
    ]
    _refused(result, view, "RayJob head: no NodePool takes it")


def test_an_operator_without_volcano_builds_no_gang(synthesized: dict[str, StackResult]) -> None:
    result = synthesized["dev"]
    view = _view(result)
    view.releases[kuberay.RELEASE]["values"]["batchScheduler"] = {"enabled": False}
    _refused(result, view, "without --batch-scheduler=volcano")
    view.releases[kuberay.RELEASE]["values"]["batchScheduler"] = {
        "enabled": True,
        "name": "volcano",
    }
    _refused(result, view, "refuses to start")


# --- Ray objects already in the view -----------------------------------------------------------


def _standing(result: StackResult, workers: int, *, queue: str | None = "ml-dev") -> dict[str, Any]:
    """A standing RayCluster of ml-dev on gpu-small, built as the how-to's RayJob's cluster."""
    config = validated_config(stack_data("dev"))
    (pool,) = [p for p in config.node_pools if p.name == "gpu-small"]
    job = kuberay_component.ray_job(
        "standing", pool, team="ml-dev", image=versions.RAY_IMAGE, workers=workers,
        entrypoint="python x.py", checkpoints=None,
    )  # fmt: skip
    # the builder's labels (queue and priority class), the queue as asked
    labels = {k: v for k, v in job["metadata"]["labels"].items() if k != kuberay.QUEUE_LABEL}
    if queue is not None:
        labels[kuberay.QUEUE_LABEL] = queue
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": f"standing-{workers}", "namespace": "ml-dev", "labels": labels},
        "spec": job["spec"]["rayClusterSpec"],
    }


def _with(result: StackResult, *clusters: dict[str, Any]) -> dict[tuple[str, str], PathReport]:
    view = _view(result)
    view.objects.extend(clusters)
    return _ray(evaluate_jobs(view), "raycluster")


def test_a_standing_raycluster_is_a_path_runnable_or_not_with_its_reason(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    # dev's gpu-small gives ml-dev three nodes, one of them held by its standing cluster
    assert _ray(result.jobs, "raycluster")[("ml-dev", "interactive")].max_nodes == 1
    fits = _with(result, _standing(result, 2))[("ml-dev", "standing-2")]
    assert fits.runnable and fits.max_nodes == 2, fits
    too_big = _with(result, _standing(result, 3))[("ml-dev", "standing-3")]
    assert not too_big.runnable and too_big.max_nodes == 0
    # refused when written: the gang admission takes the standing cluster's node off the pool
    (refusal,) = [r for r in too_big.reasons if "trainingplatform-ray-gangs" in r]
    assert "held by standing Ray clusters ml-dev/interactive" in refusal, refusal
    view = _view(result)
    view.objects.append(_standing(result, 3))
    assert not all_runnable(evaluate_jobs(view))  # `synth jobs` exits 1
    # no queue label: the queue-ownership policy's own CEL refuses it
    unqueued = _standing(result, 1, queue=None)
    unqueued["metadata"]["name"] = "unqueued"
    refused = _with(result, unqueued)[("ml-dev", "unqueued")]
    assert not refused.runnable
    assert any("trainingplatform-team-queues" in r for r in refused.reasons), refused.reasons


def test_a_standing_clusters_nodes_queue_and_quota_are_not_offered_twice(
    synthesized: dict[str, StackResult],
) -> None:
    """A standing RayCluster holds its workers' nodes, its PodGroup's share of the queue and
    its pods' share of the quota while it exists: every other path of the team on its pool
    gets the rest, and says who holds the difference."""
    result = synthesized["dev"]
    with_cluster = {(r.kind, r.runtime): r for r in result.jobs}
    view = _view(result)
    view.objects[:] = [o for o in view.objects if o.get("kind") != "RayCluster"]
    without = {(r.kind, r.runtime): r for r in evaluate_jobs(view, config=result.config)}
    held = ["trainjob", "rayjob", "katib-trial"]
    on_pool = [
        key for key, report in with_cluster.items()
        if report.pool == "gpu-small" and key[0] in held and report.team == "ml-dev"
        and report.offered
    ]  # fmt: skip
    assert {kind for kind, _ in on_pool} >= {"trainjob", "rayjob"}
    for key in on_pool:
        assert with_cluster[key].max_nodes == without[key].max_nodes - 1, key
        if key[0] != "katib-trial":
            reasons = " ".join(with_cluster[key].reasons)
            for holder in ("NodePool gpu-small", "queue ml-dev", "ResourceQuota"):
                assert f"{holder}" in reasons and "held by standing RayCluster" in reasons
    # the other pool is untouched
    trn = [k for k, r in with_cluster.items() if r.pool == "trn1" and k[0] in held and r.offered]
    assert trn and all(with_cluster[k].max_nodes == without[k].max_nodes for k in trn)


def test_a_rayjob_on_an_existing_cluster_is_refused_and_has_no_gang(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    selecting = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "on-standing",
            "namespace": "ml-dev",
            "labels": {kuberay.QUEUE_LABEL: "ml-dev"},
        },
        "spec": {"entrypoint": "python x.py", "clusterSelector": {"ray.io/cluster": "standing-1"}},
    }
    view.objects.append(selecting)
    report = _ray(evaluate_jobs(view))[("ml-dev", "on-standing")]
    assert not report.runnable
    # ml-dev does not allow cluster selectors: the Ray-gang policy's CEL refuses it
    assert any(
        "trainingplatform-ray-gangs" in r and "allowClusterSelector" in r for r in report.reasons
    )
    assert any("KubeRay builds it no PodGroup" in r for r in report.reasons)


# --- Katib trials ------------------------------------------------------------------------------


def _trials(reports: list[PathReport]) -> dict[tuple[str, str], PathReport]:
    return {(r.team, r.runtime): r for r in reports if r.kind == "katib-trial"}


@pytest.mark.parametrize("stack", STACKS)
def test_a_katib_trial_is_exactly_its_trainjob_path(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    reports = synthesized[stack].jobs
    trials = _trials(reports)
    assert bool(trials) is synthesized[stack].config.katib.enabled
    jobs = {(r.team, r.runtime): r for r in reports if r.kind in ("trainjob", "legacy-job")}
    for key, trial in trials.items():
        path = jobs[key]
        if path.runtime.startswith("mpi-") and path.kind == "trainjob":
            # its primary pod serves SSH: test_an_mpi_trial_is_not_offered_for_want_of_metrics
            assert not (trial.offered or trial.runnable), trial
            continue
        assert (trial.runnable, trial.max_nodes, trial.pool) == (
            path.runnable,
            path.max_nodes,
            path.pool,
        )
        kind = TRAINJOB_TRIAL if path.kind == "trainjob" else PYTORCHJOB_TRIAL
        assert any(kind in reason for reason in trial.reasons)


@pytest.mark.parametrize(
    "stack", [s for s in STACKS if stack_data(s).get("katib", {}).get("enabled")]
)
def test_an_mpi_trial_is_not_offered_for_want_of_metrics(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Katib's primary pod of a TrainJob trial is node's index 0, which on an MPI runtime runs
    sshd: no metrics, so no MPI trial is offered, while the MPI TrainJob path stays runnable
    and the stack's offered paths all run (the exit status)."""
    reports = synthesized[stack].jobs
    trials = _trials(reports)
    mpi = {k: t for k, t in trials.items() if k[1].startswith("mpi-")}
    assert mpi, "the stack has MPI runtimes"
    for (team, runtime), trial in mpi.items():
        assert not trial.offered and not trial.runnable and trial.max_nodes == 0, trial
        assert any("runs sshd" in r and "reads no metrics" in r for r in trial.reasons)
        (path,) = [r for r in reports if (r.kind, r.team, r.runtime) == ("trainjob", team, runtime)]
        assert path.runnable, path
    assert all_runnable(reports)


def test_a_trial_is_judged_by_its_runtimes_shape_not_its_name(
    synthesized: dict[str, StackResult],
) -> None:
    """A torch runtime whose node pods serve SSH instead loses its trials; one without a node
    job too."""
    view = _view(synthesized["dev"])
    assert _trials(evaluate_jobs(view))[("ml-dev", "torch-gpu-small")].offered
    (runtime,) = [r for r in view.of_kind("TrainingRuntime", "ml-dev") if name_of(r) == "torch-gpu-small"]  # fmt: skip
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            if container["name"] == "node":
                container["command"] = ["/usr/sbin/sshd"]
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-gpu-small")]
    assert not trial.offered and any("runs sshd" in r for r in trial.reasons), trial
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        job["name"] = "trainer" if job["name"] == "node" else job["name"]
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-gpu-small")]
    assert any("has no replicated job node" in r for r in trial.reasons), trial


def _katib_config(view: StackView) -> dict[str, Any]:
    (config_map,) = [c for c in view.of_kind("ConfigMap") if name_of(c) == CONFIG_MAP]
    return config_map


def test_a_trial_fails_with_its_trainjob_path_and_without_trainjob_trials(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    view = _view(result)
    (queue,) = [q for q in view.of_kind("Queue") if name_of(q) == "ml-dev"]
    queue["spec"]["capability"][GPU] = "0"
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-gpu-small")]
    assert not trial.runnable
    assert any("torch-gpu-small jobs, and that path is not runnable" in r for r in trial.reasons)
    assert _trials(evaluate_jobs(view))[("ml-dev", "torch-trn1")].runnable
    config_map = _katib_config(view)
    katib = load_yaml(config_map["data"][CONFIG_KEY])
    katib["init"]["controller"]["trialResources"] = ["Job.v1.batch"]
    config_map["data"][CONFIG_KEY] = yaml.safe_dump(katib)
    refused = _trials(evaluate_jobs(view))[("ml-dev", "torch-trn1")]
    assert not refused.runnable
    assert any("lists Job.v1.batch, not TrainJob" in r for r in refused.reasons)


def _collector_requests(view: StackView, requests: dict[str, str]) -> None:
    config_map = _katib_config(view)
    katib = load_yaml(config_map["data"][CONFIG_KEY])
    for collector in katib["runtime"]["metricsCollectors"]:
        collector["resources"]["requests"] = dict(requests)
    config_map["data"][CONFIG_KEY] = yaml.safe_dump(katib)


def test_the_metrics_collector_joins_the_primary_pods_fit_and_the_quota(
    synthesized: dict[str, StackResult],
) -> None:
    """Katib's webhook adds the collector (katib-config's requests) to node 0's pod, a whole
    node on the GPU pools: dev's fits with margin, a collector of 4Gi does not, and a quota
    with room for the gang but not the collector caps the trial."""
    result = synthesized["dev"]
    view = _view(result)
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-gpu-small")]
    assert trial.runnable and any("still fits" in r for r in trial.reasons), trial.reasons
    _collector_requests(view, {"cpu": "50m", "memory": "4Gi"})
    reports = evaluate_jobs(view)
    trial = _trials(reports)[("ml-dev", "torch-gpu-small")]
    assert not trial.runnable and trial.max_nodes == 0, trial
    assert any("primary pod with Katib's metrics collector: fits no instance type" in r for r in trial.reasons)  # fmt: skip
    (path,) = [r for r in reports if (r.kind, r.runtime) == ("trainjob", "torch-gpu-small")]
    assert path.runnable, "the TrainJob itself has no collector"
    # the quota: room for the path's largest gang, not for the collector's CPU on top (without
    # dev's standing RayCluster, which holds some of it)
    view = _view(result)
    view.objects[:] = [o for o in view.objects if o.get("kind") != "RayCluster"]
    (runtime,) = [r for r in view.of_kind("TrainingRuntime", "ml-dev") if name_of(r) == "torch-gpu-small"]  # fmt: skip
    gang_cpu = sum(
        trainer.pod_requests(job.pod, _limit_range_defaults(view, "ml-dev"))["cpu"] * count
        for job, count in Runtime.parse(runtime).gang_pods(path.max_nodes)
    )
    (quota,) = [q for q in view.of_kind("ResourceQuota", "ml-dev") if "requests.cpu" in q["spec"]["hard"]]  # fmt: skip
    quota["spec"]["hard"]["requests.cpu"] = str(gang_cpu + Decimal("0.01"))
    reports = evaluate_jobs(view)
    (path,) = [r for r in reports if (r.kind, r.runtime) == ("trainjob", "torch-gpu-small")]
    trial = _trials(reports)[("ml-dev", "torch-gpu-small")]
    assert path.runnable and trial.runnable and trial.max_nodes == path.max_nodes - 1, trial
    assert any("with the collector's requests: ResourceQuota" in r for r in trial.reasons), trial


def test_members_who_may_not_create_experiments_run_no_trial(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    for role in view.of_kind("ClusterRole"):
        for rule in role.get("rules") or []:
            rule["resources"] = [r for r in rule.get("resources", []) if r != "experiments"]
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-trn1")]
    assert not trial.runnable
    assert any("may not create experiments.kubeflow.org" in r for r in trial.reasons)


def test_a_namespace_without_the_collector_label_reports_no_metrics(
    synthesized: dict[str, StackResult],
) -> None:
    view = _view(synthesized["dev"])
    (namespace,) = [n for n in view.of_kind("Namespace") if name_of(n) == "ml-dev"]
    for key in METRICS_COLLECTOR_INJECTION:
        del namespace["metadata"]["labels"][key]
    trial = _trials(evaluate_jobs(view))[("ml-dev", "torch-trn1")]
    assert not trial.runnable
    assert any("injects no metrics collector" in r for r in trial.reasons)
    # and a team with neither the label nor Experiments has no Katib: no trial paths
    for role in view.of_kind("ClusterRole"):
        for rule in role.get("rules") or []:
            rule["resources"] = [r for r in rule.get("resources", []) if r != "experiments"]
    assert not any(team == "ml-dev" for team, _ in _trials(evaluate_jobs(view)))
