"""The EFA exporter on the cluster: one DaemonSet on the EFA pools' nodes, and its PodMonitor.

The exporter (efa_exporter/, built from images/efa-exporter) serves the EFA devices' sysfs
counters (:data:`~components.metric_names.EFA_METRICS`) on
:data:`~components.metric_names.EFA_EXPORTER_PORT`; node_exporter's infiniband collector
reads none of them (prometheus/node_exporter v1.12.1 collector/infiniband_linux.go). The
DaemonSet runs in :data:`~components.metric_names.NODE_EXPORTERS_NAMESPACE` (its hostPath
sysfs is what the monitoring namespace's baseline refuses) only where a pool attaches EFA,
tolerating every taint those pools' nodes carry; the PodMonitor, in the monitoring namespace,
has Prometheus scrape it with the node and its NodePool as labels (docs: concepts,
observability, "The EFA exporter").

The builders here are pure; :func:`register_efa_exporter` registers them.
"""

from __future__ import annotations

import typing
from collections.abc import Collection, Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import workloads
from components.config import NodePoolConfig, PlatformConfig
from components.metric_names import (
    EFA_EXPORTER_PORT,
    MONITORING_NAMESPACE,
    NODE_EXPORTERS_NAMESPACE,
    SCRAPE_INTERVAL,
)
from components.node_pools import POOL_LABEL, required_node_affinity
from components.observability.sources import (
    NODE_EXPORTER_PRIORITY_CLASS,
    exporter_tolerations,
    node_relabelings,
)
from components.tenancy import hardened_pod

NAME: Final = "efa-exporter"
"""The DaemonSet, its PodMonitor and its pods' ``app.kubernetes.io/name``."""
LABELS: Final = {"app.kubernetes.io/name": NAME}
EXPORTER_UID: Final = 10002
"""The image's user (images/efa-exporter/Dockerfile, ``USER 10002:10002``)."""
JOB: Final = f"{MONITORING_NAMESPACE}/{NAME}"
"""The ``job`` label of the exporter's series: ``<namespace>/<name>`` of its PodMonitor, which
sets no ``jobLabel`` (prometheus-operator pkg/prometheus/promcfg.go,
generatePodMonitorConfig, read at v0.93.0). The alerts read EFA counts only from this job."""
PORT_NAME: Final = "metrics"
HOST_SYSFS: Final = "/sys"
SYSFS_MOUNT: Final = "/host/sys"
"""Where the pod sees the host's sysfs, read-only.

The whole of ``/sys``, not only ``/sys/class/infiniband``: the entries there are relative links
(``efa_0 -> ../../devices/pci.../infiniband/efa_0``, and the device's ``device/driver`` that tells
an EFA device from another RDMA device), which resolve only inside a sysfs mounted whole. The
container's own ``/sys`` (the read-only sysfs the runtime mounts in every container) shows the
same devices while the RDMA subsystem shares its devices across network namespaces (the kernel's
default), but not when it is set to exclusive mode, where a pod's network namespace sees none;
the host's mount shows them either way. Read-only, and nothing in the pod runs privileged."""
REQUESTS: Final = {
    "cpu": f"{workloads.EFA_EXPORTER_CPU_MILLIS}m",
    "memory": f"{workloads.EFA_EXPORTER_MEMORY_MIB}Mi",
}
"""What ``synth jobs`` counts as its overhead on each EFA pool, and what whole-node pods leave it
(components/workloads.py)."""
LIMITS: Final = {"cpu": "100m", "memory": "128Mi"}
"""Enough for one Python process serving a scrape every :data:`SCRAPE_INTERVAL`; a runaway
exporter cannot take a training node's CPU."""


def efa_pools(pools: Sequence[NodePoolConfig]) -> list[NodePoolConfig]:
    """The pools that attach EFA interfaces, in the stack's order; the exporter runs on them.

    Args:
        pools: the stack's node pools.
    """
    return [pool for pool in pools if pool.uses_efa]


