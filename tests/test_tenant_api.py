"""What a member may not create (issue 39, items 2, 3's DaemonSets, 5 and 6), proven on the
synthesized ValidatingAdmissionPolicies of every stack: each attack refused and the legitimate
object beside it admitted, by the policy's own CEL (``admit``, cel-python)."""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest

from components.tenant_api import (
    GANG_SIZE_POLICY,
    INTERNAL_ANNOTATION,
    LEAF_QUEUE_POLICY,
    SCHEME_ANNOTATION,
    SERVICE_POLICY,
    TENANT_WRITES_POLICY,
    service_exposure_policy,
)
from synth.engine import ResourceRecord
from synth.jobs.admission import admit
from synth.jobs.model import evaluate_jobs
from synth.jobs.rbac import allowed
from synth.jobs.view import StackView, name_of
from synth.run import StackResult
from tests.conftest import STACKS
from tests.test_admission_policies import BINDING

POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
TEAM_LABEL: Final = "trainingplatform.io/team"
POOL_LABEL: Final = "trainingplatform.io/pool"


def _records(result: StackResult, type_: str) -> list[ResourceRecord]:
    return [r for r in result.records if r.type == type_]


def _policy(result: StackResult, name: str) -> dict[str, Any]:
    (record,) = [r for r in _records(result, POLICY) if r.inputs["metadata"]["name"] == name]
    spec: dict[str, Any] = record.inputs["spec"]
    return spec


def _binding(result: StackResult, name: str) -> dict[str, Any]:
    (record,) = [r for r in _records(result, BINDING) if r.inputs["metadata"]["name"] == name]
    spec: dict[str, Any] = record.inputs["spec"]
    return spec


