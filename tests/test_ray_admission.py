"""Ray objects at admission (issue 42, item 6): gangs that fit their pools, heads inside the
cluster, templates held to the tenant pods' rules, each through the policies' own CEL."""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest

from components import kuberay, versions
from components.cluster import SYSTEM_TOLERATION
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.platform import stack_gang_limits
from components.tenancy import QUEUE_POLICY, RAY_TEMPLATE_RESOURCES
from components.tenant_api import RAY_GANG_POLICY
from components.tenant_pods import TENANT_PODS_POLICY
from synth.jobs.admission import admit
from synth.pods import ray_pods
from synth.run import StackResult
from tests.test_kuberay import _examples, _kuberays_pod, _policy, _team_namespace

POOL: Final = "gpu-small"
"""dev's GPU pool of 1-GPU nodes (components.platform.stack_gang_limits), one held by its
standing Ray cluster."""


def _cluster(result: StackResult, workers: int) -> dict[str, Any]:
    """A RayCluster of dev's team with one whole-node worker group of ``workers`` on POOL."""
    config = result.config
    pool = config.pool(POOL)
    assert pool is not None
    team = config.teams[0].name
    job = kuberay.ray_job("train", pool, team=team, image=versions.RAY_IMAGE, workers=workers,
                          entrypoint="python train.py", checkpoints=None)  # fmt: skip
    return {"apiVersion": kuberay.RAY_API, "kind": "RayCluster", "metadata": job["metadata"],
            "spec": job["spec"]["rayClusterSpec"]}  # fmt: skip


def _as(kind: str, cluster: dict[str, Any]) -> dict[str, Any]:
    """``cluster``'s spec inside a RayJob (``rayClusterSpec``) or RayService
    (``rayClusterConfig``)."""
    if kind == "RayCluster":
        return cluster
    field = kuberay.CLUSTER_SPEC_FIELDS[kind]
    assert field is not None
    spec: dict[str, Any] = {field: cluster["spec"]}
    if kind == "RayJob":
        spec["entrypoint"] = "python train.py"
    return {**cluster, "kind": kind, "spec": spec}


