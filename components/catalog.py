"""Instance-type facts, one source of truth for every component that needs them.

The NodePool's instance requirements and limits, the EC2NodeClass's EFA network interfaces, the
device plugins' instance lists and (later) the training runtimes' resource requests all read the
same :class:`InstanceType` entry. Facts: EC2 DescribeInstanceTypes as published in Karpenter's
instance-type reference at our pin, AWS's EFA table and Neuron's documentation:
https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/website/content/en/v1.14/reference/instance-types.md
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

CpuArchitecture = Literal["x86_64", "arm64"]
AcceleratorKind = Literal["nvidia", "neuron"]

GPU_RESOURCE: Final = "nvidia.com/gpu"
NEURON_RESOURCE: Final = "aws.amazon.com/neuron"
NEURON_CORE_RESOURCE: Final = "aws.amazon.com/neuroncore"
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE: Final = "hugepages-2Mi"

# Graviton families carry a "g" right after the generation digit (m7g, c7gn, r8g, t4g), except
# the first generation, a1. GPU families with a "g" before the digit (g5, g6e) are x86_64.
_GRAVITON_FAMILY = re.compile(r"[a-z]+\d+g[a-z]*|a1")


def cpu_architecture(instance_type: str) -> CpuArchitecture:
    """CPU architecture of an EC2 instance type, e.g. ``arm64`` for ``m7g.xlarge``."""
    family = instance_type.split(".", 1)[0]
    return "arm64" if _GRAVITON_FAMILY.fullmatch(family) else "x86_64"


@dataclass(frozen=True)
class InstanceType:
    """What one accelerated EC2 instance type offers."""

    name: str
    """EC2 instance type, e.g. ``p5.48xlarge``."""
    accelerator: AcceleratorKind
    """Who makes the accelerators: ``nvidia`` GPUs or AWS ``neuron`` (Trainium)."""
    accelerator_model: str
    """Accelerator model, e.g. ``H100``, ``Trainium2``."""
    accelerators: int
    """Accelerator devices per instance (GPUs, or Neuron devices)."""
    accelerator_memory_gib: float
    """Memory per accelerator device, GiB."""
    neuron_cores: int
    """NeuronCores per instance (logical cores at the default LNC); 0 for GPUs."""
    efa_interfaces: int
    """Most EFA interfaces the instance takes: one per network card; 0 without EFA."""
    network_gbps: int
    """Aggregate network bandwidth, Gbit/s."""
    vcpu: int
    """vCPUs per instance."""
    memory_gib: int
    """Instance memory, GiB."""
    nvme_gb: int
    """Local NVMe instance storage, GB (0 without); becomes RAID0 ephemeral storage."""
    card0_interfaces: int
    """Network interfaces network card 0 takes (EC2 ``MaximumNetworkInterfaces`` of the default
    card): with the next field it sets the node's pod limit and so its kube-reserved memory."""
    ipv4_per_interface: int
    """IPv4 addresses per network interface (EC2 ``Ipv4AddressesPerInterface``)."""

    @property
    def accelerator_resource(self) -> str:
        """Extended resource name of the accelerators (``nvidia.com/gpu`` or Neuron devices)."""
        return GPU_RESOURCE if self.accelerator == "nvidia" else NEURON_RESOURCE

    @property
    def supports_efa(self) -> bool:
        """Whether the instance type has EFA at all."""
        return self.efa_interfaces > 0

    @property
    def family(self) -> str:
        """Instance family, e.g. ``p5`` for ``p5.48xlarge``."""
        return self.name.split(".", 1)[0]


def efa_network_interfaces(efa_interfaces: int) -> list[dict[str, Any]]:
    """Karpenter ``networkInterfaces`` attaching every EFA interface, in AWS's multi-card layout.

    Card 0 carries the primary ENA interface (device 0) and an EFA-only interface (device 1);
    every other network card carries one EFA-only interface (device 0). That is one EFA device
    per network card, which is what ``vpc.amazonaws.com/efa`` then reports.

    Args:
        efa_interfaces: network cards with EFA on the instance type (>= 1).
    """
    if efa_interfaces < 1:
        raise ValueError("an EFA layout needs at least one EFA interface")
    interfaces = [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    ]
    interfaces += [
        {"networkCardIndex": card, "deviceIndex": 0, "interfaceType": "efa-only"}
        for card in range(1, efa_interfaces)
    ]
    return interfaces


def _gpu(  # noqa: PLR0917 (positional, so the table below reads as a table)
    name: str, model: str, count: int, memory: float, efa: int, gbps: int, vcpu: int,
    memory_gib: int, nvme: int, card0: int, ipv4: int,
) -> InstanceType:  # fmt: skip
    return InstanceType(name, "nvidia", model, count, memory, 0, efa, gbps, vcpu, memory_gib, nvme,
                        card0, ipv4)  # fmt: skip


