"""Karpenter pools: the spec builders, and the NodePools component of every stack under mocks."""

from __future__ import annotations

import email
import re
import subprocess
import tomllib
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from components.catalog import CATALOG
from components.config import (
    GeneralPoolConfig,
    NodePoolConfig,
    PlatformConfig,
    parse_platform_config,
)
from components.config.pools import placement_group_name
from components.node_pools import (
    accelerator_taint,
    general_node_class_spec,
    general_node_pool_spec,
    node_class_spec,
    node_pool_spec,
    node_user_data,
    pool_labels,
    pool_zones,
)
from components.user_data import hugepages_script
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.mutations import without_notebooks

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
RELEASE = "kubernetes:helm.sh/v3:Release"

GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neuron"
GPU_PRESENT = "nvidia.com/gpu.present"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"

POOL_CASES = [
    (stack, pool["name"]) for stack in STACKS for pool in stack_data(stack).get("nodePools", [])
]


# --------------------------------------------------------------------------- helpers


def _pool(**overrides: Any) -> NodePoolConfig:
    data: dict[str, Any] = {"name": "p5", "instanceTypes": ["p5.48xlarge"], "maxNodes": 4}
    data.update(overrides)
    return NodePoolConfig.model_validate(data)


def _expects_efa(raw: dict[str, Any]) -> bool:
    """EFA on unless the pool says otherwise, when every type has EFA (config docs)."""
    if raw.get("efa") is not None:
        return bool(raw["efa"])
    return all(CATALOG[t].efa_interfaces > 0 for t in raw["instanceTypes"])


def _expects_placement_group(raw: dict[str, Any]) -> bool:
    if raw.get("placementGroup") is not None:
        return bool(raw["placementGroup"])
    return _expects_efa(raw)


def _efa_only(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in spec.get("networkInterfaces", []) if i["interfaceType"] == "efa-only"]


