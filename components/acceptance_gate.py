"""The acceptance gate on the cluster: the agent's namespace, rights, settings and DaemonSets.

Every accelerator node starts with the acceptance taint (:mod:`components.node_pools`); one
DaemonSet per accelerator vendor runs the acceptance agent on those pools' nodes, which checks
its node and frees it or moves it out (docs: concepts, node acceptance). The agent may change
only the health marks of a node (:data:`components.health_marks.AGENT_TAINT_KEYS`, labels and
annotations): a ValidatingAdmissionPolicy holds it, and the Slurm health mirror, to them.

The builders here are pure; :class:`AcceptanceGate` registers them.
"""

from __future__ import annotations

import hashlib
import json
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import pulumi
import pulumi_kubernetes as k8s

from acceptance.floors import load_floors
from components import health_marks, workloads
from components.admission import enforced_policy
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.config import NodePoolConfig
from components.config.acceptance import AcceptanceConfig
from components.config.pools import GENERAL_POOL
from components.device_plugins import node_daemon_tolerations
from components.node_pools import (
    POOL_LABEL,
    required_node_affinity,
)
from components.tenancy import hardened_pod

NAMESPACE: Final = "node-acceptance"
SERVICE_ACCOUNT: Final = "acceptance-agent"
AGENT_USER: Final = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
"""The user the API server sees the agent as (its service account)."""
MIRROR_USER: Final = (
    f"system:serviceaccount:{health_marks.MIRROR_NAMESPACE}:{health_marks.MIRROR_ACCOUNT}"
)
"""The Slurm health mirror's user: it sets and clears the same marks (issue 44, item 4)."""
NODE_MARKS_POLICY: Final = "trainingplatform-node-health-marks"
POD_SECURITY_LEVEL: Final = "restricted"
"""The agent and its check pods need no privilege, host namespace, host path nor capability:
the devices come from the device plugins, and both run as the image's non-root user with every
capability dropped and the RuntimeDefault seccomp profile (the check pod as the agent builds it,
acceptance/agent.py). So the namespace enforces the most restrictive level."""
AGENT_UID: Final = 10001
"""The acceptance image's user (images/acceptance/Dockerfile, ``USER 10001:10001``)."""
SETTINGS_KEY: Final = "settings.json"
SETTINGS_DIR: Final = "/etc/acceptance"
SETTINGS_PATH: Final = f"{SETTINGS_DIR}/{SETTINGS_KEY}"
PRIORITY_CLASS: Final = "system-node-critical"
"""As the device plugins: the agent must run on every node it gates, or the node waits."""
AGENT_REQUESTS: Final = {
    "cpu": f"{workloads.NODE_AGENT_CPU_MILLIS}m",
    "memory": f"{workloads.NODE_AGENT_MEMORY_MIB}Mi",
}
"""The agent only watches its node and creates one pod: what ``synth jobs`` counts as its
overhead on each pool, and what whole-node pods leave it (components/workloads.py)."""
AGENT_LIMITS: Final = {"cpu": "500m", "memory": "256Mi"}
"""Enough for a Kubernetes client; a runaway agent cannot take CPU from a node's checks."""

Vendor = Literal["nvidia", "neuron"]
VENDOR_RESOURCES: Final[dict[Vendor, str]] = {"nvidia": GPU_RESOURCE, "neuron": NEURON_RESOURCE}


def vendor_of(pool: NodePoolConfig) -> Vendor:
    """The accelerator vendor of a pool: ``nvidia`` (GPU) or ``neuron`` (Trainium).

    Args:
        pool: the validated pool.
    """
    return "neuron" if pool.instance.accelerator_resource == NEURON_RESOURCE else "nvidia"


def vendor_pools(pools: Sequence[NodePoolConfig]) -> dict[Vendor, list[NodePoolConfig]]:
    """The pools of each vendor present, in the order the stack lists them.

    Args:
        pools: the stack's accelerator pools.
    """
    found: dict[Vendor, list[NodePoolConfig]] = {}
    for pool in pools:
        found.setdefault(vendor_of(pool), []).append(pool)
    return found


