"""scripts/setup: says what it does, installs once, skips pip while nothing changed.

Each test runs the real script in a temporary copy of the repository's layout with a fake
interpreter (``PYTHON``) whose virtualenv's ``python`` records every call and fakes pip, so no
network or real install is involved.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from synth.stackfile import REPOSITORY_ROOT

# The interpreter that creates .venv: `-m venv DIR` writes DIR/bin/python (the fake below).
FAKE_BASE_PYTHON = """#!/usr/bin/env bash
set -euo pipefail
echo "base $*" >>"$FAKE_LOG"
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  cp "$FAKE_VENV_PYTHON" "$3/bin/python"
  chmod +x "$3/bin/python"
fi
"""

# The virtualenv's python: answers the version query, fakes pip (FAKE_PIP_STATUS, default 0).
FAKE_VENV_PYTHON = """#!/usr/bin/env bash
set -euo pipefail
if [ "$1" = "-c" ]; then echo "${FAKE_PYTHON_VERSION:-3.11.9}"; exit 0; fi
echo "venv $*" >>"$FAKE_LOG"
if [ "$1 $2" = "-m pip" ]; then
  echo "Collecting pulumi==3.0.0"
  echo "  Downloading pulumi-3.0.0.whl"
  if [ "${FAKE_PIP_STATUS:-0}" != 0 ]; then echo "ERROR: no network" >&2; exit "$FAKE_PIP_STATUS"; fi
  echo "Successfully installed pulumi-3.0.0 grpcio-1.0"
fi
"""

STAMP = ".venv/.requirements-dev.sha256"


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with scripts/setup, requirements-dev.txt including requirements.txt."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPOSITORY_ROOT / "scripts" / "setup", root / "scripts" / "setup")
    (root / "requirements.txt").write_text("# runtime\npulumi==3.0.0\nPyYAML==6.0.3\n")
    (root / "requirements-dev.txt").write_text("-r requirements.txt\npytest==9.2.0\n")
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    _executable(fakes / "python3", FAKE_BASE_PYTHON)
    _executable(fakes / "venv-python", FAKE_VENV_PYTHON)
    return root


def run_setup(
    root: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run scripts/setup in ``root``; the result and the fake interpreters' calls, in order."""
    fakes = root.parent / "fakes"
    log = root.parent / "calls.log"
    log.write_text("")
    environment = {
        **os.environ,
        "PYTHON": str(fakes / "python3"),
        "FAKE_VENV_PYTHON": str(fakes / "venv-python"),
        "FAKE_LOG": str(log),
        **env,
    }
    result = subprocess.run(
        [str(root / "scripts" / "setup"), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    return result, log.read_text().splitlines()


def _pip_calls(calls: list[str]) -> list[str]:
    return [call for call in calls if call.startswith("venv -m pip")]


def test_first_run_creates_the_venv_installs_and_records_the_stamp(project: Path) -> None:
    result, calls = run_setup(project)
    assert result.returncode == 0, result.stderr
    assert calls[0] == "base -m venv .venv"
    assert any("-r requirements-dev.txt" in call for call in _pip_calls(calls))
    assert "creating the virtualenv .venv" in result.stderr
    assert "installing 3 pinned packages from requirements-dev.txt" in result.stderr
    assert "about a minute" in result.stderr
    assert "Collecting pulumi==3.0.0" in result.stderr, "pip's progress is shown"
    assert "installed 2 package(s)" in result.stderr
    assert result.stdout == "", "messages go to stderr, so piped output stays clean"
    stamp = (project / STAMP).read_text()
    assert "requirements-dev.txt" in stamp and "requirements.txt" in stamp
    assert "python 3.11.9" in stamp


def test_second_run_with_unchanged_files_skips_pip(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    result, calls = run_setup(project)
    assert result.returncode == 0, result.stderr
    assert _pip_calls(calls) == []
    assert not any(call.startswith("base") for call in calls), "the venv is not recreated"
    assert result.stderr.strip().splitlines() == [
        f"setup: requirements unchanged, skipping install ({STAMP})"
    ]


def test_editing_an_included_file_triggers_an_install(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    with (project / "requirements.txt").open("a") as file:
        file.write("jsonschema==4.26.0\n")
    result, calls = run_setup(project)
    assert result.returncode == 0, result.stderr
    assert any("-r requirements-dev.txt" in call for call in _pip_calls(calls))
    assert "installing 4 pinned packages" in result.stderr
    assert run_setup(project)[1] == [], "the new stamp matches again"


def test_a_new_interpreter_version_triggers_an_install(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    _, calls = run_setup(project, FAKE_PYTHON_VERSION="3.12.1")
    assert _pip_calls(calls) != []


def test_each_requirements_file_has_its_own_stamp(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    result, calls = run_setup(project, "requirements.txt")
    assert result.returncode == 0, result.stderr
    assert any("-r requirements.txt" in call for call in _pip_calls(calls))
    assert (project / ".venv/.requirements.sha256").is_file()
    assert run_setup(project, "requirements.txt")[1] == []


def test_a_failing_install_leaves_no_stamp(project: Path) -> None:
    result, _ = run_setup(project, FAKE_PIP_STATUS="1")
    assert result.returncode != 0
    assert "ERROR: no network" in result.stderr
    assert not (project / STAMP).exists()
    assert not list((project / ".venv").glob(".*.sha256*"))
    _, calls = run_setup(project)
    assert _pip_calls(calls) != [], "the next run tries again"


def test_a_failing_install_after_a_change_removes_the_old_stamp(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    (project / "requirements-dev.txt").write_text("-r requirements.txt\npytest==9.3.0\n")
    result, _ = run_setup(project, FAKE_PIP_STATUS="1")
    assert result.returncode != 0
    assert not (project / STAMP).exists()


def test_a_missing_included_file_is_an_error(project: Path) -> None:
    (project / "requirements.txt").unlink()
    result, calls = run_setup(project)
    assert result.returncode == 2
    assert "no requirements file requirements.txt" in result.stderr
    assert _pip_calls(calls) == []


def test_venv_picks_a_second_virtualenv_with_its_own_stamp(project: Path) -> None:
    """The scanners' (.venv-scan) is set up beside the program's, which it leaves alone."""
    (project / "requirements-scan.txt").write_text("checkov==3.3.30\n")
    result, calls = run_setup(project, "requirements-scan.txt", VENV=".venv-scan")
    assert result.returncode == 0, result.stderr
    assert calls[0] == "base -m venv .venv-scan"
    assert (project / ".venv-scan" / ".requirements-scan.sha256").exists()
    assert not (project / ".venv").exists()
