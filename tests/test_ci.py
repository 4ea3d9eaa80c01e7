"""The CI definitions: the cloud gate previews every stack with its own policy config."""

from __future__ import annotations

from typing import Any

import yaml

from synth.stackfile import REPOSITORY_ROOT
from tests.conftest import STACKS

WORKFLOW = REPOSITORY_ROOT / ".github" / "workflows" / "ci.yml"


def _workflow() -> dict[str, Any]:
    document = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(document, dict)
    return document


def test_preview_runs_for_every_stack_with_its_policy_config() -> None:
    preview = _workflow()["jobs"]["preview"]
    assert sorted(preview["strategy"]["matrix"]["stack"]) == STACKS
    script = "\n".join(step.get("run", "") for step in preview["steps"])
    assert "--policy-pack policies" in script
    assert '--policy-pack-config "policies/config/${{ matrix.stack }}.json"' in script
    for stack in STACKS:
        assert (REPOSITORY_ROOT / "policies" / "config" / f"{stack}.json").is_file()


def test_cloud_credentials_come_from_oidc_only() -> None:
    preview = _workflow()["jobs"]["preview"]
    assert preview["permissions"]["id-token"] == "write"
    uses = [step.get("uses", "") for step in preview["steps"]]
    assert any(u.startswith("aws-actions/configure-aws-credentials@") for u in uses)
    assert "AWS_SECRET_ACCESS_KEY" not in WORKFLOW.read_text()
    assert preview["needs"] == "offline"


def test_offline_gate_runs_tests_and_synthesis() -> None:
    steps = _workflow()["jobs"]["offline"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert "scripts/test" in runs and "scripts/synth --all" in runs
