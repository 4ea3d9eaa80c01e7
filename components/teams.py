"""Team namespaces: quota, defaults, access, isolation and the service account jobs run as."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog, health_marks
from components.admission import enforced_policy
from components.catalog import EFA_RESOURCE, GPU_RESOURCE, NEURON_CORE_RESOURCE, NEURON_RESOURCE
from components.config import NodePoolConfig, TeamConfig
from components.config.cluster import principal_identity
from components.config.teams import CPU_ONLY_MEMORY_GIB, CPU_ONLY_VCPUS
from components.device_plugins import NEURON_DEVICE_RESOURCE, NEURON_SCHEDULER_NAME
from components.katib import METRICS_COLLECTOR_INJECTION
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY, lustre_boundary_policy
from components.node_pools import slurm_taint
from components.scheduling import (
    PRIORITY_CLASSES,
    QUEUE_ANNOTATION,
    RAY_QUEUE_LABEL,
    SCHEDULER_NAME,
)
from components.tenancy import (
    LEGACY_JOBS,
    LEGACY_MIN_RESOURCES_POLICY,
    QUEUE_POLICY,
    TEAM_POD_SECURITY,
    TEAM_POD_SECURITY_ADVICE,
    ControllerIngress,
    legacy_min_resources_policy,
    pod_security_labels,
    queue_ownership_policy,
    team_namespace_binding,
    team_network_policies,
)
from components.tenant_api import (
    GANG_SIZE_POLICY,
    RAY_GANG_POLICY,
    SERVICE_POLICY,
    TENANT_WRITES_POLICY,
    GangLimits,
    gang_size_policy,
    ray_gang_policy,
    service_exposure_policy,
    tenant_writes_policy,
)
from components.tenant_pods import TENANT_PODS_POLICY, tenant_pods_policy

TEAM_LABEL: Final = "trainingplatform.io/team"
JOB_SERVICE_ACCOUNT: Final = "training-jobs"
JOBS_CLUSTER_ROLE: Final = "trainingplatform:training-jobs"
# What team members manage in their namespace: Kubeflow Trainer v2 jobs, the legacy Training
# Operator's, KubeRay's clusters, jobs and services, and read access to the runtimes and gangs
# there. A job's status is the controllers' to write.
RAY_RESOURCES: Final = ("rayclusters", "rayjobs", "rayservices")
"""KubeRay's kinds a member runs (ray.io/v1, kuberay v1.7.0 helm-chart/kuberay-operator/crds).
Built-in ``view`` does not aggregate them (the chart's viewer roles carry no aggregation label),
so the reads are here too."""
JOB_RULES: Final = [
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["trainjobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["trainjobs/status", "trainingruntimes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["kubeflow.org"],
        "resources": list(LEGACY_JOBS),
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["ray.io"],
        "resources": list(RAY_RESOURCES),
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["ray.io"],
        "resources": [f"{resource}/status" for resource in RAY_RESOURCES],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.volcano.sh"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch"],
    },
]  # fmt: skip
KATIB_CLUSTER_ROLE: Final = "trainingplatform:katib-experiments"
# Katib: members write Experiments; its controller makes their Suggestions and Trials (and
# each trial's TrainJob), which members read. Bound only in the namespaces of teams with
# katib.enabled (while Katib is on): the standalone install aggregates none of it into the
# built-in roles (kubeflow/katib v0.19.0 has its aggregated roles only in
# manifests/v1beta1/installs/katib-with-kubeflow/kubeflow-katib-roles.yaml).
KATIB_RULES: Final = [
    {
        "apiGroups": ["kubeflow.org"],
        "resources": ["experiments"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["kubeflow.org"],
        "resources": [
            "experiments/status", "suggestions", "suggestions/status", "trials", "trials/status",
        ],
        "verbs": ["get", "list", "watch"],
    },
]  # fmt: skip
MEMBER_WRITES_CLUSTER_ROLE: Final = "trainingplatform:team-member-writes"
MEMBER_READ_CLUSTER_ROLE: Final = "view"
_WRITE: Final = ["create", "update", "patch", "delete", "deletecollection"]
_READ_WRITE: Final = ["get", "list", "watch", *_WRITE]
# What Kubernetes' ``edit`` lets a user write in a namespace (the rules of
# ``system:aggregate-to-edit`` in kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/
# policy.go), less DaemonSets (a pod on every node whose taints it tolerates, outside any
# queue), NetworkPolicies (the platform's and the team admins') and impersonating service
# accounts (a request as one carries none of the team's groups, which the tenant-writes policy
# judges). Members get it beside the
# built-in ``view``, which gives the reads, CRD reads aggregated into it included.
MEMBER_WRITE_RULES: Final = [
    {
        "apiGroups": [""],
        "resources": [
            "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy",
            "configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
            "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
            "services/proxy",
        ],
        "verbs": _READ_WRITE,
    },
    {
        "apiGroups": [""],
        "resources": ["pods/eviction", "serviceaccounts/token"],
        "verbs": ["create"],
    },
    {
        "apiGroups": ["apps"],
        "resources": [
            "deployments", "deployments/rollback", "deployments/scale", "replicasets",
            "replicasets/scale", "statefulsets", "statefulsets/scale",
        ],
        "verbs": _WRITE,
    },
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": _WRITE},
    {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": _WRITE},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _WRITE},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": _WRITE},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": _READ_WRITE},
]  # fmt: skip
CATALOG_CLUSTER_ROLE: Final = "trainingplatform:training-catalog"
# Cluster-scoped objects every team reads: a RoleBinding cannot grant them. The Kubeflow SDK's
# list_runtimes() lists ClusterTrainingRuntimes beside the namespace's runtimes and fails as a
# whole on a 403 (kubeflow/sdk 0.5.0 backends/kubernetes/backend.py); queues show a team its
# share and what it uses (vcctl queue list, kubectl get queues).
CATALOG_RULES: Final = [
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["clustertrainingruntimes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.volcano.sh"],
        "resources": ["queues"],
        "verbs": ["get", "list", "watch"],
    },
]


def accelerator_node_capacity(team: TeamConfig, pools: list[NodePoolConfig]) -> tuple[int, int]:
    """(vCPUs, memory GiB) of the nodes the team's accelerator quota fills.

    Per accelerator kind the quota takes ceil(quota / accelerators per node) of the pools'
    largest node of that kind (most accelerators, then vCPUs); a kind without a pool adds 0.

    Args:
        team: the team.
        pools: the stack's accelerated pools.
    """
    cpu = memory = 0
    for resource, count in team.quota.resources().items():
        types = [
            catalog.CATALOG[name]
            for pool in pools
            for name in pool.instance_types
            if name in catalog.CATALOG and pool.instance.accelerator_resource == resource
        ]
        if count == 0 or not types:
            continue
        node = max(types, key=lambda t: (t.accelerators, t.vcpu, t.memory_gib))
        nodes = -(-count // node.accelerators)
        cpu += nodes * node.vcpu
        memory += nodes * node.memory_gib
    return cpu, memory


def resource_quota_spec(team: TeamConfig, pools: list[NodePoolConfig]) -> dict[str, Any]:
    """Hard limits on what the namespace's pods may request: accelerators, EFA, CPU, memory.

    CPU and memory are the team's config, or the nodes its accelerator quota fills
    (:func:`accelerator_node_capacity`), or, where that fills no node, a bounded default
    (:data:`components.config.teams.CPU_ONLY_VCPUS` and ``CPU_ONLY_MEMORY_GIB``), so a team
    without accelerators still runs CPU pods; an explicit 0 admits none. Every pod states them:
    the LimitRange gives a container that states none its default requests
    (:func:`limit_range_spec`).

    The Neuron device plugin's other names of the same devices (``aws.amazon.com/neuroncore``,
    ``aws.amazon.com/neurondevice``) are held at 0: a ResourceQuota counts each resource on its
    own, so a budget in another form, or none (an unlisted resource is not bounded at all),
    would let a team hold its devices twice over or without limit. Pods take Trainium as
    ``aws.amazon.com/neuron``; a request under another name is refused at admission by this
    quota (a listed resource at 0 refuses every request) and by the tenant pods policy.

    ``pods`` bounds how many pods exist at once (``quota.pods``): each holds an address of the
    VPC and a slot of a node's pod limit, which CPU and memory alone do not bound for pods
    that request little (the LimitRange's minimum keeps them from requesting nothing).

    Args:
        team: the team.
        pools: the stack's accelerated pools (the default CPU and memory).
    """
    quota = team.quota
    cpu, memory = accelerator_node_capacity(team, pools)
    if cpu == 0 and memory == 0:
        # No accelerator nodes to size by: CPU pods still run, within one node's worth.
        cpu, memory = CPU_ONLY_VCPUS, CPU_ONLY_MEMORY_GIB
    return {
        "hard": {
            **{f"requests.{name}": str(count) for name, count in quota.resources().items()},
            **{f"requests.{name}": "0" for name in OTHER_NEURON_RESOURCES},
            f"requests.{EFA_RESOURCE}": str(quota.efa_interfaces),
            "requests.cpu": str(quota.cpu if quota.cpu is not None else cpu),
            "requests.memory": f"{quota.memory_gib if quota.memory_gib is not None else memory}Gi",
            "pods": str(quota.pods),
        }
    }


TEAM_QUOTA: Final = "accelerators"
"""Name of each team namespace's ResourceQuota (:func:`resource_quota_spec`): GangPending's
quota reason reads this quota's ``hard`` and ``used`` (components/observability/rules.py)."""

CONTAINER_MIN_CPU: Final = "10m"
CONTAINER_MIN_MEMORY: Final = "16Mi"
"""The least a team container may request (LimitRange ``min``): a pod requesting nothing would
count nothing against the team's CPU and memory quota, however many there are."""

SYSTEM_PRIORITY_CLASSES: Final = ("system-node-critical", "system-cluster-critical")
"""Kubernetes' built-in classes, which any namespace may use since 1.17 (kubernetes#76310):
they outrank every training class and preempt, so one team pod could evict a gang's worker."""
SYSTEM_PRIORITY_QUOTA: Final = "no-system-priority"


def system_priority_quota_spec() -> dict[str, Any]:
    """A ResourceQuota that admits no pod of the system priority classes in a team namespace.

    The quota admission plugin counts a pod against a quota whose ``scopeSelector`` matches
    it (scope ``PriorityClass`` matches the pod's ``spec.priorityClassName``) and refuses the
    pod when the count would exceed ``hard``: at ``pods: 0`` every such pod is refused, and
    pods of any other class (the platform's training classes) are not counted at all.
    """
    return {
        "hard": {"pods": "0"},
        "scopeSelector": {
            "matchExpressions": [
                {
                    "scopeName": "PriorityClass",
                    "operator": "In",
                    "values": list(SYSTEM_PRIORITY_CLASSES),
                }
            ]
        },
    }


RESOURCE_TAINTS: Final = {
    GPU_RESOURCE: (GPU_RESOURCE,),
    NEURON_RESOURCE: (NEURON_RESOURCE,),
    EFA_RESOURCE: (EFA_RESOURCE,),
}
"""Taint keys a team pod may tolerate only while it requests the resource: the accelerator
taints of the pools (:func:`components.node_pools.accelerator_taint`: the accelerator's resource
name is the key), and EFA, whose toleration the ExtendedResourceToleration admission plugin adds
to a pod that requests it (a taint keyed by the extended resource's name)."""
NODE_CONDITION_TOLERATIONS: Final = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
)
"""The tolerations the DefaultTolerationSeconds admission plugin gives every pod (NoExecute, 300
seconds): a pod stays that long on a node that stops answering."""
OTHER_NEURON_RESOURCES: Final = (NEURON_CORE_RESOURCE, NEURON_DEVICE_RESOURCE)
"""The Neuron device plugin's other names of the Trainium devices that ``aws.amazon.com/neuron``
counts: held at 0 by the quota and refused by the tenant pods policy."""


