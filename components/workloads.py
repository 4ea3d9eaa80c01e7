"""A pod on a pool: what one node gives, what a whole-node pod asks for, and where it may run.

Trainer runtimes, Slurm node sets and the offline jobs model (``python -m synth jobs``) read
these builders, so a training pod, a slurmd pod and the model's idea of both never disagree.

What a node gives is computed the way Karpenter v1.14.1 computes it when it picks an instance
type (aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``: capacity, kube-reserved,
eviction threshold; kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go``: allocatable less
huge pages), and the way the node itself computes it once it runs (amazon-eks-ami nodeadm
``internal/kubelet/config.go``). The two differ by the kube-reserved memory of the ENI that an
EFA-only interface takes on network card 0: Karpenter leaves it out, nodeadm does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from components.catalog import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGEPAGES_RESOURCE,
    NEURON_RESOURCE,
    InstanceType,
)
from components.config import NodePoolConfig
from components.config.storage import SHARED_MOUNT, TEAM_HOME_PATH
from components.first_step import FIRST_STEP_EXPORTER_MEMORY_MIB
from components.node_pools import POOL_LABEL, RESERVED_FOR_LABEL, accelerator_taint, slurm_taint

NEURON_COMPILE_CACHE_VARIABLE: Final = "NEURON_COMPILE_CACHE_URL"
"""Where the Neuron compiler keeps and looks up compiled graphs (default
``/var/tmp/neuron-compile-cache``, on the node: lost with it, and compiled again by every node)."""


def team_directory(team: str) -> str:
    """The team's working directory on the shared file system, as pods see it."""
    return f"{SHARED_MOUNT}{TEAM_HOME_PATH}/{team}"


def neuron_compile_cache(team: str) -> str:
    """The team's Neuron compile cache on the shared file system.

    One compile per graph for every node and job of the team; a job may set its own cache
    through ``trainer.env``.
    """
    return f"{team_directory(team)}/neuron-compile-cache"


VM_MEMORY_OVERHEAD_PERCENT: Final = 0.075
"""Karpenter's estimate of the memory the hypervisor keeps (chart value
``settings.vmMemoryOverheadPercent``; karpenter-provider-aws v1.14.1 pkg/operator/options/)."""
EVICTION_HARD_MEMORY_MIB: Final = 100
"""``evictionHard memory.available`` of both Karpenter's simulation and nodeadm."""
DAEMONSET_HEADROOM_CPU_MILLIS: Final = 1000
DAEMONSET_HEADROOM_MEMORY_MIB: Final = 2048
"""What a whole-node pod leaves for the DaemonSets every training node runs besides the device
plugins (the EKS add-ons' aws-node, kube-proxy, Pod Identity agent, EBS and FSx CSI node
plugins, the node monitoring agent: 10m and 30Mi, its DCGM host engine nothing, per
aws/eks-node-monitoring-agent v1.7.0 charts/eks-node-monitoring-agent/values.yaml): an
allowance, not a measurement. Karpenter adds their real requests when it picks an
instance type, so the allowance must cover them."""
DEVICE_PLUGIN_MEMORY_MIB: Final = 64
"""What a whole-node pod leaves for the device plugins on its node: their charts request at
most 20Mi each (aws-efa-k8s-device-plugin 0.5.30; NVIDIA's and Neuron's request nothing)."""
NODE_AGENT_CPU_MILLIS: Final = 50
NODE_AGENT_MEMORY_MIB: Final = 128
"""Requests of the acceptance agent, the platform's own DaemonSet on every accelerator node
(components/acceptance_gate.py requests exactly this): a whole-node pod leaves it room, beside
the add-ons' allowance and the device plugins', or the node that passed acceptance cannot
take the pod it was bought for."""
EFA_EXPORTER_CPU_MILLIS: Final = 10
EFA_EXPORTER_MEMORY_MIB: Final = 48
"""Requests of the EFA exporter, the platform's DaemonSet on every node of an EFA pool
(components/observability/efa_exporter.py requests exactly this): one Python process reading
a few dozen sysfs files per scrape. A whole-node pod on an EFA pool leaves it room too."""


