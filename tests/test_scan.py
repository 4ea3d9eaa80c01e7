"""The second opinion: checkov's AWS and Kubernetes rules on every stack, and the waiver gate.

These run the pinned checkov (requirements-scan.txt, in .venv-scan; scripts/test sets it up), a
subprocess of a few seconds each: the tests that run it are marked slow.
Without it they fail with the command that installs it: a scan that did not run is not a pass.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.run import StackResult
from synth.scan import (
    Finding,
    ScanError,
    Waiver,
    aws_findings,
    idle,
    kubernetes_findings,
    load_waivers,
    render,
    unwaived,
)
from tests.conftest import STACKS


@pytest.fixture(scope="module")
def findings(synthesized: dict[str, StackResult]) -> dict[str, list[Finding]]:
    return {
        stack: kubernetes_findings(synthesized[stack].written.directory)
        + aws_findings(synthesized[stack].written.directory)
        for stack in STACKS
    }


@pytest.mark.slow
@pytest.mark.parametrize("stack", STACKS)
def test_every_finding_of_every_stack_is_waived_with_a_reason(
    findings: dict[str, list[Finding]], stack: str
) -> None:
    assert findings[stack], "checkov found nothing at all: did it read the pods?"
    left = unwaived(findings[stack], load_waivers(), stack)
    assert left == [], render(stack, findings[stack], load_waivers())


@pytest.mark.slow
def test_no_waiver_waives_nothing(findings: dict[str, list[Finding]]) -> None:
    assert idle(load_waivers(), findings) == []


@pytest.mark.slow
def test_the_scan_reads_the_pods_inside_custom_resources(
    findings: dict[str, list[Finding]],
) -> None:
    """What the manifests alone never show: the runtimes' and node sets' pods."""
    resources = {f.resource for f in findings["prod"]}
    assert any(r.startswith("Pod.slurm.") for r in resources)
    assert any(r.startswith("Pod.ml-research.") for r in resources)


@pytest.mark.slow
def test_the_aws_scan_reads_the_terraform_export(findings: dict[str, list[Finding]]) -> None:
    assert any(f.resource.startswith("aws_s3_bucket.") for f in findings["prod"])
    assert {f.file for f in findings["prod"]} >= {"terraform-plan.json"}


def _plan_copy(synthesized: dict[str, StackResult], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    copy = tmp_path / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    return copy, json.loads((copy / "terraform-plan.json").read_text())


def _write_plan(directory: Path, plan: dict[str, Any]) -> None:
    (directory / "terraform-plan.json").write_text(json.dumps(plan))


@pytest.mark.slow
def test_a_seeded_aws_violation_fails_the_gate(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """A bucket that stops logging, and a group opened to SSH from anywhere.

    (A group with a ``self`` rule passes CKV_AWS_24 whatever else it allows, so the seed is
    the API group, which has no inline rules.)
    """
    directory, plan = _plan_copy(synthesized, tmp_path)
    for section in (plan["planned_values"]["root_module"], plan["configuration"]["root_module"]):
        section["resources"] = [
            r for r in section["resources"] if r["address"] != "aws_s3_bucket_logging.storage-data"
        ]
    group = next(
        r
        for r in plan["planned_values"]["root_module"]["resources"]
        if r["type"] == "aws_security_group" and r["name"].endswith("-api")
    )
    group["values"]["ingress"] = [
        {"cidr_blocks": ["0.0.0.0/0"], "from_port": 22, "to_port": 22, "protocol": "tcp",
         "description": "ssh"}
    ]  # fmt: skip
    _write_plan(directory, plan)
    left = {(f.check, f.resource) for f in unwaived(aws_findings(directory), load_waivers(), "dev")}
    assert left == {
        ("CKV_AWS_18", "aws_s3_bucket.storage-data"),
        # No bucket logs into it any more, so it is a bucket without logging as well.
        ("CKV_AWS_18", "aws_s3_bucket.storage-access-logs"),
        ("CKV_AWS_24", group["address"]),
    }


@pytest.mark.slow
def test_a_seeded_admin_policy_fails_the_gate(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """A role policy that names another resource (Karpenter's names its node role and queue)
    and grants everything: checkov must read the document, not lose it as an identifier."""
    directory, plan = _plan_copy(synthesized, tmp_path)
    policy = next(
        r
        for r in plan["planned_values"]["root_module"]["resources"]
        if r["address"] == "aws_iam_role_policy.karpenter-controller-iam-integration"
    )
    document = json.loads(policy["values"]["policy"])
    document["Statement"].append({"Effect": "Allow", "Action": "*", "Resource": "*"})
    policy["values"]["policy"] = json.dumps(document)
    _write_plan(directory, plan)
    left = {(f.check, f.resource) for f in unwaived(aws_findings(directory), load_waivers(), "dev")}
    assert ("CKV_AWS_62", policy["address"]) in left or ("CKV_AWS_63", policy["address"]) in left
    assert {resource for _, resource in left} == {policy["address"]}


@pytest.mark.slow
def test_a_plan_resource_checkov_does_not_read_fails_the_scan(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """Two resources at one address: checkov keeps one, so it read fewer than it was given."""
    directory, plan = _plan_copy(synthesized, tmp_path)
    resources = plan["planned_values"]["root_module"]["resources"]
    resources.append(dict(resources[0]))
    _write_plan(directory, plan)
    with pytest.raises(ScanError, match=r"terraform_plan read \d+ of \d+ resources"):
        aws_findings(directory)


def _seeded(synthesized: dict[str, StackResult], tmp_path: Path) -> tuple[Path, str]:
    """dev's synthesis with one training pod made privileged on the host's network."""
    copy = tmp_path / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    path = next((copy / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    path.write_text(yaml.safe_dump(pod))
    return copy, f"Pod.ml-dev.{pod['metadata']['name']}"


@pytest.mark.slow
def test_a_seeded_violation_fails_the_gate(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    directory, resource = _seeded(synthesized, tmp_path)
    found = kubernetes_findings(directory)
    left = unwaived(found, load_waivers(), "dev")
    checks = {f.check for f in left if f.resource == resource}
    assert {"CKV_K8S_16", "CKV_K8S_19"} <= checks  # privileged, host network
    text = render("dev", found, load_waivers())
    assert f"CKV_K8S_16 {resource}" in text and "not waived" in text


CLOSED_FINDINGS = {
    "CKV2_AWS_12": "the VPC's default security group has rules",
    "CKV_AWS_297": "a schedule is not encrypted with a customer key",
    "CKV_K8S_38": "a pod mounts a service account token",
    "CKV2_K8S_6": "a pod has no NetworkPolicy",
}
"""Findings issue 39 closed by fixing them (the default group adopted with no rules, the release
schedules under the data key, every pod without a token and selected by a NetworkPolicy), so a
waiver for one is a regression, not a design choice."""


@pytest.mark.slow
def test_the_findings_issue_39_closed_stay_fixed_not_waived(
    findings: dict[str, list[Finding]],
) -> None:
    for stack in STACKS:
        back = [f for f in findings[stack] if f.check in CLOSED_FINDINGS]
        assert back == [], [(f.check, f.resource, CLOSED_FINDINGS[f.check]) for f in back]
    assert [w.check for w in load_waivers() if w.check in CLOSED_FINDINGS] == []


@pytest.mark.slow
def test_checkov_still_finds_a_pod_with_a_token_and_no_network_policy(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """The two pod checks run: a training pod that mounts its token, in a synthesis without
    NetworkPolicies, is found by both (else the test above could pass on checks that never ran)."""
    copy = tmp_path / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    path = next((copy / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["automountServiceAccountToken"] = True
    path.write_text(yaml.safe_dump(pod))
    for policy in (copy / "manifests").glob("NetworkPolicy.*.yaml"):
        policy.unlink()
    resource = f"Pod.ml-dev.{pod['metadata']['name']}"
    checks = {f.check for f in kubernetes_findings(copy) if f.resource == resource}
    assert {"CKV_K8S_38", "CKV2_K8S_6"} <= checks, checks


@pytest.mark.slow
def test_a_skip_annotation_cannot_silence_a_finding(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """checkov honours ``checkov.io/skip`` annotations, which would bypass the waiver file."""
    directory, _ = _seeded(synthesized, tmp_path)
    path = next((directory / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = yaml.safe_load(path.read_text())
    pod["metadata"]["annotations"]["checkov.io/skip1"] = "CKV_K8S_16=because I said so"
    path.write_text(yaml.safe_dump(pod))
    with pytest.raises(ScanError, match="skipped 1 check"):
        kubernetes_findings(directory)


@pytest.mark.slow
def test_a_document_checkov_cannot_read_fails_the_scan(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    copy = tmp_path / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    (copy / "pods" / "Pod.broken.yaml").write_text("kind: Pod\nmetadata: [unclosed\n")
    with pytest.raises(ScanError, match=r"kubernetes read \d+ of \d+"):
        kubernetes_findings(copy)


@pytest.mark.slow
def test_node_set_waivers_do_not_cover_the_login_pod(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """slurmd is privileged by design; a privileged login pod is a finding."""
    copy = tmp_path / "prod"
    shutil.copytree(synthesized["prod"].written.directory, copy)
    path = copy / "pods" / "Pod.slurm.slurm-login-login.yaml"
    pod = yaml.safe_load(path.read_text())
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    path.write_text(yaml.safe_dump(pod))
    left = unwaived(kubernetes_findings(copy), load_waivers(), "prod")
    assert {f.resource for f in left} == {"Pod.slurm.slurm-login-login"}
    # privileged, and (its drop of NET_RAW replaced) raw sockets again
    assert {f.check for f in left} == {"CKV_K8S_16", "CKV_K8S_28"}


@pytest.mark.slow
def test_node_set_waivers_do_not_cover_slurms_daemons_or_database(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """slurm-controller-0, slurm-accounting-0 and slurm-accounting-db-0 end in -0 like a node
    set's pod; a privileged one is a finding, not slurmd's waived privilege."""
    copy = tmp_path / "prod"
    shutil.copytree(synthesized["prod"].written.directory, copy)
    daemons = {"slurm-controller-0", "slurm-restapi", "slurm-accounting-0", "slurm-accounting-db-0"}
    for name in daemons:
        path = copy / "pods" / f"Pod.slurm.{name}.yaml"
        pod = yaml.safe_load(path.read_text())
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        path.write_text(yaml.safe_dump(pod))
    left = unwaived(kubernetes_findings(copy), load_waivers(), "prod")
    privileged = {f.resource for f in left if f.check == "CKV_K8S_16"}
    assert privileged == {f"Pod.slurm.{name}" for name in daemons}


def test_waivers_are_scoped_by_check_resource_and_stack() -> None:
    waiver = Waiver("CKV_K8S_16", ("Pod.slurm.*",), "slurmd runs privileged by design", ("prod",))
    slurm = Finding("CKV_K8S_16", "privileged", "Pod.slurm.p5-0", "f")
    assert waiver.waives(slurm, "prod")
    assert not waiver.waives(slurm, "dev")
    assert not waiver.waives(Finding("CKV_K8S_16", "p", "Pod.ml.x-node", "f"), "prod")
    assert not waiver.waives(Finding("CKV_K8S_17", "p", "Pod.slurm.p5-0", "f"), "prod")
    but_prod = Waiver("CKV_K8S_16", ("Pod.*",), "a reason long enough here", (), ("prod",))
    assert but_prod.waives(slurm, "sandbox") and not but_prod.waives(slurm, "prod")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"check": "K8S_16", "resources": ["Pod.*"], "reason": "a reason long enough here"},
         "a checkov id"),
        ({"check": "CKV_K8S_16", "resources": [], "reason": "a reason long enough here"},
         "resource id patterns"),
        ({"check": "CKV_K8S_16", "resources": ["Pod.*"], "reason": "because"}, "in a sentence"),
        ({"check": "CKV_K8S_16", "resources": ["Pod.*"], "reason": "a reason long enough",
          "until": "2027"}, "keys check, resources, stacks or exceptStacks"),
    ],
    ids=["check-id", "no-resources", "no-reason", "unknown-key"],
)  # fmt: skip
def test_a_malformed_waiver_is_refused_by_its_entry(
    tmp_path: Path, entry: dict[str, object], words: str
) -> None:
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump([entry]))
    with pytest.raises(ScanError, match=r"waivers\.yaml\[0\]") as caught:
        load_waivers(path)
    assert words in str(caught.value)


def test_without_checkov_the_scan_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match=r"scripts/setup requirements-scan\.txt"):
        kubernetes_findings(tmp_path, checkov=tmp_path / "missing")
    (tmp_path / "terraform-plan.json").write_text(
        json.dumps({"planned_values": {"root_module": {"resources": []}}})
    )
    with pytest.raises(ScanError, match=r"scripts/setup requirements-scan\.txt"):
        aws_findings(tmp_path, checkov=tmp_path / "missing")


@pytest.mark.slow
def test_a_policy_document_lost_from_the_export_fails_the_scan(
    synthesized: dict[str, StackResult], tmp_path: Path
) -> None:
    """checkov reports a check it cannot evaluate as nothing at all: without the sentinel a
    role policy with no document would pass (how nine of twelve once went unread)."""
    directory, plan = _plan_copy(synthesized, tmp_path)
    policy = next(
        r for r in plan["planned_values"]["root_module"]["resources"]
        if r["type"] == "aws_iam_role_policy"
    )  # fmt: skip
    del policy["values"]["policy"]
    _write_plan(directory, plan)
    with pytest.raises(ScanError, match=rf"did not evaluate CKV_AWS_290 on {policy['address']}"):
        aws_findings(directory)