def exporter_daemonset(
    pools: Sequence[NodePoolConfig], *, image: str, slurm_pools: Collection[str] = ()
) -> dict[str, Any]:
    """The DaemonSet spec: on the EFA pools' nodes only (node affinity on their pool label).

    It tolerates what every node-level exporter does
    (:func:`components.observability.sources.exporter_tolerations`) and is
    ``system-node-critical`` as they are.

    Non-root (the image's user), read-only root, every capability dropped
    (:func:`components.tenancy.hardened_pod`), no service account token (it calls nothing),
    the host's sysfs read-only (:data:`SYSFS_MOUNT`), probed by TCP on its metrics port.

    Args:
        pools: the EFA pools (:func:`efa_pools`).
        image: ``observability.images.efaExporter``.
        slurm_pools: names of pools that keep nodes for Slurm (their taint is tolerated).
    """
    # A TCP probe: an HTTP probe of /metrics would read every counter file again (and make
    # the device answer a statistics query once its 10 ms cache has expired) at each probe.
    probe = {"tcpSocket": {"port": PORT_NAME}, "timeoutSeconds": 5}
    pod = hardened_pod(
        {
            "automountServiceAccountToken": False,
            "priorityClassName": NODE_EXPORTER_PRIORITY_CLASS,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": EXPORTER_UID,
                "runAsGroup": EXPORTER_UID,
            },
            "containers": [
                {
                    "name": NAME,
                    "image": image,
                    "args": ["--sysfs", SYSFS_MOUNT, "--port", str(EFA_EXPORTER_PORT)],
                    "ports": [
                        {"name": PORT_NAME, "containerPort": EFA_EXPORTER_PORT, "protocol": "TCP"}
                    ],
                    "resources": {"requests": dict(REQUESTS), "limits": dict(LIMITS)},
                    "securityContext": {"readOnlyRootFilesystem": True},
                    "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 3},
                    "readinessProbe": {**probe, "periodSeconds": 10},
                    "volumeMounts": [{"name": "sys", "mountPath": SYSFS_MOUNT, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "sys", "hostPath": {"path": HOST_SYSFS, "type": "Directory"}}],
            "affinity": required_node_affinity(POOL_LABEL, [pool.name for pool in pools]),
            "tolerations": exporter_tolerations(pools, slurm_pools),
        }
    )
    return {
        "selector": {"matchLabels": dict(LABELS)},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod},
    }


def exporter_podmonitor() -> dict[str, Any]:
    """The PodMonitor spec: every exporter pod's metrics port, labelled with node and NodePool.

    In the monitoring namespace, selecting the pods in the node exporters' namespace (a
    monitor selects targets in its own namespace unless ``namespaceSelector`` names others:
    prometheus-operator v0.93.1 Documentation/api-reference/api.md, ``NamespaceSelector``).
    The relabelings are every node-level exporter's
    (:func:`components.observability.sources.node_relabelings`): ``node`` and ``nodepool`` from
    the node (``attachMetadata.node``; the chart's Prometheus may list and watch nodes,
    kube-prometheus-stack 88.5.3 templates/prometheus/clusterrole.yaml), the exporter pod's own
    ``namespace``, ``pod`` and ``container`` dropped.
    """
    return {
        "selector": {"matchLabels": dict(LABELS)},
        "namespaceSelector": {"matchNames": [NODE_EXPORTERS_NAMESPACE]},
        "attachMetadata": {"node": True},
        "podMetricsEndpoints": [
            {
                "port": PORT_NAME,
                "path": "/metrics",
                "interval": SCRAPE_INTERVAL,
                "relabelings": node_relabelings(),
            }
        ],
    }


def register_efa_exporter(
    config: PlatformConfig,
    *,
    ready: Sequence[pulumi.Resource],
    provider: pulumi.ProviderResource,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """Register the DaemonSet and its PodMonitor where a pool attaches EFA; nothing elsewhere.

    Args:
        config: the validated stack (its pools, Slurm node sets, and
            ``observability.images.efaExporter``, which config requires with an EFA pool).
        ready: what they wait for: the node exporters' namespace, the ``monitoring``
            namespace and the PodMonitor CRD (the kube-prometheus-stack release).
        provider: the cluster's Kubernetes provider.
        opts: options of the component that owns them (its parent).

    Returns:
        the resources registered (none without an EFA pool).
    """
    pools = efa_pools(config.node_pools)
    image = config.observability.images.efa_exporter
    if not pools or image is None:
        return []
    slurm_pools = {node_set.pool for node_set in config.slurm.node_sets} if (
        config.slurm.enabled
    ) else set()  # fmt: skip
    in_cluster = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(provider=provider, depends_on=list(ready))
    )
    daemonset = k8s.apps.v1.DaemonSet(
        NAME,
        metadata={"name": NAME, "namespace": NODE_EXPORTERS_NAMESPACE, "labels": dict(LABELS)},
        spec=typing.cast(Any, exporter_daemonset(pools, image=image, slurm_pools=slurm_pools)),
        opts=in_cluster,
    )
    monitor = k8s.apiextensions.CustomResource(
        f"{NAME}-podmonitor",
        api_version="monitoring.coreos.com/v1",
        kind="PodMonitor",
        metadata={"name": NAME, "namespace": MONITORING_NAMESPACE, "labels": dict(LABELS)},
        spec=typing.cast(Any, exporter_podmonitor()),
        opts=in_cluster,
    )
    return [daemonset, monitor]