@dataclass(frozen=True)
class NodeExporter:
    """A metrics DaemonSet on the nodes of some accelerator pools, and what it requests.

    Args:
        name: the DaemonSet (docs: concepts, observability, "Sources").
        cpu_millis: its CPU request, millicores.
        memory_mib: its memory request, MiB; what a whole-node pod leaves it.
        accelerator: the accelerator resource of the pools it runs on (``nvidia.com/gpu``,
            ``aws.amazon.com/neuron``), or None for every pool that ``efa`` selects.
        efa: True when it runs on the pools that attach EFA (whatever their accelerator).
    """

    name: str
    cpu_millis: int
    memory_mib: int
    accelerator: str | None = None
    efa: bool = False

    def runs_on(self, pool: NodePoolConfig) -> bool:
        """Whether the exporter has a pod on each node of ``pool``."""
        if self.efa:
            return pool.uses_efa and (
                self.accelerator is None or pool.instance.accelerator_resource == self.accelerator
            )
        return pool.instance.accelerator_resource == self.accelerator


NODE_EXPORTERS: Final[tuple[NodeExporter, ...]] = (
    # NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/values.yaml resources.requests (the chart's
    # own, kept by components/observability/sources.py).
    NodeExporter("dcgm-exporter", cpu_millis=100, memory_mib=128, accelerator=GPU_RESOURCE),
    # aws-neuron/aws-neuron-sdk v2.32.0 src/k8/k8s-neuron-monitor-daemonset.yml requests.
    NodeExporter("neuron-monitor", cpu_millis=256, memory_mib=128, accelerator=NEURON_RESOURCE),
    # Ours (components/observability/efa_exporter.py), on every pool that attaches EFA.
    NodeExporter(
        "efa-exporter",
        cpu_millis=EFA_EXPORTER_CPU_MILLIS,
        memory_mib=EFA_EXPORTER_MEMORY_MIB,
        efa=True,
    ),
)
"""The metrics DaemonSets of the accelerator pools (components/observability/sources.py
requests exactly these): a whole-node pod leaves each one on its node room, as it does the
acceptance agent."""


def node_exporters(pool: NodePoolConfig) -> tuple[NodeExporter, ...]:
    """The metrics DaemonSets that run a pod on every node of ``pool``."""
    return tuple(exporter for exporter in NODE_EXPORTERS if exporter.runs_on(pool))


def node_exporters_memory_mib(pool: NodePoolConfig) -> int:
    """Memory the metrics DaemonSets on one node of ``pool`` request, MiB."""
    return sum(exporter.memory_mib for exporter in node_exporters(pool))


KUBE_RESERVED_CPU_TIERS: Final = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)
"""(from millicore, to millicore, share reserved): the tiers of Karpenter's
``kubeReservedResources`` and of nodeadm's ``getCPUMillicoresToReserve``."""


@dataclass(frozen=True)
class NodeAllocatable:
    """What pods can request on one node: cpu in millicores, memory in MiB, counts otherwise."""

    cpu_millis: int
    memory_mib: int
    pods: int
    extended: dict[str, int] = field(default_factory=dict)
    """Extended resources by name (accelerators, EFA, ``hugepages-2Mi`` in MiB)."""

    def amount(self, resource: str) -> int:
        """This node's amount of ``resource`` in the units of :func:`request_amounts`."""
        if resource == "cpu":
            return self.cpu_millis
        if resource == "memory":
            return self.memory_mib
        if resource == "pods":
            return self.pods
        return self.extended.get(resource, 0)


def kube_reserved_cpu_millis(vcpu: int) -> int:
    """CPU kept for the kubelet and container runtime on a node of ``vcpu`` vCPUs, millicores."""
    total = vcpu * 1000
    reserved = 0.0
    for start, end, share in KUBE_RESERVED_CPU_TIERS:
        if total > start:
            reserved += (min(total, end) - start) * share
    return math.ceil(reserved)