def agent_name(vendor: Vendor) -> str:
    """The DaemonSet of a vendor's agent, e.g. ``acceptance-agent-nvidia``."""
    return f"{SERVICE_ACCOUNT}-{vendor}"


def settings_name(vendor: Vendor) -> str:
    """The ConfigMap of a vendor's settings, e.g. ``acceptance-settings-nvidia``."""
    return f"acceptance-settings-{vendor}"


def pool_floors(pool: NodePoolConfig) -> list[dict[str, Any]]:
    """The floors of a pool's types: the shipped baselines, the pool's own replacing them.

    Same field names as acceptance/baselines.json, so ``acceptance.floors`` reads them; a pool
    baseline replaces the shipped entry of equal (type, check, nodes).

    Args:
        pool: the validated pool.
    """
    floors = {
        key: {
            "instance_type": f.instance_type,
            "check": f.check,
            "nodes": f.nodes,
            "floor_gbps": f.floor_gbps,
            "of": f.of,
            "source": f.source,
        }
        for key, f in load_floors().items()
        if f.instance_type in pool.instance_types
    }
    for b in pool.acceptance.baselines:
        floors[(b.instance_type, b.check, b.nodes)] = {
            "instance_type": b.instance_type,
            "check": b.check,
            "nodes": b.nodes,
            "floor_gbps": b.floor_gbps,
            "of": b.of,
            "source": b.source,
        }
    return [floors[key] for key in sorted(floors)]


@dataclass(frozen=True)
class FileSystemMount:
    """A file system a pool's nodes must mount, as the check pod mounts it."""

    name: str
    """What the check calls it (``lustre``)."""
    claim: str
    """Its PersistentVolumeClaim in :data:`NAMESPACE`, mounted read-only."""
    mount_path: str
    fs_type: str


def agent_settings(
    acceptance: AcceptanceConfig,
    pools: Sequence[NodePoolConfig],
    *,
    image: str,
    mounts: Mapping[str, Sequence[FileSystemMount]],
) -> dict[str, Any]:
    """The agent's settings file of one vendor (``settings.json``; the issue's shared contract).

    Args:
        acceptance: ``platform.acceptance``: deadline, DCGM level, replacement defaults.
        pools: the vendor's pools.
        image: the vendor's acceptance image (the agent's and its check pods').
        mounts: pool name -> the file systems its nodes must mount (none where absent).
    """
    return {
        "deadlineMinutes": acceptance.deadline_minutes,
        "dcgmDiagLevel": acceptance.dcgm_diag_level,
        "checkImage": image,
        "pools": {
            pool.name: {
                "replaceFailedNodes": (
                    acceptance.replace_failed_nodes
                    if pool.acceptance.replace_failed_nodes is None
                    else pool.acceptance.replace_failed_nodes
                ),
                "maxReplacementsPerHour": (
                    acceptance.max_replacements_per_pool_per_hour
                    if pool.acceptance.max_replacements_per_hour is None
                    else pool.acceptance.max_replacements_per_hour
                ),
                "efa": pool.uses_efa,
                "fileSystems": [
                    {
                        "name": m.name,
                        "claim": m.claim,
                        "mountPath": m.mount_path,
                        "fsType": m.fs_type,
                    }
                    for m in mounts.get(pool.name, ())
                ],
                "floors": pool_floors(pool),
            }
            for pool in pools
        },
    }


def agent_tolerations(
    pools: Sequence[NodePoolConfig], slurm_pools: Collection[str]
) -> list[dict[str, Any]]:
    """Every taint the vendor's pools' nodes may carry, tolerated.

    The accelerator taint, the pools' extra taints, Slurm's reservation taint where a pool
    keeps nodes for Slurm, the acceptance and unhealthy taints, and the FSx startup taint: a
    node whose Lustre client never comes up must still be judged (and moved out) by its
    deadline, or it would wait forever.

    Args:
        pools: the vendor's pools.
        slurm_pools: names of pools that keep nodes for Slurm.
    """
    return node_daemon_tolerations(pools, slurm_pools)