def _trainium(  # noqa: PLR0917
    name: str, model: str, cores: int, efa: int, gbps: int, vcpu: int, memory_gib: int,
    device_memory: float, card0: int, ipv4: int,
) -> InstanceType:  # fmt: skip
    return InstanceType(name, "neuron", model, 16, device_memory, cores, efa, gbps, vcpu,
                        memory_gib, 7600, card0, ipv4)  # fmt: skip


CATALOG: Final[dict[str, InstanceType]] = {
    entry.name: entry
    for entry in (
        # Network card 0 interfaces and IPv4 per interface: Karpenter v1.14.1
        # pkg/providers/instancetype/zz_generated.vpclimits.go (trn2.48xlarge, absent there:
        # amazon-eks-ami v20260724 nodeadm/internal/kubelet/instance-info.jsonl).
        #    name               model   GPUs mem/GPU EFA  Gbps  vCPU  GiB    NVMe GB card0 IPv4
        _gpu("p4d.24xlarge",     "A100", 8,  40,     4,   400,  96,   1152,  8000,   15,   50),
        _gpu("p4de.24xlarge",    "A100", 8,  80,     4,   400,  96,   1152,  8000,   15,   50),
        _gpu("p5.48xlarge",      "H100", 8,  80,     32,  3200, 192,  2048,  30400,  2,    50),
        _gpu("p5e.48xlarge",     "H200", 8,  141,    32,  3200, 192,  2048,  30400,  2,    50),
        _gpu("p5en.48xlarge",    "H200", 8,  141,    16,  3200, 192,  2048,  30400,  4,    50),
        _gpu("p6-b200.48xlarge", "B200", 8,  179,    8,   3200, 192,  2048,  30400,  4,    50),
        _gpu("g5.48xlarge",      "A10G", 8,  24,     1,   100,  192,  768,   7600,   7,    50),
        _gpu("g6e.48xlarge",     "L40S", 8,  48,     4,   400,  192,  1536,  7600,   10,   50),
        # Small GPU sizes for development: no EFA, one GPU.
        _gpu("g5.xlarge",        "A10G", 1,  24,     0,   10,   4,    16,    250,    4,    15),
        _gpu("g5.2xlarge",       "A10G", 1,  24,     0,   10,   8,    32,    450,    4,    15),
        _gpu("g6.xlarge",        "L4",   1,  24,     0,   10,   4,    16,    250,    4,    15),
        #         name              model        cores EFA Gbps  vCPU GiB   mem/dev card0 IPv4
        _trainium("trn1.32xlarge",  "Trainium",  32,   8,  800,  128, 512,  32,     5,    50),
        _trainium("trn1n.32xlarge", "Trainium",  32,   16, 1600, 128, 512,  32,     5,    50),
        _trainium("trn2.48xlarge",  "Trainium2", 64,   16, 3200, 192, 2048, 96,     2,    50),
    )
}  # fmt: skip
"""Every accelerated instance type the platform knows, by name."""


def lookup(instance_type: str) -> InstanceType:
    """The catalog entry of an instance type.

    Raises:
        KeyError: the type is not in the catalog (config validation reports it first).
    """
    return CATALOG[instance_type]


COLD_START_BUDGET_MINUTES: Final[dict[str, int]] = {
    # Whole-node families: launch, a large image, the acceptance gate's checks (DCGM level 2
    # alone is 2.5 to 10.5 minutes, REFERENCE: AWS's measurement) and the gang's rendezvous.
    "p4d": 30, "p4de": 30,
    "p5": 35, "p5e": 35, "p5en": 35, "p6-b200": 35,
    "trn1": 30, "trn1n": 30, "trn2": 35,
    # Smaller GPU families: a shorter acceptance, smaller nodes.
    "g5": 20, "g6": 20, "g6e": 25,
}  # fmt: skip
"""Default budget from a gang's submission to its first training step on a cold pool,
minutes, per instance family: the cold-start alert fires past it. These are budgets the platform
sets, not measurements; a pool states its own with ``coldStartBudgetMinutes``, and the ledger's
dashboard shows what the pool really takes (docs: concepts, observability)."""


def cold_start_budget_minutes(instance_types: list[str]) -> int:
    """A pool's default cold-start budget: the largest of its instance families' budgets.

    Args:
        instance_types: the pool's instance types (each in :data:`CATALOG`).
    """
    return max(COLD_START_BUDGET_MINUTES[lookup(name).family] for name in instance_types)