def eni_limited_pods(instance: InstanceType, *, efa_only_on_card0: int) -> int:
    """Pods a node takes: card 0's interfaces, less EFA-only ones there, x (IPv4 each - 1) + 2."""
    interfaces = max(instance.card0_interfaces - efa_only_on_card0, 0)
    return interfaces * (instance.ipv4_per_interface - 1) + 2


def _memory_capacity_mib(instance: InstanceType) -> int:
    size = instance.memory_gib * 1024
    return size - math.ceil(size * VM_MEMORY_OVERHEAD_PERCENT)


def node_allocatable(
    instance: InstanceType,
    *,
    efa_interfaces: int,
    hugepages_gib: int,
    as_scheduled_by_karpenter: bool,
) -> NodeAllocatable:
    """Allocatable resources of one node of ``instance``.

    Args:
        instance: the catalog entry.
        efa_interfaces: EFA-only interfaces the EC2NodeClass attaches (0 without EFA); one of
            them sits on network card 0 (:func:`components.catalog.efa_network_interfaces`).
        hugepages_gib: 2 MiB huge pages the node reserves at boot, GiB; the kubelet takes them
            out of allocatable memory and a NodeOverlay tells Karpenter about them.
        as_scheduled_by_karpenter: True for Karpenter's simulation (kube-reserved memory from
            the pod count less the EFA-only interface on card 0), False for the node's own
            kubelet (nodeadm's count of every card 0 interface), which reserves more.
    """
    on_card0 = 1 if efa_interfaces else 0
    pods = eni_limited_pods(instance, efa_only_on_card0=on_card0)
    if not as_scheduled_by_karpenter:
        reserving_pods = eni_limited_pods(instance, efa_only_on_card0=0)
    else:
        reserving_pods = pods
    kube_reserved_memory = 11 * reserving_pods + 255
    hugepages_mib = hugepages_gib * 1024
    memory = (
        _memory_capacity_mib(instance)
        - kube_reserved_memory
        - EVICTION_HARD_MEMORY_MIB
        - hugepages_mib
    )
    extended = {instance.accelerator_resource: instance.accelerators}
    if efa_interfaces:
        extended[EFA_RESOURCE] = efa_interfaces
    if hugepages_mib:
        extended[HUGEPAGES_RESOURCE] = hugepages_mib
    return NodeAllocatable(
        cpu_millis=instance.vcpu * 1000 - kube_reserved_cpu_millis(instance.vcpu),
        memory_mib=memory,
        pods=pods,
        extended=extended,
    )


def pool_node_allocatable(
    pool: NodePoolConfig, *, as_scheduled_by_karpenter: bool
) -> NodeAllocatable:
    """:func:`node_allocatable` of the pool's sizing instance type with the pool's EFA and pages."""
    instance = pool.instance
    return node_allocatable(
        instance,
        efa_interfaces=instance.efa_interfaces if pool.uses_efa else 0,
        hugepages_gib=pool.hugepages,
        as_scheduled_by_karpenter=as_scheduled_by_karpenter,
    )


def whole_node_memory_mib(pool: NodePoolConfig) -> int:
    """Memory one whole-node pod can request on the pool's nodes, MiB.

    The node's allocatable memory in both views (Karpenter's, which decides whether a node is
    bought, and the kubelet's, which admits the pod; huge pages already taken out), the
    smaller of the two, less the allowances for the add-ons' DaemonSets, the device plugins and
    the acceptance agent, the requests of the pool's metrics DaemonSets
    (:data:`NODE_EXPORTERS`), and the first-step exporter every training pod runs beside its
    training container (:func:`components.first_step.first_step_sidecar`), whose
    requests add to the pod's.
    """
    allocatable = min(
        pool_node_allocatable(pool, as_scheduled_by_karpenter=view).memory_mib
        for view in (True, False)
    )
    return (
        allocatable
        - DAEMONSET_HEADROOM_MEMORY_MIB
        - DEVICE_PLUGIN_MEMORY_MIB
        - NODE_AGENT_MEMORY_MIB
        - node_exporters_memory_mib(pool)
        - FIRST_STEP_EXPORTER_MEMORY_MIB
    )