def agent_daemonset(
    vendor: Vendor,
    pools: Sequence[NodePoolConfig],
    *,
    image: str,
    slurm_pools: Collection[str],
    settings_version: str = "",
) -> dict[str, Any]:
    """The DaemonSet spec of a vendor's agent: on its pools' nodes only, no device resources.

    Args:
        vendor: ``nvidia`` or ``neuron``.
        pools: the vendor's pools (nodeAffinity on their :data:`POOL_LABEL`).
        image: the vendor's acceptance image.
        slurm_pools: names of pools that keep nodes for Slurm (their taint is tolerated).
        settings_version: a digest of the settings, as a pod annotation, so a change of them
            rolls the agents. Default: none.
    """
    labels = {"app.kubernetes.io/name": SERVICE_ACCOUNT, "app.kubernetes.io/component": vendor}
    field = [
        ("NODE_NAME", "spec.nodeName"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_NAME", "metadata.name"),  # its DaemonSet also owns the check pods
    ]
    pod = _program_pod(
        "agent",
        image=image,
        field_env=field,
        resources={"requests": dict(AGENT_REQUESTS), "limits": dict(AGENT_LIMITS)},
        settings_configmap=settings_name(vendor),
    )
    pod.update(
        priorityClassName=PRIORITY_CLASS,
        affinity=required_node_affinity(POOL_LABEL, [pool.name for pool in pools]),
        tolerations=agent_tolerations(pools, slurm_pools),
    )
    return {
        "selector": {"matchLabels": labels},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": _template_metadata(labels, settings_version), "spec": pod},
    }


def _template_metadata(labels: dict[str, str], settings_version: str) -> dict[str, Any]:
    """A pod template's labels, and the settings digest that rolls its pods when they change."""
    if not settings_version:
        return {"labels": labels}
    return {"labels": labels, "annotations": {"trainingplatform.io/settings": settings_version}}


def _program_pod(
    command: str,
    *,
    image: str,
    field_env: list[tuple[str, str]],
    resources: dict[str, Any],
    settings_configmap: str,
) -> dict[str, Any]:
    """The pod spec of one ``python -m acceptance <command>`` in the gate's namespace.

    As the agent's service account, non-root (the image's user), read-only root, every
    capability dropped (:func:`components.tenancy.hardened_pod`), its settings mounted, and the
    API token by a projected volume only: the same files as the automatic mount, which is off
    (Kubernetes docs, "Configure Service Accounts for Pods", projected token volume).

    Args:
        command: the acceptance command (``agent``, ``sweep``), also the container's name.
        image: the acceptance image.
        field_env: environment variables from the pod's fields (name, field path).
        resources: the container's requests and limits.
        settings_configmap: the ConfigMap its ``settings.json`` comes from.
    """
    return hardened_pod(
        {
            "serviceAccountName": SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": AGENT_UID,
                "runAsGroup": AGENT_UID,
            },
            "containers": [
                {
                    "name": command,
                    "image": image,
                    "command": ["python", "-m", "acceptance", command],
                    "env": [
                        {"name": "ACCEPTANCE_SETTINGS", "value": SETTINGS_PATH},
                        *(
                            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                            for name, path in field_env
                        ),
                    ],
                    "resources": resources,
                    "securityContext": {"readOnlyRootFilesystem": True},
                    "volumeMounts": [
                        {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": True},
                        {"name": "api-token", "mountPath": TOKEN_DIR, "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "settings", "configMap": {"name": settings_configmap}},
                {"name": "api-token", "projected": api_token_projection()},
            ],
        }
    )


SWEEP_NAME: Final = "acceptance-sweep"
"""The Deployment (and its settings ConfigMap) that enforces the deadline from outside the
nodes (acceptance/sweep.py)."""
SWEEP_REQUESTS: Final = {"cpu": "20m", "memory": "96Mi"}
SWEEP_LIMITS: Final = {"cpu": "200m", "memory": "256Mi"}
"""One Python process listing nodes once a minute: small; a throttled sweep only sweeps later."""


def sweep_deployment(image: str, settings_version: str = "") -> dict[str, Any]:
    """The sweep's Deployment spec: one pod on the general pool, as the agent's account.

    It runs as the agent's service account: it does what the agents do (the same verdict, the
    same Lease), and the node-marks policy admits that user's node patches. ``Recreate``: two
    sweeps at once would only race for the same Lease, but one is enough.

    Args:
        image: an acceptance image (either vendor's: the sweep runs only the package).
        settings_version: a digest of its settings, as a pod annotation (default none).
    """
    labels = {"app.kubernetes.io/name": SWEEP_NAME}
    pod = _program_pod(
        "sweep",
        image=image,
        field_env=[("POD_NAMESPACE", "metadata.namespace")],
        resources={"requests": dict(SWEEP_REQUESTS), "limits": dict(SWEEP_LIMITS)},
        settings_configmap=SWEEP_NAME,
    )
    pod["nodeSelector"] = {POOL_LABEL: GENERAL_POOL}
    return {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": labels},
        "template": {"metadata": _template_metadata(labels, settings_version), "spec": pod},
    }


TOKEN_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where Kubernetes clients read the in-cluster token, CA and namespace."""
TOKEN_SECONDS: Final = 3607
"""The token's lifetime as the automatic mount asks for it (the kubelet refreshes it)."""


def api_token_projection() -> dict[str, Any]:
    """The projected volume of the service account's token, CA and namespace.

    What the automatic mount gives a pod (token, ``kube-root-ca.crt``, the namespace), stated
    so the pod can turn the automatic mount off and still reach the API server.
    """
    return {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ]
    }


def cluster_role_rules() -> list[dict[str, Any]]:
    """The agent's cluster-wide rights: its nodes and their NodeClaims."""
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"],
         "verbs": ["get", "list", "delete"]},
    ]  # fmt: skip


EVENTS_NAMESPACE: Final = "default"
"""Where the agent writes its Events about Nodes (acceptance/agent.py ``EVENT_NAMESPACE``: the
API server admits a core/v1 Event about a cluster-scoped object only in "" or "default")."""


def events_role_rules() -> list[dict[str, Any]]:
    """The agent's rights in :data:`EVENTS_NAMESPACE`: creating Events, nothing else."""
    return [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def role_rules() -> list[dict[str, Any]]:
    """The agent's rights in :data:`NAMESPACE`: its check pods and the replacement counts."""
    return [
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "create", "update"]},
    ]  # fmt: skip


