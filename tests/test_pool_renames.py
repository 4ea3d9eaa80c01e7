"""Renaming a reserved pool: what ``synth diff`` says it drains, and its placement group kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.config.pools import placement_group_name
from components.platform import validated_config
from synth.__main__ import main as synth_main
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import stack_data
from tests.project_copies import project_copy

OLD_GROUP = "ml-training-prod-p5"
"""The placement group prod's reserved p5 pool's reservation was bought into."""


def _renamed_prod(tmp_path: Path, *, keep_group: bool) -> Path:
    """A project copy whose prod stack renames the reserved pool p5 to h100 (and its node set)."""

    def rename(platform: dict[str, Any]) -> None:
        pool = next(p for p in platform["nodePools"] if p["name"] == "p5")
        assert pool["capacityType"] == "reserved"
        pool["name"] = "h100"
        if keep_group:
            pool["placementGroupName"] = OLD_GROUP
        for node_set in platform["slurm"]["nodeSets"]:
            if node_set["pool"] == "p5":
                node_set["pool"] = "h100"

    return project_copy(tmp_path, "prod", rename)


DRAINED = [
    "EC2NodeClass._cluster.p5.yaml",
    "NodeOverlay._cluster.p5-hugepages.yaml",
    "NodeOverlay._cluster.p5-slurm-hugepages.yaml",
    "NodePool._cluster.p5-slurm.yaml",
    "NodePool._cluster.p5.yaml",
    "NodeSet.slurm.p5.yaml",
    "ScaledObject.slurm.p5.yaml",
    "TrainingRuntime.fabric-test.fabric-p5.yaml",
    *(
        f"TrainingRuntime.{team}.{framework}-p5.yaml"
        for team in ("ml-product", "ml-research")
        for framework in ("jax", "mpi", "torch")
    ),
]
"""Everything on prod's p5 pool: both NodePools (the teams' and Slurm's), the node class, the
huge-page overlays, the Slurm node set and its autoscaler, the pool's fabric test and every
team's runtimes on it."""


def _drain_block(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index(f"    - pool p5: {len(DRAINED)} objects go")
    return [line.strip() for line in lines[start + 1 : start + 1 + len(DRAINED)]]


@pytest.mark.slow
def test_renaming_a_reserved_pool_with_its_group_name_kept_drains_the_pool_only(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _renamed_prod(tmp_path, keep_group=True)
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--project-dir", str(project), "--gate"]) == 0
    out = capsys.readouterr().out
    assert "  pools removed or renamed, their nodes drained: 1\n" in out, out
    assert _drain_block(out) == DRAINED
    assert f"placement group {OLD_GROUP} stays, used by EC2NodeClass h100" in out
    # The group itself is neither replaced nor recreated: the same resource, the same name.
    assert "placementGroup:PlacementGroup" not in out
    node_class = load_yaml(
        (tmp_path / "out" / "prod" / "manifests" / "EC2NodeClass._cluster.h100.yaml").read_text()
    )
    assert node_class["spec"]["placementGroupSelector"] == {"name": OLD_GROUP}
    assert "reservations left behind" not in out


@pytest.mark.slow
def test_renaming_a_reserved_pool_without_its_group_name_is_refused(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _renamed_prod(tmp_path, keep_group=False)
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out")]
    assert synth_main([*argv, "--project-dir", str(project), "--gate"]) == 1
    out = capsys.readouterr().out
    assert _drain_block(out) == DRAINED
    assert "- aws:ec2/placementGroup:PlacementGroup pools-p5" in out
    (line,) = [x for x in out.splitlines() if x.startswith("    ! EC2NodeClass h100 (was p5)")]
    assert "'ml-training-prod-h100'" in line and "cr-0a1b2c3d4e5f60718" in line
    assert f"set placementGroupName: {OLD_GROUP} on the pool" in line


def test_placement_group_name_defaults_to_cluster_and_pool() -> None:
    config = validated_config(stack_data("prod"))
    assert {placement_group_name(config.name, p) for p in config.node_pools} == {
        "ml-training-prod-p5",
        "ml-training-prod-p5en",
        "ml-training-prod-trn2",
    }


def test_placement_group_name_of_a_pool_without_a_group_is_refused() -> None:
    data: dict[str, Any] = stack_data("prod")
    data["nodePools"][0]["placementGroup"] = False
    data["nodePools"][0]["placementGroupName"] = OLD_GROUP
    assert_reported(data, "platform.nodePools[0].placementGroupName", OLD_GROUP, "nothing")


def test_two_pools_in_one_placement_group_are_refused() -> None:
    data: dict[str, Any] = stack_data("prod")
    data["nodePools"][1]["placementGroupName"] = OLD_GROUP
    assert_reported(
        data, "platform.nodePools[1].placementGroupName", OLD_GROUP, "nodePools[0] launches"
    )


def test_a_placement_group_name_ec2_refuses_is_refused() -> None:
    data: dict[str, Any] = stack_data("prod")
    data["nodePools"][0]["placementGroupName"] = "has space"
    assert_reported(
        data, "platform.nodePools[0].placementGroupName", "has space", "placement group name"
    )
