"""scripts/setup: says what it does in one line a step, installs once, skips while nothing changed.

Each test runs the real script in a temporary copy of the repository's layout with a fake
interpreter (``PYTHON``) whose virtualenv's ``python`` records every call and fakes pip (which
installs the installer) and uv (which installs the requirements), so no network or real install
is involved.
"""

from __future__ import annotations

import os
import re
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

# The virtualenv's python: answers the version query, fakes pip installing uv (with the index
# warnings a mirror configuration makes pip print) and uv installing the requirements
# (FAKE_PIP_STATUS, default 0, is the requirements install's exit status). Once uv is installed
# (FAKE_UV_VERSION set) it answers uv's version and makes virtualenvs as uv does, without pip.
FAKE_VENV_PYTHON = """#!/usr/bin/env bash
set -euo pipefail
if [ "$1" = "-c" ]; then echo "${FAKE_PYTHON_VERSION:-3.11.9}"; exit 0; fi
echo "venv $*" >>"$FAKE_LOG"
if [ "$1 $2" = "-m pip" ]; then
  for index in 1 2 3; do
    echo "WARNING: Location 'file:///mirror/$index/uv/' is ignored: it is neither a file nor a directory." >&2
  done
fi
if [ "$1 $2 ${3:-}" = "-m uv --version" ]; then
  if [ -z "${FAKE_UV_VERSION:-}" ]; then echo "No module named uv" >&2; exit 1; fi
  echo "uv $FAKE_UV_VERSION"; exit 0
fi
if [ "$1 $2 ${3:-}" = "-m uv venv" ]; then
  dir="${!#}"
  mkdir -p "$dir/bin"
  cp "$FAKE_VENV_PYTHON" "$dir/bin/python"
  chmod +x "$dir/bin/python"
  echo "uv = $FAKE_UV_VERSION" >"$dir/pyvenv.cfg"
  exit 0
fi
if [ "$1 $2" = "-m uv" ]; then
  echo "uv index ${UV_INDEX_URL:-none} find-links ${UV_FIND_LINKS:-none}" >>"$FAKE_LOG"
  echo "Resolved 2 packages in 10ms" >&2
  if [ "${FAKE_PIP_STATUS:-0}" != 0 ]; then echo "error: no network" >&2; exit "$FAKE_PIP_STATUS"; fi
  if [ -n "${FAKE_UV_UP_TO_DATE:-}" ]; then echo "Checked 2 packages in 1ms" >&2; exit 0; fi
  echo "Installed 2 packages in 5ms" >&2
  echo " + pulumi==3.0.0" >&2
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
    shutil.copy2(REPOSITORY_ROOT / "requirements-setup.txt", root / "requirements-setup.txt")
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
    """The install steps: pip bootstrapping the installer, the installer installing."""
    return [call for call in calls if call.startswith(("venv -m pip", "venv -m uv"))]


def test_first_run_creates_the_venv_installs_and_records_the_stamp(project: Path) -> None:
    result, calls = run_setup(project)
    assert result.returncode == 0, result.stderr
    assert calls[0] == "base -m venv .venv"
    pins = (project / "requirements-setup.txt").read_text()
    uv_pin = next(line for line in pins.splitlines() if line.startswith("uv=="))
    assert _pip_calls(calls) == [
        "venv -m pip install --quiet --disable-pip-version-check -r requirements-setup.txt",
        "venv -m uv pip install --python .venv/bin/python -r requirements-dev.txt",
    ]
    lines = result.stderr.splitlines()
    # The install's seconds vary; the rest is exact.
    assert re.fullmatch(
        r"setup:   Installed 2 packages from requirements-dev\.txt in \d+ s", lines[3]
    )
    assert lines[:3] + lines[4:] == [
        "setup: creating the virtualenv .venv with " + str(project.parent / "fakes" / "python3"),
        "setup: installing 3 pinned packages from requirements-dev.txt (with requirements.txt)",
        f"setup: installing the installer, {uv_pin}",
        f"setup: done; recorded in {STAMP}",
    ], "one line a step: none of the installers' own output, warnings included"
    assert "WARNING" in (project / ".venv" / ".setup.log").read_text(), "it is in the log"
    assert result.stdout == "", "messages go to stderr, so piped output stays clean"
    stamp = (project / STAMP).read_text()
    assert "requirements-dev.txt" in stamp and "requirements.txt" in stamp
    assert "requirements-setup.txt" in stamp, "a new installer pin is a new install"
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


def test_a_new_installer_pin_triggers_an_install(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    (project / "requirements-setup.txt").write_text("uv==0.0.1\n")
    result, calls = run_setup(project)
    assert result.returncode == 0, result.stderr
    assert "installing the installer, uv==0.0.1" in result.stderr
    assert _pip_calls(calls) != []


def test_the_repository_pins_its_installer_exactly() -> None:
    pins = [
        line
        for line in (REPOSITORY_ROOT / "requirements-setup.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert len(pins) == 1 and pins[0].startswith("uv=="), pins


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
    assert "setup: failed: " in result.stderr
    assert "error: no network" in result.stderr, "a failing step shows the installer's output"
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


def test_an_install_with_nothing_new_says_what_it_checked(project: Path) -> None:
    assert run_setup(project)[0].returncode == 0
    (project / STAMP).unlink()
    result, _ = run_setup(project, FAKE_UV_UP_TO_DATE="1")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^setup:   Checked 2 packages from requirements-dev\.txt in \d+ s$",
                     result.stderr, re.M)  # fmt: skip


def test_pips_mirror_settings_reach_uv_unless_uv_has_its_own(project: Path) -> None:
    _, calls = run_setup(project, PIP_INDEX_URL="https://mirror.invalid/simple", PIP_FIND_LINKS="")
    assert "uv index https://mirror.invalid/simple find-links none" in calls
    (project / STAMP).unlink()
    _, calls = run_setup(
        project,
        PIP_INDEX_URL="https://mirror.invalid/simple",
        UV_INDEX_URL="https://uv.invalid/simple",
        PIP_FIND_LINKS="/wheels",
    )
    assert "uv index https://uv.invalid/simple find-links /wheels" in calls


def test_a_second_virtualenv_borrows_the_pinned_uv_of_venv(project: Path) -> None:
    """.venv-scan and .venv-docs are made and filled by .venv's uv when it is the pinned one:
    no python -m venv with its pip, no pip bootstrap (about 5 CPU-seconds each). One made so
    has no pip: without a lender it gets the interpreter's pip before bootstrapping uv."""
    pins = (project / "requirements-setup.txt").read_text()
    pinned = next(line for line in pins.splitlines() if line.startswith("uv==")).removeprefix(
        "uv=="
    )
    assert run_setup(project)[0].returncode == 0
    (project / "requirements-docs.txt").write_text("mkdocs==1.6.1\n")
    stale, calls = run_setup(project, "requirements-docs.txt", VENV=".venv-d", FAKE_UV_VERSION="0")
    assert stale.returncode == 0, stale.stderr
    assert next(c for c in calls if not c.endswith("--version")) == "base -m venv .venv-d", (
        "an installed uv that is not the pin lends nothing"
    )
    shutil.rmtree(project / ".venv-d")
    result, calls = run_setup(
        project, "requirements-docs.txt", VENV=".venv-docs", FAKE_UV_VERSION=pinned
    )
    assert result.returncode == 0, result.stderr
    assert [c for c in calls if not c.endswith("--version") and c.startswith("venv")] == [
        "venv -m uv venv --quiet --python "
        + str(project.parent / "fakes" / "python3")
        + " .venv-docs",
        "venv -m uv pip install --python .venv-docs/bin/python -r requirements-docs.txt",
    ]
    assert f"installing with .venv's installer, uv=={pinned}" in result.stderr
    assert (project / ".venv-docs" / ".requirements-docs.sha256").exists()
    shutil.rmtree(project / ".venv")
    (project / ".venv-docs" / ".requirements-docs.sha256").unlink()
    result, calls = run_setup(project, "requirements-docs.txt", VENV=".venv-docs")
    assert result.returncode == 0, result.stderr
    assert [c for c in calls if c.startswith("venv")] == [
        "venv -m ensurepip --default-pip",
        "venv -m pip install --quiet --disable-pip-version-check -r requirements-setup.txt",
        "venv -m uv pip install --python .venv-docs/bin/python -r requirements-docs.txt",
    ]