def _team(result: StackResult) -> tuple[dict[str, Any], list[str], list[str]]:
    """The first team's Namespace object and its member and admin groups (its RoleBindings)."""
    namespaces = [
        r.inputs
        for r in _records(result, "kubernetes:core/v1:Namespace")
        if TEAM_LABEL in (r.inputs["metadata"].get("labels") or {})
    ]
    assert namespaces, "every stack has a team"
    namespace = namespaces[0]
    name = namespace["metadata"]["name"]
    groups: dict[str, list[str]] = {"team-members": [], "team-admins": []}
    for record in _records(result, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"):
        metadata = record.inputs["metadata"]
        if metadata.get("namespace") == name and metadata["name"] in groups:
            groups[metadata["name"]] = [s["name"] for s in record.inputs["subjects"]]
    return namespace, groups["team-members"], groups["team-admins"]


# --------------------------------------------------------------------------- item 2: Services


def _in_team(result: StackResult, policy_name: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the policy's spec, a team's Namespace as the API server gives it, its name)."""
    namespace, _, _ = _team(result)
    return _policy(result, policy_name), namespace, namespace["metadata"]["name"]


def _service(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "rendezvous", "namespace": namespace},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 29500}], **spec},
    }


def _internal(service: dict[str, Any]) -> dict[str, Any]:
    service = copy.deepcopy(service)
    service["metadata"]["annotations"] = {
        INTERNAL_ANNOTATION: "true",
        SCHEME_ANNOTATION: "internal",
    }
    return service


@pytest.mark.parametrize("stack", STACKS)
def test_team_services_stay_inside_the_cluster(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, SERVICE_POLICY)
    assert _binding(result, SERVICE_POLICY)["validationActions"] == ["Deny"]
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["services"] and set(rule["operations"]) == {"CREATE", "UPDATE"}
    namespace, _, _ = _team(result)
    name = namespace["metadata"]["name"]
    plain = _service(name)
    assert admit(policy, plain, namespace) == (True, None)
    assert admit(policy, _service(name, type="ClusterIP", clusterIP="None"), namespace)[0]
    attacks = {
        "external IP": _service(name, externalIPs=["10.0.0.2"]),
        "node port": _service(name, type="NodePort"),
        "public load balancer": _service(name, type="LoadBalancer"),
        # the stacks' teams are not allowed internal load balancers (the default)
        "internal load balancer": _internal(_service(name, type="LoadBalancer")),
    }
    for what, service in attacks.items():
        ok, message = admit(policy, service, namespace)
        assert not ok and message, what
        # the same change as an UPDATE of an admitted ClusterIP Service
        assert not admit(policy, service, namespace, old=plain)[0], what
    assert "CVE-2020-8554" in (admit(policy, attacks["external IP"], namespace)[1] or "")


def test_an_internal_load_balancer_only_where_config_allows_it() -> None:
    """The config key: an allowed team gets an internal one, and nothing that faces outward."""
    policy = service_exposure_policy(team_label=TEAM_LABEL, internal_load_balancers=["a"])
    allowed = {"metadata": {"name": "a", "labels": {TEAM_LABEL: "a"}}}
    other = {"metadata": {"name": "b", "labels": {TEAM_LABEL: "b"}}}
    internal = _internal(_service("a", type="LoadBalancer"))
    assert admit(policy, internal, allowed) == (True, None)
    assert not admit(policy, internal, other)[0]
    public = copy.deepcopy(internal)
    public["metadata"]["annotations"][SCHEME_ANNOTATION] = "internet-facing"
    assert not admit(policy, public, allowed)[0]
    classed = copy.deepcopy(internal)
    classed["spec"]["loadBalancerClass"] = "service.k8s.aws/nlb"
    assert not admit(policy, classed, allowed)[0]
    assert not admit(policy, _service("a", type="LoadBalancer"), allowed)[0]
    with_ip = copy.deepcopy(internal)
    with_ip["spec"]["externalIPs"] = ["10.0.0.2"]
    assert not admit(policy, with_ip, allowed)[0]


# ------------------------------------------------- item 2 (NetworkPolicies) and 3 (DaemonSets)


@pytest.mark.parametrize("stack", STACKS)
def test_members_do_not_write_network_policies_or_daemon_sets(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, TENANT_WRITES_POLICY)
    assert _binding(result, TENANT_WRITES_POLICY)["validationActions"] == ["Deny"]
    rules = {
        r["resources"][0]: set(r["operations"]) for r in policy["matchConstraints"]["resourceRules"]
    }
    assert rules == {
        "networkpolicies": {"CREATE", "UPDATE", "DELETE"},
        "daemonsets": {"CREATE", "UPDATE"},
    }
    namespace, members, admins = _team(result)
    assert members and admins, "the test needs both kinds of group"
    name = namespace["metadata"]["name"]
    # the platform's own NetworkPolicy of the namespace, as synthesized
    (network_policy,) = [
        r.inputs
        for r in _records(result, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"].get("namespace") == name
        and r.inputs["metadata"]["name"] == "default-deny-ingress"
    ]
    network_policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        **network_policy,
    }
    opened = copy.deepcopy(network_policy)
    opened["spec"]["ingress"] = [{}]
    member = [members[0], "system:authenticated"]
    admin = [admins[0], "system:authenticated"]
    deployer = ["system:masters", "system:authenticated"]
    for groups in (member, [*member, "another-teams-admins"]):
        assert not admit(policy, network_policy, namespace, user_groups=groups)[0]
        assert not admit(policy, opened, namespace, old=network_policy, user_groups=groups)[0]
        ok, message = admit(
            policy, network_policy, namespace, user_groups=groups, operation="DELETE"
        )
        assert not ok and message and "team admins only" in message
    # the platform writes them (no team group), and the team's admins may change them
    for groups in (deployer, admin, [*admin, members[0]]):
        assert admit(policy, network_policy, namespace, user_groups=groups) == (True, None)
        assert admit(policy, opened, namespace, old=network_policy, user_groups=groups)[0]
        assert admit(policy, network_policy, namespace, user_groups=groups, operation="DELETE")[0]
    assert admit(policy, network_policy, namespace) == (True, None)  # a user without groups
    # a service account of the namespace (which any member can run a pod as) writes none,
    # whatever role an admin bound it to; the platform's controllers' accounts live elsewhere
    for account in (f"system:serviceaccount:{name}:gitops", f"system:serviceaccount:{name}:x"):
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{name}"]
        assert not admit(policy, network_policy, namespace, username=account, user_groups=groups)[0]
        assert not admit(policy, opened, namespace, old=network_policy, username=account)[0]
    controller = "system:serviceaccount:kube-system:generic-garbage-collector"
    assert admit(policy, network_policy, namespace, username=controller, operation="DELETE")[0]
    daemon_set = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "holder", "namespace": name},
        "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}},
    }
    # whoever asks: a team admin, a member, one of the team's service accounts, the deployer
    for groups in (member, admin, deployer, []):
        ok, message = admit(policy, daemon_set, namespace, user_groups=groups)
        assert not ok and message and "DaemonSets" in message
        assert not admit(policy, daemon_set, namespace, old=daemon_set, user_groups=groups)[0]
    account = f"system:serviceaccount:{name}:x"
    assert not admit(policy, daemon_set, namespace, username=account)[0]


@pytest.mark.parametrize("stack", STACKS)
def test_members_roles_grant_no_daemon_set_or_network_policy_writes(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """RBAC as the synthesized roles grant it: a member's verbs lack both, and keep the rest."""
    view = StackView.from_records(synthesized[stack].records)
    namespace, members, _ = _team(synthesized[stack])
    name = namespace["metadata"]["name"]
    member = ("Group", members[0])
    # the model reads the stack's own roles; of the built-in ones only ``view`` (reads) may be
    # bound, since ``edit`` and ``admin`` write DaemonSets and NetworkPolicies
    defined = {name_of(role) for role in view.of_kind("ClusterRole")}
    bound = {
        binding["roleRef"]["name"]
        for binding in view.of_kind("RoleBinding", name)
        if any(s.get("name") == members[0] for s in binding.get("subjects") or [])
    }
    assert bound - defined == {"view"}, bound
    for verb in ("create", "update", "patch", "delete"):
        for group, resource in (
            ("apps", "daemonsets"),
            ("extensions", "daemonsets"),
            ("networking.k8s.io", "networkpolicies"),
            ("extensions", "networkpolicies"),
        ):
            assert not allowed(view, member, verb, group, resource, namespace=name), (
                verb,
                resource,
            )
    # what a member does every day: edit's other writes stay, in its own namespace only
    for group, resource in (
        ("", "pods"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "persistentvolumeclaims"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("batch", "jobs"),
        ("trainer.kubeflow.org", "trainjobs"),
    ):
        assert allowed(view, member, "create", group, resource, namespace=name), resource
        assert not allowed(view, member, "create", group, resource, namespace="kube-system")
    assert allowed(view, member, "create", "", "pods/exec", namespace=name)


# --------------------------------------------------------------------------- item 5: gang sizes


def _node_limit(result: StackResult, pool: str) -> int:
    (node_pool,) = [
        r.inputs
        for r in _records(result, "kubernetes:karpenter.sh/v1:NodePool")
        if r.inputs["metadata"]["name"] == pool
    ]
    return int(node_pool["spec"]["limits"]["nodes"])


def _team_runtimes(result: StackResult) -> list[dict[str, Any]]:
    return [
        r.inputs
        for r in result.records
        if r.inputs.get("kind") == "TrainingRuntime"
        and TEAM_LABEL in (r.inputs["metadata"].get("labels") or {})
    ]


def _trainjob(namespace: str, runtime: str, nodes: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}}
    if nodes is not None:
        spec["trainer"] = {"numNodes": nodes}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": namespace},
        "spec": spec,
    }