def largest_trainium_node(pools: list[NodePoolConfig]) -> int:
    """Neuron devices of the largest Trainium instance type of ``pools`` (0 without one).

    Args:
        pools: the stack's accelerated pools.
    """
    return max(
        (
            catalog.CATALOG[name].accelerators
            for pool in pools
            if pool.instance.accelerator_resource == NEURON_RESOURCE
            for name in pool.instance_types
            if name in catalog.CATALOG
        ),
        default=0,
    )


def team_pods_policy(teams: list[TeamConfig], pools: list[NodePoolConfig]) -> dict[str, Any]:
    """The tenant pods policy of these teams (:func:`components.tenant_pods.tenant_pods_policy`).

    Args:
        teams: the validated teams; their unqueued service accounts.
        pools: the stack's accelerated pools: their extra taints, which the runtimes' pods
            tolerate, and their largest Trainium node.
    """
    extra_taints = sorted({taint.key for pool in pools for taint in pool.taints})
    # Never the health taints, even where a pool names one as an extra taint: a team pod that
    # tolerated them would land on a node before it passed acceptance, or after it failed.
    never = {*RESOURCE_TAINTS, slurm_taint()["key"], *health_marks.AGENT_TAINT_KEYS}
    return tenant_pods_policy(
        team_label=TEAM_LABEL,
        allowed_toleration_keys=[
            *NODE_CONDITION_TOLERATIONS,
            *(k for k in extra_taints if k not in never),
        ],
        resource_taints=RESOURCE_TAINTS,
        scheduler_name=SCHEDULER_NAME,
        scheduled_resources=[GPU_RESOURCE, EFA_RESOURCE],
        scheduled_prefix=NEURON_RESOURCE,
        neuron_scheduler_name=NEURON_SCHEDULER_NAME,
        neuron_resource=NEURON_RESOURCE,
        neuron_node_devices=largest_trainium_node(pools),
        other_neuron_resources=OTHER_NEURON_RESOURCES,
        whole_node_resources=[GPU_RESOURCE, EFA_RESOURCE],
        training_priority_classes=list(PRIORITY_CLASSES),
        unqueued_service_accounts={team.name: team.unqueued_service_accounts for team in teams},
    )


