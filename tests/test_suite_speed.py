"""What keeps the suite inside CI's time budget (docs/development.md, "Commands").

Each test here holds one choice that buys time back to what makes it safe, so that a later
change cannot silently undo it or make it hide a test.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from synth.stackfile import REPOSITORY_ROOT

TESTS = REPOSITORY_ROOT / "tests"


def test_collection_stays_out_of_the_data_folders_which_hold_no_tests(
    request: pytest.FixtureRequest,
) -> None:
    """pytest walks every folder under tests/ it is not told to skip, following links: the
    sysfs fixture's links lead back into itself, some 1,900 folders deep. Every folder of
    tests/ is skipped (``norecursedirs``), so none may hold a test module pytest would miss."""
    patterns = request.config.getini("norecursedirs")
    folders = sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders, "tests/ has no folders: nothing to check"
    walked = [f.name for f in folders if not any(fnmatch.fnmatch(f.name, p) for p in patterns)]
    assert walked == [], "pytest would walk these folders of tests/: add them to norecursedirs"
    hidden = [
        str(Path(root, name).relative_to(REPOSITORY_ROOT))
        for folder in folders
        for root, _, names in os.walk(folder)  # links not followed
        for name in names
        if fnmatch.fnmatch(name, "test_*.py") or name == "conftest.py"
    ]
    assert hidden == [], "test modules pytest never collects (norecursedirs skips their folder)"


DEFERRED_IRI_GRAMMAR = """
import sys
import policies, jsonschema
built = "rfc3987_syntax.syntax_helpers" in sys.modules
checker = jsonschema.FormatChecker()
answers = [checker.conforms(value, "iri") for value in ("https://example.com/%C3%A4?q=ä", "a b")]
import rfc3987_syntax
print(built, answers, rfc3987_syntax.is_valid_syntax("iri", "a b"), type(rfc3987_syntax.syntax_parser).__name__)
"""


@pytest.mark.slow
def test_jsonschema_builds_its_iri_grammar_when_an_iri_is_first_checked() -> None:
    """Importing jsonschema after the policy package builds no RFC 3987 parser (1.4 CPU-seconds
    in every synthesis and test process); the IRI checks then answer as rfc3987-syntax's own,
    and the real module takes its name back."""
    done = subprocess.run(
        [sys.executable, "-c", DEFERRED_IRI_GRAMMAR], cwd=REPOSITORY_ROOT,
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "[True,", "False]", "False", "Lark"]


CI_STEPS = ("setup", "lint", "docs", "renovate", "promtool-setup", "test")
"""The scripts .ci/run calls, which :func:`_run_ci_with_fakes` fakes."""


def _run_ci_with_fakes(
    tmp_path: Path, script: str, env: dict[str, str] | None = None
) -> dict[str, list[str]]:
    """Run .ci/run in a copy whose scripts are fakes running ``script`` (bash; ``$0.log`` is
    the fake's own log); each fake's log lines, by script name."""
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    (root / "scripts").mkdir()
    shutil.copy2(REPOSITORY_ROOT / ".ci" / "run", root / ".ci" / "run")
    for name in CI_STEPS:
        fake = root / "scripts" / name
        fake.write_text(f"#!/usr/bin/env bash\n{script}\n")
        fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(root / ".ci" / "run")], capture_output=True, text=True, check=False,
        env={**os.environ, **(env or {})}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {
        name: (root / "scripts" / f"{name}.log").read_text().split()
        for name in CI_STEPS
        if (root / "scripts" / f"{name}.log").exists()
    }


def test_ci_lets_python_cache_what_it_compiles(tmp_path: Path) -> None:
    """uv installs no bytecode: where PYTHONDONTWRITEBYTECODE is set, every test process and
    synthesis compiled the provider SDKs again. .ci/run lets the first one write the cache, for
    every step it runs."""
    seen = _run_ci_with_fakes(
        tmp_path,
        'echo "${PYTHONDONTWRITEBYTECODE-unset}" >>"$0.log"',
        {"PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert set(seen) == set(CI_STEPS)
    assert {value for values in seen.values() for value in values} == {"unset"}


def test_ci_sets_up_checkovs_virtualenv_beside_the_tests_own(tmp_path: Path) -> None:
    """Both setups are mostly unpacking and the tests wait for both: one after the other, the
    tests started some ten seconds later on a clean clone."""
    seen = _run_ci_with_fakes(
        tmp_path,
        'echo "start:${VENV:-.venv}" >>"$0.log"\n'
        'if [ "${0##*/}" = setup ]; then sleep 0.3; fi\n'
        'echo "end:${VENV:-.venv}" >>"$0.log"',
    )
    setups = seen["setup"][:4]
    assert sorted(setups) == ["end:.venv", "end:.venv-scan", "start:.venv", "start:.venv-scan"]
    assert {setups[0], setups[1]} == {"start:.venv", "start:.venv-scan"}, setups