def _figures(result: StackResult) -> dict[tuple[str | None, str], int]:
    """(namespace, runtime) -> ``synth jobs``' maxNodes, for the runnable team runtimes: the
    team's own limit, which the gang-size policy holds a TrainJob to."""
    return {
        (r.namespace, r.runtime): r.max_nodes
        for r in evaluate_jobs(StackView.from_records(result.records))
        if r.kind == "trainjob" and r.runnable
    }


def _pod_template(pool: str, resource: str, count: int) -> dict[str, Any]:
    return {
        "spec": {
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [
                {"name": "node", "image": "x", "resources": {"limits": {resource: str(count)}}}
            ],
        }
    }


@pytest.mark.parametrize("stack", STACKS)
def test_no_gang_larger_than_its_pool(synthesized: dict[str, StackResult], stack: str) -> None:
    result = synthesized[stack]
    policy = _policy(result, GANG_SIZE_POLICY)
    assert _binding(result, GANG_SIZE_POLICY)["validationActions"] == ["Deny"]
    runtimes = _team_runtimes(result)
    assert runtimes
    figures = _figures(result)
    for runtime in runtimes:
        metadata = runtime["metadata"]
        namespace = {"metadata": {"name": metadata["namespace"], "labels": metadata["labels"]}}
        name = metadata["name"]
        pool_limit = _node_limit(result, metadata["labels"][POOL_LABEL])
        limit = figures.get((metadata["namespace"], name), pool_limit)
        assert limit <= pool_limit
        at_limit = _trainjob(metadata["namespace"], name, limit)
        assert admit(policy, at_limit, namespace) == (True, None), name
        ok, message = admit(policy, _trainjob(metadata["namespace"], name, limit + 1), namespace)
        assert not ok and message and f"at most {limit} nodes" in message, name
        # numNodes left out: the runtime's own
        default = runtime["spec"]["mlPolicy"]["numNodes"]
        assert admit(policy, _trainjob(metadata["namespace"], name, None), namespace)[0] is (
            default <= limit
        )
        # an update that grows it
        grown = _trainjob(metadata["namespace"], name, limit + 1)
        assert not admit(policy, grown, namespace, old=at_limit)[0]


