"""What a team member may not create through the API: admission policies as pure builders.

Each builder returns a ValidatingAdmissionPolicy spec (CEL) that
:func:`components.admission.enforced_policy` registers with a ``Deny`` binding; the facts they
need (team groups, pools' node limits, the queue tree) are known at synthesis and written into
the CEL as literals, since a policy's ``paramKind`` would need a CRD of our own.

* :func:`service_exposure_policy`: no Service in a team namespace reaches beyond the cluster
  (external IPs, node ports, internet-facing load balancers);
* :func:`tenant_writes_policy`: NetworkPolicies of a team namespace are the platform's and its
  team admins', DaemonSets nobody of the team's;
* :func:`gang_size_policy`: no gang asks for more nodes than its pool can launch;
* :func:`leaf_queue_policy`: no gang names ``root`` or another queue with children, anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from components.config import NodePoolConfig, TeamConfig
from components.node_pools import POOL_LABEL
from components.tenancy import (
    CREATED_OR_SPEC_CHANGED,
    LEGACY_JOBS,
    team_namespaces,
    team_spec_policy,
    writes,
)

SERVICE_POLICY: Final = "trainingplatform-team-services"
TENANT_WRITES_POLICY: Final = "trainingplatform-team-writes"
GANG_SIZE_POLICY: Final = "trainingplatform-gang-sizes"
LEAF_QUEUE_POLICY: Final = "trainingplatform-leaf-queues"

INTERNAL_ANNOTATION: Final = "service.beta.kubernetes.io/aws-load-balancer-internal"
SCHEME_ANNOTATION: Final = "service.beta.kubernetes.io/aws-load-balancer-scheme"
GROUP_MIN_MEMBER: Final = "scheduling.volcano.sh/group-min-member"
LEGACY_JOB_GROUP: Final = "kubeflow.org"
LEGACY_REPLICA_SPECS: Final = (
    "pytorchReplicaSpecs", "tfReplicaSpecs", "mpiReplicaSpecs", "jaxReplicaSpecs",
    "xgbReplicaSpecs", "paddleReplicaSpecs",
)  # fmt: skip
"""The replica-spec maps of the legacy jobs (kubeflow/training-operator v1.9.4 CRDs), role ->
spec. Named one by one: CEL may not iterate an object's fields, only a map's keys."""


def _cel(value: object) -> str:
    """A CEL literal of ``value`` (strings, ints, bools, lists and maps of them).

    JSON's spelling of these is CEL's, save ``true``/``false``, which CEL spells alike.
    """
    return json.dumps(value, sort_keys=True)


def service_exposure_policy(
    *, team_label: str, internal_load_balancers: list[str]
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: a team's Services stay inside the cluster.

    Refused, on CREATE and UPDATE of a Service in a team namespace:

    * ``spec.externalIPs``: kube-proxy redirects traffic for such an address from every pod and
      node of the cluster to the Service's endpoints (CVE-2020-8554), so a team could take
      another team's rendezvous (29500), the file servers (988) or DNS (53);
    * ``type: NodePort``: a port on every node, outside any NetworkPolicy of the namespace;
    * ``type: LoadBalancer``, unless the team is in ``internal_load_balancers`` and the Service
      asks for an internal load balancer both ways the AWS controllers read it:
      ``service.beta.kubernetes.io/aws-load-balancer-internal: "true"`` (EKS's built-in service
      controller makes an internal load balancer for any value but ``false``) and
      ``service.beta.kubernetes.io/aws-load-balancer-scheme: internal`` (the AWS Load Balancer
      Controller reads this one and calls the other deprecated), and names no
      ``loadBalancerClass`` (which would hand it to a controller with other rules). The public
      subnets are tagged for internet-facing load balancers, so anything else could face the
      internet. Even an internal one allocates node ports (its instance targets need them).

    ClusterIP Services, headless ones included, and ExternalName Services (a DNS alias inside
    the namespace) pass.

    Args:
        team_label: the namespace label that names the team.
        internal_load_balancers: the teams whose config allows internal load balancers
            (``teams[].allowInternalLoadBalancers``).
    """
    team = f"namespaceObject.metadata.labels['{team_label}']"
    annotations = "(has(object.metadata.annotations) ? object.metadata.annotations : {})"
    internal = (
        f"(variables.team in {_cel(sorted(internal_load_balancers))} && "
        f"'{INTERNAL_ANNOTATION}' in {annotations} && "
        f"{annotations}['{INTERNAL_ANNOTATION}'] == 'true' && "
        f"'{SCHEME_ANNOTATION}' in {annotations} && "
        f"{annotations}['{SCHEME_ANNOTATION}'] == 'internal' && "
        "!has(object.spec.loadBalancerClass))"
    )
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["services"],
                }
            ],
        },
        "variables": [
            {"name": "team", "expression": team},
            {
                "name": "type",
                "expression": "has(object.spec.type) ? object.spec.type : 'ClusterIP'",
            },
        ],
        "validations": [
            {
                "expression": "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
                "message": "a team's Service may not set spec.externalIPs: kube-proxy would "
                "send every pod's and node's traffic for those addresses to it (CVE-2020-8554)",
                "reason": "Forbidden",
            },
            {
                "expression": "variables.type != 'NodePort'",
                "message": "a team's Service may not be type NodePort (a port on every node): "
                "use ClusterIP",
                "reason": "Forbidden",
            },
            {
                "expression": f"variables.type != 'LoadBalancer' || {internal}",
                "messageExpression": "variables.team in "
                f"{_cel(sorted(internal_load_balancers))} ? "
                "'a LoadBalancer Service of team ' + variables.team + ' must be internal: "
                f'annotations {INTERNAL_ANNOTATION}: "true" and {SCHEME_ANNOTATION}: '
                "internal, and no spec.loadBalancerClass' : "
                "'team ' + variables.team + ' may not create LoadBalancer Services (the "
                "platform allows internal ones where teams[].allowInternalLoadBalancers is "
                "true): use ClusterIP'",
                "reason": "Forbidden",
            },
        ],
    }


RAY_GANG_POLICY: Final = "trainingplatform-ray-gangs"