def limit_range_spec() -> dict[str, Any]:
    """Default requests for containers that state none, and the least one may state.

    Defaults let the scheduler place them; the minimum (:data:`CONTAINER_MIN_CPU`,
    :data:`CONTAINER_MIN_MEMORY`) keeps every container counted by the quota.

    No default limits: a training container that states only ``nvidia.com/gpu`` would be
    capped at a default CPU and memory limit and killed.
    """
    return {
        "limits": [
            {
                "type": "Container",
                "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
                # A container stating a zero request would count nothing against the quota.
                "min": {"cpu": CONTAINER_MIN_CPU, "memory": CONTAINER_MIN_MEMORY},
            },
        ]
    }


def team_namespace_labels(
    team: TeamConfig, *, kubernetes_version: str, katib: bool = False
) -> dict[str, str]:
    """A team namespace's labels: its team (what the queue policy reads) and Pod Security.

    Args:
        team: the team.
        kubernetes_version: the cluster's minor, to which the Pod Security levels are pinned.
        katib: Katib is on: its pod webhook gives the trials' primary pods their metrics
            collector in namespaces with :data:`~components.katib.METRICS_COLLECTOR_INJECTION`
            only. Default: false.
    """
    return {
        TEAM_LABEL: team.name,
        **pod_security_labels(
            TEAM_POD_SECURITY,
            kubernetes_version=kubernetes_version,
            advise=TEAM_POD_SECURITY_ADVICE,
        ),
        **(METRICS_COLLECTOR_INJECTION if katib else {}),
    }