@pytest.mark.parametrize("stack", STACKS)
def test_each_teams_limit_is_the_figure_synth_jobs_reports(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Past the team's quota or queue a gang never starts either: for every runnable
    (team, runtime) of ``synth jobs``, its ``maxNodes`` is admitted and one more refused."""
    result = synthesized[stack]
    policy = _policy(result, GANG_SIZE_POLICY)
    reports = [
        r
        for r in evaluate_jobs(StackView.from_records(result.records))
        if r.kind == "trainjob" and r.offered and r.runnable
    ]
    assert reports, "every stack has a runnable team runtime"
    namespaces = {
        r.inputs["metadata"]["name"]: {"metadata": r.inputs["metadata"]}
        for r in _records(result, "kubernetes:core/v1:Namespace")
    }
    for report in reports:
        assert report.namespace
        namespace = namespaces[report.namespace]
        job = _trainjob(report.namespace, report.runtime, report.max_nodes)
        assert admit(policy, job, namespace) == (True, None), report
        ok, message = admit(
            policy, _trainjob(report.namespace, report.runtime, report.max_nodes + 1), namespace
        )
        assert not ok and message and f"at most {report.max_nodes} nodes" in message, report


@pytest.mark.parametrize("stack", STACKS)
def test_a_runtime_patch_to_a_smaller_pool_is_held_to_it(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, GANG_SIZE_POLICY)
    runtime = _team_runtimes(result)[0]
    metadata = runtime["metadata"]
    namespace = {"metadata": {"name": metadata["namespace"], "labels": metadata["labels"]}}
    pool = metadata["labels"][POOL_LABEL]
    limit = _figures(result).get(
        (metadata["namespace"], metadata["name"]), _node_limit(result, pool)
    )
    job = _trainjob(metadata["namespace"], metadata["name"], limit)
    job["spec"]["runtimePatches"] = [
        {
            "manager": "me",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {
                    "nodeSelector": {POOL_LABEL: pool}}}}}}
            ]}}},
        }
    ]  # fmt: skip
    assert admit(policy, job, namespace) == (True, None)
    job["spec"]["trainer"]["numNodes"] = limit + 1
    assert not admit(policy, job, namespace)[0]


ACCELERATORS: Final = ("nvidia.com/gpu", "aws.amazon.com/neuron")


def _accelerated_pools(result: StackResult) -> dict[str, tuple[str, int, int]]:
    """Pool -> (accelerator resource, devices per node, node limit), read from the synthesized
    Kubernetes NodePools (not Slurm's, which team pods may not use)."""
    pools: dict[str, tuple[str, int, int]] = {}
    for record in _records(result, "kubernetes:karpenter.sh/v1:NodePool"):
        spec = record.inputs["spec"]
        labels = spec["template"]["metadata"]["labels"]
        if "trainingplatform.io/reserved-for" in labels:
            continue
        for resource in ACCELERATORS:
            if resource in spec["limits"]:
                nodes = int(spec["limits"]["nodes"])
                per_node = int(spec["limits"][resource]) // nodes
                pools[record.inputs["metadata"]["name"]] = (resource, per_node, nodes)
    assert pools, "every stack has an accelerated pool"
    return pools


def _unpinned_template(resource: str, count: int) -> dict[str, Any]:
    template = _pod_template("x", resource, count)
    del template["spec"]["nodeSelector"]
    return template


def _pytorchjob(namespace: str, workers: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "legacy", "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": copy.deepcopy(template)},
            "Worker": {"replicas": workers, "template": copy.deepcopy(template)},
        }},
    }  # fmt: skip