def shared_memory_mib(pool: NodePoolConfig) -> int:
    """Size of a whole-node pod's ``/dev/shm``, MiB: half its memory, in whole GiB.

    A memory-backed emptyDir is charged to the pod's memory, so an unbounded one lets data
    loaders' shared tensors and NCCL's buffers take what the processes need; half leaves the
    other half to them.
    """
    return whole_node_memory_mib(pool) // 2 // 1024 * 1024


def shared_memory_volume(pool: NodePoolConfig) -> dict[str, Any]:
    """The ``dshm`` volume a whole-node pod mounts at ``/dev/shm``, sized explicitly."""
    return {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": f"{shared_memory_mib(pool)}Mi"},
    }


def node_resources(pool: NodePoolConfig) -> dict[str, Any]:
    """Requests and limits of one whole-node pod: every accelerator, EFA interface, huge page.

    Requests equal limits. Memory is what the node can give (:func:`whole_node_memory_mib`),
    so data loaders and compilers have the node's memory, not a slice of it. On Trainium the
    pod asks for one CPU per NeuronCore and may use every vCPU: Trainer's torch plugin starts
    one process per requested CPU when the pod has no GPU (kubeflow/trainer v2.3.0
    pkg/runtime/framework/plugins/torch/torch.go), and the Kubeflow SDK reads the device of a
    runtime from its CPU limit when it knows no accelerator there (kubeflow/sdk 0.5.0
    kubeflow/trainer/backends/kubernetes/utils.py, get_container_devices).
    """
    instance = pool.instance
    amounts: dict[str, str] = {
        instance.accelerator_resource: str(instance.accelerators),
        "memory": f"{whole_node_memory_mib(pool)}Mi",
    }
    if pool.uses_efa:
        amounts[EFA_RESOURCE] = str(instance.efa_interfaces)
    if pool.hugepages:
        amounts[HUGEPAGES_RESOURCE] = f"{pool.hugepages}Gi"
    requests = dict(amounts)
    limits = dict(amounts)
    if instance.accelerator_resource == NEURON_RESOURCE:
        requests["cpu"] = str(instance.neuron_cores)
        limits["cpu"] = str(instance.vcpu)
    return {"requests": requests, "limits": limits}


def processes_per_node(pool: NodePoolConfig) -> int:
    """Training processes a whole-node pod runs: one per GPU, or one per NeuronCore."""
    instance = pool.instance
    if instance.accelerator_resource == GPU_RESOURCE:
        return instance.accelerators
    return instance.neuron_cores


def pool_workload_placement(pool: NodePoolConfig, *, slurm: bool = False) -> dict[str, Any]:
    """``nodeSelector`` and ``tolerations`` of a pod that runs on the pool's nodes only.

    It tolerates the accelerator taint and the pool's extra taints, never the FSx startup taint:
    that one must keep pods off a node until the Lustre client there is ready.

    Args:
        pool: the pool.
        slurm: place the pod on the pool's nodes reserved for Slurm (slurmd pods), which carry
            the reservation label and taint; other pods can never land there.
    """
    taints = [accelerator_taint(pool), *(t.model_dump() for t in pool.taints)]
    selector = {POOL_LABEL: pool.name}
    if slurm:
        taints.append(slurm_taint())
        selector[RESERVED_FOR_LABEL] = slurm_taint()["value"]
    return {
        "nodeSelector": selector,
        "tolerations": [
            {"key": t["key"], "operator": "Exists", "effect": t["effect"]} for t in taints
        ],
    }


def non_root_security_context(uid: int) -> dict[str, Any]:
    """Pod security context of a workload that runs as ``uid`` (group and fsGroup the same).

    fsGroup makes mounted volumes (the SSH keys Trainer's MPI plugin mounts) readable by it.
    """
    return {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid, "runAsNonRoot": True}