def team_access_entries(teams: list[TeamConfig]) -> dict[str, list[str]]:
    """Each IAM principal of any team with the Kubernetes groups its access entry gives it.

    EKS holds one access entry per principal (CreateAccessEntry fails with
    ResourceInUseException for a second), so a principal in several teams, or admin of one and
    member of another, gets one entry with every group. Principals are matched as IAM does
    (:func:`principal_identity`: one role whatever its path or case); the first spelling wins.

    Args:
        teams: the validated teams.

    Returns:
        principal ARN -> sorted groups, in the order the principals first appear.
    """
    groups: dict[tuple[str, str, str], set[str]] = {}
    spelling: dict[tuple[str, str, str], str] = {}
    for team in teams:
        for arns, team_groups in (
            (team.admin_principal_arns, team.admin_groups),
            (team.member_principal_arns, team.member_groups),
        ):
            for arn in arns:
                identity = principal_identity(arn)
                spelling.setdefault(identity, arn)
                groups.setdefault(identity, set()).update(team_groups)
    return {spelling[identity]: sorted(found) for identity, found in groups.items()}


def access_entry_resource_name(prefix: str, principal_arn: str) -> str:
    """A stable resource name for a principal's entry: by account, kind and name, not position."""
    account, kind, principal = principal_identity(principal_arn)
    return f"{prefix}-access-{account}-{kind}-{principal}"