RAY_PRIORITY_LABEL: Final = "ray.io/priority-class-name"
"""The label of a RayCluster or RayJob whose value KubeRay gives its PodGroup as
``priorityClassName`` (kuberay v1.7.0 ray-operator/controllers/ray/utils/constant.go,
RayPriorityClassName; batchscheduler/volcano/volcano_scheduler.go, createPodGroup)."""


RAY_POOL_LABELS: Final = (POOL_LABEL, "karpenter.sh/nodepool")
"""The node selector labels that pin a Ray worker group to a pool: the platform's pool label,
which the builders set (components/kuberay.py), or Karpenter's own label of its NodePool's
nodes (kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go, NodePoolLabelKey)."""
HEAD_SERVICE_TYPE: Final = "ClusterIP"


def _ray_group_row(group: str, pools: Mapping[str, int], resources: list[str]) -> str:
    """CEL: a worker group as ``[pool index or -1, pods of its minimum, pod's amounts...]``.

    Its pods are ``minReplicas`` (0 when unset) x ``numOfHosts`` (the CRD's default, 1, when
    unset), as KubeRay counts a gang (kuberay v1.7.0 ray-operator/controllers/ray/utils/util.go,
    CalculateMinReplicas); a suspended group (``suspend: true``) is no part of it.
    """
    template = f"{group}.template"
    selector = f"{template}.spec.nodeSelector"
    index = "-1"
    for label in reversed(RAY_POOL_LABELS):
        index = (
            f"('{label}' in {selector} && {selector}['{label}'] in {_cel(dict(pools))} ? "
            f"{_cel(dict(pools))}[{selector}['{label}']] : {index})"
        )
    pool = f"(has({template}) && has({template}.spec) && has({selector}) ? {index} : -1)"
    pods = (
        f"(has({group}.suspend) && {group}.suspend ? 0 : "
        f"(has({group}.minReplicas) ? {group}.minReplicas : 0) * "
        f"(has({group}.numOfHosts) ? {group}.numOfHosts : 1))"
    )
    amounts = ", ".join([pool, pods, *(_pod_amount(template, r) for r in resources)])
    zeros = ", ".join(["-1", pods, *("0" for _ in resources)])
    return f"(has({template}) && has({template}.spec) ? [{amounts}] : [{zeros}])"


def _ray_pod_classes(cluster: str) -> str:
    """CEL: the ``priorityClassName`` of every pod template of a Ray object that names one.

    The head's and each worker group's of ``cluster`` (the object's RayClusterSpec) and a
    RayJob's submitter's (:func:`components.kuberay.ray_pod_templates` walks the same ones).
    """

    def named(template: str) -> str:
        return (
            f"has({template}.spec) && has({template}.spec.priorityClassName) && "
            f"{template}.spec.priorityClassName != ''"
        )

    head = f"{cluster}.headGroupSpec.template"
    submitter = "object.spec.submitterPodTemplate"
    return (
        f"(has({cluster}.headGroupSpec) && has({head}) && {named(head)} ? "
        f"[{head}.spec.priorityClassName] : []) + "
        f"(has({cluster}.workerGroupSpecs) ? {cluster}.workerGroupSpecs"
        f".filter(g, has(g.template) && {named('g.template')})"
        ".map(g, g.template.spec.priorityClassName) : []) + "
        f"(object.kind == 'RayJob' && has({submitter}) && {named(submitter)} ? "
        f"[{submitter}.spec.priorityClassName] : [])"
    )


