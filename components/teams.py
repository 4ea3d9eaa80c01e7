"""Team namespaces: quota, defaults, access and the service account jobs run as."""

from __future__ import annotations

import typing
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import EFA_RESOURCE, NEURON_CORE_RESOURCE
from components.config import TeamConfig

TEAM_LABEL: Final = "trainingplatform.io/team"
JOB_SERVICE_ACCOUNT: Final = "training-jobs"
JOBS_CLUSTER_ROLE: Final = "trainingplatform:training-jobs"
# What team members manage in their namespace: Kubeflow Trainer v2 jobs, the legacy Training
# Operator's, and read access to the runtimes and gangs there. A job's status is the
# controllers' to write.
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
        "resources": ["pytorchjobs", "tfjobs", "mpijobs", "jaxjobs", "xgboostjobs", "paddlejobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["scheduling.volcano.sh"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch"],
    },
]
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


def resource_quota_spec(team: TeamConfig) -> dict[str, Any]:
    """Hard limits on what the namespace's pods may request: accelerators and EFA.

    Neuron cores (``aws.amazon.com/neuroncore``) are held at 0: a ResourceQuota counts each
    resource on its own, so a budget in both forms would let a team hold its devices twice over
    (devices plus cores worth as many). Pods take Trainium as devices; a request for cores is
    refused at admission by this quota (a listed resource at 0 refuses every request).

    Args:
        team: the team.
    """
    quota = team.quota
    return {
        "hard": {
            **{f"requests.{name}": str(count) for name, count in quota.resources().items()},
            f"requests.{NEURON_CORE_RESOURCE}": "0",
            f"requests.{EFA_RESOURCE}": str(quota.efa_interfaces),
        }
    }


def limit_range_spec() -> dict[str, Any]:
    """Default requests for containers that state none, so the scheduler can place them.

    No default limits: a training container that states only ``nvidia.com/gpu`` would be
    capped at a default CPU and memory limit and killed.
    """
    return {
        "limits": [
            {"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}},
        ]
    }


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
        kubernetes_provider: pulumi.ProviderResource,
        cluster_ready: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the team namespaces.

        Args:
            name: prefix of child resource names.
            teams: validated teams.
            kubernetes_provider: provider of every object.
            cluster_ready: what the objects wait for (the cluster and its system nodes).
            opts: resource options.
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
        catalog = k8s.rbac.v1.ClusterRole(
            f"{name}-catalog",
            metadata={"name": CATALOG_CLUSTER_ROLE},
            rules=_cast(CATALOG_RULES),
            opts=in_cluster,
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
                metadata={"name": team.name, "labels": {TEAM_LABEL: team.name}},
                opts=in_cluster,
            )
            self.namespaces[team.name] = namespace
            inside = pulumi.ResourceOptions(
                parent=self, provider=kubernetes_provider, depends_on=[namespace]
            )
            metadata: dict[str, Any] = {"namespace": team.name, "labels": {TEAM_LABEL: team.name}}
            k8s.core.v1.ResourceQuota(
                f"{name}-{team.name}-accelerators",
                metadata=_cast({**metadata, "name": "accelerators"}),
                spec=_cast(resource_quota_spec(team)),
                opts=inside,
            )
            k8s.core.v1.LimitRange(
                f"{name}-{team.name}-defaults",
                metadata=_cast({**metadata, "name": "container-defaults"}),
                spec=_cast(limit_range_spec()),
                opts=inside,
            )
            k8s.core.v1.ServiceAccount(
                f"{name}-{team.name}-jobs",
                metadata=_cast({**metadata, "name": JOB_SERVICE_ACCOUNT}),
                opts=inside,
            )
            bindings = (
                ("admins", "admin", team.admin_groups),
                ("members", "edit", team.member_groups),
                ("admins-jobs", JOBS_CLUSTER_ROLE, team.admin_groups),
                ("members-jobs", JOBS_CLUSTER_ROLE, team.member_groups),
            )
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
