"""The instance catalog: published facts, the EFA interface layout, resources, architectures."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from components import catalog
from components.catalog import (
    CATALOG,
    COLD_START_BUDGET_MINUTES,
    EFA_RESOURCE,
    GPU_RESOURCE,
    NEURON_RESOURCE,
    cold_start_budget_minutes,
    cpu_architecture,
    efa_network_interfaces,
    lookup,
)
from components.requirements import catalog_types_admitted, karpenter_labels


@dataclass(frozen=True)
class Fact:
    """One row of the published facts below, written out by hand (not read from the code under test)."""

    name: str
    kind: str
    model: str
    accelerators: int
    memory_per_device_gib: float
    efa_max: int
    network_gbps: int
    vcpu: int
    memory_gib: int
    nvme_gb: int
    neuron_cores: int = 0
    memory_tolerance_gib: float = 0.0
    """The reference gives some device memory only approximately (``~179 GiB``)."""


# Karpenter's instance-type reference at our pin (https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/website/content/en/v1.14/reference/instance-types.md),
# AWS's EFA table (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html) and Neuron's docs:
# Instance | Accelerators | Memory/device | EFA max | Network Gbps | vCPU | Mem GiB |
# NVMe GB (+ NeuronCores for Trainium: trn1/trn1n 32, trn2 64 logical at the default LNC=2).
REFERENCE_TABLE: list[Fact] = [
    Fact("p4d.24xlarge", "nvidia", "A100", 8, 40, 4, 400, 96, 1152, 8000),
    Fact("p4de.24xlarge", "nvidia", "A100", 8, 80, 4, 400, 96, 1152, 8000),
    Fact("p5.48xlarge", "nvidia", "H100", 8, 80, 32, 3200, 192, 2048, 30400),
    Fact("p5e.48xlarge", "nvidia", "H200", 8, 141, 32, 3200, 192, 2048, 30400),
    Fact("p5en.48xlarge", "nvidia", "H200", 8, 141, 16, 3200, 192, 2048, 30400),
    Fact("p6-b200.48xlarge", "nvidia", "B200", 8, 179, 8, 3200, 192, 2048, 30400, 0, 1.0),
    Fact("g5.48xlarge", "nvidia", "A10G", 8, 24, 1, 100, 192, 768, 7600),
    Fact("g6e.48xlarge", "nvidia", "L40S", 8, 48, 4, 400, 192, 1536, 7600),
    Fact("trn1.32xlarge", "neuron", "Trainium", 16, 32, 8, 800, 128, 512, 7600, 32),
    Fact("trn1n.32xlarge", "neuron", "Trainium", 16, 32, 16, 1600, 128, 512, 7600, 32),
    Fact("trn2.48xlarge", "neuron", "Trainium2", 16, 96, 16, 3200, 192, 2048, 7600, 64),
]

EFA_TYPES = sorted(name for name, entry in CATALOG.items() if entry.efa_interfaces > 0)


def _fact_id(fact: Fact) -> str:
    return fact.name


# --------------------------------------------------------------------------- published facts


def test_reference_table_is_complete_and_unique() -> None:
    names = [fact.name for fact in REFERENCE_TABLE]
    assert len(names) == len(set(names)) == 11


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_every_reference_type_is_in_the_catalog(fact: Fact) -> None:
    assert fact.name in CATALOG
    assert lookup(fact.name) is CATALOG[fact.name]
    assert CATALOG[fact.name].name == fact.name


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_accelerators_match_the_reference(fact: Fact) -> None:
    entry = lookup(fact.name)
    assert entry.accelerator == fact.kind
    assert entry.accelerator_model == fact.model
    assert entry.accelerators == fact.accelerators
    assert entry.accelerator_memory_gib == pytest.approx(
        fact.memory_per_device_gib, abs=fact.memory_tolerance_gib
    )


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_efa_and_network_match_the_reference(fact: Fact) -> None:
    entry = lookup(fact.name)
    assert entry.efa_interfaces == fact.efa_max
    assert entry.network_gbps == fact.network_gbps


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_host_resources_match_the_reference(fact: Fact) -> None:
    entry = lookup(fact.name)
    assert entry.vcpu == fact.vcpu
    assert entry.memory_gib == fact.memory_gib
    assert entry.nvme_gb == fact.nvme_gb


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_neuron_cores_match_the_reference(fact: Fact) -> None:
    assert lookup(fact.name).neuron_cores == fact.neuron_cores


@pytest.mark.parametrize(
    ("name", "cores"), [("trn1.32xlarge", 32), ("trn1n.32xlarge", 32), ("trn2.48xlarge", 64)]
)
def test_trainium_neuron_cores(name: str, cores: int) -> None:
    assert lookup(name).neuron_cores == cores


def test_gpus_have_no_neuron_cores_and_trainium_always_does() -> None:
    for entry in CATALOG.values():
        if entry.accelerator == "nvidia":
            assert entry.neuron_cores == 0, entry.name
        else:
            assert entry.neuron_cores > 0, entry.name
            assert entry.neuron_cores % entry.accelerators == 0, entry.name


def test_every_catalog_entry_is_sane() -> None:
    for name, entry in CATALOG.items():
        assert entry.name == name
        assert entry.accelerator in ("nvidia", "neuron"), name
        assert entry.accelerators >= 1, name
        assert entry.accelerator_memory_gib > 0, name
        assert entry.efa_interfaces >= 0, name
        assert entry.vcpu > 0 and entry.memory_gib > 0 and entry.network_gbps > 0, name
        assert entry.nvme_gb >= 0, name
        assert entry.family == name.split(".", 1)[0]


def test_unknown_type_raises_key_error() -> None:
    with pytest.raises(KeyError):
        lookup("m7i.xlarge")


# --------------------------------------------------------------------------- resources, EFA


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_accelerator_resource(fact: Fact) -> None:
    expected = "nvidia.com/gpu" if fact.kind == "nvidia" else "aws.amazon.com/neuron"
    assert lookup(fact.name).accelerator_resource == expected


def test_resource_names() -> None:
    assert GPU_RESOURCE == "nvidia.com/gpu"
    assert NEURON_RESOURCE == "aws.amazon.com/neuron"
    assert catalog.NEURON_CORE_RESOURCE == "aws.amazon.com/neuroncore"
    assert EFA_RESOURCE == "vpc.amazonaws.com/efa"


def test_accelerator_resource_of_small_gpu_types() -> None:
    for name in ("g5.xlarge", "g5.2xlarge", "g6.xlarge"):
        assert lookup(name).accelerator_resource == "nvidia.com/gpu"


@pytest.mark.parametrize("fact", REFERENCE_TABLE, ids=_fact_id)
def test_supports_efa_for_reference_types(fact: Fact) -> None:
    assert lookup(fact.name).supports_efa is (fact.efa_max > 0)


def test_supports_efa_follows_interfaces_for_every_entry() -> None:
    for entry in CATALOG.values():
        assert entry.supports_efa is (entry.efa_interfaces > 0), entry.name
    # the development sizes have no EFA at all
    for name in ("g5.xlarge", "g5.2xlarge", "g6.xlarge"):
        assert lookup(name).supports_efa is False


def _check_layout(interfaces: list[dict[str, Any]], efa: int) -> None:
    for interface in interfaces:
        assert set(interface) == {"networkCardIndex", "deviceIndex", "interfaceType"}
        assert interface["interfaceType"] in ("interface", "efa-only")
        assert isinstance(interface["networkCardIndex"], int) and interface["networkCardIndex"] >= 0
        assert isinstance(interface["deviceIndex"], int) and interface["deviceIndex"] >= 0
    primary = [i for i in interfaces if i["interfaceType"] == "interface"]
    assert primary == [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    pairs = [(i["networkCardIndex"], i["deviceIndex"]) for i in interfaces]
    assert len(pairs) == len(set(pairs)), "duplicate (card, device) pairs"
    efa_only = [i for i in interfaces if i["interfaceType"] == "efa-only"]
    per_card = Counter(i["networkCardIndex"] for i in efa_only)
    assert all(count == 1 for count in per_card.values()), per_card
    assert len(efa_only) == efa
    # AWS's multi-card layout: card 0 device 1, every other card device 0
    assert {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"} in efa_only
    for interface in efa_only:
        if interface["networkCardIndex"] != 0:
            assert interface["deviceIndex"] == 0, interface
    # one EFA per network card, cards numbered without gaps
    assert sorted(per_card) == list(range(efa))


@pytest.mark.parametrize("name", EFA_TYPES)
def test_efa_layout_for_every_efa_capable_entry(name: str) -> None:
    efa = lookup(name).efa_interfaces
    _check_layout(efa_network_interfaces(efa), efa)


@pytest.mark.parametrize("fact", [f for f in REFERENCE_TABLE if f.efa_max > 0], ids=_fact_id)
def test_efa_layout_uses_the_reference_maximum(fact: Fact) -> None:
    interfaces = efa_network_interfaces(lookup(fact.name).efa_interfaces)
    assert sum(i["interfaceType"] == "efa-only" for i in interfaces) == fact.efa_max
    assert len(interfaces) == fact.efa_max + 1


@pytest.mark.parametrize("efa", [1, 2, 3, 4, 8, 16, 32])
def test_efa_layout_for_any_count(efa: int) -> None:
    _check_layout(efa_network_interfaces(efa), efa)


def test_efa_layout_for_one_interface_is_primary_plus_one() -> None:
    assert efa_network_interfaces(1) == [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    ]


@pytest.mark.parametrize("efa", [0, -1])
def test_efa_layout_needs_at_least_one_interface(efa: int) -> None:
    with pytest.raises(ValueError):
        efa_network_interfaces(efa)


def test_efa_layouts_are_fresh_lists() -> None:
    first = efa_network_interfaces(4)
    first[0]["interfaceType"] = "efa-only"
    first.append({})
    _check_layout(efa_network_interfaces(4), 4)


# --------------------------------------------------------------------------- architectures


@pytest.mark.parametrize(
    "instance_type",
    [
        "m7g.large",
        "m7g.xlarge",
        "c7gn.16xlarge",
        "r8g.large",
        "t4g.medium",
        "m6gd.large",
        "g5g.xlarge",
    ],
)
def test_graviton_is_arm64(instance_type: str) -> None:
    assert cpu_architecture(instance_type) == "arm64"


@pytest.mark.parametrize(
    "instance_type",
    [
        "g5.xlarge",
        "p5.48xlarge",
        "m7i.xlarge",
        "m7i.large",
        "m6i.large",
        "g6e.48xlarge",
        "p6-b200.48xlarge",
        "trn1.32xlarge",
        "m7i-flex.large",
        "c7a.large",
    ],
)
def test_intel_amd_and_accelerated_types_are_x86_64(instance_type: str) -> None:
    assert cpu_architecture(instance_type) == "x86_64"


def test_every_catalog_entry_is_x86_64() -> None:
    for name in CATALOG:
        assert cpu_architecture(name) == "x86_64", name


def test_first_generation_graviton_a1_is_arm64() -> None:
    # a1 (Graviton 1) has no "g" after its generation digit, yet is arm64.
    assert cpu_architecture("a1.large") == "arm64"


# ------------------------------------------------------------- Karpenter's well-known labels
# Karpenter v1.14.1 website/content/en/docs/reference/instance-types.md, "Labels" per type
# (written out here, not read from the code under test).
KARPENTER_LABEL_FACTS: dict[str, dict[str, str]] = {
    "p5.48xlarge": {
        "instance-category": "p", "instance-family": "p5", "instance-generation": "5",
        "instance-size": "48xlarge", "instance-cpu": "192", "instance-local-nvme": "30400",
        "instance-gpu-name": "h100", "instance-gpu-manufacturer": "nvidia",
        "instance-gpu-count": "8", "instance-capability-flex": "false",
    },
    "p6-b200.48xlarge": {
        "instance-category": "p", "instance-family": "p6-b200", "instance-generation": "6",
        "instance-size": "48xlarge", "instance-cpu": "192", "instance-local-nvme": "30400",
        "instance-gpu-name": "b200", "instance-gpu-manufacturer": "nvidia",
        "instance-gpu-count": "8", "instance-capability-flex": "false",
    },
    "trn1.32xlarge": {
        "instance-category": "trn", "instance-family": "trn1", "instance-generation": "1",
        "instance-size": "32xlarge", "instance-cpu": "128", "instance-local-nvme": "7600",
        "instance-accelerator-name": "trainium", "instance-accelerator-manufacturer": "aws",
        "instance-accelerator-count": "16", "instance-capability-flex": "false",
    },
    "g6e.48xlarge": {
        "instance-category": "g", "instance-family": "g6e", "instance-generation": "6",
        "instance-size": "48xlarge", "instance-cpu": "192", "instance-local-nvme": "7600",
        "instance-gpu-name": "l40s", "instance-gpu-manufacturer": "nvidia",
        "instance-gpu-count": "8", "instance-capability-flex": "false",
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(KARPENTER_LABEL_FACTS))
def test_karpenter_labels_match_karpenters_reference(name: str) -> None:
    expected = {f"karpenter.k8s.aws/{k}": v for k, v in KARPENTER_LABEL_FACTS[name].items()}
    expected |= {"node.kubernetes.io/instance-type": name, "kubernetes.io/arch": "amd64"}
    assert karpenter_labels(CATALOG[name]) == expected


def _names(requirements: list[dict[str, Any]]) -> list[str]:
    return [entry.name for entry in catalog_types_admitted(requirements)]


GPU_TYPES = sorted(n for n, e in CATALOG.items() if e.accelerator == "nvidia")
NEURON_TYPES = sorted(n for n, e in CATALOG.items() if e.accelerator == "neuron")


@pytest.mark.parametrize(
    ("requirements", "admitted"),
    [
        ([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}],
         ["p5.48xlarge"]),
        ([{"key": "karpenter.k8s.aws/instance-category", "operator": "In",
           "values": ["c", "m", "r"]}], []),
        ([{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["4"]}],
         sorted(n for n in GPU_TYPES if CATALOG[n].accelerators > 4)),
        ([{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}],
         NEURON_TYPES),
        ([{"key": "karpenter.k8s.aws/instance-accelerator-name", "operator": "In",
           "values": ["trainium"]}], ["trn1.32xlarge", "trn1n.32xlarge"]),
        ([{"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
           "values": ["p5.48xlarge"]}], sorted(set(CATALOG) - {"p5.48xlarge"})),
        ([{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
          {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["p"]}],
         ["p6-b200.48xlarge"]),
        # Requirements on labels the catalog cannot decide rule nothing out.
        ([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1d"]},
          {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
         sorted(CATALOG)),
        ([], sorted(CATALOG)),
    ],
)  # fmt: skip
def test_catalog_types_admitted_by_requirements(
    requirements: list[dict[str, Any]], admitted: list[str]
) -> None:
    assert _names(requirements) == admitted


def test_every_family_has_a_cold_start_budget() -> None:
    """A pool of any catalogued type gets a default budget: a new family without one fails."""
    families = {entry.family for entry in CATALOG.values()}
    assert families <= set(COLD_START_BUDGET_MINUTES), families - set(COLD_START_BUDGET_MINUTES)
    assert cold_start_budget_minutes(["p5.48xlarge", "g5.48xlarge"]) == max(
        COLD_START_BUDGET_MINUTES["p5"], COLD_START_BUDGET_MINUTES["g5"]
    )