def _check_interface_rules(interfaces: list[dict[str, Any]]) -> None:
    """The EC2NodeClass CRD's rules and AWS's multi-card layout.

    https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
    """
    assert {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"} in interfaces
    assert sum(i["interfaceType"] == "interface" for i in interfaces) == 1
    pairs = Counter((i["networkCardIndex"], i["deviceIndex"]) for i in interfaces)
    assert max(pairs.values()) == 1, "duplicate (card, device) pairs"
    per_card = Counter(
        i["networkCardIndex"] for i in interfaces if i["interfaceType"] == "efa-only"
    )
    assert max(per_card.values()) == 1, "more than one efa-only interface on a card"
    for interface in interfaces:
        if interface["interfaceType"] == "efa-only":
            expected_device = 1 if interface["networkCardIndex"] == 0 else 0
            assert interface["deviceIndex"] == expected_device, interface


def _requirement(pool_spec: dict[str, Any], key: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        r for r in pool_spec["template"]["spec"]["requirements"] if r["key"] == key
    ]
    assert len(found) == 1, f"expected one requirement {key}: {found}"
    return found[0]


def _gib(quantity: str) -> int:
    assert quantity.endswith("Gi"), quantity
    return int(quantity[: -len("Gi")])


def _by_object_name(run: ProgramRun, resource_type: str, name: str) -> ResourceRecord:
    found = [r for r in run.of_type(resource_type) if r.inputs["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {resource_type} named {name}: {found}"
    return found[0]


def _private_subnet(run: ProgramRun, zone: str) -> ResourceRecord:
    found = [r for r in run.of_type(SUBNET) if r.name == f"network-private-{zone}"]
    assert len(found) == 1, zone
    assert found[0].inputs["availabilityZone"] == zone
    return found[0]


def _spec_subnets(run: ProgramRun, node_class: ResourceRecord) -> set[str]:
    """URNs of the subnets whose ids went into an EC2NodeClass spec."""
    subnets = {r.urn for r in run.of_type(SUBNET)}
    return {urn for urn in node_class.property_dependencies.get("spec", []) if urn in subnets}


def _karpenter_releases(run: ProgramRun) -> list[ResourceRecord]:
    releases = [r for r in run.of_type(RELEASE) if r.name in ("karpenter", "karpenter-crd")]
    assert sorted(r.name for r in releases) == ["karpenter", "karpenter-crd"]
    return releases


def _efa_group(run: ProgramRun) -> ResourceRecord:
    """The one security group of the NodePools component that EFA pools' classes select by id.

    (Node classes also select the storage component's Lustre client group, when there is one.)
    """
    component = run.one("trainingplatform:index:NodePools").urn
    groups = {r.urn: r for r in run.of_type(SECURITY_GROUP) if r.parent == component}
    selected = {
        urn
        for node_class in run.of_type(NODE_CLASS)
        if "networkInterfaces" in node_class.inputs["spec"]
        for urn in node_class.property_dependencies.get("spec", [])
        if urn in groups
    }
    assert len(selected) == 1, selected
    return groups[selected.pop()]


class StackCase:
    """One synthesized stack with its raw and parsed config."""

    def __init__(self, stack: str, result: StackResult) -> None:
        self.stack = stack
        self.run = ProgramRun(result.records)
        self.raw = stack_data(stack)
        self.config: PlatformConfig = parse_platform_config(self.raw)

    def raw_pool(self, name: str) -> dict[str, Any]:
        pools: list[dict[str, Any]] = [p for p in self.raw["nodePools"] if p["name"] == name]
        assert len(pools) == 1, name
        return pools[0]

    def pool_config(self, name: str) -> NodePoolConfig:
        (pool,) = [p for p in self.config.node_pools if p.name == name]
        return pool


@pytest.fixture(scope="module")
def cases(synthesized: dict[str, StackResult]) -> dict[str, StackCase]:
    return {stack: StackCase(stack, synthesized[stack]) for stack in STACKS}


@pytest.fixture(params=STACKS)
def case(request: pytest.FixtureRequest, cases: dict[str, StackCase]) -> StackCase:
    return cases[request.param]


# --------------------------------------------------------------------------- builders


def test_accelerator_taint_per_accelerator_kind() -> None:
    assert accelerator_taint(_pool()) == {"key": GPU, "value": "true", "effect": "NoSchedule"}
    trn = _pool(name="trn", instanceTypes=["trn1.32xlarge"])
    assert accelerator_taint(trn) == {"key": NEURON, "value": "true", "effect": "NoSchedule"}


def test_pool_labels_mark_gpu_pools_for_the_nvidia_plugin() -> None:
    labels = pool_labels(_pool(labels={"team": "vision"}))
    assert labels[GPU_PRESENT] == "true"
    assert labels["team"] == "vision"
    assert "p5" in labels.values() and "nvidia" in labels.values()
    trn = pool_labels(_pool(name="trn", instanceTypes=["trn2.48xlarge"]))
    assert GPU_PRESENT not in trn
    assert "trn" in trn.values() and "neuron" in trn.values()
    small = pool_labels(_pool(name="small", instanceTypes=["g5.xlarge"]))
    assert small[GPU_PRESENT] == "true"


def test_pool_zones() -> None:
    zones = ["us-east-1a", "us-east-1b", "us-east-1d"]
    training = "us-east-1d"
    assert pool_zones(_pool(), zones, training) == [training]
    assert pool_zones(_pool(zone=training), zones, training) == [training]
    # a placement group without EFA is pinned as well
    pinned = _pool(name="g", instanceTypes=["g5.xlarge"], placementGroup=True)
    assert pool_zones(pinned, zones, training) == [training]
    # EFA switched off on an EFA type: free to use every zone
    assert pool_zones(_pool(efa=False), zones, training) == zones
    small = _pool(name="small", instanceTypes=["g5.xlarge"])
    assert pool_zones(small, zones, training) == zones
    one = _pool(name="small", instanceTypes=["g5.xlarge"], zone="us-east-1b")
    assert pool_zones(one, zones, training) == ["us-east-1b"]
    # the caller's list is not handed out
    result = pool_zones(small, zones, training)
    result.append("x")
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1d"]


def test_placement_group_name_is_per_cluster_and_pool() -> None:
    assert placement_group_name("ml-training-prod", _pool()) == "ml-training-prod-p5"
    names = {
        placement_group_name(cluster, _pool(name=pool))
        for cluster in ("training-dev", "training-staging")
        for pool in ("p5", "trn1")
    }
    assert len(names) == 4


def _class_spec(
    pool: NodePoolConfig, *, placement_group: str | None = "c-p5", subnets: list[str] | None = None
) -> dict[str, Any]:
    return node_class_spec(
        pool,
        node_role_name="node-role",
        subnet_ids=list(subnets or ["subnet-0a"]),
        security_group_terms=[{"tags": {"aws:eks:cluster-name": "c"}}, {"id": "sg-efa"}],
        placement_group=placement_group,
        tags={"owner": "ml-platform", "environment": "test"},
    )


def test_node_class_spec_of_an_efa_pool() -> None:
    pool = _pool(rootVolumeSizeGiB=500, amiAlias="al2023@v20260101")
    spec = _class_spec(pool, subnets=["subnet-0a"])
    assert spec["role"] == "node-role"
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260101"}]
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0a"}]
    assert spec["securityGroupSelectorTerms"] == [
        {"tags": {"aws:eks:cluster-name": "c"}},
        {"id": "sg-efa"},
    ]
    assert spec["placementGroupSelector"] == {"name": "c-p5"}
    _check_interface_rules(spec["networkInterfaces"])
    assert len(_efa_only(spec)) == 32
    assert spec["instanceStorePolicy"] == "RAID0"
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True
    assert root["ebs"]["volumeType"] == "gp3"
    assert root["ebs"]["volumeSize"] == "500Gi"
    assert spec["tags"]["owner"] == "ml-platform" and spec["tags"]["environment"] == "test"
    assert "p5" in spec["tags"].values()
    assert "capacityReservationSelectorTerms" not in spec
    assert spec.get("associatePublicIPAddress") is not True


@pytest.mark.parametrize("instance_type", sorted(CATALOG))
def test_node_class_spec_follows_the_catalog(instance_type: str) -> None:
    entry = CATALOG[instance_type]
    spec = _class_spec(_pool(name="pool", instanceTypes=[instance_type]))
    if entry.efa_interfaces > 0:
        _check_interface_rules(spec["networkInterfaces"])
        assert len(_efa_only(spec)) == entry.efa_interfaces
    else:
        assert "networkInterfaces" not in spec
    if entry.nvme_gb > 0:
        assert spec["instanceStorePolicy"] == "RAID0"
    else:
        assert "instanceStorePolicy" not in spec


def test_node_class_spec_without_efa_or_placement_group() -> None:
    spec = _class_spec(_pool(efa=False), placement_group=None)
    assert "networkInterfaces" not in spec
    assert "placementGroupSelector" not in spec


def test_node_class_spec_capacity_reservations() -> None:
    by_id = _pool(capacityType="reserved", capacityReservationIds=["cr-0123456789abcdef0"])
    assert _class_spec(by_id)["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}
    ]
    by_tags = _pool(capacityType="reserved", capacityReservationTags={"purpose": "training"})
    assert _class_spec(by_tags)["capacityReservationSelectorTerms"] == [
        {"tags": {"purpose": "training"}}
    ]
    both = _pool(
        capacityType="reserved",
        capacityReservationIds=["cr-0123456789abcdef0", "cr-0123456789abcdef1"],
        capacityReservationTags={"purpose": "training"},
    )
    terms = _class_spec(both)["capacityReservationSelectorTerms"]
    assert {"id": "cr-0123456789abcdef0"} in terms and {"id": "cr-0123456789abcdef1"} in terms
    assert {"tags": {"purpose": "training"}} in terms and len(terms) == 3
    # an id term never carries anything else (CRD rule)
    assert all(set(term) in ({"id"}, {"tags"}) for term in terms)
    assert "capacityReservationSelectorTerms" not in _class_spec(_pool(capacityType="spot"))


def test_node_pool_spec_of_an_accelerated_pool() -> None:
    pool = _pool(
        instanceTypes=["p5.48xlarge", "p5e.48xlarge"],
        maxNodes=3,
        taints=[{"key": "team", "value": "vision", "effect": "NoExecute"}],
        labels={"team": "vision"},
    )
    spec = node_pool_spec(pool, zones=["us-east-1d"], nodes=3)
    template = spec["template"]
    assert template["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "p5",
    }
    assert _requirement(spec, INSTANCE_TYPE) == {
        "key": INSTANCE_TYPE,
        "operator": "In",
        "values": ["p5.48xlarge", "p5e.48xlarge"],
    }
    assert _requirement(spec, CAPACITY_TYPE)["values"] == ["on-demand"]
    assert _requirement(spec, ZONE) == {"key": ZONE, "operator": "In", "values": ["us-east-1d"]}
    taints = template["spec"]["taints"]
    assert {"key": GPU, "value": "true", "effect": "NoSchedule"} in taints
    assert {"key": "team", "value": "vision", "effect": "NoExecute"} in taints
    assert len(taints) == 2
    assert template["metadata"]["labels"] == pool_labels(pool)
    assert template["spec"]["expireAfter"] == "Never"
    limits = spec["limits"]
    assert limits["nodes"] == 3
    assert limits[GPU] == 3 * 8
    assert NEURON not in limits
    assert limits["cpu"] == 3 * 192 and _gib(limits["memory"]) == 3 * 2048
    disruption = spec["disruption"]
    assert disruption["consolidationPolicy"] == "WhenEmpty"
    assert disruption["consolidateAfter"]
    assert {"nodes": "0", "reasons": ["Drifted"]} in disruption["budgets"]


def test_node_pool_spec_of_a_trainium_pool() -> None:
    pool = _pool(name="trn", instanceTypes=["trn1.32xlarge"], maxNodes=5, capacityType="spot")
    spec = node_pool_spec(pool, zones=["a", "b"], nodes=5)
    assert spec["limits"]["nodes"] == 5
    assert spec["limits"][NEURON] == 5 * 16
    assert GPU not in spec["limits"]
    assert _requirement(spec, CAPACITY_TYPE)["values"] == ["spot"]
    assert _requirement(spec, ZONE)["values"] == ["a", "b"]
    assert spec["template"]["spec"]["taints"] == [
        {"key": NEURON, "value": "true", "effect": "NoSchedule"}
    ]
    assert GPU_PRESENT not in spec["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    "instance_types",
    [["g5.xlarge", "g5.2xlarge"], ["g5.2xlarge", "g5.xlarge"], ["p4d.24xlarge", "p4de.24xlarge"]],
)
def test_node_pool_limits_admit_max_nodes_of_every_allowed_type(instance_types: list[str]) -> None:
    # A pool may mix types with the same accelerators but different host sizes (config allows
    # it); its cpu and memory limits must not stop it below maxNodes nodes of any of them.
    pool = _pool(name="mixed", instanceTypes=instance_types, maxNodes=2)
    limits = node_pool_spec(pool, zones=["a"], nodes=2)["limits"]
    assert limits["nodes"] == 2
    for name in instance_types:
        assert limits["cpu"] >= 2 * CATALOG[name].vcpu, (name, limits)
        assert _gib(limits["memory"]) >= 2 * CATALOG[name].memory_gib, (name, limits)


def test_node_pool_spec_reserved_capacity() -> None:
    pool = _pool(capacityType="reserved", capacityReservationIds=["cr-0123456789abcdef0"])
    assert _requirement(node_pool_spec(pool, zones=["a"], nodes=4), CAPACITY_TYPE)["values"] == [
        "reserved"
    ]


def test_general_node_class_and_pool_specs() -> None:
    general = GeneralPoolConfig.model_validate(
        {"maxCpu": 96, "maxMemoryGiB": 384, "capacityTypes": ["on-demand"]}
    )
    class_spec = general_node_class_spec(
        general,
        node_role_name="node-role",
        subnet_ids=["subnet-0a", "subnet-0b"],
        security_group_terms=[{"tags": {"aws:eks:cluster-name": "c"}}],
        tags={"owner": "ml-platform"},
    )
    assert class_spec["role"] == "node-role"
    assert class_spec["amiSelectorTerms"] == [{"alias": general.ami_alias}]
    assert class_spec["subnetSelectorTerms"] == [{"id": "subnet-0a"}, {"id": "subnet-0b"}]
    assert class_spec["securityGroupSelectorTerms"] == [{"tags": {"aws:eks:cluster-name": "c"}}]
    for absent in (
        "networkInterfaces",
        "placementGroupSelector",
        "capacityReservationSelectorTerms",
    ):
        assert absent not in class_spec
    assert class_spec["metadataOptions"]["httpTokens"] == "required"
    assert class_spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = class_spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and root["ebs"]["volumeType"] == "gp3"
    assert class_spec["tags"]["owner"] == "ml-platform"
    assert "general" in class_spec["tags"].values()

    pool_spec = general_node_pool_spec(general, zones=["a", "b"])
    assert pool_spec["template"]["spec"]["nodeClassRef"]["name"] == "general"
    assert "taints" not in pool_spec["template"]["spec"]
    assert _requirement(pool_spec, CAPACITY_TYPE)["values"] == ["on-demand"]
    assert _requirement(pool_spec, ZONE)["values"] == ["a", "b"]
    assert pool_spec["limits"]["cpu"] == 96 and _gib(pool_spec["limits"]["memory"]) == 384
    assert GPU not in pool_spec["limits"] and NEURON not in pool_spec["limits"]


# --------------------------------------------------------------------------- every stack


def _slurm_held(raw: dict[str, Any]) -> dict[str, int]:
    """Pool -> nodes its Slurm node set holds (stack file; Slurm off: none)."""
    slurm = raw.get("slurm", {})
    if not slurm.get("enabled", False):
        return {}
    return {s["pool"]: s.get("maxNodes", 1) for s in slurm.get("nodeSets", [])}


def test_one_node_class_per_pool_and_a_node_pool_per_owner(case: StackCase) -> None:
    """Each pool's EC2NodeClass serves its own NodePool and, for a pool Slurm takes nodes of,
    a second NodePool ``<pool>-slurm`` (same class: same placement group and EFA layout)."""
    names = [p["name"] for p in case.raw.get("nodePools", [])]
    held = _slurm_held(case.raw)
    assert held, "every shipped stack gives Slurm some nodes"
    classes = case.run.of_type(NODE_CLASS)
    pools = case.run.of_type(NODE_POOL)
    cpu = ["general", "general-lustre"]  # every shipped stack has a file system
    assert sorted(r.inputs["metadata"]["name"] for r in classes) == sorted([*names, *cpu])
    expected_pools = sorted([*names, *(f"{p}-slurm" for p in held), *cpu])
    assert sorted(r.inputs["metadata"]["name"] for r in pools) == expected_pools
    for pool in held:
        spec = _by_object_name(case.run, NODE_POOL, f"{pool}-slurm").inputs["spec"]
        assert spec["template"]["spec"]["nodeClassRef"]["name"] == pool
    for record in classes:
        assert record.inputs["apiVersion"] == "karpenter.k8s.aws/v1"
        assert record.inputs["kind"] == "EC2NodeClass"
    for record in pools:
        assert record.inputs["apiVersion"] == "karpenter.sh/v1"
        assert record.inputs["kind"] == "NodePool"


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_efa_interfaces_are_the_catalog_maximum(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    spec = _by_object_name(case.run, NODE_CLASS, name).inputs["spec"]
    if _expects_efa(raw):
        maxima = {CATALOG[t].efa_interfaces for t in raw["instanceTypes"]}
        assert len(maxima) == 1
        _check_interface_rules(spec["networkInterfaces"])
        assert len(_efa_only(spec)) == maxima.pop()
        assert spec.get("associatePublicIPAddress") is not True
    else:
        assert "networkInterfaces" not in spec


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_placement_group_per_pinned_pool(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    node_class = _by_object_name(case.run, NODE_CLASS, name)
    spec = node_class.inputs["spec"]
    if not _expects_placement_group(raw):
        assert "placementGroupSelector" not in spec
        groups = {r.urn for r in case.run.of_type(PLACEMENT_GROUP)}
        assert not groups & set(node_class.dependencies)
        return
    selector = spec["placementGroupSelector"]
    assert set(selector) == {"name"}
    matching = [
        r for r in case.run.of_type(PLACEMENT_GROUP) if r.inputs["name"] == selector["name"]
    ]
    assert len(matching) == 1, matching
    (group,) = matching
    assert group.inputs["strategy"] == "cluster"
    assert case.config.name in group.inputs["name"] and name in group.inputs["name"]
    # Karpenter does not create the group: it must exist before the class selects it
    assert group.urn in node_class.dependencies


def test_placement_groups_only_for_pinned_pools(case: StackCase) -> None:
    pinned = [p for p in case.raw.get("nodePools", []) if _expects_placement_group(p)]
    groups = case.run.of_type(PLACEMENT_GROUP)
    assert len(groups) == len(pinned)
    assert len({g.inputs["name"] for g in groups}) == len(groups)
    assert all(g.inputs["strategy"] == "cluster" for g in groups)


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_pool_zones_and_subnets(cases: dict[str, StackCase], stack: str, name: str) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    network = case.raw["network"]
    training_zone = network["trainingZone"]
    node_class = _by_object_name(case.run, NODE_CLASS, name)
    node_pool = _by_object_name(case.run, NODE_POOL, name).inputs["spec"]
    terms = node_class.inputs["spec"]["subnetSelectorTerms"]
    if _expects_efa(raw) or _expects_placement_group(raw):
        zones = [training_zone]
    elif raw.get("zone"):
        zones = [raw["zone"]]
    else:
        zones = list(network["availabilityZones"])
    assert _requirement(node_pool, ZONE) == {"key": ZONE, "operator": "In", "values": zones}
    assert len(terms) == len(zones)
    assert all(set(term) == {"id"} for term in terms)
    assert len({term["id"] for term in terms}) == len(terms)
    assert _spec_subnets(case.run, node_class) == {
        _private_subnet(case.run, zone).urn for zone in zones
    }


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_accelerator_taint_and_labels(cases: dict[str, StackCase], stack: str, name: str) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    kind = CATALOG[raw["instanceTypes"][0]].accelerator
    template = _by_object_name(case.run, NODE_POOL, name).inputs["spec"]["template"]
    resource = GPU if kind == "nvidia" else NEURON
    taints = template["spec"]["taints"]
    assert {"key": resource, "value": "true", "effect": "NoSchedule"} in taints
    labels = template["metadata"]["labels"]
    if kind == "nvidia":
        assert labels[GPU_PRESENT] == "true"
    else:
        assert GPU_PRESENT not in labels
    assert name in labels.values()


def test_every_stack_has_gpu_and_trainium_pools(case: StackCase) -> None:
    kinds = {CATALOG[p["instanceTypes"][0]].accelerator for p in case.raw["nodePools"]}
    assert kinds == {"nvidia", "neuron"}, "the label and taint checks need both kinds"


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_node_pool_requirements_and_limits(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    spec = _by_object_name(case.run, NODE_POOL, name).inputs["spec"]
    types = raw["instanceTypes"]
    entries = [CATALOG[t] for t in types]
    assert _requirement(spec, INSTANCE_TYPE)["values"] == types
    capacity = raw.get("capacityType", "on-demand")
    assert _requirement(spec, CAPACITY_TYPE)["values"] == [capacity]
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": name,
    }
    limits = spec["limits"]
    # The pool's own NodePool gets what Slurm does not hold (README, sharing pools).
    max_nodes = raw["maxNodes"] - _slurm_held(case.raw).get(name, 0)
    resource = GPU if entries[0].accelerator == "nvidia" else NEURON
    other = NEURON if resource == GPU else GPU
    assert limits["nodes"] == max_nodes
    assert limits[resource] == max_nodes * entries[0].accelerators
    assert other not in limits
    assert limits["cpu"] >= max_nodes * max(e.vcpu for e in entries)
    assert _gib(limits["memory"]) >= max_nodes * max(e.memory_gib for e in entries)


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_training_disruption(cases: dict[str, StackCase], stack: str, name: str) -> None:
    spec = _by_object_name(cases[stack].run, NODE_POOL, name).inputs["spec"]
    disruption = spec["disruption"]
    assert disruption["consolidationPolicy"] == "WhenEmpty"
    assert disruption["consolidateAfter"]
    assert spec["template"]["spec"]["expireAfter"] == "Never"
    drift = [b for b in disruption["budgets"] if "Drifted" in b.get("reasons", [])]
    assert drift and all(b["nodes"] == "0" for b in drift)


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_capacity_reservations(cases: dict[str, StackCase], stack: str, name: str) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    class_spec = _by_object_name(case.run, NODE_CLASS, name).inputs["spec"]
    pool_spec = _by_object_name(case.run, NODE_POOL, name).inputs["spec"]
    if raw.get("capacityType") == "reserved":
        terms = class_spec["capacityReservationSelectorTerms"]
        ids = [term["id"] for term in terms if "id" in term]
        assert ids == raw.get("capacityReservationIds", [])
        tags = [term["tags"] for term in terms if "tags" in term]
        assert tags == (
            [raw["capacityReservationTags"]] if raw.get("capacityReservationTags") else []
        )
        assert _requirement(pool_spec, CAPACITY_TYPE)["values"] == ["reserved"]
    else:
        assert "capacityReservationSelectorTerms" not in class_spec
        assert "reserved" not in _requirement(pool_spec, CAPACITY_TYPE)["values"]


def test_prod_p5_launches_only_into_its_reservation(cases: dict[str, StackCase]) -> None:
    case = cases["prod"]
    raw = case.raw_pool("p5")
    assert raw["capacityType"] == "reserved" and raw["capacityReservationIds"]
    terms = _by_object_name(case.run, NODE_CLASS, "p5").inputs["spec"][
        "capacityReservationSelectorTerms"
    ]
    assert terms == [{"id": rid} for rid in raw["capacityReservationIds"]]
    pool_spec = _by_object_name(case.run, NODE_POOL, "p5").inputs["spec"]
    assert _requirement(pool_spec, CAPACITY_TYPE)["values"] == ["reserved"]


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_node_class_hardening_and_storage(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    spec = _by_object_name(case.run, NODE_CLASS, name).inputs["spec"]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True
    assert root["ebs"]["volumeType"] == "gp3"
    assert root["ebs"]["volumeSize"] == f"{case.pool_config(name).root_volume_size_gib}Gi"
    if "rootVolumeSizeGiB" in raw:
        assert root["ebs"]["volumeSize"] == f"{raw['rootVolumeSizeGiB']}Gi"
    if all(CATALOG[t].nvme_gb > 0 for t in raw["instanceTypes"]):
        assert spec["instanceStorePolicy"] == "RAID0"
    else:
        assert "instanceStorePolicy" not in spec
    (alias,) = spec["amiSelectorTerms"]
    assert set(alias) == {"alias"}
    if "amiAlias" in raw:
        assert alias["alias"] == raw["amiAlias"]
    for key, value in case.config.required_tags.items():
        assert spec["tags"][key] == value


def test_general_node_class_hardening(case: StackCase) -> None:
    spec = _by_object_name(case.run, NODE_CLASS, "general").inputs["spec"]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] is True and root["ebs"]["volumeType"] == "gp3"


def test_efa_security_group_allows_all_traffic_within_itself(case: StackCase) -> None:
    group = _efa_group(case.run)
    ingress = group.inputs["ingress"]
    assert any(rule.get("self") is True and rule["protocol"] == "-1" for rule in ingress), ingress
    egress = group.inputs["egress"]
    assert any(rule.get("self") is True and rule["protocol"] == "-1" for rule in egress), egress
    vpc = case.run.one("aws:ec2/vpc:Vpc")
    assert vpc.urn in group.property_dependencies.get("vpcId", [])


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_efa_security_group_selected_by_efa_pools_only(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    group = _efa_group(case.run)
    node_class = _by_object_name(case.run, NODE_CLASS, name)
    terms = node_class.inputs["spec"]["securityGroupSelectorTerms"]
    # one id term is the Lustre client group, when the stack has a file system
    lustre_terms = 1 if case.config.storage.lustre is not None else 0
    id_terms = [term for term in terms if "id" in term][lustre_terms:]
    # the cluster security group is always selected
    assert {"tags": {"aws:eks:cluster-name": case.config.name}} in terms
    if _expects_efa(raw):
        assert group.urn in node_class.property_dependencies["spec"]
        assert group.urn in node_class.dependencies
        assert len(id_terms) == 1
    else:
        assert group.urn not in node_class.dependencies
        assert id_terms == []


def test_general_pool_in_every_stack(case: StackCase) -> None:
    node_class = _by_object_name(case.run, NODE_CLASS, "general")
    node_pool = _by_object_name(case.run, NODE_POOL, "general")
    spec = node_pool.inputs["spec"]
    zones = case.raw["network"]["availabilityZones"]
    assert spec["template"]["spec"]["nodeClassRef"]["name"] == "general"
    assert _requirement(spec, ZONE)["values"] == zones
    assert _spec_subnets(case.run, node_class) == {
        _private_subnet(case.run, zone).urn for zone in zones
    }
    general = case.config.general_pool
    assert spec["limits"]["cpu"] == general.max_cpu
    assert _gib(spec["limits"]["memory"]) == general.max_memory_gib
    assert _requirement(spec, CAPACITY_TYPE)["values"] == list(general.capacity_types)
    assert "taints" not in spec["template"]["spec"]
    class_spec = node_class.inputs["spec"]
    terms = class_spec["securityGroupSelectorTerms"]
    # it crosses zones, so its nodes are no Lustre clients (general-lustre's are)
    assert terms == [{"tags": {"aws:eks:cluster-name": case.config.name}}]
    assert "networkInterfaces" not in class_spec and "placementGroupSelector" not in class_spec
    assert spec["weight"] > 0


def test_node_pools_depend_on_their_classes_and_karpenter(case: StackCase) -> None:
    releases = [r.urn for r in _karpenter_releases(case.run)]
    classes = {r.inputs["metadata"]["name"]: r for r in case.run.of_type(NODE_CLASS)}
    pools = case.run.of_type(NODE_POOL)
    assert pools and classes
    for node_pool in pools:
        ref = node_pool.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        assert classes[ref].urn in node_pool.dependencies, node_pool.name
    for record in [*classes.values(), *pools]:
        for release in releases:
            assert release in record.dependencies, (record.name, release)


# --------------------------------------------------------------------------- mutated configs


def test_placement_group_can_be_switched_off(run_component: RunComponent) -> None:
    data = stack_data("staging")
    (p5,) = [p for p in data["nodePools"] if p["name"] == "p5"]
    assert _expects_efa(p5)
    before = run_component(parts.node_pools, data, "staging")
    p5_group = _by_object_name(before, NODE_CLASS, "p5").inputs["spec"]["placementGroupSelector"]
    p5["placementGroup"] = False
    run = run_component(parts.node_pools, data, "staging")
    names = [g.inputs["name"] for g in run.of_type(PLACEMENT_GROUP)]
    assert p5_group["name"] not in names
    assert len(names) == len(before.of_type(PLACEMENT_GROUP)) - 1
    node_class = _by_object_name(run, NODE_CLASS, "p5")
    spec = node_class.inputs["spec"]
    assert "placementGroupSelector" not in spec
    groups = {g.urn for g in run.of_type(PLACEMENT_GROUP)}
    assert not groups & set(node_class.dependencies)
    # still an EFA pool: every interface, the EFA group, the training zone
    assert len(_efa_only(spec)) == CATALOG["p5.48xlarge"].efa_interfaces
    assert _efa_group(run).urn in node_class.dependencies
    pool_spec = _by_object_name(run, NODE_POOL, "p5").inputs["spec"]
    assert _requirement(pool_spec, ZONE)["values"] == [data["network"]["trainingZone"]]
    # the other pool keeps its group
    trn1 = _by_object_name(run, NODE_CLASS, "trn1").inputs["spec"]["placementGroupSelector"]
    assert trn1["name"] in names


def test_capacity_reservation_tags_become_a_selector_term(
    run_component: RunComponent,
) -> None:
    data = stack_data("dev")
    (trn1,) = [p for p in data["nodePools"] if p["name"] == "trn1"]
    trn1["capacityType"] = "reserved"
    trn1["capacityReservationTags"] = {"purpose": "training", "team": "neuron"}
    run = run_component(parts.node_pools, data, "dev")
    spec = _by_object_name(run, NODE_CLASS, "trn1").inputs["spec"]
    assert spec["capacityReservationSelectorTerms"] == [
        {"tags": {"purpose": "training", "team": "neuron"}}
    ]
    pool_spec = _by_object_name(run, NODE_POOL, "trn1").inputs["spec"]
    assert _requirement(pool_spec, CAPACITY_TYPE)["values"] == ["reserved"]
    # the spot pool is untouched
    assert (
        "capacityReservationSelectorTerms"
        not in (_by_object_name(run, NODE_CLASS, "gpu-small").inputs["spec"])
    )


def test_reservation_ids_and_tags_together(run_component: RunComponent) -> None:
    data = stack_data("prod")
    (p5,) = [p for p in data["nodePools"] if p["name"] == "p5"]
    p5["capacityReservationTags"] = {"purpose": "training"}
    run = run_component(parts.node_pools, data, "prod")
    terms = _by_object_name(run, NODE_CLASS, "p5").inputs["spec"][
        "capacityReservationSelectorTerms"
    ]
    assert [t for t in terms if "id" in t] == [{"id": rid} for rid in p5["capacityReservationIds"]]
    assert [t for t in terms if "tags" in t] == [{"tags": {"purpose": "training"}}]


def test_no_efa_pool_means_no_efa_group(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    (trn1,) = [p for p in data["nodePools"] if p["name"] == "trn1"]
    trn1["efa"] = False
    # no longer pinned by EFA: pinned by hand beside the file system its Slurm node set mounts
    trn1["zone"] = data["network"]["trainingZone"]
    without_notebooks(data)  # a Trainium pool without EFA gets notebooks, whose image dev has not
    run = run_platform(data, "dev")
    assert not any(g.name.endswith("-efa") for g in run.of_type(SECURITY_GROUP))
    assert run.of_type(PLACEMENT_GROUP) == []
    spec = _by_object_name(run, NODE_CLASS, "trn1").inputs["spec"]
    assert "networkInterfaces" not in spec and "placementGroupSelector" not in spec
    # only the Lustre client group is selected by id: no EFA group
    lustre_clients = run.one(SECURITY_GROUP, "lustre-clients").urn
    id_terms = [t for t in spec["securityGroupSelectorTerms"] if "id" in t]
    assert (
        len(id_terms) == 1
        and lustre_clients in _by_object_name(run, NODE_CLASS, "trn1").dependencies
    )
    pool_spec = _by_object_name(run, NODE_POOL, "trn1").inputs["spec"]
    assert _requirement(pool_spec, ZONE)["values"] == [data["network"]["trainingZone"]]


def test_non_efa_pool_in_one_zone(run_platform: Callable[..., ProgramRun]) -> None:
    data = stack_data("dev")
    (small,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    zone = next(
        z for z in data["network"]["availabilityZones"] if z != data["network"]["trainingZone"]
    )
    small["zone"] = zone
    # away from the file system, so no Slurm node set on it (config refuses one)
    data["slurm"]["nodeSets"] = [n for n in data["slurm"]["nodeSets"] if n["pool"] != "gpu-small"]
    run = run_platform(data, "dev")
    node_class = _by_object_name(run, NODE_CLASS, "gpu-small")
    assert len(node_class.inputs["spec"]["subnetSelectorTerms"]) == 1
    assert _spec_subnets(run, node_class) == {_private_subnet(run, zone).urn}
    pool_spec = _by_object_name(run, NODE_POOL, "gpu-small").inputs["spec"]
    assert _requirement(pool_spec, ZONE)["values"] == [zone]


# --------------------------------------------------------------------------- Slurm's nodes, huge pages

SLURM_TAINT = {"key": "trainingplatform.io/reserved-for", "value": "slurm", "effect": "NoSchedule"}
HUGE_PAGES = "hugepages-2Mi"
SLURM_POOL_CASES = [(stack, pool) for stack in STACKS for pool in _slurm_held(stack_data(stack))]


@pytest.mark.parametrize(("stack", "name"), SLURM_POOL_CASES)
def test_slurms_node_pool_holds_its_share_under_a_taint_only_slurmd_tolerates(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    case = cases[stack]
    raw = case.raw_pool(name)
    held = _slurm_held(case.raw)[name]
    own = _by_object_name(case.run, NODE_POOL, name).inputs["spec"]
    slurm = _by_object_name(case.run, NODE_POOL, f"{name}-slurm").inputs["spec"]
    assert slurm["limits"]["nodes"] == held
    assert own["limits"]["nodes"] + slurm["limits"]["nodes"] == raw["maxNodes"]
    assert SLURM_TAINT in slurm["template"]["spec"]["taints"]
    assert SLURM_TAINT not in own["template"]["spec"]["taints"]
    labels = slurm["template"]["metadata"]["labels"]
    assert labels["trainingplatform.io/reserved-for"] == "slurm"
    assert labels["trainingplatform.io/pool"] == name
    assert "trainingplatform.io/reserved-for" not in own["template"]["metadata"]["labels"]
    # Everything else is the pool's: requirements, the accelerator taint, disruption.
    assert slurm["template"]["spec"]["requirements"] == own["template"]["spec"]["requirements"]
    assert slurm["disruption"] == own["disruption"]


def _pages(user_data: str) -> int:
    match = re.search(r"^pages=(\d+)$", user_data, flags=re.MULTILINE)
    assert match, user_data
    return int(match.group(1))


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_efa_nodes_reserve_huge_pages_and_an_overlay_tells_karpenter(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    """Karpenter offers no huge pages (its instance types' capacity has none:
    https://github.com/aws/karpenter-provider-aws/blob/v1.14.1/pkg/providers/instancetype/types.go): each NodePool of a pool whose
    nodes reserve them gets a NodeOverlay with exactly what the node's user data reserves."""
    case = cases[stack]
    raw = case.raw_pool(name)
    gib = raw.get("hugepagesGiB", 5 if _expects_efa(raw) else 0)
    node_class = _by_object_name(case.run, NODE_CLASS, name).inputs["spec"]
    overlays = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in case.run.of_type(OVERLAY)}
    node_pools = [name] + ([f"{name}-slurm"] if name in _slurm_held(case.raw) else [])
    if not gib:
        assert "text/x-shellscript" not in node_class.get("userData", "")
        assert not any(f"{p}-hugepages" in overlays for p in node_pools)
        return
    user_data = node_class["userData"]
    assert user_data.startswith("MIME-Version: 1.0")
    assert "Content-Type: text/x-shellscript" in user_data
    assert _pages(user_data) * 2 == gib * 1024
    for pool in node_pools:
        overlay = overlays[f"{pool}-hugepages"]
        assert overlay["requirements"] == [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}
        ]
        assert overlay["capacity"] == {HUGE_PAGES: f"{gib}Gi"}


def test_karpenter_runs_with_node_overlays_where_pools_have_huge_pages(case: StackCase) -> None:
    (release,) = [r for r in case.run.of_type(RELEASE) if r.name == "karpenter"]
    values = release.inputs["values"]
    assert values["settings"]["featureGates"]["nodeOverlay"] is True
    assert case.run.of_type(OVERLAY)


def test_karpenter_repairs_nodes_that_stay_not_ready(case: StackCase) -> None:
    """A node that hangs while its instance runs holds its pods Terminating, and JobSet's
    BlockingRecreate waits for them: only node repair (or a person) ends that."""
    (release,) = [r for r in case.run.of_type(RELEASE) if r.name == "karpenter"]
    assert release.inputs["values"]["settings"]["featureGates"]["nodeRepair"] is True


def _user_data_parts(user_data: str) -> dict[str, str]:
    """Content type -> body of each part, parsed as cloud-init parses it (Python's email)."""
    message = email.message_from_string(user_data)
    assert message.is_multipart()
    parts = [part for part in message.walk() if not part.is_multipart()]
    return {part.get_content_type(): str(part.get_payload()) for part in parts}


@pytest.mark.parametrize(("stack", "name"), POOL_CASES)
def test_efa_nodes_let_every_container_lock_memory(
    cases: dict[str, StackCase], stack: str, name: str
) -> None:
    """libfabric pins EFA buffers against RLIMIT_MEMLOCK, and team pods hold no CAP_IPC_LOCK:
    an EFA node's containerd gives every container an unlimited memlock limit."""
    case = cases[stack]
    node_class = _by_object_name(case.run, NODE_CLASS, name).inputs["spec"]
    parts = _user_data_parts(node_class["userData"])
    node_config = load_yaml(parts["application/node.eks.aws"])
    # every node keeps the privileged ports (the Lustre boundary), EFA or not
    assert "enable_unprivileged_ports = false" in node_config["spec"]["containerd"]["config"]
    if not _expects_efa(case.raw_pool(name)):
        assert "baseRuntimeSpec" not in node_config["spec"]["containerd"]
        return
    assert node_config["apiVersion"] == "node.eks.aws/v1alpha1"
    assert node_config["kind"] == "NodeConfig"
    rlimits = node_config["spec"]["containerd"]["baseRuntimeSpec"]["process"]["rlimits"]
    by_type = {r["type"]: r for r in rlimits}
    memlock = by_type["RLIMIT_MEMLOCK"]
    assert memlock["soft"] == memlock["hard"] >= 2**59  # effectively unlimited (bytes)
    for limit in rlimits:
        for value in (limit["soft"], limit["hard"]):
            # nodeadm's merge turns numbers into float64 and writes them in Go's shortest
            # form (as Python's repr does): each must come back as the same uint64
            assert int(Decimal(repr(float(value)))) == value < 2**64, (limit, value)
    # the list replaces the AMI's: its open-files limit must still be there
    assert by_type["RLIMIT_NOFILE"]["soft"] >= 65536


def test_every_pool_keeps_privileged_ports_for_root() -> None:
    """containerd 2 lets any pod bind ports below 1024 unless told not to: the Lustre servers
    trust a client that connects from one (docs/concepts/tenancy.md, "The Lustre boundary")."""
    for efa in (False, True):
        parts = _user_data_parts(node_user_data(_pool(instanceTypes=["p5.48xlarge"], efa=efa)))
        containerd = load_yaml(parts["application/node.eks.aws"])["spec"]["containerd"]
        config = tomllib.loads(containerd["config"])
        assert config["plugins"]["io.containerd.cri.v1.runtime"] == {
            "enable_unprivileged_ports": False
        }
        assert ("baseRuntimeSpec" in containerd) is efa
    # Bottlerocket's user data is TOML settings: the same switch, by its own name
    bottlerocket = node_user_data(
        _pool(instanceTypes=["g6e.12xlarge"], efa=False, amiAlias="bottlerocket@latest")
    )
    settings = tomllib.loads(bottlerocket)["settings"]["container-runtime"]
    assert settings == {"enable-unprivileged-ports": False}


def test_the_user_data_script_reserves_the_pages(tmp_path: Any) -> None:
    """Run the script against a fake /proc and /etc: it writes the sysctl and asks for N pages."""
    script = hugepages_script(5)
    proc = tmp_path / "proc"
    (proc / "sys" / "vm").mkdir(parents=True)
    (proc / "sys" / "vm" / "nr_hugepages").write_text("2560\n")
    (proc / "meminfo").write_text("HugePages_Total:    2560\n")
    (tmp_path / "etc" / "sysctl.d").mkdir(parents=True)
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sysctl").write_text(f'#!/bin/bash\necho "$@" >> {calls}\n')
    (bin_dir / "sysctl").chmod(0o755)
    localized = (
        script.replace("/etc/", f"{tmp_path}/etc/")
        .replace("/proc/", f"{proc}/")
        .replace("/dev/console", f"{tmp_path}/console")
    )
    done = subprocess.run(["bash", "-c", localized], capture_output=True, text=True, check=False,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    conf = (tmp_path / "etc" / "sysctl.d" / "90-training-platform-hugepages.conf").read_text()
    assert conf.strip() == "vm.nr_hugepages = 2560"
    assert calls.read_text().split() == ["-q", "-w", "vm.nr_hugepages=2560"]
    assert "wanted 2560" in (tmp_path / "console").read_text()


def _reaches(run: ProgramRun, start: ResourceRecord, target: str) -> bool:
    """Whether ``start`` depends on ``target`` (a URN), directly or through its dependencies."""
    by_urn = {record.urn: record for record in run.records}
    seen: set[str] = set()
    todo = [start]
    while todo:
        record = todo.pop()
        property_urns = [u for urns in record.property_dependencies.values() for u in urns]
        for urn in {*record.dependencies, *property_urns}:
            if urn == target:
                return True
            if urn not in seen and urn in by_urn:
                seen.add(urn)
                todo.append(by_urn[urn])
    return False


def test_every_pool_waits_for_the_node_roles_access_entry(case: StackCase) -> None:
    """Nodes join only once their role has its EC2_LINUX access entry; on destroy, NodePools and
    EC2NodeClasses go first, and the EC2NodeClass finalizer (aws/karpenter-provider-aws v1.14.1
    pkg/controllers/nodeclass/controller.go) waits for every NodeClaim before the entry goes."""
    classes = case.run.of_type(NODE_CLASS)
    roles = {
        urn
        for node_class in classes
        for urn in node_class.property_dependencies.get("spec", [])
        if case.run.by_urn(urn).type == "aws:iam/role:Role"
    }
    assert len(roles) == 1, roles
    (role,) = roles
    entries = [
        entry
        for entry in case.run.of_type("aws:eks/accessEntry:AccessEntry")
        if entry.property_dependencies.get("principalArn") == [role]
    ]
    assert len(entries) == 1 and entries[0].inputs["type"] == "EC2_LINUX"
    waiting = [*classes, *case.run.of_type(NODE_POOL), *case.run.of_type(OVERLAY)]
    for record in waiting:
        assert _reaches(case.run, record, entries[0].urn), record.name