def cluster_role_ref(name: str) -> k8s.rbac.v1.RoleRefArgsDict:
    """A binding's reference to the ClusterRole ``name``."""
    return {"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}


def role_binding_subjects(groups: list[str]) -> list[dict[str, str]]:
    """RBAC subjects for Kubernetes groups."""
    return [
        {"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}
        for group in groups
    ]


def _cast(value: object) -> Any:
    # Builders speak the Kubernetes API's field names, which the SDK passes through unchanged.
    return typing.cast(Any, value)


class Teams(pulumi.ComponentResource):
    """One namespace per team with its quota, defaults, access and job service account.

    Output: ``namespaces`` (team name -> Namespace resource) for what lives in them (claims).
    """

    def __init__(
        self,
        name: str,
        *,
        teams: list[TeamConfig],
        pools: list[NodePoolConfig],
        cluster_name: pulumi.Input[str],
        kubernetes_version: str,
        kubernetes_provider: pulumi.ProviderResource,
        cluster_ready: list[pulumi.Resource],
        gang_limits: GangLimits,
        katib: bool = False,
        controllers: Mapping[str, Sequence[ControllerIngress]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the team namespaces, their isolation and their members' access entries.

        Args:
            name: prefix of child resource names.
            teams: validated teams.
            pools: the accelerated pools (the teams' default CPU and memory quota).
            cluster_name: the EKS cluster the access entries belong to.
            kubernetes_version: the cluster's minor (Pod Security levels are pinned to it).
            kubernetes_provider: provider of every Kubernetes object.
            cluster_ready: what the objects wait for (the cluster and its system nodes).
            gang_limits: the pools' node limits and the runtimes on them: no gang in a team
                namespace may ask for more nodes than its pool launches.
            katib: Katib is on: members of teams with ``katib.enabled`` get its Experiments
                (:data:`KATIB_RULES`) and their namespaces its metrics collector's label.
                Default: false.
            controllers: team -> the platform controllers that connect to its pods, each
                admitted by a NetworkPolicy of its own
                (:func:`components.tenancy.team_network_policies`). Default: none.
            opts: resource options (the AWS provider of the access entries).
        """
        super().__init__("trainingplatform:index:Teams", name, None, opts)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        if not teams:
            self.register_outputs({})
            return
        k8s.rbac.v1.ClusterRole(
            f"{name}-jobs",
            metadata={"name": JOBS_CLUSTER_ROLE},
            rules=_cast(JOB_RULES),
            opts=in_cluster,
        )
        k8s.rbac.v1.ClusterRole(
            f"{name}-member-writes",
            metadata={"name": MEMBER_WRITES_CLUSTER_ROLE},
            rules=_cast(MEMBER_WRITE_RULES),
            opts=in_cluster,
        )
        if katib:
            k8s.rbac.v1.ClusterRole(
                f"{name}-katib",
                metadata={"name": KATIB_CLUSTER_ROLE},
                rules=_cast(KATIB_RULES),
                opts=in_cluster,
            )
        catalog = k8s.rbac.v1.ClusterRole(
            f"{name}-catalog",
            metadata={"name": CATALOG_CLUSTER_ROLE},
            rules=_cast(CATALOG_RULES),
            opts=in_cluster,
        )
        # Every tenant policy judges team namespaces only: (resource name suffix, policy, spec).
        team_policies: list[tuple[str, str, dict[str, Any]]] = [
            (
                "queues",
                QUEUE_POLICY,
                queue_ownership_policy(
                    team_label=TEAM_LABEL,
                    queue_annotation=QUEUE_ANNOTATION,
                    scheduler_name=SCHEDULER_NAME,
                    ray_queue_label=RAY_QUEUE_LABEL,
                ),
            ),
            (
                "legacy-min-resources",
                LEGACY_MIN_RESOURCES_POLICY,
                legacy_min_resources_policy(team_label=TEAM_LABEL),
            ),
            (
                "services",
                SERVICE_POLICY,
                service_exposure_policy(
                    team_label=TEAM_LABEL,
                    internal_load_balancers=[
                        team.name for team in teams if team.allow_internal_load_balancers
                    ],
                ),
            ),
            (
                "writes",
                TENANT_WRITES_POLICY,
                tenant_writes_policy(
                    team_label=TEAM_LABEL,
                    member_groups={team.name: team.member_groups for team in teams},
                    admin_groups={team.name: team.admin_groups for team in teams},
                ),
            ),
            ("gang-sizes", GANG_SIZE_POLICY, gang_size_policy(gang_limits, team_label=TEAM_LABEL)),
            (
                "ray-gangs",
                RAY_GANG_POLICY,
                ray_gang_policy(
                    team_label=TEAM_LABEL,
                    allowed=[team.name for team in teams if team.ray.allow_cluster_selector],
                    priority_classes=list(PRIORITY_CLASSES),
                    limits=gang_limits,
                ),
            ),
            ("pods", TENANT_PODS_POLICY, team_pods_policy(teams, pools)),
            # Pods share their node's security groups, and the file servers trust any client
            # that connects from a privileged port: no team pod may bind one.
            (
                "lustre-boundary",
                LUSTRE_BOUNDARY_POLICY,
                lustre_boundary_policy(team_label=TEAM_LABEL),
            ),
        ]
        for suffix, policy_name, spec in team_policies:
            enforced_policy(
                f"{name}-{suffix}",
                policy_name,
                spec,
                binding=team_namespace_binding(policy_name, team_label=TEAM_LABEL),
                opts=in_cluster,
            )
        for principal_arn, groups in team_access_entries(teams).items():
            # STANDARD with groups and no access policy: what the groups may do is the
            # RoleBindings below (EKS authorizes an entry's kubernetesGroups through RBAC).
            aws.eks.AccessEntry(
                access_entry_resource_name(name, principal_arn),
                cluster_name=cluster_name,
                principal_arn=principal_arn,
                type="STANDARD",
                kubernetes_groups=groups,
                opts=pulumi.ResourceOptions(parent=self, depends_on=cluster_ready),
            )
        team_groups = sorted(
            {group for team in teams for group in (*team.admin_groups, *team.member_groups)}
        )
        if team_groups:
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-catalog",
                metadata={"name": CATALOG_CLUSTER_ROLE},
                role_ref=cluster_role_ref(CATALOG_CLUSTER_ROLE),
                subjects=_cast(role_binding_subjects(team_groups)),
                opts=pulumi.ResourceOptions.merge(
                    in_cluster, pulumi.ResourceOptions(depends_on=[catalog])
                ),
            )
        for team in teams:
            namespace = k8s.core.v1.Namespace(
                f"{name}-{team.name}",
                metadata={
                    "name": team.name,
                    "labels": team_namespace_labels(
                        team,
                        kubernetes_version=kubernetes_version,
                        katib=katib and team.katib.enabled,
                    ),
                },
                opts=in_cluster,
            )
            self.namespaces[team.name] = namespace
            inside = pulumi.ResourceOptions(
                parent=self, provider=kubernetes_provider, depends_on=[namespace]
            )
            metadata: dict[str, Any] = {"namespace": team.name, "labels": {TEAM_LABEL: team.name}}
            k8s.core.v1.ResourceQuota(
                f"{name}-{team.name}-accelerators",
                metadata=_cast({**metadata, "name": TEAM_QUOTA}),
                spec=_cast(resource_quota_spec(team, pools)),
                opts=inside,
            )
            k8s.core.v1.ResourceQuota(
                f"{name}-{team.name}-{SYSTEM_PRIORITY_QUOTA}",
                metadata=_cast({**metadata, "name": SYSTEM_PRIORITY_QUOTA}),
                spec=_cast(system_priority_quota_spec()),
                opts=inside,
            )
            k8s.core.v1.LimitRange(
                f"{name}-{team.name}-defaults",
                metadata=_cast({**metadata, "name": "container-defaults"}),
                spec=_cast(limit_range_spec()),
                opts=inside,
            )
            # No token: no pod of Trainer's runtimes calls the API server (Trainer v2.3.0
            # mounts the MPI hostfile and SSH keys as volumes; its one token-using plugin,
            # TrainJobStatus, is an alpha gate we leave off), so a job gets no credentials a
            # compromised step could use. A legacy v1 MPIJob's launcher does run kubectl exec,
            # as the ServiceAccount the operator makes for it (<job>-launcher) unless its
            # template names another (training-operator release-1.9
            # pkg/controller.v1/mpi/mpijob_controller.go): it must not name this one.
            k8s.core.v1.ServiceAccount(
                f"{name}-{team.name}-jobs",
                metadata=_cast({**metadata, "name": JOB_SERVICE_ACCOUNT}),
                automount_service_account_token=False,
                opts=inside,
            )
            for manifest in team_network_policies(
                team.name,
                labels={TEAM_LABEL: team.name},
                controllers=(controllers or {}).get(team.name, ()),
            ):
                k8s.networking.v1.NetworkPolicy(
                    f"{name}-{team.name}-{manifest['metadata']['name']}",
                    metadata=_cast(manifest["metadata"]),
                    spec=_cast(manifest["spec"]),
                    opts=inside,
                )
            bindings: list[tuple[str, str, list[str]]] = [
                ("admins", "admin", team.admin_groups),
                ("members", MEMBER_READ_CLUSTER_ROLE, team.member_groups),
                ("members-writes", MEMBER_WRITES_CLUSTER_ROLE, team.member_groups),
                ("admins-jobs", JOBS_CLUSTER_ROLE, team.admin_groups),
                ("members-jobs", JOBS_CLUSTER_ROLE, team.member_groups),
            ]
            if katib and team.katib.enabled:
                bindings += [
                    ("admins-katib", KATIB_CLUSTER_ROLE, team.admin_groups),
                    ("members-katib", KATIB_CLUSTER_ROLE, team.member_groups),
                ]
            for binding, role, groups in bindings:
                if not groups:
                    continue
                k8s.rbac.v1.RoleBinding(
                    f"{name}-{team.name}-{binding}",
                    metadata=_cast({**metadata, "name": f"team-{binding}"}),
                    role_ref=cluster_role_ref(role),
                    subjects=_cast(role_binding_subjects(groups)),
                    opts=inside,
                )
        self.register_outputs({})
