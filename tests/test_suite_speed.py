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


def test_ci_lets_python_cache_what_it_compiles(tmp_path: Path) -> None:
    """uv installs no bytecode: where PYTHONDONTWRITEBYTECODE is set, every test process and
    synthesis compiled the provider SDKs again. .ci/run lets the first one write the cache, for
    every step it runs (here fakes that record what they were given)."""
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    (root / "scripts").mkdir()
    shutil.copy2(REPOSITORY_ROOT / ".ci" / "run", root / ".ci" / "run")
    for name in ("setup", "lint", "docs", "renovate", "promtool-setup", "test"):
        fake = root / "scripts" / name
        fake.write_text('#!/usr/bin/env bash\necho "${PYTHONDONTWRITEBYTECODE-unset}" >>"$0.env"\n')
        fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(root / ".ci" / "run")], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = {p.name: p.read_text().split() for p in (root / "scripts").glob("*.env")}
    assert set(seen) == {"setup.env", "lint.env", "docs.env", "renovate.env",
                         "promtool-setup.env", "test.env"}  # fmt: skip
    assert {value for values in seen.values() for value in values} == {"unset"}
