"""The stack exports exactly the outputs the docs name (docs/concepts/architecture.md; components/
platform.py deploy).

No ``oidcIssuer``: no OIDC provider is made, as nothing uses IRSA (tests/test_cluster.py). No
``clusterSecurityGroupId``: pulumi-eks's cluster group is skipped; ``nodeSecurityGroupId`` is the
group every node sits in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest

from synth.stackfile import REPOSITORY_ROOT
from tests.conftest import STACKS, ProgramRun, stack_data
from tests.mutations import without_lustre

ARCHITECTURE = REPOSITORY_ROOT / "docs" / "concepts" / "architecture.md"
CONDITIONAL = {"fileSystemId": "only with a Lustre file system"}


def documented_outputs() -> list[str]:
    """The names in the architecture page's "Outputs: ..." sentence (the cluster's bullet)."""
    text = " ".join(ARCHITECTURE.read_text().split())
    sentences = re.findall(r"Outputs: (.*?)\.(?: |$)", text)
    assert len(sentences) == 1, sentences
    return re.findall(r"`([A-Za-z]+)`", sentences[0])


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names the program passes to ``pulumi.export``, in order."""
    names: list[str] = []

    def record(name: str, value: Any) -> None:
        names.append(name)

    monkeypatch.setattr(pulumi, "export", record)
    yield names


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_exports_what_is_documented(
    stack: str, exported: list[str], run_platform: Callable[..., ProgramRun]
) -> None:
    data = stack_data(stack)
    run_platform(data, stack)
    expected = [
        name
        for name in documented_outputs()
        if name not in CONDITIONAL or data["storage"].get("lustre")
    ]
    assert exported == expected


def test_without_lustre_there_is_no_file_system_output(
    exported: list[str], run_platform: Callable[..., ProgramRun]
) -> None:
    data = stack_data("dev")
    without_lustre(data)
    for team in data.get("teams", []):
        team.pop("sharedFileSystem", None)
    run_platform(data, "dev")
    assert "fileSystemId" not in exported
    assert set(exported) == set(documented_outputs()) - set(CONDITIONAL)