def ray_gang_policy(
    *,
    team_label: str,
    allowed: list[str],
    priority_classes: list[str],
    limits: GangLimits | None = None,
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: a Ray gang in a team namespace is the team's kind of gang.

    * A RayJob with ``spec.clusterSelector`` runs on a RayCluster that is already up instead of
      making its own: KubeRay builds no PodGroup for it (kuberay v1.7.0 ray-operator/
      controllers/ray/batchscheduler/volcano/volcano_scheduler.go, handleRayJob and
      CleanupOnCompletion), so its submitter is outside any gang and its work goes to a cluster
      whose gang was sized without it. With Volcano as batch scheduler v1.7.0 also never
      submits it (handleRayJob returns an error on every reconcile), so it would sit in
      Initializing. Refused unless the team's ``ray.allowClusterSelector`` says otherwise.
    * A RayCluster's or RayJob's ``ray.io/priority-class-name`` label becomes its PodGroup's
      ``priorityClassName`` (:data:`RAY_PRIORITY_LABEL`), which orders Volcano's queue and its
      preemption: it must be one of the training priority classes, as a pod's must
      (components/tenant_pods.py). Members cannot write PodGroups themselves; without this the
      label would be a way to any priority class. Every pod template that names a
      ``priorityClassName`` (head, worker groups, a RayJob's submitter) must name the label's,
      and a template that names one needs the label: KubeRay takes the gang's priority from the
      label alone, so pods of ``training-critical`` in a gang without it would queue at
      Volcano priority 0 (:func:`components.kuberay.gang_labels` sets both).

    * A RayCluster, RayJob or RayService whose minimum gang on a pool is more than the pool
      ever launches: KubeRay's PodGroup asks for the head and every worker group's
      ``minReplicas`` x ``numOfHosts`` pods at once (:func:`_ray_group_row`), so such a gang
      pends forever and holds the nodes Karpenter did launch (see :func:`gang_size_policy`).
      Per accelerated pool, the worker groups pinned to it (node selector
      :data:`RAY_POOL_LABELS`) add up pods x each pod's request of the pool's accelerator, which
      may not exceed the pool's node limit x its accelerators per node (a group of whole-node
      workers, as the builders make, may not start more workers than the pool has nodes). A
      group pinned by affinity only, or not pinned at all, is not counted: Karpenter may place
      it on any pool it fits, so no pool is provably too small; the general pools are not
      judged (their pods pack many to a node). Only the first :data:`SUMMED_SETS` groups and
      :data:`SUMMED_CONTAINERS` containers are added: every count errs low.
    * A head Service of a type other than ``ClusterIP`` (``headGroupSpec.serviceType``, or the
      type of a custom ``headGroupSpec.headService``, which KubeRay keeps over the default:
      ray-operator/controllers/ray/common/service.go, BuildServiceForHeadPod and
      setServiceTypeForUserProvidedService): a NodePort or LoadBalancer would put the team's
      dashboard (which runs any job it is sent) and GCS outside the cluster. The Service itself
      is made by the operator, where the service policy would refuse it out of the member's
      sight; here the object is refused when it is written.

    The cluster spec is the RayCluster's ``spec``, a RayJob's ``spec.rayClusterSpec`` and a
    RayService's ``spec.rayClusterConfig`` (:data:`components.kuberay.CLUSTER_SPEC_FIELDS`).
    Label changes are judged as spec changes are (KubeRay reads the labels when it builds the
    PodGroup).

    Args:
        team_label: the namespace label that names the team.
        allowed: the teams whose RayJobs may set ``spec.clusterSelector``.
        priority_classes: the priority classes a team's gang may name.
        limits: the pools' node limits and accelerators (:func:`gang_limits`). Default: none,
            so no pool is judged.
    """
    limits = limits or GangLimits()
    nodes = dict(limits.pool_nodes)
    accelerated = {
        pool: (resource, count)
        for pool, (resource, count) in sorted(limits.pool_accelerators.items())
        if pool in nodes and resource and count > 0
    }
    pool_index = {pool: i for i, pool in enumerate(accelerated)}
    resources = sorted({resource for resource, _ in accelerated.values()})
    cluster = "variables.cluster"
    head = f"{cluster}.headGroupSpec"
    head_service = f"{head}.headService"
    name = "object.kind + ' ' + object.metadata.name"
    pool_variables: list[dict[str, str]] = []
    pool_validations: list[dict[str, str]] = []
    for pool_name, (resource, per_node) in accelerated.items():
        i, k = pool_index[pool_name], resources.index(resource)
        demand = " + ".join(
            f"(size(variables.groups) > {j} && variables.groups[{j}][0] == {i} ? "
            f"variables.groups[{j}][1] * variables.groups[{j}][{2 + k}] : 0)"
            for j in range(SUMMED_SETS)
        )
        pool_variables.append({"name": f"pool{i}", "expression": f"({demand})"})
        # A standing cluster's nodes are no other gang's; the cluster itself is judged
        # against the nodes the others leave it.
        holders = limits.standing.get(pool_name, ())
        held = sum(workers for _, _, workers in holders)
        own = " + ".join(
            f"(object.kind == 'RayCluster' && has(object.metadata.namespace) && "
            f"object.metadata.namespace == '{namespace}' && object.metadata.name == "
            f"'{cluster_name}' ? {workers * per_node} : 0)"
            for namespace, cluster_name, workers in holders
        )
        capacity = (nodes[pool_name] - held) * per_node
        ceiling = f"{capacity} + ({own})" if holders else str(capacity)
        held_text = (
            f" ({held} of them held by standing Ray clusters "
            + ", ".join(f"{namespace}/{cluster_name}" for namespace, cluster_name, _ in holders)
            + ")"
            if holders
            else ""
        )
        pool_validations.append(
            {
                "expression": f"variables.pool{i} <= {ceiling}",
                "messageExpression": f"{name} + ': its worker groups on pool {pool_name} start "
                f"with ' + string(variables.pool{i}) + ' {resource} (minReplicas x numOfHosts "
                f"x the request of each worker: ' + string((variables.pool{i} + {per_node - 1}) / "
                f"{per_node}) + ' nodes of {per_node}); pool {pool_name} launches at most "
                f"{nodes[pool_name]} nodes{held_text}: the gang would pend forever and hold the "
                "nodes it got'",
                "reason": "Invalid",
            }
        )
    labels = "(has({0}.metadata.labels) ? {0}.metadata.labels : {{}})"
    judged = {
        "name": "created-or-spec-or-labels-changed",
        "expression": f"{CREATED_OR_SPEC_CHANGED['expression']} || "
        f"{labels.format('object')} != {labels.format('oldObject')}",
    }
    return {
        **team_spec_policy(team_label, [writes("ray.io", "rayclusters", "rayjobs", "rayservices")]),
        "matchConditions": [judged],
        "variables": [
            {"name": "team", "expression": f"namespaceObject.metadata.labels['{team_label}']"},
            {
                "name": "cluster",
                "expression": "object.kind == 'RayCluster' ? object.spec : "
                "(object.kind == 'RayJob' ? (has(object.spec.rayClusterSpec) ? "
                "object.spec.rayClusterSpec : {}) : (has(object.spec.rayClusterConfig) ? "
                "object.spec.rayClusterConfig : {}))",
            },
            {
                "name": "groups",
                "expression": f"has({cluster}.workerGroupSpecs) ? "
                f"{cluster}.workerGroupSpecs.map(g, {_ray_group_row('g', pool_index, resources)})"
                " : []",
            },
            {
                "name": "headServiceType",
                "expression": f"has({cluster}.headGroupSpec) && has({head_service}) && "
                f"has({head_service}.spec) && has({head_service}.spec.type) && "
                f"{head_service}.spec.type != '' ? {head_service}.spec.type : "
                f"(has({cluster}.headGroupSpec) && has({head}.serviceType) ? "
                f"{head}.serviceType : '')",
            },
            *pool_variables,
            {
                "name": "selects",
                "expression": "object.kind == 'RayJob' && has(object.spec.clusterSelector) && "
                "size(object.spec.clusterSelector) > 0",
            },
            {
                "name": "priority",
                "expression": f"'{RAY_PRIORITY_LABEL}' in {labels.format('object')} ? "
                f"{labels.format('object')}['{RAY_PRIORITY_LABEL}'] : ''",
            },
            {"name": "podClasses", "expression": _ray_pod_classes(cluster)},
        ],
        "validations": [
            {
                "expression": f"!variables.selects || variables.team in {_cel(sorted(allowed))}",
                "messageExpression": (
                    "'RayJob ' + object.metadata.name + ': team ' + variables.team + ' runs "
                    "each RayJob on a RayCluster of its own (spec.rayClusterSpec), which KubeRay "
                    "gang-schedules in the team queue; spec.clusterSelector skips the gang and is "
                    "allowed only where the stack sets teams[].ray.allowClusterSelector'"
                ),
                "reason": "Forbidden",
            },
            {
                "expression": "variables.priority == '' || "
                f"variables.priority in {_cel(list(priority_classes))}",
                "messageExpression": (
                    "object.kind + ' ' + object.metadata.name + ': label "
                    f"{RAY_PRIORITY_LABEL} ' + variables.priority + ' is not a training "
                    f"priority class ({', '.join(priority_classes)})'"
                ),
                "reason": "Forbidden",
            },
            {
                "expression": "variables.podClasses.all(c, c == variables.priority)",
                "messageExpression": (
                    f"{name} + ': its pods ask for priority class ' + "
                    "variables.podClasses.filter(c, c != variables.priority)[0] + ' but label "
                    f"{RAY_PRIORITY_LABEL} is ' + (variables.priority == '' ? 'unset' : "
                    "variables.priority) + '; KubeRay gives the gang (its Volcano PodGroup) the "
                    f"class of the label only: set label {RAY_PRIORITY_LABEL} to the "
                    "priorityClassName of the pods'"
                ),
                "reason": "Invalid",
            },
            {
                "expression": f"variables.headServiceType in ['', '{HEAD_SERVICE_TYPE}']",
                "messageExpression": (
                    f"{name} + ': its head Service is ' + variables.headServiceType + "
                    "', which would expose the Ray dashboard and GCS of team ' + "
                    "variables.team + ' beyond the cluster; leave headGroupSpec.serviceType "
                    f"unset or {HEAD_SERVICE_TYPE} (members reach the dashboard by "
                    "port-forward)'"
                ),
                "reason": "Forbidden",
            },
            *pool_validations,
        ],
    }


def tenant_writes_policy(
    *,
    team_label: str,
    member_groups: Mapping[str, list[str]],
    admin_groups: Mapping[str, list[str]],
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: NetworkPolicies and DaemonSets are not a member's to write.

    Members' role leaves both out; team admins hold ``admin``, which has both, and a request
    made as a service account carries none of the team's groups:

    * a NetworkPolicy written (created, changed or deleted) by a member, or by a service
      account of the team's namespace, is refused. Team admins may still change their
      namespace's: a policy only ever opens or closes the team's own pods, and the admins
      answer for them. A user in both a member and an admin group of the team counts as an
      admin. Without the service-account rule an admin's RoleBinding of ``admin`` to an
      account would hand NetworkPolicies to every member, who can run pods as any account of
      the namespace;
    * a DaemonSet created or changed in a team namespace is refused, whoever asks: it places a
      pod on every node whose taints it tolerates, outside any queue, and the platform makes
      none there. Deleting one stays possible.

    Members and admins are known by ``request.userInfo.groups``, the Kubernetes groups the
    user's EKS access entry gives (``teams[].memberGroups`` and ``adminGroups``); the
    platform's own writes (the deployer, controllers) carry none of them and no team
    account's name, and pass.

    Args:
        team_label: the namespace label that names the team (its namespace's name).
        member_groups: team -> its ``memberGroups``.
        admin_groups: team -> its ``adminGroups``.
    """
    team = f"namespaceObject.metadata.labels['{team_label}']"
    groups = "(has(request.userInfo.groups) ? request.userInfo.groups : [])"
    members = {name: sorted(found) for name, found in member_groups.items()}
    admins = {name: sorted(found) for name, found in admin_groups.items()}

    def holds(table: dict[str, list[str]]) -> str:
        return (
            f"(variables.team in {_cel(table)} && "
            f"{groups}.exists(g, g in {_cel(table)}[variables.team]))"
        )

    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {
                    "apiGroups": ["networking.k8s.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "resources": ["networkpolicies"],
                },
                {
                    "apiGroups": ["apps"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["daemonsets"],
                },
            ],
        },
        "variables": [
            {"name": "team", "expression": team},
            {"name": "member", "expression": holds(members)},
            {"name": "admin", "expression": holds(admins)},
            {
                "name": "teamAccount",
                "expression": "request.userInfo.username.startsWith("
                "'system:serviceaccount:' + variables.team + ':')",
            },
            # DELETE has no object, only the old one.
            {
                "name": "kind",
                "expression": "object == null ? oldObject.kind : object.kind",
            },
        ],
        "validations": [
            {
                "expression": "variables.kind != 'NetworkPolicy' || "
                "(!variables.teamAccount && (!variables.member || variables.admin))",
                "messageExpression": "'the NetworkPolicies of namespace ' + variables.team + "
                "' are written by the platform and the team admins only, not by its members "
                "or its service accounts'",
                "reason": "Forbidden",
            },
            {
                "expression": "variables.kind != 'DaemonSet'",
                "messageExpression": "'team ' + variables.team + ' may not run DaemonSets: one "
                "holds a pod on every node it tolerates, outside any Volcano queue; run a job'",
                "reason": "Forbidden",
            },
        ],
    }