def node_marks_policy(users: Sequence[str] = (AGENT_USER, MIRROR_USER)) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: ``users`` change only a node's health marks.

    An UPDATE of a node (a PATCH is one) by one of them is admitted only when the old and new
    node differ in nothing but taints of :data:`~components.health_marks.AGENT_TAINT_KEYS`,
    labels of ``AGENT_LABELS`` and annotations of ``AGENT_ANNOTATIONS`` (and what the API
    server itself keeps: ``resourceVersion``, ``managedFields``). Anything else (another
    taint, another label, ``spec.unschedulable``) is refused. Status is another subresource,
    which their roles do not grant.

    Args:
        users: the usernames held to it. Default: the agent's and the Slurm health mirror's.
    """

    def keys(values: Sequence[str]) -> str:
        return "[" + ", ".join(f"'{v}'" for v in values) + "]"

    def other_taints(node: str) -> str:
        return (
            f"(has({node}.spec.taints) ? {node}.spec.taints.filter(t, !(t.key in "
            f"{keys(health_marks.AGENT_TAINT_KEYS)})) : [])"
        )

    def field_map(node: str, field: str) -> str:
        return f"(has({node}.metadata.{field}) ? {node}.metadata.{field} : {{}})"

    def same_except(old: str, new: str, allowed: str) -> str:
        return (
            f"{old}.all(k, k in {allowed} || (k in {new} && {new}[k] == {old}[k])) && "
            f"{new}.all(k, k in {allowed} || k in {old})"
        )

    server_kept = keys(["labels", "annotations", "resourceVersion", "managedFields"])
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["UPDATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["nodes"],
                }
            ]
        },
        "matchConditions": [
            {"name": "health-writers", "expression": f"request.userInfo.username in {keys(users)}"}
        ],
        "variables": [
            {"name": "oldSpec", "expression": "has(oldObject.spec) ? oldObject.spec : {}"},
            {"name": "newSpec", "expression": "has(object.spec) ? object.spec : {}"},
        ],
        "validations": [
            {
                "expression": f"{other_taints('oldObject')} == {other_taints('object')}",
                "message": "only the taints "
                + ", ".join(health_marks.AGENT_TAINT_KEYS)
                + " may be added or removed by the node health writers",
                "reason": "Forbidden",
            },
            {
                "expression": same_except(
                    field_map("oldObject", "labels"),
                    field_map("object", "labels"),
                    keys(health_marks.AGENT_LABELS),
                ),
                "message": "only the labels "
                + ", ".join(health_marks.AGENT_LABELS)
                + " may change by the node health writers",
                "reason": "Forbidden",
            },
            {
                "expression": same_except(
                    field_map("oldObject", "annotations"),
                    field_map("object", "annotations"),
                    keys(health_marks.AGENT_ANNOTATIONS),
                ),
                "message": "only the annotations "
                + ", ".join(health_marks.AGENT_ANNOTATIONS)
                + " may change by the node health writers",
                "reason": "Forbidden",
            },
            {
                "expression": same_except("variables.oldSpec", "variables.newSpec", "['taints']")
                + " && "
                + same_except("oldObject.metadata", "object.metadata", server_kept),
                "message": "the node health writers change nothing of a node but its health "
                "taints, labels and annotations (not spec.unschedulable, not other metadata)",
                "reason": "Forbidden",
            },
        ],
    }


@dataclass(frozen=True)
class NodeAddonTolerations:
    """How an EKS add-on's node DaemonSet is placed, as its upstream manifest at the pin says."""

    daemonset: str | None
    """``namespace/name`` of its DaemonSet; None where the add-on runs none (a Deployment)."""
    tolerations: tuple[Mapping[str, Any], ...]
    source: str
    """Where the tolerations are read: "project tag path", or why no source is published."""
    configured: bool = False
    """The platform sets the tolerations in the add-on's ``configurationValues`` (every one of
    its DaemonSets); False: the upstream default, which no configuration replaces."""


