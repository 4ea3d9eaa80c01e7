"""Device plugins that turn accelerators and EFA interfaces into schedulable resources.

Each plugin is installed only when a pool needs it, and runs only on the nodes that have the
hardware: the NVIDIA plugin on nodes labelled ``nvidia.com/gpu.present``, the EFA plugin on the
EFA instance types of this platform's pools (tolerating the accelerator taints), and the Neuron
device plugin and scheduler extension on the Trainium types.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

import pulumi

from components import health_marks, software, versions
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.cluster import SYSTEM_TOLERATION
from components.config import NodePoolConfig
from components.helm import release, with_system_placement
from components.node_pools import (
    FSX_STARTUP_TAINT,
    GPU_PRESENT_LABEL,
    accelerator_taint,
    slurm_taint,
)

NAMESPACE: Final = "kube-system"
NEURON_RELEASE: Final = "neuron-helm-chart"
"""The Neuron chart's Helm release name, which its pods' ``app.kubernetes.io/instance`` carries."""
NEURON_SCHEDULER_NAME: Final = "my-scheduler"
"""The Neuron scheduler extension's scheduler: the chart names it by its
``scheduler.customScheduler.fullnameOverride``, which these values leave at the chart's
default. Pods that want contiguous Neuron devices within a node set it as schedulerName."""
NEURON_DEVICE_RESOURCE: Final = "aws.amazon.com/neurondevice"
"""The Neuron device plugin's third resource name, beside devices and cores."""
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
ACCELERATOR_TOLERATIONS: Final = [
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
    {"key": NEURON_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
]

HEALTH_TOLERATIONS: Final = [
    {"key": key, "operator": "Exists", "effect": health_marks.TAINT_EFFECT}
    for key in health_marks.AGENT_TAINT_KEYS
]
"""The acceptance and unhealthy taints: a device plugin must run on a node that waits for
acceptance (the agent checks that the plugins registered every device, so without them the gate
would deadlock) and on one marked unhealthy (its devices stay counted while an admin looks)."""

# The charts' own default tolerations; setting tolerations replaces a chart's list, so they are
# repeated here before the pools' extra taints are added.
NVIDIA_DEFAULT_TOLERATIONS: Final = [SYSTEM_TOLERATION, ACCELERATOR_TOLERATIONS[0]]
NEURON_DEFAULT_TOLERATIONS: Final = [
    SYSTEM_TOLERATION,
    ACCELERATOR_TOLERATIONS[1],
    {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "operator": "Equal",
        "value": "Unschedulable",
        "effect": "NoSchedule",
    },
]


def _types(
    pools: list[NodePoolConfig], *, resource: str | None = None, efa: bool = False
) -> list[str]:
    return sorted(
        {
            name
            for pool in pools
            if (resource is None or pool.instance.accelerator_resource == resource)
            and (not efa or pool.uses_efa)
            for name in pool.instance_types
        }
    )


def neuron_pools(pools: list[NodePoolConfig]) -> list[NodePoolConfig]:
    """The Trainium pools; the Neuron chart (and its scheduler extension) is installed with one.

    Args:
        pools: the stack's node pools.
    """
    return [p for p in pools if p.instance.accelerator_resource == NEURON_RESOURCE]


def extra_tolerations(
    pools: list[NodePoolConfig], slurm_pools: Collection[str] = ()
) -> list[dict[str, str]]:
    """Tolerations of the pools' extra taints and the health taints, so plugins run there.

    Args:
        pools: the pools the plugin serves.
        slurm_pools: names of pools that keep nodes for Slurm; when one of ``pools`` is among
            them, the Slurm reservation taint is tolerated too (slurmd needs the devices).
    """
    taints: list[tuple[str, str]] = [(t.key, t.effect) for pool in pools for t in pool.taints]
    if any(pool.name in slurm_pools for pool in pools):
        taints.append((slurm_taint()["key"], slurm_taint()["effect"]))
    taints += [(str(t["key"]), str(t["effect"])) for t in HEALTH_TOLERATIONS]
    found = {(key, effect): {"key": key, "operator": "Exists", "effect": effect}
             for key, effect in taints}  # fmt: skip
    return [found[key] for key in sorted(found)]


def node_daemon_tolerations(
    pools: Sequence[NodePoolConfig], slurm_pools: Collection[str] = ()
) -> list[dict[str, str]]:
    """Every taint the pools' nodes may carry, tolerated: for the platform's node DaemonSets.

    The pools' accelerator taints, their own taints, Slurm's reservation where a pool keeps
    nodes for Slurm, the acceptance and unhealthy taints (:func:`extra_tolerations`), and the
    FSx startup taint: the acceptance agent and the metrics exporters read no file system, and
    a node whose Lustre client never comes up must still be judged and seen. Each ``Exists``
    by key and effect, sorted.

    Args:
        pools: the pools the DaemonSet runs on.
        slurm_pools: names of pools that keep nodes for Slurm; default none.
    """
    taints = [accelerator_taint(pool) for pool in pools]
    taints += [*extra_tolerations(list(pools), slurm_pools), FSX_STARTUP_TAINT]
    found = {(str(t["key"]), str(t["effect"])): {"key": str(t["key"]), "operator": "Exists",
                                                 "effect": str(t["effect"])}
             for t in taints}  # fmt: skip
    return [found[key] for key in sorted(found)]


def nvidia_values(
    gpu_pools: list[NodePoolConfig], slurm_pools: Collection[str] = ()
) -> dict[str, Any]:
    """NVIDIA device plugin values: only on nodes our GPU pools label as GPU nodes.

    Args:
        gpu_pools: the GPU pools; their extra taints are tolerated.
        slurm_pools: pools that keep nodes for Slurm (see :func:`extra_tolerations`).
    """
    return {
        "nodeSelector": {GPU_PRESENT_LABEL: "true"},
        "tolerations": [*NVIDIA_DEFAULT_TOLERATIONS, *extra_tolerations(gpu_pools, slurm_pools)],
    }


def efa_values(
    efa_pools: list[NodePoolConfig], region: str, slurm_pools: Collection[str] = ()
) -> dict[str, Any]:
    """EFA device plugin values: our EFA types only, tolerating the pools' taints.

    Args:
        efa_pools: the pools that attach EFA.
        region: the cluster's region; the plugin image is served from its regional registry.
        slurm_pools: pools that keep nodes for Slurm (see :func:`extra_tolerations`).
    """
    account = versions.EKS_IMAGE_REGISTRY_ACCOUNTS[region]
    registry = f"{account}.dkr.ecr.{region}.amazonaws.com"
    return {
        "image": {"repository": f"{registry}/eks/aws-efa-k8s-device-plugin"},
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": _types(efa_pools)},
        "tolerations": [*ACCELERATOR_TOLERATIONS, *extra_tolerations(efa_pools, slurm_pools)],
    }


def neuron_values(
    neuron_pools: list[NodePoolConfig], kubernetes_version: str, slurm_pools: Collection[str] = ()
) -> dict[str, Any]:
    """Neuron chart values: device plugin and scheduler extension on, node problem detector off.

    The scheduler extension runs a second scheduler (``my-scheduler``) that allocates contiguous
    Neuron devices; EKS does not let the default scheduler be extended.

    Args:
        neuron_pools: the Trainium pools; their types and extra taints.
        kubernetes_version: cluster minor version; the second scheduler's image follows it.
        slurm_pools: pools that keep nodes for Slurm (see :func:`extra_tolerations`).
    """
    repository, tag = software.repository_and_tag(
        versions.NEURON_CUSTOM_SCHEDULER_IMAGES[kubernetes_version]
    )
    # The scheduler extension and its scheduler go to the system nodes (with_system_placement).
    return with_system_placement(
        versions.NEURON_CHART,
        {
            "neuronInstances": _types(neuron_pools),
            "devicePlugin": {
                "enabled": True,
                "tolerations": [
                    *NEURON_DEFAULT_TOLERATIONS,
                    *extra_tolerations(neuron_pools, slurm_pools),
                ],
            },
            "scheduler": {
                "enabled": True,
                "customScheduler": {
                    "enabled": True,
                    "image": {"repository": repository, "tag": tag},
                },
            },
            "npd": {"enabled": False},
        },
    )


class DevicePlugins(pulumi.ComponentResource):
    """The device plugins the platform's pools need, and no others."""

    def __init__(
        self,
        name: str,
        *,
        pools: list[NodePoolConfig],
        region: str,
        kubernetes_version: str,
        slurm_pools: Collection[str],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install the plugins.

        Args:
            name: component name.
            pools: validated accelerated pools.
            region: AWS region (EFA plugin image registry).
            kubernetes_version: cluster minor version (Neuron's second scheduler image).
            slurm_pools: pools that keep nodes for Slurm; the plugins tolerate those nodes.
            cluster_ready: resources the releases wait for (system nodes, add-ons).
            kubernetes_provider: provider of the Helm releases.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:DevicePlugins", name, None, opts)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        gpu_pools = [p for p in pools if p.instance.accelerator_resource == GPU_RESOURCE]
        efa_pools = [p for p in pools if p.uses_efa]
        trainium = neuron_pools(pools)
        wanted: list[tuple[str, versions.HelmChart, dict[str, Any]]] = []
        if gpu_pools:
            values = nvidia_values(gpu_pools, slurm_pools)
            wanted.append(("nvidia-device-plugin", versions.NVIDIA_DEVICE_PLUGIN_CHART, values))
        if efa_pools:
            values = efa_values(efa_pools, region, slurm_pools)
            wanted.append(("aws-efa-k8s-device-plugin", versions.EFA_DEVICE_PLUGIN_CHART, values))
        if trainium:
            values = neuron_values(trainium, kubernetes_version, slurm_pools)
            wanted.append((NEURON_RELEASE, versions.NEURON_CHART, values))
        for release_name, chart, chart_values in wanted:
            release(release_name, chart, namespace=NAMESPACE, values=chart_values, opts=in_cluster)
        self.register_outputs({})
