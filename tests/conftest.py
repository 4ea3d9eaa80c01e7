"""Shared fixtures: synthesized stacks, mocked program runs, and the upstream reference data."""

from __future__ import annotations

import copy
import dataclasses
import fcntl
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import pytest

from components.config import PlatformConfig, parse_platform_config
from components.platform import deploy
from synth import reference
from synth.engine import ResourceRecord, synthesize
from synth.run import StackResult, synthesize_stack
from synth.stackfile import REPOSITORY_ROOT, StackFile, load_stack, stack_names
from tests.component_runs import Part, program

REFERENCE_ENV = reference.REFERENCE_ENV
REQUIRE_ENV = reference.REQUIRE_ENV
reference_root = reference.reference_root
"""Where the upstream CRD schemas and chart values are read from (:mod:`synth.reference`)."""
STACKS = stack_names()


RUN_FIRST: Final = ("test_scan.py", "test_new_environment.py")
"""Modules whose tests take tens of seconds in one go (checkov over every stack, a copy of the
repository running its how-to): run first, so that no worker is left with one of them while
the other has nothing more to do."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that runs the whole program (before ``-m`` selects), and put
    the :data:`RUN_FIRST` modules first (the order is the same in every xdist worker)."""
    for item in items:
        if "run_platform" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.path.name not in RUN_FIRST)


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """The reference data directory; skips (or, under .ci/run, fails) when it is absent."""
    root = reference_root()
    if not (root / "crds").is_dir() or not (root / "charts").is_dir():
        message = (
            f"upstream reference data not found at {root} (needs crds/ and charts/); set "
            f"{REFERENCE_ENV} to its location (see docs/development.md, 'Reference data')"
        )
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(message)
        pytest.skip(message)
    return root


@pytest.fixture(scope="session")
def synthesized(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, StackResult]:
    """Every stack in stacks/, synthesized once per test run.

    The pytest-xdist workers of a run share it: each synthesizes the stacks no other worker
    has taken (a lock file per stack) into the run's directory and saves the result there;
    the others read it.
    """
    base = tmp_path_factory.getbasetemp()
    # A worker's base is popen-gw<N> in the run's own directory.
    out = (base.parent if hasattr(request.config, "workerinput") else base) / "synth"
    out.mkdir(exist_ok=True)
    results: dict[str, StackResult] = {}
    for wait in (False, True):  # first the stacks nobody is on, then wait for the rest
        for stack in STACKS:
            if stack in results:
                continue
            result = _shared_synthesis(stack, out, wait)
            if result is not None:
                results[stack] = result
    return {stack: results[stack] for stack in STACKS}


def _shared_synthesis(stack: str, out: Path, wait: bool) -> StackResult | None:
    """The stack's synthesis under ``out``, made now unless saved; None if another worker is
    making it and ``wait`` is false."""
    with (out / f"{stack}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        saved = out / f"{stack}.pickle"
        if saved.exists():
            result: StackResult = pickle.loads(saved.read_bytes())
            return result
        result = synthesize_stack(stack, out)
        saved.write_bytes(pickle.dumps(result))
        return result


@pytest.fixture
def replay_synthesis(monkeypatch: pytest.MonkeyPatch, synthesized: dict[str, StackResult]) -> None:
    """The CLI synthesizes an unchanged stack of this repository by copying the session's.

    Synthesis is deterministic (tests/test_synth.py), so a command test of a stack as it is
    repeats identical work; the copy goes where the command writes and the command reads it
    back from there. A project copy (``--project-dir``) is synthesized for real.
    """

    def replay(stack: str, out: Path, root: Path = REPOSITORY_ROOT) -> StackResult:
        if root.resolve() != REPOSITORY_ROOT.resolve() or stack not in synthesized:
            return synthesize_stack(stack, out, root)
        session = synthesized[stack]
        target = out / stack
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(session.written.directory, target)
        written = dataclasses.replace(session.written, directory=target)
        return dataclasses.replace(session, written=written)

    monkeypatch.setattr("synth.__main__.synthesize_stack", replay)


class ProgramRun:
    """Records of one mocked program run, with lookups for assertions."""

    def __init__(self, records: list[ResourceRecord]) -> None:
        self.records = records

    def of_type(self, resource_type: str) -> list[ResourceRecord]:
        return [record for record in self.records if record.type == resource_type]

    def one(self, resource_type: str, name_contains: str = "") -> ResourceRecord:
        found = [r for r in self.of_type(resource_type) if name_contains in r.name]
        assert len(found) == 1, f"expected one {resource_type} named *{name_contains}*: {found}"
        return found[0]

    def by_urn(self, urn: str) -> ResourceRecord:
        return next(record for record in self.records if record.urn == urn)


def synth_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m synth`` with ``args`` from the repository root, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "synth", *args],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def stack_data(stack: str) -> dict[str, Any]:
    """A deep copy of a stack's raw ``platform`` value, to mutate in tests."""
    return copy.deepcopy(load_stack(stack).platform)


def _run(program: Callable[[], Any], platform: dict[str, Any], stack: str) -> ProgramRun:
    """Run ``program`` under mocks with ``stack``'s file, its platform config replaced."""
    base = load_stack(stack)
    config = dict(base.config)
    config[f"{base.project}:platform"] = platform
    stack_file = StackFile(base.project, stack, config, base.secret_keys)
    parsed: PlatformConfig = parse_platform_config(platform)
    result = synthesize(stack_file, program, region=parsed.region, account_id=parsed.account_id)
    return ProgramRun(result.records)


@pytest.fixture
def run_platform() -> Callable[..., ProgramRun]:
    """Run the real program under mocks with a (possibly modified) stack's platform config.

    Tests that use it are marked ``slow`` (see :func:`pytest_collection_modifyitems`).
    """

    def run(platform: dict[str, Any], stack: str = "dev") -> ProgramRun:
        return _run(deploy, platform, stack)

    return run


class RunComponent(Protocol):
    """The ``run_component`` fixture's callable."""

    def __call__(self, part: Part, platform: dict[str, Any], stack: str = "dev") -> ProgramRun:
        """Build one component under mocks from a (possibly modified) stack's platform config.

        Args:
            part: what to build (tests/component_runs.py).
            platform: the stack's ``platform`` value.
            stack: the stack whose file (project, AWS config, secrets) the run uses.
        """
        ...


@pytest.fixture
def run_component() -> RunComponent:
    """Build one component alone, wired as the platform wires it (tests/component_runs.py).

    The config is validated as the program validates it, so a change the program refuses is
    refused here too.
    """

    def run(part: Part, platform: dict[str, Any], stack: str = "dev") -> ProgramRun:
        return _run(program(part), platform, stack)

    return run


@pytest.fixture(params=STACKS)
def stack_result(
    request: pytest.FixtureRequest, synthesized: dict[str, StackResult]
) -> Iterator[StackResult]:
    yield synthesized[request.param]