_TOLERATE_ALL: Final = ({"operator": "Exists"},)

NODE_ADDONS: Final[dict[str, NodeAddonTolerations]] = {
    "vpc-cni": NodeAddonTolerations(
        "kube-system/aws-node",
        _TOLERATE_ALL,
        "aws/amazon-vpc-cni-k8s v1.20.2 charts/aws-vpc-cni/values.yaml (tolerations, the same "
        "at v1.21.1); the add-on is built from that chart",
    ),
    "kube-proxy": NodeAddonTolerations(
        "kube-system/kube-proxy",
        _TOLERATE_ALL,
        "no upstream manifest of the EKS kube-proxy add-on is published, and the add-on takes "
        "no tolerations in its configuration (aws/containers-roadmap#2604, open); the "
        "DaemonSet EKS installs tolerates every taint (operator Exists), as it must already "
        "for the accelerator taints of every pool here; confirm with kubectl -n kube-system "
        "get ds kube-proxy -o yaml on each new minor",
    ),
    "eks-pod-identity-agent": NodeAddonTolerations(
        "kube-system/eks-pod-identity-agent",
        _TOLERATE_ALL,
        "aws/eks-pod-identity-agent v0.1.37 charts/eks-pod-identity-agent/values.yaml "
        "(tolerations; the add-on's own builds are not tagged upstream)",
    ),
    "coredns": NodeAddonTolerations(
        None, (), "a Deployment on the system nodes, not a DaemonSet (components/cluster.py)"
    ),
    "aws-ebs-csi-driver": NodeAddonTolerations(
        "kube-system/ebs-csi-node",
        _TOLERATE_ALL,
        "kubernetes-sigs/aws-ebs-csi-driver v1.54.0 charts/aws-ebs-csi-driver/values.yaml "
        "(node.tolerateAllTaints: true) and templates/node.yaml",
    ),
    "aws-fsx-csi-driver": NodeAddonTolerations(
        "kube-system/fsx-csi-node",
        _TOLERATE_ALL,
        "kubernetes-sigs/aws-fsx-csi-driver v1.7.0 charts/aws-fsx-csi-driver/values.yaml "
        "(node.tolerateAllTaints: true), templates/node-daemonset.yaml and "
        "deploy/kubernetes/base/node-daemonset.yaml",
    ),
    "eks-node-monitoring-agent": NodeAddonTolerations(
        "kube-system/eks-node-monitoring-agent",
        _TOLERATE_ALL,
        "set in the add-on's configuration for its node agent and DCGM host engine "
        "(components/cluster.py MONITORING_AGENT_CONFIGURATION): the chart leaves the host "
        "engine without tolerations (aws/eks-node-monitoring-agent v1.7.0 "
        "charts/eks-node-monitoring-agent/values.yaml)",
        configured=True,
    ),
    "aws-efs-csi-driver": NodeAddonTolerations(
        "kube-system/efs-csi-node",
        _TOLERATE_ALL,
        "kubernetes-sigs/aws-efs-csi-driver v3.4.1 charts/aws-efs-csi-driver/values.yaml "
        "(node.tolerations) and templates/node-daemonset.yaml",
    ),
}
"""The EKS add-ons' node DaemonSets and their tolerations: each tolerates every taint, the
acceptance taint included (tests/test_acceptance_gate.py); all but the node monitoring agent by
their upstream default, which no configuration replaces."""


