"""The CI definitions: the offline gate checks what .ci/run checks, the cloud gate previews every
stack with its own policy config, and the preview role's example policies stay read-only."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from synth.stackfile import REPOSITORY_ROOT, load_stack
from synth.yamlio import load_yaml
from tests.conftest import STACKS

WORKFLOW = REPOSITORY_ROOT / ".github" / "workflows" / "ci.yml"
WORKFLOWS = sorted((REPOSITORY_ROOT / ".github" / "workflows").glob("*.yml"))
CI_RUN = REPOSITORY_ROOT / ".ci" / "run"
DOCS = REPOSITORY_ROOT / "docs" / "ci.md"
PREVIEW_ROLE = REPOSITORY_ROOT / "ci" / "preview-role"
TRUST_POLICY = PREVIEW_ROLE / "trust-policy.json"
PERMISSIONS_POLICY = PREVIEW_ROLE / "permissions-policy.json"
RENOVATE_ROLE = REPOSITORY_ROOT / "ci" / "renovate-role"
RENOVATE_TRUST = RENOVATE_ROLE / "trust-policy.json"
RENOVATE_PERMISSIONS = RENOVATE_ROLE / "permissions-policy.json"
RENOVATE_WORKFLOW = REPOSITORY_ROOT / ".github" / "workflows" / "renovate.yml"
GITHUB_OIDC = "token.actions.githubusercontent.com"
STATE_OBJECTS = "arn:aws:s3:::<state-bucket>/"
"""Objects of the Pulumi state bucket: the only resources a write action may name."""
WRITE_VERBS = (
    "Create", "Delete", "Put", "Update", "Attach", "Detach", "Modify", "Associate",
    "Disassociate", "Tag", "Untag", "Set", "Add", "Remove", "Run", "Start", "Stop", "Terminate",
    "Reboot", "Replace", "Revoke", "Authorize", "Enable", "Disable", "Register", "Deregister",
    "Pass", "Upload", "Import", "Restore", "Reset", "Release", "Allocate", "Accept", "Reject",
    "Send", "Publish", "Invoke", "Assume", "Apply", "Cancel", "Change", "Copy", "Import",
    "Rotate", "Schedule", "Encrypt", "ReEncrypt", "Sign", "Retire", "Purge", "Receive",
    "Access",
)  # fmt: skip
"""Leading words of IAM actions that change something (or act as someone)."""


def _workflow() -> dict[str, Any]:
    document = load_yaml(WORKFLOW.read_text())
    assert isinstance(document, dict)
    return document


def _runs(job: str) -> list[str]:
    return [step.get("run", "").strip() for step in _workflow()["jobs"][job]["steps"]]


def _uses() -> list[str]:
    """Every action any workflow uses."""
    return [
        step["uses"]
        for path in WORKFLOWS
        for job in load_yaml(path.read_text())["jobs"].values()
        for step in job["steps"]
        if "uses" in step
    ]


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    statements = policy["Statement"]
    assert isinstance(statements, list) and statements
    return statements


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --------------------------------------------------------------------------- preview job


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
    assert "AWS_ACCESS_KEY_ID" not in WORKFLOW.read_text()
    assert preview["needs"] == "offline"
    assert preview["environment"] == "${{ matrix.stack }}"
    # Only the preview job may ask for an OIDC token.
    assert _workflow()["permissions"] == {"contents": "read"}
    assert "permissions" not in _workflow()["jobs"]["offline"]


def test_preview_selects_the_stack_before_previewing() -> None:
    script = "\n".join(_runs("preview"))
    select = script.find('pulumi stack select "${{ matrix.stack }}"')
    assert select != -1, "the preview job must select the stack explicitly"
    # Creating one would write state, which the preview role may not (its policy, below).
    assert "--create" not in script
    commands = [
        line.strip() for line in script.splitlines() if not line.strip().startswith(("#", "echo"))
    ]
    assert not any(line.startswith("pulumi stack init") for line in commands)
    assert script.find("pulumi login") < select < script.find("pulumi preview")
    assert 'pulumi preview --stack "${{ matrix.stack }}"' in script


def test_preview_fails_first_and_plainly_when_the_runner_cannot_reach_the_cluster() -> None:
    """dev and staging limit their public endpoints to office and VPN ranges, which hosted
    runners are not in; the check names the endpoint and the fix before the preview starts."""
    script = "\n".join(_runs("preview"))
    check = script.find("pulumi stack output endpoint")
    assert check != -1
    assert script.find("pulumi stack select") < check < script.find("pulumi preview")
    assert "--max-time" in script and "::error::this runner cannot reach" in script
    assert "docs/ci.md" in script[check : script.find("pulumi preview")]


def test_pulumi_cli_matches_the_sdk_pin() -> None:
    pins = re.findall(r"^pulumi==(\S+)$", (REPOSITORY_ROOT / "requirements.txt").read_text(), re.M)
    assert len(pins) == 1, "requirements.txt pins the pulumi SDK exactly once"
    steps = [
        step
        for step in _workflow()["jobs"]["preview"]["steps"]
        if step.get("uses", "").startswith("pulumi/actions@")
    ]
    assert len(steps) == 1
    assert str(steps[0]["with"]["pulumi-version"]) == pins[0]
    # No command: the action only installs the CLI; the run steps drive it.
    assert "command" not in steps[0]["with"]


# --------------------------------------------------------------------------- offline job


def test_ci_run_checks_lint_types_and_tests_with_reference_data_required() -> None:
    script = CI_RUN.read_text()
    for check in ("scripts/lint", "scripts/test", "TRAINING_PLATFORM_REQUIRE_REFERENCE=1"):
        assert check in script, check
    lint = _commands(REPOSITORY_ROOT / "scripts" / "lint")
    checking = lint[lint.index("else") :]  # without --fix: check only
    for check in (".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/mypy"):
        assert check in checking, check
    # The lint, the docs build and Renovate's install run beside the tests and are waited for
    # after them (Renovate's extraction test waits on the install's lock); checkov's
    # virtualenv, which the tests need, is waited for before.
    steps = ["finish scan", "scripts/test || tests=$?", "finish renovate",
             "scripts/renovate validate || tests=$((tests != 0 ? tests : 1))", "finish lint",
             "finish docs", 'exit "$tests"']  # fmt: skip
    assert [line for line in _commands(CI_RUN) if line in steps] == steps
    for job in ("lint scripts/lint", "docs scripts/docs", "renovate scripts/renovate setup"):
        assert f"background {job}" in _commands(CI_RUN)
    renovate = (REPOSITORY_ROOT / "scripts" / "renovate").read_text()
    assert "flock 9" in renovate and "setup\n" in renovate.split("extract)", 1)[1]
    # Renovate's validator (pinned in ci/renovate/package.json) checks renovate.json --strict.
    assert (
        "renovate-config-validator --strict" in (REPOSITORY_ROOT / "scripts/renovate").read_text()
    )
    # The docs build treats every warning (a broken link or anchor) as an error.
    assert "command=(build --strict)" in (REPOSITORY_ROOT / "scripts" / "docs").read_text()
    # It honours a reference directory given by the caller (the workflow's fetched copy).
    assert "${TRAINING_PLATFORM_REFERENCE_DIR:-" in script


@pytest.mark.parametrize(("lint", "tests", "status"), [(3, 0, 3), (0, 5, 5), (3, 5, 5)])
def test_ci_run_fails_with_a_failing_step_and_prints_its_wall_time(
    tmp_path: Path, lint: int, tests: int, status: int
) -> None:
    """The budget is measured every run: the time is printed on exit, success or not. A lint
    that fails beside the tests fails CI once the tests end (with the tests' status first)."""
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    (root / "scripts").mkdir()
    shutil.copy2(CI_RUN, root / ".ci" / "run")
    steps = {"setup": 0, "lint": lint, "docs": 0, "renovate": 0, "promtool-setup": 0, "test": tests}
    for name, exit_status in steps.items():
        fake = root / "scripts" / name
        fake.write_text(f'#!/usr/bin/env bash\necho {name} >>"$0.called"\nexit {exit_status}\n')
        fake.chmod(0o755)
    result = subprocess.run(
        ["bash", str(root / ".ci" / "run")], capture_output=True, text=True, check=False
    )
    assert result.returncode == status, result.stderr
    assert (root / "scripts" / "test.called").exists(), "the tests run beside the lint"
    assert re.search(r"^== \.ci/run wall time: \d+ s \(budget 300 s\)$", result.stderr, re.M)


def _commands(script: Path) -> list[str]:
    """The lines a shell script runs: no comments, no blank lines, no echo."""
    lines = (line.split("#", 1)[0].strip() for line in script.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("echo ")]


def test_offline_gate_fetches_then_runs_ci_then_synthesizes() -> None:
    offline = _workflow()["jobs"]["offline"]
    runs = _runs("offline")
    order = ["scripts/fetch-reference", ".ci/run", "scripts/synth --all"]
    assert [run for run in runs if run][: len(order)] == order
    # fetch-reference and .ci/run agree on where the data is: the job sets it for both.
    assert offline["env"]["TRAINING_PLATFORM_REFERENCE_DIR"]
    upload = [s for s in offline["steps"] if s.get("uses", "").startswith("actions/upload-")]
    assert len(upload) == 1 and upload[0]["with"]["path"] == "build/synth"
    assert upload[0]["if"] == "always()"


def test_pull_requests_refuse_replacements_against_the_base_branchs_synthesis() -> None:
    steps = _workflow()["jobs"]["offline"]["steps"]
    synth = next(i for i, s in enumerate(steps) if s.get("run") == "scripts/synth --all")
    checkout, base_synth, diff = steps[synth + 1 : synth + 4]
    pr_only = "github.event_name == 'pull_request'"
    assert checkout["uses"].startswith("actions/checkout@") and checkout["if"] == pr_only
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    # The base is synthesized by its own scripts (its own program and pins) into build/base.
    base_dir = checkout["with"]["path"]
    assert base_synth["if"] == pr_only
    assert base_synth["run"].startswith(f"{base_dir}/scripts/synth --all --out ")
    assert "build/base" in base_synth["run"]
    assert diff["if"] == pr_only
    # Every stack file is compared, with --gate: only a refused replacement fails the job.
    assert "for file in stacks/Pulumi.*.yaml" in diff["run"]
    assert 'scripts/synth diff "$stack" --base build/base --gate' in diff["run"]
    assert "--allow-replace" not in diff["run"]
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload"))
    assert upload > synth + 3, "the diff runs after the synthesis, before the upload"


def _private_only(stack: str) -> bool:
    endpoint = (load_stack(stack).platform.get("cluster") or {}).get("endpoint") or {}
    return endpoint.get("publicAccess") is False


def test_private_endpoint_stacks_preview_on_a_self_hosted_runner() -> None:
    preview = _workflow()["jobs"]["preview"]
    matrix = preview["strategy"]["matrix"]
    runner_of = {entry["stack"]: entry.get("runner") for entry in matrix.get("include", [])}
    assert set(runner_of) <= set(matrix["stack"]), "an include entry names no matrix stack"
    match = re.fullmatch(r"\$\{\{ matrix\.runner \|\| '([^']+)' \}\}", preview["runs-on"])
    assert match, preview["runs-on"]
    hosted = match[1]
    assert not hosted.startswith("self-hosted")
    assert any(_private_only(stack) for stack in STACKS), "no stack has a private endpoint"
    for stack in STACKS:
        runner = runner_of.get(stack) or hosted
        labels = runner if isinstance(runner, list) else [runner]
        if _private_only(stack):
            assert labels[0] == "self-hosted" and len(labels) > 1, stack
        else:
            assert labels == [hosted], f"{stack} has a public endpoint: preview on {hosted}"


# --------------------------------------------------------------------------- action versions


USES_LINE = re.compile(r"^\s*(?:- )?uses:\s*(\S+?)@(\S+)(?:\s+#\s*(\S+))?\s*$", re.MULTILINE)
RELEASE = re.compile(r"v\d+(\.\d+){0,2}")


def test_every_action_is_pinned_to_a_release_or_to_its_commit() -> None:
    # The dependency bot's GitHub Actions group (renovate.json) keeps them current and pins each
    # to its commit with the release in a comment (`@<sha> # v7.0.1`); a branch is never used.
    found = [(path.name, *use) for path in WORKFLOWS for use in USES_LINE.findall(path.read_text())]
    assert len(found) == len(_uses()), "a uses: line this test cannot read"
    for workflow, action, ref, comment in found:
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            assert RELEASE.fullmatch(comment), f"{workflow}: {action}@{ref} names no release"
        else:
            assert RELEASE.fullmatch(ref), f"{workflow}: {action}@{ref} is not a release"


# --------------------------------------------------------------------------- docs


def test_docs_name_every_variable_secret_action_and_policy_file() -> None:
    docs = DOCS.read_text()
    text = "\n".join(path.read_text() for path in WORKFLOWS)
    names = set(re.findall(r"\$\{\{\s*(?:vars|secrets)\.([A-Z_]+)\s*\}\}", text))
    assert {
        "AWS_PREVIEW_ROLE_ARN",
        "AWS_REGION",
        "PULUMI_BACKEND_URL",
        "EFA_INSTALLER_URL",
    } <= names
    for name in sorted(names):
        assert f"`{name}`" in docs, name
    # The actions by name only: their versions are the dependency bot's to move.
    for name in {use.partition("@")[0] for use in _uses()}:
        assert f"`{name}`" in docs, name
    for path in (TRUST_POLICY, PERMISSIONS_POLICY, RENOVATE_TRUST, RENOVATE_PERMISSIONS):
        assert path.relative_to(REPOSITORY_ROOT).as_posix() in docs
    for placeholder in ("111122223333", "<org>/<repo>", "<stack>", "<state-bucket>"):
        assert placeholder in docs, placeholder


# --------------------------------------------------------------------------- preview role


@pytest.mark.parametrize(
    "path",
    [TRUST_POLICY, PERMISSIONS_POLICY, RENOVATE_TRUST, RENOVATE_PERMISSIONS],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_example_policies_follow_the_iam_grammar(path: Path) -> None:
    policy = json.loads(path.read_text())
    assert set(policy) == {"Version", "Statement"}
    assert policy["Version"] == "2012-10-17"
    sids = [statement.get("Sid") for statement in _statements(policy)]
    assert len(set(sids)) == len(sids), "Sids must be unique"
    for statement in _statements(policy):
        assert statement["Effect"] in {"Allow", "Deny"}
        assert "Action" in statement and "NotAction" not in statement
        assert all(
            re.fullmatch(r"[a-z0-9-]+:[A-Za-z*]+", action)
            for action in _as_list(statement["Action"])
        ), statement["Action"]
        if path.name == "trust-policy.json":
            assert "Principal" in statement and "Resource" not in statement
        else:
            assert "Resource" in statement and "Principal" not in statement


@pytest.mark.parametrize(
    ("path", "environment"), [(TRUST_POLICY, "<stack>"), (RENOVATE_TRUST, "renovate")]
)
def test_trust_policy_admits_only_one_environment_of_one_repository(
    path: Path, environment: str
) -> None:
    policy = json.loads(path.read_text())
    (statement,) = _statements(policy)
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"] == {
        "Federated": f"arn:aws:iam::111122223333:oidc-provider/{GITHUB_OIDC}"
    }
    conditions = statement["Condition"]
    # Exact matches only: no StringLike wildcards that would admit other refs or repositories.
    assert set(conditions) == {"StringEquals"}
    keys = conditions["StringEquals"]
    assert set(keys) == {f"{GITHUB_OIDC}:aud", f"{GITHUB_OIDC}:sub"}
    assert keys[f"{GITHUB_OIDC}:aud"] == "sts.amazonaws.com"
    assert keys[f"{GITHUB_OIDC}:sub"] == f"repo:<org>/<repo>:environment:{environment}"


def _is_write(action: str) -> bool:
    verb = action.split(":", 1)[1]
    return verb == "*" or verb.startswith(WRITE_VERBS)


def test_write_detector_catches_write_actions() -> None:
    for action in ("ec2:CreateVpc", "iam:PassRole", "s3:PutObject", "eks:*", "kms:Encrypt"):
        assert _is_write(action), action
    for action in ("ec2:Describe*", "iam:GetRole", "s3:ListBucket", "kms:Decrypt"):
        assert not _is_write(action), action


def test_permissions_policy_is_read_only_but_for_the_state_bucket() -> None:
    policy = json.loads(PERMISSIONS_POLICY.read_text())
    for statement in _statements(policy):
        assert statement["Effect"] == "Allow"
        actions = _as_list(statement["Action"])
        assert "*" not in actions
        writes = [action for action in actions if _is_write(action)]
        if not writes:
            continue
        # Only the lock a preview holds: a role assumable from any pull request's branch must
        # not be able to overwrite or delete a stack's state (.pulumi/stacks/...).
        assert set(writes) <= {"s3:PutObject", "s3:DeleteObject"}, writes
        resources = _as_list(statement["Resource"])
        assert resources and all(r.startswith(STATE_OBJECTS + ".pulumi/locks/") for r in resources)
    granted = {a for s in _statements(policy) for a in _as_list(s["Action"])}
    # What a preview (and a later --refresh) reads on the services components/ creates.
    for needed in ("ec2:Describe*", "eks:Describe*", "iam:GetRole", "kms:DescribeKey",
                   "fsx:DescribeFileSystems", "sqs:GetQueueAttributes", "events:DescribeRule",
                   "logs:DescribeLogGroups", "s3:GetObject", "s3:ListBucket",
                   "cloudwatch:DescribeAlarms", "scheduler:GetSchedule"):  # fmt: skip
        assert needed in granted, needed


# --------------------------------------------------------------------------- the dependency bot


def test_the_dependency_bot_reads_aws_and_writes_nothing_there() -> None:
    # Renovate looks up EKS add-on builds (the aws-eks-addon datasource) and the stacks' images
    # in the account's registry; it needs no other AWS access, and none to write.
    policy = json.loads(RENOVATE_PERMISSIONS.read_text())
    granted = {a for s in _statements(policy) for a in _as_list(s["Action"])}
    assert not [action for action in granted if _is_write(action)]
    assert granted == {
        "eks:DescribeAddonVersions", "ecr:GetAuthorizationToken", "ecr:BatchGetImage",
        "ecr:DescribeImages", "ecr:ListImages",
    }  # fmt: skip


def test_the_bot_workflow_runs_the_pinned_renovate_in_its_own_environment() -> None:
    workflow = load_yaml(RENOVATE_WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    assert job["environment"] == "renovate"  # the only subject the role trusts
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    # The tool .ci/run validates with, from ci/renovate/package.json: one pin for both.
    assert "scripts/renovate setup" in runs and "ci/renovate/node_modules/.bin/renovate" in runs
    run_step = next(s for s in job["steps"] if "node_modules/.bin/renovate" in s.get("run", ""))
    # A token minted per run by the bot's GitHub App (installation tokens last an hour).
    minted = next(s for s in job["steps"] if s.get("id") == "app-token")
    assert minted["uses"].startswith("actions/create-github-app-token@")
    assert run_step["env"]["RENOVATE_TOKEN"] == "${{ steps.app-token.outputs.token }}"
    allowed = json.loads(run_step["env"]["RENOVATE_ALLOWED_COMMANDS"])
    config = json.loads((REPOSITORY_ROOT / "renovate.json").read_text())
    for command in config["postUpgradeTasks"]["commands"]:
        assert any(re.fullmatch(pattern, command) for pattern in allowed), command