@dataclass(frozen=True)
class GangLimits:
    """What bounds a gang, per pool and per platform runtime: known at synthesis."""

    pool_nodes: dict[str, int] = field(default_factory=dict)
    """Pool name -> the most nodes its Kubernetes NodePool launches."""
    pool_accelerators: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Pool name -> (its accelerator resource, devices per node)."""
    runtime_pools: dict[str, str] = field(default_factory=dict)
    """Platform runtime name -> the pool its pods are pinned to."""
    runtime_nodes: dict[str, int] = field(default_factory=dict)
    """Platform runtime name -> its default ``numNodes`` (``mlPolicy.numNodes``)."""
    team_runtime_nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    """Team namespace -> its runtime's name -> the most nodes one of its gangs can get: the
    pool's limit, or fewer where the team's quota or queue capability holds fewer whole
    nodes' accelerators or EFA interfaces (what ``synth jobs`` reports as ``maxNodes``)."""
    standing: dict[str, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)
    """Pool name -> (namespace, name, workers) of each standing Ray cluster on it: nodes no
    other gang gets while the cluster exists."""


def standing_held(team: TeamConfig, pools: Mapping[str, NodePoolConfig]) -> dict[str, int]:
    """What the team's standing Ray clusters (``teams[].ray.clusters``) hold while they exist.

    Each worker takes a whole node (components/kuberay.py): its accelerators (keyed by their
    resource name) and, on an EFA pool, every EFA interface (key ``efa``).

    Args:
        team: the team.
        pools: the stack's pools by name.
    """
    held: dict[str, int] = {}
    for cluster in team.ray.clusters:
        pool = pools.get(cluster.pool)
        if pool is None:
            continue
        resource = pool.instance.accelerator_resource
        if resource:
            held[resource] = held.get(resource, 0) + cluster.workers * pool.instance.accelerators
        if pool.uses_efa:
            held["efa"] = held.get("efa", 0) + cluster.workers * pool.instance.efa_interfaces
    return held


