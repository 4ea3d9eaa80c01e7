"""Appending a zone to prod, whose existing blocks are pinned: it gets a free block, nothing moves."""

from __future__ import annotations

import ipaddress
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform import validated_config
from synth.__main__ import main as synth_main
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from tests.conftest import stack_data

SUBNET = "aws:ec2/subnet:Subnet"
ADDED = "us-east-1c"
"""A zone of prod's region whose private slot (10.40.128.0/18) is us-east-1d's pinned block."""


def _subnets(directory: Path) -> dict[str, Any]:
    records = json.loads((directory / "resources.json").read_text())
    return {r["name"]: r["inputs"] for r in records if r["type"] == SUBNET}


def test_appending_a_zone_to_prod_passes_config_validation() -> None:
    data = stack_data("prod")
    assert data["network"]["subnetCidrs"]["us-east-1d"]["private"] == "10.40.128.0/18"
    data["network"]["availabilityZones"].append(ADDED)
    assert ADDED in validated_config(data).network.availability_zones


@pytest.mark.slow
def test_appending_a_zone_to_prod_adds_its_subnets_and_moves_none(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPOSITORY_ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(REPOSITORY_ROOT / "stacks", project / "stacks")
    stack_file = project / "stacks" / "Pulumi.prod.yaml"
    document = yaml.safe_load(stack_file.read_text())
    document["config"]["eks-training-platform:platform"]["network"]["availabilityZones"].append(
        ADDED
    )
    stack_file.write_text(yaml.safe_dump(document))
    base = synthesized["prod"].written.directory
    out = tmp_path / "out"
    argv = ["diff", "prod", "--base", str(base), "--out", str(out), "--project-dir", str(project)]
    assert synth_main([*argv, "--gate"]) == 0
    text = capsys.readouterr().out
    assert f"    + {SUBNET} network-private-{ADDED}\n" in text, text
    assert f"    + {SUBNET} network-public-{ADDED}\n" in text
    assert f"~ {SUBNET}" not in text and f"- {SUBNET}" not in text
    before, after = _subnets(base), _subnets(out / "prod")
    assert {name: after[name] for name in before} == before
    new = [ipaddress.IPv4Network(after[f"network-{kind}-{ADDED}"]["cidrBlock"])
           for kind in ("private", "public")]  # fmt: skip
    old = [ipaddress.IPv4Network(inputs["cidrBlock"]) for inputs in before.values()]
    assert not any(n.overlaps(o) for n in new for o in old)
    assert not new[0].overlaps(new[1])
    assert all(n.subnet_of(ipaddress.IPv4Network("10.40.0.0/16")) for n in new)