def _volcano_job(namespace: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    """A Volcano Job of a master and ``replicas - 1`` workers, all of them the gang."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "vc", "namespace": namespace},
        "spec": {
            "queue": namespace,
            "minAvailable": replicas,
            "tasks": [
                {"name": "master", "replicas": 1, "template": copy.deepcopy(template)},
                {"name": "w", "replicas": replicas - 1, "template": copy.deepcopy(template)},
            ],
        },
    }


def _pod_group(namespace: str, resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": namespace},
        "spec": {"queue": namespace, "minMember": 1, "minResources": resources},
    }


@pytest.mark.parametrize("stack", STACKS)
def test_legacy_and_volcano_jobs_larger_than_their_pool_are_refused(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Every role (task) pinned to a pool adds up: a Master and ``limit`` whole-node Workers
    are one node too many, wherever the extra node is asked for."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, GANG_SIZE_POLICY)
    for pool, (resource, per_node, limit) in _accelerated_pools(result).items():
        whole = _pod_template(pool, resource, per_node)
        for make, label in ((_pytorchjob, "PyTorchJob legacy"), (_volcano_job, "Job vc")):
            # the pytorchjob's count is Workers (plus its Master), the volcano job's all pods
            fits = limit - 1 if make is _pytorchjob else limit
            assert admit(policy, make(name, fits, whole), namespace) == (True, None), pool
            ok, message = admit(policy, make(name, fits + 1, whole), namespace)
            assert not ok and message, (pool, label)
            assert f"{label} asks for {(limit + 1) * per_node} {resource} on pool {pool}" in (
                message
            )
            assert f"at most {limit} nodes" in message and f"({limit + 1} nodes" in message
            # an update that grows it; one that keeps the spec (a status write) is not judged
            assert not admit(policy, make(name, fits + 1, whole), namespace, old=make(
                name, fits, whole))[0]  # fmt: skip
        # pods that share nodes: twice the pods at half a node each still fit, one more not
        if per_node % 2 == 0:
            half = _pod_template(pool, resource, per_node // 2)
            assert admit(policy, _volcano_job(name, 2 * limit, half), namespace) == (True, None)
            assert not admit(policy, _volcano_job(name, 2 * limit + 1, half), namespace)[0]
        # a CPU pod pinned to the pool asks for no accelerator: not counted
        cpu = _pod_template(pool, "cpu", 1)
        assert admit(policy, _volcano_job(name, 10 * limit + 10, cpu), namespace) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
def test_gangs_with_a_smaller_minimum_are_judged_by_it(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Elastic jobs may leave pods pending legitimately: only what they need to start counts."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, GANG_SIZE_POLICY)
    pool, (resource, per_node, limit) = next(iter(_accelerated_pools(result).items()))
    whole = _pod_template(pool, resource, per_node)
    elastic_volcano = _volcano_job(name, limit + 5, whole)
    elastic_volcano["spec"]["minAvailable"] = 1
    assert admit(policy, elastic_volcano, namespace) == (True, None)
    elastic_volcano["spec"]["minAvailable"] = limit + 5
    assert not admit(policy, elastic_volcano, namespace)[0]
    # legacy: a scheduling minimum, or an elastic policy's minReplicas
    legacy = _pytorchjob(name, limit + 5, whole)
    legacy["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2}}
    assert admit(policy, legacy, namespace) == (True, None)
    legacy["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = limit + 6
    assert not admit(policy, legacy, namespace)[0]
    elastic = _pytorchjob(name, limit + 5, whole)
    elastic["spec"]["elasticPolicy"] = {"minReplicas": limit - 1, "maxReplicas": limit + 5}
    assert admit(policy, elastic, namespace) == (True, None)
    elastic["spec"]["elasticPolicy"]["minReplicas"] = limit
    ok, message = admit(policy, elastic, namespace)
    assert not ok and message and f"asks for {(limit + 1) * per_node} {resource}" in message
    del elastic["spec"]["elasticPolicy"]["minReplicas"]  # the fewest: one Worker
    assert admit(policy, elastic, namespace) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
def test_gangs_naming_no_pool_are_held_to_every_pool_together(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A job without a pool selector and a PodGroup (which names no pool) may not ask for more
    of an accelerator than all pools offering it hold; their pod counts are not judged."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, GANG_SIZE_POLICY)
    totals: dict[str, tuple[int, int]] = {}
    for resource, per_node, limit in _accelerated_pools(result).values():
        total, smallest = totals.get(resource, (0, per_node))
        totals[resource] = (total + per_node * limit, min(smallest, per_node))
    for resource, (total, _) in totals.items():
        one = _unpinned_template(resource, 1)
        for make, label in ((_pytorchjob, "PyTorchJob legacy"), (_volcano_job, "Job vc")):
            fits = total - 1 if make is _pytorchjob else total
            assert admit(policy, make(name, fits, one), namespace) == (True, None), resource
            ok, message = admit(policy, make(name, fits + 1, one), namespace)
            assert not ok and message, (resource, label)
            assert f"{label} asks for {total + 1} {resource} in all" in message
            assert f"at most {total}" in message
        for key in (resource, f"requests.{resource}"):
            for value in (total, str(total)):
                group = _pod_group(name, {key: value, "cpu": "4"})
                assert admit(policy, group, namespace) == (True, None), key
            ok, message = admit(policy, _pod_group(name, {key: str(total + 1)}), namespace)
            assert not ok and message and f"PodGroup pg asks for {total + 1}" in message
            assert not admit(
                policy, _pod_group(name, {key: total + 1}), namespace,
                old=_pod_group(name, {key: total}),
            )[0]  # fmt: skip
    # a PodGroup of many CPU pods: members are not nodes
    many = _pod_group(name, {"cpu": "400"})
    many["spec"]["minMember"] = 1000
    assert admit(policy, many, namespace) == (True, None)
    # its status rewritten by Volcano, spec unchanged: not judged even if it was too big
    stuck = _pod_group(name, {next(iter(totals)): 10**6})
    assert admit(policy, stuck, namespace, old=copy.deepcopy(stuck)) == (True, None)


def _annotated(kind: str, namespace: str, members: str | None, template: dict[str, Any]) -> Any:
    """A workload whose pods Volcano's podgroup controller gangs: ``members`` is its
    ``scheduling.volcano.sh/group-min-member`` (None: not annotated)."""
    annotations = {} if members is None else {"scheduling.volcano.sh/group-min-member": members}
    group = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    spec: dict[str, Any] = {"replicas": 1000, "template": copy.deepcopy(template)}
    metadata: dict[str, Any] = {"name": "w", "namespace": namespace, "annotations": annotations}
    if kind == "CronJob":
        job = {"metadata": {"annotations": annotations}, "spec": spec}
        return {"apiVersion": group, "kind": kind, "metadata": {"name": "w"},
                "spec": {"schedule": "@daily", "jobTemplate": job}}  # fmt: skip
    return {"apiVersion": group, "kind": kind, "metadata": metadata, "spec": spec}


@pytest.mark.parametrize("stack", STACKS)
def test_workloads_ganged_by_annotation_are_held_to_their_pool(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Volcano's podgroup controller makes a PodGroup of ``group-min-member`` pods for a
    Deployment's, StatefulSet's or Job's pods: that many whole-node pods may not outgrow the
    pool; the annotation is judged on its own update too; without it the pods are no gang."""
    result = synthesized[stack]
    policy, namespace, name = _in_team(result, GANG_SIZE_POLICY)
    for pool, (resource, per_node, limit) in _accelerated_pools(result).items():
        whole = _pod_template(pool, resource, per_node)
        for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob"):
            fits = _annotated(kind, name, str(limit), whole)
            assert admit(policy, fits, namespace) == (True, None), (pool, kind)
            too_big = _annotated(kind, name, str(limit + 1), whole)
            ok, message = admit(policy, too_big, namespace)
            assert not ok and message, (pool, kind)
            assert f"{kind} w asks for {(limit + 1) * per_node} {resource} on pool {pool}" in (
                message
            )
            # only the annotation changes (kubectl annotate): judged all the same
            assert not admit(policy, too_big, namespace, old=fits)[0], (pool, kind)
            # no annotation: each pod its own group of one, however many replicas
            assert admit(policy, _annotated(kind, name, None, whole), namespace) == (True, None)
            # a value Volcano cannot read counts as 1 there: never refused
            assert admit(policy, _annotated(kind, name, "lots", whole), namespace)[0]


# --------------------------------------------------------------------------- item 6: leaf queues


@pytest.mark.parametrize("stack", STACKS)
def test_no_gang_in_a_queue_with_children_anywhere(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, LEAF_QUEUE_POLICY)
    # bound everywhere: no namespace selector on the policy or its binding
    assert _binding(result, LEAF_QUEUE_POLICY) == {
        "policyName": LEAF_QUEUE_POLICY,
        "validationActions": ["Deny"],
    }
    assert "namespaceSelector" not in policy["matchConstraints"]
    queues = [
        r.inputs
        for r in result.records
        if r.inputs.get("kind") == "Queue"
        and r.inputs.get("apiVersion", "").startswith("scheduling.volcano.sh/")
    ]
    assert queues
    parents = {q["spec"].get("parent", "root") for q in queues} | {"root"}
    leaves = [q["metadata"]["name"] for q in queues if q["metadata"]["name"] not in parents]
    assert leaves
    for namespace in (leaves[0], "default", "kube-system"):
        for kind, api in (("PodGroup", "scheduling.volcano.sh/v1beta1"),
                          ("Job", "batch.volcano.sh/v1alpha1")):  # fmt: skip

            def gang(
                queue: str, kind: str = kind, api: str = api, namespace: str = namespace
            ) -> dict[str, Any]:
                return {"apiVersion": api, "kind": kind,
                        "metadata": {"name": "g", "namespace": namespace},
                        "spec": {"queue": queue, "minMember": 1}}  # fmt: skip

            assert admit(policy, gang(leaves[0])) == (True, None)
            for parent in sorted(parents):
                ok, message = admit(policy, gang(parent))
                assert not ok and message and "child queues" in message, (kind, parent)
                assert not admit(policy, gang(parent), old=gang(leaves[0]))[0]
            # a status update of a gang already in root is not judged (the spec is unchanged)
            stuck = gang("root")
            with_status = {**stuck, "status": {"phase": "Pending"}}
            assert admit(policy, with_status, old=stuck) == (True, None)