def team_node_limit(
    team: TeamConfig,
    pool: NodePoolConfig,
    pool_nodes: int,
    held: Mapping[str, int] | None = None,
) -> int:
    """The most whole nodes of ``pool`` one gang of ``team`` can get.

    A platform runtime's pod takes a whole node: its accelerators and every EFA interface. A
    gang larger than the team's ResourceQuota (``quota``) or Volcano queue capability
    (``queue.capability``, the quota by default) holds in whole nodes never starts either: the
    quota refuses the pods past it, or the queue never admits the PodGroup, while Karpenter
    holds the nodes launched for the rest.

    Args:
        team: the team.
        pool: an accelerated pool of its runtimes.
        pool_nodes: the most nodes the pool's Kubernetes NodePool launches for gangs (less
            what standing Ray clusters hold).
        held: what the team's standing Ray clusters hold of its quota and queue
            (:func:`standing_held`). Default: nothing.
    """
    held = held or {}
    resource, per_node = pool.instance.accelerator_resource, pool.instance.accelerators
    limit = pool_nodes
    if resource and per_node:
        taken = held.get(resource, 0)
        limit = min(
            limit,
            (team.quota.resources().get(resource, 0) - taken) // per_node,
            (team.capability.resources().get(resource, 0) - taken) // per_node,
        )
    if pool.uses_efa and pool.instance.efa_interfaces:
        free_efa = team.quota.efa_interfaces - held.get("efa", 0)
        limit = min(limit, free_efa // pool.instance.efa_interfaces)
    return max(limit, 0)


def gang_limits(
    pools: list[NodePoolConfig],
    *,
    slurm_nodes: Mapping[str, int],
    runtime_pools: Mapping[str, str],
    runtime_nodes: Mapping[str, int],
    team_runtimes: Mapping[str, tuple[TeamConfig, Mapping[str, str]]] | None = None,
    teams: Sequence[TeamConfig] = (),
) -> GangLimits:
    """The :class:`GangLimits` of a stack.

    Args:
        pools: the accelerator pools.
        slurm_nodes: pool name -> nodes its Slurm node set holds (a NodePool of their own, so
            the Kubernetes NodePool may launch only the rest, as ``components.node_pools`` sizes
            it).
        runtime_pools: platform runtime name -> its pool's name (every team's runtimes; the
            names are the same in every namespace, ``<framework>-<pool>``).
        runtime_nodes: platform runtime name -> its default ``numNodes``.
        team_runtimes: team namespace -> (the team, its runtimes' names -> their pools), for
            the teams' own limits (:func:`team_node_limit`), less what the teams' standing Ray
            clusters hold. Default: none (pool limits only).
        teams: the teams whose standing Ray clusters (``teams[].ray.clusters``, with Ray on)
            hold nodes of their pools, with Trainer on or off. Default: none.
    """
    pool_nodes = {pool.name: pool.max_nodes - slurm_nodes.get(pool.name, 0) for pool in pools}
    by_name = {pool.name: pool for pool in pools}
    # A standing Ray cluster's workers hold their nodes for every team's gangs on the pool.
    standing: dict[str, list[tuple[str, str, int]]] = {}
    for team in teams:
        for cluster in team.ray.clusters:
            if cluster.pool in by_name:
                standing.setdefault(cluster.pool, []).append(
                    (team.name, cluster.name, cluster.workers)
                )
    free_nodes = {
        name: nodes - sum(workers for _, _, workers in standing.get(name, []))
        for name, nodes in pool_nodes.items()
    }
    return GangLimits(
        pool_nodes=pool_nodes,
        standing={pool: tuple(clusters) for pool, clusters in sorted(standing.items())},
        team_runtime_nodes={
            namespace: {
                runtime: team_node_limit(
                    team, by_name[pool], free_nodes[pool], standing_held(team, by_name)
                )
                for runtime, pool in own.items()
                if pool in by_name
            }
            for namespace, (team, own) in (team_runtimes or {}).items()
        },
        pool_accelerators={
            pool.name: (pool.instance.accelerator_resource, pool.instance.accelerators)
            for pool in pools
        },
        runtime_pools=dict(runtime_pools),
        runtime_nodes=dict(runtime_nodes),
    )


SUMMED_SETS: Final = 8
"""Replica sets (a legacy job's roles, a Volcano Job's tasks) a gang's sum adds up. CEL has no
fold and cel-go's ``sum()`` is a Kubernetes extension, so sums are unrolled: with more sets the
sum of the first ones is a lower bound of the gang, which may refuse only what is too big."""
SUMMED_CONTAINERS: Final = 4
"""Containers of a pod whose accelerator requests are added up (a lower bound past that)."""


def _quantity(value: str) -> str:
    """CEL: a whole-number quantity ``value`` as an int; anything else (``1k``, ``500m``) 0.

    Accelerators and EFA devices are extended resources, written as whole numbers; reading
    other spellings as 0 can only admit, never refuse.
    """
    return f"(string({value}).matches('^[0-9]+$') ? int(string({value})) : 0)"


def _pod_amount(template: str, resource: str) -> str:
    """CEL: a pod template's request of ``resource``, its first containers added up.

    Limits first: an extended resource's request, if written, equals its limit.
    """

    def container(c: str) -> str:
        limits, requests = f"{c}.resources.limits", f"{c}.resources.requests"
        limit = _quantity(f"{limits}['{resource}']")
        request = _quantity(f"{requests}['{resource}']")
        return (
            f"(has({c}.resources) && has({limits}) && '{resource}' in {limits} ? {limit} : "
            f"(has({c}.resources) && has({requests}) && '{resource}' in {requests} ? "
            f"{request} : 0))"
        )

    containers = f"{template}.spec.containers"
    terms = [
        f"(has({containers}) && size({containers}) > {i} ? "
        + container(f"{containers}[{i}]")
        + " : 0)"
        for i in range(SUMMED_CONTAINERS)
    ]
    return "(" + " + ".join(terms) + ")"


def _row(owner: str, count: str, pools: Mapping[str, int], resources: list[str]) -> str:
    """CEL: one replica set as ``[pool index or -1, pods, pod's amount of each resource...]``.

    Computed in one expression per set: two comprehensions over one map may see its keys in
    different orders, so a set's figures are never zipped from separate lists.
    """
    template = f"{owner}.template"
    selector = f"{template}.spec.nodeSelector"
    pool = (
        f"(has({selector}) && '{POOL_LABEL}' in {selector} && "
        f"{selector}['{POOL_LABEL}'] in {_cel(dict(pools))} ? "
        f"{_cel(dict(pools))}[{selector}['{POOL_LABEL}']] : -1)"
    )
    amounts = ", ".join(_pod_amount(template, resource) for resource in resources)
    return (
        f"(has({template}) && has({template}.spec) ? [{pool}, {count}, {amounts}] : "
        f"[-1, {count}, {', '.join('0' for _ in resources)}])"
    )


def _unrolled_sum(term: str) -> str:
    """CEL: ``term`` (an int expression of ``j``, the set's index) added over the sets."""
    return (
        "("
        + " + ".join(
            f"(size(variables.sets) > {j} ? {term.replace('{j}', str(j))} : 0)"
            for j in range(SUMMED_SETS)
        )
        + ")"
    )


def gang_size_policy(limits: GangLimits, *, team_label: str) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: no gang larger than the pool its pods go to.

    A gang that needs more nodes than its pool may ever launch pends forever, and worse:
    Karpenter nominates the nodes it did launch for the pending pods (karpenter v1.14.1
    ``pkg/controllers/provisioning/scheduling/scheduler.go``, NominateNodeForPod), and a
    nominated node is not a candidate for disruption (``pkg/controllers/disruption/
    validation.go``), so they idle, capacity reservations included, under one impossible job.
    A pool's limit is the nodes its Kubernetes NodePool may hold (``maxNodes``, less the nodes
    Slurm's node set holds): the figure ``synth jobs`` reports as a runtime's ``maxNodes``
    where nothing smaller (quota, queue) binds first. Its capacity is that limit times its
    accelerators per node.

    Refused, on CREATE and on UPDATEs that change the spec, in a team namespace:

    * a TrainJob of a platform runtime whose ``spec.trainer.numNodes`` (or, left out, the
      runtime's own ``mlPolicy.numNodes``) exceeds the limit of the runtime's pool; a
      ``runtimePatches`` entry that moves a replicated job to another pool (its
      ``trainingplatform.io/pool`` node selector) is held to that pool's limit. Each node of a
      platform runtime is one pod taking a whole node, so nodes are counted directly.
    * a legacy Training Operator job or a Volcano Job whose pods, all its roles (tasks)
      together, ask for more of a pool's accelerator than the pool holds at its limit: for
      each pool, the sum over the replica sets whose template pins the pool
      (``nodeSelector: {trainingplatform.io/pool: <pool>}``, as the migration guide writes it)
      of pods x the pod's request. Its pods need not take whole nodes (two pods of half a
      node share one), so accelerators are counted, not pods: more accelerators than the
      pool's nodes hold cannot be placed however the pods pack. Unpinned sets count towards
      the next rule;
    * any of those jobs, and a PodGroup, asking for more of an accelerator in all than every
      pool that offers it holds at its limit: a PodGroup names no pool (no pod template or
      node selector), so its ``minResources`` (the gang's minimum, ``nvidia.com/gpu`` or
      ``requests.nvidia.com/gpu``) is held to the total. Its ``minMember`` is not judged: pods
      without a pool may share nodes (CPU pods pack many to a node), so no pod count is
      provably too many.

    A job is judged as a whole gang only when all its pods are the gang: no gang minimum
    below its pod count (a Volcano Job's ``spec.minAvailable``, a legacy job's
    ``runPolicy.schedulingPolicy.minAvailable``); an elastic job with a smaller minimum may
    legitimately leave pods pending, so it is admitted. An elastic legacy job
    (``spec.elasticPolicy``) counts its Worker role at ``elasticPolicy.minReplicas`` (1 when
    unset), the fewest it starts with. Every count errs low, so a legitimate job is never
    refused: quantities other than whole numbers read as 0, only the first
    :data:`SUMMED_SETS` sets and :data:`SUMMED_CONTAINERS` containers are added (a job with
    more sets is a whole gang only when it sets no minimum), init containers and
    ``neuroncore`` requests are not counted.

    Args:
        limits: the stack's pools and runtimes (:func:`gang_limits`).
        team_label: the namespace label of team namespaces.
    """
    runtime_nodes = limits.runtime_nodes
    nodes = dict(limits.pool_nodes)
    runtime_limits = {
        runtime: nodes[pool] for runtime, pool in limits.runtime_pools.items() if pool in nodes
    }
    team_limits = limits.team_runtime_nodes
    accelerated = {
        pool: (resource, count)
        for pool, (resource, count) in sorted(limits.pool_accelerators.items())
        if pool in nodes and resource and count > 0
    }
    pool_index = {pool: i for i, pool in enumerate(accelerated)}
    resources = sorted({resource for resource, _ in accelerated.values()})
    totals = {
        resource: sum(nodes[p] * count for p, (r, count) in accelerated.items() if r == resource)
        for resource in resources
    }
    runtime = "object.spec.runtimeRef.name"
    own = "namespaceObject.metadata.name"
    asked = (
        "has(object.spec.trainer) && has(object.spec.trainer.numNodes) ? "
        f"object.spec.trainer.numNodes : ({runtime} in {_cel(dict(runtime_nodes))} ? "
        f"{_cel(dict(runtime_nodes))}[{runtime}] : 1)"
    )
    selector = "t.spec.nodeSelector"
    pinned = (
        f"has(t.spec) && has({selector}) && '{POOL_LABEL}' in {selector} && "
        f"{selector}['{POOL_LABEL}'] in {_cel(nodes)}"
    )
    pool = f"{selector}['{POOL_LABEL}']"
    patch_jobs = "p.trainingRuntimeSpec.template.spec.replicatedJobs"
    patch_ok = (
        "!has(p.trainingRuntimeSpec) || !has(p.trainingRuntimeSpec.template) || "
        f"!has(p.trainingRuntimeSpec.template.spec) || !has({patch_jobs}) || "
        f"{patch_jobs}.all(j, !has(j.template) || !has(j.template.spec) || "
        "!has(j.template.spec.template) || "
        f"[j.template.spec.template].all(t, !({pinned}) || "
        f"variables.nodes <= {_cel(nodes)}[{pool}]))"
    )

    elastic = "object.spec.elasticPolicy"
    specs = "variables.legacySpecs"
    replicas = f"(!has({specs}[r].replicas) ? 1 : {specs}[r].replicas)"
    # the fewest Workers an elastic job starts with: minReplicas (1 if unset), at most all
    floor = f"(has({elastic}.minReplicas) ? {elastic}.minReplicas : 1)"
    legacy_pods = (
        f"(r == 'Worker' && has({elastic}) ? ({floor} < {replicas} ? {floor} : {replicas})"
        f" : {replicas})"
    )
    # Each legacy kind has one replica-spec map (PyTorchJob's pytorchReplicaSpecs, ...): named
    # once here, so the row below is written once rather than once per kind.
    legacy_specs = "{}"
    for spec_field in reversed(LEGACY_REPLICA_SPECS):
        legacy_specs = (
            f"(has(object.spec.{spec_field}) ? object.spec.{spec_field} : {legacy_specs})"
        )
    legacy_sets = f"{specs}.map(r, {_row(f'{specs}[r]', legacy_pods, pool_index, resources)})"
    volcano_sets = (
        "(has(object.spec.tasks) ? object.spec.tasks.map(task, "
        f"{_row('task', 'has(task.replicas) ? task.replicas : 0', pool_index, resources)})"
        " : [])"
    )
    # A Deployment's, ReplicaSet's, StatefulSet's or Job's pods get a PodGroup from Volcano's
    # podgroup controller, whose minMember is the owner's group-min-member annotation (a
    # Deployment's reaches its ReplicaSet) and minResources that many pods' requests (volcano
    # v1.15.1 pkg/controllers/podgroup/pg_controller_handler.go, getMinMemberFromUpperRes and
    # buildPodGroupFromPod; a value that is not a number counts as 1). A CronJob's Jobs take
    # their annotations from its jobTemplate.
    cron = "object.kind == 'CronJob'"
    workload_annotations = (
        f"({cron} ? object.spec.jobTemplate.metadata.annotations : object.metadata.annotations)"
    )
    min_member = _quantity(f"{workload_annotations}['{GROUP_MIN_MEMBER}']")
    cron_set = _row("object.spec.jobTemplate.spec", min_member, pool_index, resources)
    workload_set = (
        f"({cron} ? {cron_set} : {_row('object.spec', min_member, pool_index, resources)})"
    )
    cron_meta = "object.spec.jobTemplate.metadata"
    annotated = (
        f"({cron} ? has(object.spec.jobTemplate) && has({cron_meta}) && "
        f"has({cron_meta}.annotations) && '{GROUP_MIN_MEMBER}' in {cron_meta}.annotations : "
        f"has(object.metadata.annotations) && '{GROUP_MIN_MEMBER}' in object.metadata.annotations)"
    )
    scheduling = "object.spec.runPolicy.schedulingPolicy"
    gang_minimum = (
        f"variables.legacy ? (has(object.spec.runPolicy) && has({scheduling}) && "
        f"has({scheduling}.minAvailable) ? {scheduling}.minAvailable : -1) : "
        "(variables.volcanoJob && has(object.spec.minAvailable) ? object.spec.minAvailable : -1)"
    )
    name = (
        "object.kind + ' ' + (has(object.metadata.name) ? object.metadata.name : "
        "object.metadata.generateName)"
    )

    def pod_group_amount(resource: str) -> str:
        held = "object.spec.minResources"
        plain_amount = _quantity(f"{held}['{resource}']")
        prefixed_amount = _quantity(f"{held}['requests.{resource}']")
        plain = f"('{resource}' in {held} ? {plain_amount} : 0)"
        prefixed = f"('requests.{resource}' in {held} ? {prefixed_amount} : 0)"
        return f"(has({held}) ? ({plain} > {prefixed} ? {plain} : {prefixed}) : 0)"

    variables: list[dict[str, str]] = [
        {"name": "trainJob", "expression": "object.apiVersion.startsWith('trainer.kubeflow.org/')"},
        {"name": "legacy", "expression": "object.apiVersion.startsWith('kubeflow.org/')"},
        {"name": "volcanoJob", "expression": "object.apiVersion.startsWith('batch.volcano.sh/')"},
        {
            "name": "podGroup",
            "expression": "object.apiVersion.startsWith('scheduling.volcano.sh/')",
        },
        {"name": "nodes", "expression": f"variables.trainJob ? ({asked}) : 0"},
        {
            "name": "limit",
            # the team's own limit where it has one, else the pool's
            "expression": f"!variables.trainJob ? -1 : ({own} in {_cel(team_limits)} && "
            f"{runtime} in {_cel(team_limits)}[{own}] ? {_cel(team_limits)}[{own}][{runtime}] "
            f": ({runtime} in {_cel(runtime_limits)} ? {_cel(runtime_limits)}[{runtime}] : -1))",
        },
        {
            "name": "workload",
            "expression": "(object.apiVersion.startsWith('apps/') || "
            f"object.apiVersion.startsWith('batch/')) && {annotated}",
        },
        {
            "name": "legacySpecs",
            "expression": f"variables.legacy ? {legacy_specs} : {{}}",
        },
        {
            "name": "sets",
            "expression": f"variables.legacy ? ({legacy_sets}) : "
            f"(variables.volcanoJob ? {volcano_sets} : "
            f"(variables.workload ? [{workload_set}] : []))",
        },
        {"name": "minimum", "expression": gang_minimum},
        {"name": "pods", "expression": _unrolled_sum("variables.sets[{j}][1]")},
        {
            "name": "whole",
            "expression": "variables.minimum < 0 || "
            f"(size(variables.sets) <= {SUMMED_SETS} && variables.minimum >= variables.pods)",
        },
    ]
    validations: list[dict[str, str]] = [
        {
            "expression": "!variables.trainJob || variables.limit < 0 || "
            "variables.nodes <= variables.limit",
            "messageExpression": "'runtime ' + object.spec.runtimeRef.name + ' runs on a "
            "pool that launches, or a team quota or queue that holds, at most ' + "
            "string(variables.limit) + ' nodes: numNodes ' + "
            "string(variables.nodes) + ' would pend forever and hold the nodes it got'",
            "reason": "Invalid",
        },
        {
            "expression": "!variables.trainJob || !has(object.spec.runtimePatches) || "
            f"object.spec.runtimePatches.all(p, {patch_ok})",
            "messageExpression": "'numNodes ' + string(variables.nodes) + ' is more than "
            "the pool a runtimePatches entry moves the job to ever launches'",
            "reason": "Invalid",
        },
    ]
    for pool_name, (resource, per_node) in accelerated.items():
        i, k = pool_index[pool_name], resources.index(resource)
        demand = f"pool{i}"
        variables.append(
            {
                "name": demand,
                "expression": _unrolled_sum(
                    f"(variables.sets[{{j}}][0] == {i} ? "
                    f"variables.sets[{{j}}][1] * variables.sets[{{j}}][{2 + k}] : 0)"
                ),
            }
        )
        capacity = nodes[pool_name] * per_node
        validations.append(
            {
                "expression": f"!variables.whole || variables.{demand} <= {capacity}",
                "messageExpression": f"{name} + ' asks for ' + string(variables.{demand}) + "
                f"' {resource} on pool {pool_name} (' + string((variables.{demand} + "
                f"{per_node - 1}) / {per_node}) + ' nodes of {per_node}); the pool launches "
                f"at most {nodes[pool_name]} nodes ({capacity}): the gang would pend forever "
                "and hold the nodes it got'",
                "reason": "Invalid",
            }
        )
    for k, resource in enumerate(resources):
        asked_in_all = f"asked{k}"
        variables.append(
            {
                "name": asked_in_all,
                "expression": f"variables.podGroup ? {pod_group_amount(resource)} : "
                + _unrolled_sum(f"variables.sets[{{j}}][1] * variables.sets[{{j}}][{2 + k}]"),
            }
        )
        validations.append(
            {
                "expression": f"!(variables.whole || variables.podGroup) || "
                f"variables.{asked_in_all} <= {totals[resource]}",
                "messageExpression": f"{name} + ' asks for ' + string(variables.{asked_in_all})"
                f" + ' {resource} in all; every pool with {resource} together launches at "
                f"most {totals[resource]}: the gang would pend forever and hold the nodes it "
                "got'",
                "reason": "Invalid",
            }
        )
    rule = {"operations": ["CREATE", "UPDATE"], "apiVersions": ["*"]}
    annotations = "(has({0}.metadata.annotations) ? {0}.metadata.annotations : {{}})"
    # an annotation is a gang's size too (group-min-member), and lives outside the spec
    judged = {
        "name": "created-or-spec-or-annotations-changed",
        "expression": f"{CREATED_OR_SPEC_CHANGED['expression']} || "
        f"{annotations.format('object')} != {annotations.format('oldObject')}",
    }
    return {
        "failurePolicy": "Fail",
        "matchConditions": [judged],
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {**rule, "apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"]},
                {**rule, "apiGroups": ["batch.volcano.sh"], "resources": ["jobs"]},
                {**rule, "apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"]},
                {
                    **rule,
                    "apiGroups": ["apps"],
                    "resources": ["deployments", "replicasets", "statefulsets"],
                },
                {**rule, "apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
                {
                    **rule,
                    "apiGroups": [LEGACY_JOB_GROUP],
                    "resources": list(LEGACY_JOBS),
                },
            ],
        },
        "variables": variables,
        "validations": validations,
    }


def non_leaf_queues(queues: Mapping[str, str], *, root: str) -> list[str]:
    """The queues with children: ``root`` and every queue named as another's parent.

    Args:
        queues: queue name -> its parent's name.
        root: Volcano's root queue.
    """
    return sorted({root, *queues.values()})


def leaf_queue_policy(non_leaf: list[str]) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: gangs go to leaf queues, in every namespace.

    With hierarchical queues Volcano's capacity plugin refuses to open a session while a job
    sits in a queue that has children: ``OnSessionOpen`` calls ``buildHierarchicalQueueAttrs``,
    which fails for a non-leaf queue with jobs (volcano v1.15.1
    ``pkg/scheduler/plugins/capacity/capacity.go``), and nothing is scheduled cluster-wide. One
    PodGroup or Volcano Job in ``root`` would stop every team, so it is refused wherever it is
    made (PodGroups of TrainJobs and legacy jobs are made by their controllers from the queue
    the job names). Updates are judged only when the spec changes: Volcano writes PodGroup
    status with full updates.

    Args:
        non_leaf: the queues with children (:func:`non_leaf_queues`).
    """
    rule = {"operations": ["CREATE", "UPDATE"], "apiVersions": ["*"]}
    return {
        "failurePolicy": "Fail",
        "matchConditions": [dict(CREATED_OR_SPEC_CHANGED)],
        "matchConstraints": {
            "resourceRules": [
                {**rule, "apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"]},
                {**rule, "apiGroups": ["batch.volcano.sh"], "resources": ["jobs"]},
            ]
        },
        "validations": [
            {
                "expression": "!has(object.spec.queue) || "
                f"!(object.spec.queue in {_cel(non_leaf)})",
                "messageExpression": "'queue ' + object.spec.queue + ' has child queues: a job "
                "in it stops Volcano scheduling every queue; name a leaf queue (a team queue)'",
                "reason": "Forbidden",
            }
        ],
    }
