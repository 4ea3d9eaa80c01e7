"""A pytest plugin: ``-p tests.collected_ids --collected-ids PATH`` writes every collected test id.

The ids are written before ``-k``, ``-m`` and ``--deselect`` choose what runs, so one run can
report the suite's whole parametrization and run a part of it (tests/test_new_environment.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--collected-ids``."""
    parser.addoption(
        "--collected-ids",
        type=Path,
        default=None,
        help="write the id of every collected test to this JSON file (before deselection)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Write every collected test's id, before any selection drops some."""
    path: Path | None = config.getoption("collected_ids")
    if path is not None:
        path.write_text(json.dumps([item.nodeid for item in items]))
