"""A team's gid changes: the admin client's layout moves its existing files to the new group
and quota project once, and walks nothing on the next boot."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.config import PlatformConfig, parse_platform_config
from components.storage.layout import (
    ADMIN_MOUNT,
    LAYOUT_DONE,
    LAYOUT_LOG,
    layout_script,
    team_directories,
)
from synth.__main__ import main as synth_main
from synth.diff import RERUN_GID_NOTE, RERUN_NOTE, layout_gids
from synth.run import StackResult
from tests.conftest import stack_data
from tests.project_copies import project_copy

NEW_GID = 6101
OTHER_GID = 7777
"""A group some file of the team's was given on purpose: the walk leaves it alone."""


def _config(gid: int | None = None) -> PlatformConfig:
    data = stack_data("prod")
    if gid is not None:
        data["teams"][0]["gid"] = gid
    return parse_platform_config(data)


def _layout(config: PlatformConfig, root: Path) -> list[str]:
    """Run the admin client's layout on ``root/fsx`` (real chown, chgrp, find; ``lfs``,
    ``mount``, ``dnf`` and ``shutdown`` recorded) and return the recorded calls."""
    lustre = config.storage.lustre
    assert lustre is not None
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = root / "calls"
    calls.write_text("")
    for command in ("dnf", "mount", "umount", "lfs", "shutdown"):
        shim = bin_dir / command
        shim.write_text(f'#!/bin/sh\necho "{command} $*" >> {calls}\n')
        shim.chmod(0o755)
    (root / "fsx").mkdir(exist_ok=True)
    console = root / "console"
    script = (
        layout_script(lustre, config.teams, dns_name="fs-1.fsx", mount_name="abcd")
        .replace(ADMIN_MOUNT, str(root / "fsx"))
        .replace(LAYOUT_LOG, str(root / "layout.log"))
        .replace("/dev/console", str(console))
    )
    result = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert LAYOUT_DONE in console.read_text()
    return calls.read_text().splitlines()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to a team's gid needs root")
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_changed_gid_moves_the_teams_files_and_project_once(tmp_path: Path) -> None:
    before = _config()
    lustre = before.storage.lustre
    assert lustre is not None
    team, other = before.teams[0], before.teams[1]
    assert team.gid is not None and team.gid != NEW_GID
    _layout(before, tmp_path)
    mount = tmp_path / "fsx"
    directories = [mount / d.path.lstrip("/") for d in team_directories(lustre, team)]
    # A job's files, made under the setgid directories: they take the team's group.
    jobs = []
    for directory in directories:
        job = directory / "job-1"
        job.mkdir()
        (job / "step-100.pt").write_text("x")
        assert job.stat().st_gid == team.gid and (job / "step-100.pt").stat().st_gid == team.gid
        jobs.append(job)
    kept = directories[0] / "shared-with-others"
    kept.write_text("y")
    os.chown(kept, -1, OTHER_GID)

    after = _config(NEW_GID)
    calls = _layout(after, tmp_path)
    for directory, job in zip(directories, jobs, strict=True):
        assert directory.stat().st_gid == NEW_GID
        assert job.stat().st_gid == NEW_GID, job
        assert (job / "step-100.pt").stat().st_gid == NEW_GID
        assert f"lfs project -p {NEW_GID} -r -s {directory}" in calls
    assert kept.stat().st_gid == OTHER_GID
    walks = [call for call in calls if call.startswith("lfs project") and " -r " in call]
    assert len(walks) == len(directories)  # only the team whose gid changed
    assert not [call for call in walks if f"/{other.name}" in call]

    # The next boot finds every directory in its group: nothing is walked again.
    again = _layout(after, tmp_path)
    assert not [call for call in again if call.startswith("lfs project") and " -r " in call]
    assert f"lfs project -p {NEW_GID} -s {directories[0]}" in again


@pytest.mark.slow
def test_synth_diff_names_a_changed_gid_and_says_to_stop_the_teams_jobs(
    synthesized: dict[str, StackResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gid change replaces the admin client like any user data change, but it is not safe with
    jobs running: running pods keep the old supplemental gid and lose group write on the 2770
    directories once the layout moves them, and on paths exporting CHANGED each chgrp is
    exported. The forecast names the team and both gids instead of "Jobs keep running"."""
    old_gids: list[int] = []

    def regroup(platform: dict[str, Any]) -> None:
        (product,) = [team for team in platform["teams"] if team["name"] == "ml-product"]
        old_gids.append(product["gid"])
        product["gid"] = NEW_GID

    project = project_copy(tmp_path, "prod", regroup)
    (old_gid,) = old_gids
    base = synthesized["prod"].written.directory
    argv = ["diff", "prod", "--base", str(base), "--out", str(tmp_path / "out"), "--gate"]
    assert synth_main([*argv, "--project-dir", str(project)]) == 0  # a warning, not a refusal
    out = capsys.readouterr().out
    assert "~ aws:ec2/instance:Instance storage-lustre-admin (replaced)" in out
    block = out.split("  instances that boot again: 1\n", 1)[1]
    assert block.startswith(
        "    ! aws:ec2/instance:Instance storage-lustre-admin\n"
        f"    ! team ml-product: gid {old_gid} -> {NEW_GID}: stop its jobs before the up\n"
        f"{RERUN_GID_NOTE}\n"
        "    (on /artifacts, /checkpoints (exportEvents CHANGED) each file the layout moves"
    ), out
    assert RERUN_NOTE not in out and "Jobs keep running" not in out
    assert "ml-research" not in block.split("(on /artifacts", 1)[0]


def test_only_a_teams_gid_change_is_a_gid_change(tmp_path: Path) -> None:
    """A quota change, an added or a removed team changes the user data but no gid."""
    lustre = _config().storage.lustre
    assert lustre is not None

    def user_data(config: PlatformConfig) -> str:
        assert lustre is not None
        return layout_script(lustre, config.teams, dns_name="fs-1.fsx", mount_name="abcd")

    before = _config()
    assert layout_gids(user_data(before)) == {t.name: t.gid for t in before.teams}
    data = stack_data("prod")
    data["teams"][0]["lustreQuotaGiB"] += 1
    data["teams"] = data["teams"][:1]
    assert (
        layout_gids(user_data(parse_platform_config(data))).items()
        < layout_gids(user_data(before)).items()
    )
    changed = layout_gids(user_data(_config(NEW_GID)))
    assert changed[before.teams[0].name] == NEW_GID