class AcceptanceGate(pulumi.ComponentResource):
    """The acceptance agent of every vendor present, its rights, settings and policy."""

    def __init__(
        self,
        name: str,
        *,
        acceptance: AcceptanceConfig,
        pools: list[NodePoolConfig],
        slurm_pools: Collection[str],
        namespace: k8s.core.v1.Namespace,
        mounts: Mapping[str, Sequence[FileSystemMount]],
        claims: Sequence[pulumi.Resource],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Register the gate.

        Args:
            name: component name.
            acceptance: ``platform.acceptance`` (enabled; its images checked by config).
            pools: the stack's accelerator pools.
            slurm_pools: pools that keep nodes for Slurm.
            namespace: :data:`NAMESPACE`, made by :func:`create_namespace` (the file-system
                claims live in it).
            mounts: pool name -> the file systems its check pods mount read-only.
            claims: the claims of ``mounts`` (the agents wait for them).
            cluster_ready: what in-cluster resources wait for.
            kubernetes_provider: provider of the objects.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:AcceptanceGate", name, None, opts)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=[*cluster_ready, namespace]
        )
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata=_meta(SERVICE_ACCOUNT), opts=in_cluster
        )
        subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-nodes",
            metadata=_meta(f"trainingplatform:{SERVICE_ACCOUNT}", namespaced=False),
            rules=typing.cast(Any, cluster_role_rules()),
            opts=in_cluster,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-nodes",
            metadata=_meta(f"trainingplatform:{SERVICE_ACCOUNT}", namespaced=False),
            role_ref=_role_ref("ClusterRole", f"trainingplatform:{SERVICE_ACCOUNT}"),
            subjects=typing.cast(Any, subject),
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[cluster_role, account])
            ),
        )  # fmt: skip
        role = k8s.rbac.v1.Role(
            f"{name}-checks",
            metadata=_meta(SERVICE_ACCOUNT),
            rules=typing.cast(Any, role_rules()),
            opts=in_cluster,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-checks",
            metadata=_meta(SERVICE_ACCOUNT),
            role_ref=_role_ref("Role", SERVICE_ACCOUNT),
            subjects=typing.cast(Any, subject),
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[role, account])
            ),
        )  # fmt: skip
        events_role = k8s.rbac.v1.Role(
            f"{name}-events",
            metadata={"name": SERVICE_ACCOUNT, "namespace": EVENTS_NAMESPACE},
            rules=typing.cast(Any, events_role_rules()),
            opts=in_cluster,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-events",
            metadata={"name": SERVICE_ACCOUNT, "namespace": EVENTS_NAMESPACE},
            role_ref=_role_ref("Role", SERVICE_ACCOUNT),
            subjects=typing.cast(Any, subject),
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[events_role, account])
            ),
        )
        enforced_policy(
            f"{name}-node-marks", NODE_MARKS_POLICY, node_marks_policy(), opts=in_cluster
        )
        images: dict[Vendor, str | None] = {
            "nvidia": acceptance.images.nvidia,
            "neuron": acceptance.images.neuron,
        }
        gated_pools = [
            pool
            for vendor, members in vendor_pools(pools).items()
            if images[vendor] is not None
            for pool in members
        ]
        sweep_image = images["nvidia"] or images["neuron"]
        if gated_pools and sweep_image is not None:
            document = json.dumps(
                agent_settings(acceptance, gated_pools, image=sweep_image, mounts=mounts),
                indent=2,
                sort_keys=True,
            )
            sweep_settings = k8s.core.v1.ConfigMap(
                f"{name}-settings-sweep",
                metadata=_meta(SWEEP_NAME),
                data={SETTINGS_KEY: document},
                opts=in_cluster,
            )
            k8s.apps.v1.Deployment(
                f"{name}-sweep",
                metadata=_meta(SWEEP_NAME),
                spec=typing.cast(Any, sweep_deployment(sweep_image, _digest(document))),
                opts=pulumi.ResourceOptions.merge(
                    in_cluster, pulumi.ResourceOptions(depends_on=[sweep_settings, account])
                ),
            )
        for vendor, members in vendor_pools(pools).items():
            image = images[vendor]
            if image is None:
                continue  # config refuses an enabled gate without the vendor's image
            document = json.dumps(
                agent_settings(acceptance, members, image=image, mounts=mounts),
                indent=2,
                sort_keys=True,
            )
            settings = k8s.core.v1.ConfigMap(
                f"{name}-settings-{vendor}",
                metadata=_meta(settings_name(vendor)),
                data={SETTINGS_KEY: document},
                opts=in_cluster,
            )
            k8s.apps.v1.DaemonSet(
                f"{name}-{vendor}",
                metadata=_meta(agent_name(vendor)),
                spec=typing.cast(
                    Any,
                    agent_daemonset(
                        vendor,
                        members,
                        image=image,
                        slurm_pools=slurm_pools,
                        settings_version=_digest(document),
                    ),
                ),
                opts=pulumi.ResourceOptions.merge(
                    in_cluster, pulumi.ResourceOptions(depends_on=[settings, account, *claims])
                ),
            )
        self.register_outputs({})


