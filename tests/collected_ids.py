"""A pytest plugin for a run of the suite inside another: ``-p tests.collected_ids``.

``--collected-ids PATH`` writes the id of every collected test before ``-k``, ``-m`` and
``--deselect`` choose what runs, so one run can report the suite's whole parametrization and run
a part of it; ``--without-fixture NAME`` deselects the tests that use fixture ``NAME``
(tests/test_new_environment.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--collected-ids`` and ``--without-fixture``."""
    parser.addoption(
        "--collected-ids",
        type=Path,
        default=None,
        help="write the id of every collected test to this JSON file (before deselection)",
    )
    parser.addoption(
        "--without-fixture",
        action="append",
        default=[],
        help="deselect the tests that use this fixture (repeatable)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Write every collected test's id, then deselect the tests of the fixtures named."""
    path: Path | None = config.getoption("collected_ids")
    if path is not None:
        path.write_text(json.dumps([item.nodeid for item in items]))
    unwanted = set(config.getoption("without_fixture"))
    dropped = [item for item in items if unwanted & set(getattr(item, "fixturenames", ()))]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
