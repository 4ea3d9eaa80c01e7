"""Appending a zone to prod, whose existing blocks are pinned: it gets a free block, nothing moves.

The cluster itself stays on the zones it was created in (``network.clusterZones``): EKS refuses
subnets of other zones on update, so ``synth diff`` refuses a change that gives it one.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.platform import validated_config
from synth.__main__ import main as synth_main
from synth.diff import Synthesis, cluster_zone_additions
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import stack_data
from tests.project_copies import project_copy

SUBNET = "aws:ec2/subnet:Subnet"
CLUSTER = "eks:index:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ATTACHMENT = "aws:ec2transitgateway/vpcAttachment:VpcAttachment"
ADDED = "us-east-1c"
"""A zone of prod's region whose private slot (10.40.128.0/18) is us-east-1d's pinned block."""
PROD_ZONES = ["us-east-1a", "us-east-1b", "us-east-1d"]


def _records(directory: Path, resource_type: str) -> dict[str, Any]:
    records = json.loads((directory / "resources.json").read_text())
    return {r["name"]: r for r in records if r["type"] == resource_type}


def _subnets(directory: Path) -> dict[str, Any]:
    return {name: r["inputs"] for name, r in _records(directory, SUBNET).items()}


def _subnet_zones(directory: Path, resource_type: str, name: str, key: str) -> set[str]:
    """Zones of the subnets input ``key`` of a record names (its property dependencies)."""
    subnets = _records(directory, SUBNET)
    record = _records(directory, resource_type)[name]
    names = [urn.rsplit("::", 1)[1] for urn in record["propertyDependencies"][key]]
    return {subnets[n]["inputs"]["availabilityZone"] for n in names if n in subnets}


def _appended(data: dict[str, Any]) -> dict[str, Any]:
    data["network"]["availabilityZones"].append(ADDED)
    return data


def test_appending_a_zone_to_prod_passes_config_validation() -> None:
    data = stack_data("prod")
    assert data["network"]["availabilityZones"] == PROD_ZONES
    assert data["network"]["subnetCidrs"]["us-east-1d"]["private"] == "10.40.128.0/18"
    network = validated_config(_appended(data)).network
    assert ADDED in network.availability_zones
    assert network.control_plane_zones() == sorted([*PROD_ZONES, ADDED])
    data["network"]["clusterZones"] = list(reversed(PROD_ZONES))
    assert validated_config(data).network.control_plane_zones() == PROD_ZONES


@pytest.mark.parametrize(
    ("cluster_zones", "path", "value", "allowed"),
    [
        (["us-east-1a", "us-east-1f"], "platform.network.clusterZones[1]", "us-east-1f",
         "a zone of network.availabilityZones (us-east-1a, us-east-1b, us-east-1d, us-east-1c)"),
        (["us-east-1a"], "platform.network.clusterZones", ["us-east-1a"],
         "at least two zones of network.availabilityZones"),
        (["us-east-1a", "us-east-1a"], "platform.network.clusterZones",
         ["us-east-1a", "us-east-1a"], "each zone once"),
        ([], "platform.network.clusterZones", [], "at least two zones"),
    ],
)  # fmt: skip
def test_cluster_zones_are_refused_by_key_path(
    cluster_zones: list[str], path: str, value: Any, allowed: str
) -> None:
    data = _appended(stack_data("prod"))
    data["network"]["clusterZones"] = cluster_zones
    assert_reported(data, path, value, allowed)


def _record(
    resource_type: str, name: str, inputs: dict[str, Any], **deps: list[str]
) -> ResourceRecord:
    return ResourceRecord(
        type=resource_type, name=name, urn=f"urn:pulumi:s::p::{resource_type}::{name}",
        parent=None, provider=None, providers={}, dependencies=[],
        property_dependencies={key: [f"urn:pulumi:s::p::{SUBNET}::{n}" for n in names]
                               for key, names in deps.items()},
        protect=False, custom=True, inputs=inputs,
    )  # fmt: skip


def _synthesis(cluster: dict[str, list[str]] | None, zones: list[str]) -> Synthesis:
    """Subnets ``private-<zone>`` and, unless ``cluster`` is None, clusters naming them."""
    records = [_record(SUBNET, f"private-{z}", {"availabilityZone": z}) for z in zones]
    if cluster is not None:
        records.append(_record(CLUSTER, "c", {}, privateSubnetIds=cluster["c"]))
        records.append(_record("aws:eks/cluster:Cluster", "raw", {}, vpcConfig=cluster["raw"]))
    return Synthesis(Path("x"), {r.urn: r for r in records}, {}, {})


def test_only_a_new_zone_of_an_existing_cluster_is_refused() -> None:
    zones = ["z-a", "z-b", "z-c"]
    two = {"c": ["private-z-a", "private-z-b"], "raw": ["private-z-a", "private-z-b"]}
    three = {"c": [f"private-{z}" for z in zones], "raw": [f"private-{z}" for z in zones]}
    assert cluster_zone_additions(_synthesis(None, zones), _synthesis(three, zones)) == []
    assert cluster_zone_additions(_synthesis(two, zones), _synthesis(two, zones)) == []
    assert cluster_zone_additions(_synthesis(three, zones), _synthesis(two, zones)) == []
    assert cluster_zone_additions(_synthesis(two, zones), _synthesis(three, zones)) == [
        f"aws:eks/cluster:Cluster raw: new zone z-c ({SUBNET} private-z-c)",
        f"{CLUSTER} c: new zone z-c ({SUBNET} private-z-c)",
    ]


def _diff_prod(
    edit: Callable[[dict[str, Any]], object],
    base: Path,
    tmp_path: Path,
) -> tuple[int, Path]:
    """``synth diff prod --gate`` of a copy of the project whose prod platform ``edit`` changed."""
    project = project_copy(tmp_path, "prod", edit)
    out = tmp_path / "out"
    argv = ["diff", "prod", "--base", str(base), "--out", str(out), "--project-dir", str(project)]
    return synth_main([*argv, "--gate"]), out / "prod"


@pytest.mark.slow
def test_appending_a_zone_to_the_cluster_itself_is_refused(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = synthesized["prod"].written.directory
    code, out = _diff_prod(_appended, base, tmp_path)
    text = capsys.readouterr().out
    assert code == 1, text
    assert "  cluster zones refused: 1\n" in text, text
    assert (
        f"    ! {CLUSTER} ml-training-prod: new zone {ADDED} ({SUBNET} network-private-{ADDED})\n"
    ) in text
    assert "set network.clusterZones to the zones the cluster has" in text
    cluster_zones = _subnet_zones(out, CLUSTER, "ml-training-prod", "privateSubnetIds")
    assert cluster_zones == {*PROD_ZONES, ADDED}


@pytest.mark.slow
def test_appending_a_zone_to_prod_adds_its_subnets_and_moves_none(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def append_beside_the_cluster(platform: dict[str, Any]) -> None:
        platform["network"]["availabilityZones"].append(ADDED)
        platform["network"]["clusterZones"] = list(PROD_ZONES)

    base = synthesized["prod"].written.directory
    code, out = _diff_prod(append_beside_the_cluster, base, tmp_path)
    text = capsys.readouterr().out
    assert code == 0, text
    assert "cluster zones refused" not in text
    assert f"    + {SUBNET} network-private-{ADDED}\n" in text, text
    assert f"    + {SUBNET} network-public-{ADDED}\n" in text
    assert f"~ {SUBNET}" not in text and f"- {SUBNET}" not in text
    # The cluster and its system node group (subnet_ids ForceNew) keep their subnets.
    assert f"~ {CLUSTER} " not in text and f"~ {NODE_GROUP} " not in text
    for resource_type in (CLUSTER, NODE_GROUP):
        assert _records(out, resource_type).keys() == _records(base, resource_type).keys()
        for name, record in _records(out, resource_type).items():
            assert record["inputs"] == _records(base, resource_type)[name]["inputs"]
    assert _subnet_zones(out, CLUSTER, "ml-training-prod", "privateSubnetIds") == set(PROD_ZONES)
    assert _subnet_zones(out, NODE_GROUP, "ml-training-prod-system", "subnetIds") == set(PROD_ZONES)
    # The deploy path's attachment and Karpenter's general pool do get the new zone.
    attachment = _subnet_zones(out, ATTACHMENT, "network-deploy-path", "subnetIds")
    assert attachment == {*PROD_ZONES, ADDED}
    pool = load_yaml((out / "manifests" / "NodePool._cluster.general.yaml").read_text())
    zones = [r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]
             if r["key"] == "topology.kubernetes.io/zone"]  # fmt: skip
    assert zones == [sorted([*PROD_ZONES, ADDED])]
    before, after = _subnets(base), _subnets(out)
    assert {name: after[name] for name in before} == before
    new = [ipaddress.IPv4Network(after[f"network-{kind}-{ADDED}"]["cidrBlock"])
           for kind in ("private", "public")]  # fmt: skip
    old = [ipaddress.IPv4Network(inputs["cidrBlock"]) for inputs in before.values()]
    assert not any(n.overlaps(o) for n in new for o in old)
    assert not new[0].overlaps(new[1])
    assert all(n.subnet_of(ipaddress.IPv4Network("10.40.0.0/16")) for n in new)
