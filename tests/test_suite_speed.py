"""What keeps the suite inside CI's time budget (docs/development.md, "Commands").

Each test here holds one choice that buys time back to what makes it safe, so that a later
change cannot silently undo it or make it hide a test.
"""

from __future__ import annotations

import fnmatch
import os
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

