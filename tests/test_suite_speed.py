"""What keeps the suite inside CI's time budget (docs/development.md, "Commands").

Each test here holds one choice that buys time back to what makes it safe, so that a later
change cannot silently undo it or make it hide a test.
"""

from __future__ import annotations

import fnmatch
import os
import re
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


TYPINGS = REPOSITORY_ROOT / "typings"
PROVIDER_ALIASES = {"pulumi_aws": "aws", "pulumi_kubernetes": "k8s"}


def _checked_sources() -> str:
    """Every Python file strict mypy checks (pyproject.toml's ``files``), as one text."""
    import tomllib  # noqa: PLC0415  # only this test reads it

    config = tomllib.loads((REPOSITORY_ROOT / "pyproject.toml").read_text())
    roots = [REPOSITORY_ROOT / name for name in config["tool"]["mypy"]["files"]]
    paths = [p for r in roots for p in ([r] if r.is_file() else sorted(r.rglob("*.py")))]
    return "\n".join(p.read_text() for p in paths)


def test_the_provider_stubs_name_only_what_the_program_uses() -> None:
    """mypy reads a provider module only where ``typings/`` names it: each name a stub keeps
    costs the lint the module's analysis on a clean clone (half of strict mypy's CPU time was
    the providers' unused modules). Every name a stub re-exports is used by the checked code
    as ``<alias>.<module>.<name>``, and each comes from a file of the installed provider, whose
    real types mypy then checks the call against."""
    import ast  # noqa: PLC0415

    sources = _checked_sources()
    for package, alias in PROVIDER_ALIASES.items():
        imports = set(re.findall(rf"^\s*(?:import|from) {package}\b.*$", sources, re.M))
        assert imports == {f"import {package} as {alias}"}, imports
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    named = []
    for stub in sorted(TYPINGS.rglob("__init__.pyi")):
        module = ".".join(stub.parent.relative_to(TYPINGS).parts)
        package = module.split(".")[0]
        assert (TYPINGS / package / "py.typed").read_text().strip() == "partial", stub
        for node in ast.parse(stub.read_text()).body:
            if not isinstance(node, ast.ImportFrom):
                continue
            source = site / Path(*(node.module or "").split("."))
            assert source.with_suffix(".py").exists() or source.is_dir(), node.module
            for name in node.names:
                assert name.asname == name.name, f"{stub}: {name.name} re-exported as is"
                use = ".".join([PROVIDER_ALIASES[package], *module.split(".")[1:], name.name])
                named.append(use)
                assert re.search(rf"\b{re.escape(use)}\b", sources), f"{stub}: {use} unused"
    assert len(named) > 40, named  # the stubs are there to check