def _meta(name: str, *, namespaced: bool = True) -> Any:
    return {"name": name, **({"namespace": NAMESPACE} if namespaced else {})}


def _role_ref(kind: str, name: str) -> Any:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def _digest(text: str) -> str:

    return hashlib.sha256(text.encode()).hexdigest()[:16]


GATE_LABEL: Final = "trainingplatform.io/acceptance-gate"
"""On the namespace, ``on``: the stack runs the gate (the namespace exists only then), so the
policies hold every accelerator pool to it (policies/rules/acceptance.py)."""


def namespace_labels() -> dict[str, str]:
    """The namespace's labels: Pod Security at :data:`POD_SECURITY_LEVEL`, :data:`GATE_LABEL`."""
    return {
        "pod-security.kubernetes.io/enforce": POD_SECURITY_LEVEL,
        "pod-security.kubernetes.io/warn": POD_SECURITY_LEVEL,
        GATE_LABEL: "on",
    }


def create_namespace(
    *,
    cluster_ready: list[pulumi.Resource],
    kubernetes_provider: pulumi.ProviderResource,
    parent: pulumi.Resource,
) -> k8s.core.v1.Namespace:
    """The agent's namespace, made before storage so the Lustre claim can be made in it.

    Args:
        cluster_ready: what it waits for.
        kubernetes_provider: the cluster's provider.
        parent: the platform component.
    """
    return k8s.core.v1.Namespace(
        "acceptance-namespace",
        metadata={"name": NAMESPACE, "labels": namespace_labels()},
        opts=pulumi.ResourceOptions(
            parent=parent, provider=kubernetes_provider, depends_on=cluster_ready
        ),
    )
