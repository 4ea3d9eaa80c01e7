"""Copies of the project whose stack files a test edits, for the CLI's ``--project-dir``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml

PLATFORM_KEY = "eks-training-platform:platform"


def project_copy(
    tmp_path: Path, stack: str = "dev", edit: Callable[[dict[str, Any]], object] | None = None
) -> Path:
    """``tmp_path/project``: Pulumi.yaml and every stack file, ``stack``'s platform value passed
    through ``edit`` (None: unchanged).

    Args:
        tmp_path: the test's temporary directory.
        stack: the stack whose platform value is edited. Default: dev.
        edit: changes the platform value in place (its result is ignored).
    """
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPOSITORY_ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copytree(REPOSITORY_ROOT / "stacks", project / "stacks")
    if edit is not None:
        stack_file = project / "stacks" / f"Pulumi.{stack}.yaml"
        document = load_yaml(stack_file.read_text())
        edit(document["config"][PLATFORM_KEY])
        stack_file.write_text(yaml.safe_dump(document))
    return project