def test_a_ray_gang_larger_than_its_pool_is_refused(synthesized: dict[str, StackResult]) -> None:
    """minReplicas x numOfHosts of the groups on a pool (KubeRay's CalculateMinReplicas) may
    not exceed the nodes the pool launches; suspended and unpinned groups do not count."""
    result = synthesized["dev"]
    limits = stack_gang_limits(result.config)
    (standing,) = limits.standing[POOL]  # dev's interactive cluster holds nodes of the pool
    limit = limits.pool_nodes[POOL] - standing[2]
    assert limit >= 1
    policy = _policy(result, RAY_GANG_POLICY)
    fits = _cluster(result, limit)
    namespace = _team_namespace(result, fits["metadata"]["namespace"])
    assert admit(policy, fits, namespace) == (True, None)
    too_big = _cluster(result, limit + 1)
    for kind in ("RayCluster", "RayJob", "RayService"):
        ok, message = admit(policy, _as(kind, too_big), namespace)
        assert not ok and message, kind
        assert f"pool {POOL} launches at most {limits.pool_nodes[POOL]} nodes" in message
        assert f"held by standing Ray clusters {standing[0]}/{standing[1]}" in message, message
        assert f"{kind} train" in message
    # the standing cluster itself is judged against what the others leave it, not less
    itself = _cluster(result, limit + standing[2])
    itself["metadata"]["name"] = standing[1]
    assert admit(policy, itself, namespace) == (True, None)
    assert not admit(policy, _as("RayJob", itself), namespace)[0]  # a RayJob of that name is not
    # numOfHosts multiplies: ceil(limit / 2) replicas of two hosts each exceed it by one
    hosts = copy.deepcopy(fits)
    (group,) = hosts["spec"]["workerGroupSpecs"]
    group.update(numOfHosts=2, minReplicas=limit // 2 + 1)
    assert not admit(policy, hosts, namespace)[0]
    # a suspended group is no part of the gang
    suspended = copy.deepcopy(too_big)
    suspended["spec"]["workerGroupSpecs"][0]["suspend"] = True
    assert admit(policy, suspended, namespace) == (True, None)
    # a group without a pool selector goes wherever it fits: no pool is provably too small
    unpinned = copy.deepcopy(too_big)
    del unpinned["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    assert admit(policy, unpinned, namespace) == (True, None)


@pytest.mark.parametrize(
    ("kind", "where", "service_type"),
    [
        ("RayCluster", "serviceType", "NodePort"),
        ("RayJob", "serviceType", "LoadBalancer"),
        ("RayService", "headService", "LoadBalancer"),
    ],
)
def test_a_head_service_outside_the_cluster_is_refused(
    synthesized: dict[str, StackResult], kind: str, where: str, service_type: str
) -> None:
    result = synthesized["dev"]
    policy = _policy(result, RAY_GANG_POLICY)
    cluster = _cluster(result, 1)
    namespace = _team_namespace(result, cluster["metadata"]["namespace"])
    exposed = copy.deepcopy(cluster)
    head = exposed["spec"]["headGroupSpec"]
    if where == "serviceType":
        head["serviceType"] = service_type
    else:  # a custom head Service's own type wins over serviceType (service.go)
        head.update(serviceType="ClusterIP", headService={"spec": {"type": service_type}})
    ok, message = admit(policy, _as(kind, exposed), namespace)
    assert not ok and message and f"head Service is {service_type}" in message, message
    head.pop("headService", None)
    head["serviceType"] = "ClusterIP"
    assert admit(policy, _as(kind, exposed), namespace) == (True, None)


def _example_objects() -> dict[str, dict[str, Any]]:
    """The GPU example of docs/how-to/run-raytrain.md (the builders' RayJob, with the team's
    claim and checkpoints), and its cluster spec as a RayCluster and a RayService."""
    job = _examples()["gpu"]
    cluster = {"apiVersion": kuberay.RAY_API, "kind": "RayCluster", "metadata": job["metadata"],
               "spec": job["spec"]["rayClusterSpec"]}  # fmt: skip
    return {"RayCluster": cluster, "RayJob": job, "RayService": _as("RayService", cluster)}


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = next(
        t["spec"] for where, t in kuberay.ray_pod_templates(obj["kind"], obj["spec"])
        if "workerGroupSpecs" in where
    )  # fmt: skip
    return spec


def _head(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = next(iter(kuberay.ray_pod_templates(obj["kind"], obj["spec"])))[1][
        "spec"
    ]
    return spec


def _system_toleration(obj: dict[str, Any]) -> None:
    _worker(obj)["tolerations"].append(SYSTEM_TOLERATION)


def _node_name(obj: dict[str, Any]) -> None:
    _head(obj)["nodeName"] = "ip-10-0-0-1.ec2.internal"


def _submitter_priority(obj: dict[str, Any]) -> None:
    obj["spec"]["submitterPodTemplate"]["spec"]["priorityClassName"] = "system-node-critical"


def _binds_privileged_ports(obj: dict[str, Any]) -> None:
    _worker(obj)["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_BIND_SERVICE"]}


def _bare_autoscaler(obj: dict[str, Any]) -> None:
    cluster = kuberay.ray_cluster_spec(obj["kind"], obj["spec"])
    cluster["enableInTreeAutoscaling"] = True  # type: ignore[index]


# (kind, policy, change, words in the refusal)
TEMPLATE_CASES: Final = [
    ("RayCluster", TENANT_PODS_POLICY, _system_toleration, "toleration not allowed"),
    ("RayService", TENANT_PODS_POLICY, _node_name, "spec.nodeName is not allowed"),
    ("RayJob", TENANT_PODS_POLICY, _submitter_priority, "priorityClassName"),
    ("RayJob", LUSTRE_BOUNDARY_POLICY, _binds_privileged_ports, "port below 1024"),
    ("RayCluster", LUSTRE_BOUNDARY_POLICY, _bare_autoscaler, "enableInTreeAutoscaling"),
]


def test_ray_templates_meet_the_tenant_pod_rules_at_create(
    synthesized: dict[str, StackResult],
) -> None:
    """The builders' Ray objects pass every template-reading policy; a bad template (head,
    worker group, submitter, the autoscaler KubeRay adds) is refused on the Ray object."""
    result = synthesized["dev"]
    objects = _example_objects()
    namespace = _team_namespace(result, objects["RayJob"]["metadata"]["namespace"])
    for policy in (TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY, RAY_GANG_POLICY):
        rules = _policy(result, policy)["matchConstraints"]["resourceRules"]
        assert any(
            r["apiGroups"] == ["ray.io"] and set(RAY_TEMPLATE_RESOURCES) <= set(r["resources"])
            for r in rules
        ), policy
    for policy in (TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY):
        for kind, obj in objects.items():
            assert admit(_policy(result, policy), obj, namespace) == (True, None), (policy, kind)
    for kind, policy, change, words in TEMPLATE_CASES:
        bad = copy.deepcopy(objects[kind])
        change(bad)
        ok, message = admit(_policy(result, policy), bad, namespace)
        assert not ok and message and words in message, (kind, policy, message)
    # the pods KubeRay makes of them, a worker's wait-gcs-ready init container included
    job = objects["RayJob"]
    for made in ray_pods(job):
        pod = _kuberays_pod(job, {"spec": made["spec"]})
        for policy in (TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY, QUEUE_POLICY):
            assert admit(_policy(result, policy), pod, namespace) == (True, None), policy
    # an autoscaler that drops every capability, as the runtimes' containers do, passes
    scaled = copy.deepcopy(objects["RayCluster"])
    scaled["spec"].update(enableInTreeAutoscaling=True, autoscalerOptions={
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}})  # fmt: skip
    assert admit(_policy(result, LUSTRE_BOUNDARY_POLICY), scaled, namespace) == (True, None)
