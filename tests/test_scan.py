"""The second opinion: checkov's AWS and Kubernetes rules on every stack, and the waiver gate.

These run the pinned checkov (requirements-scan.txt, in .venv-scan; scripts/test sets it up), a
subprocess of a few seconds each: the tests that run it are marked slow.
Without it they fail with the command that installs it: a scan that did not run is not a pass.
"""

from __future__ import annotations

import fcntl
import json
import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import acceptance_gate
from synth.pods import pods_of
from synth.run import StackResult
from synth.scan import (
    FRAMEWORKS,
    KUBERNETES,
    TERRAFORM_PLAN,
    Finding,
    ScanError,
    Waiver,
    _prepared,
    aws_findings,
    idle,
    kubernetes_findings,
    load_waivers,
    render,
    resources_checkov_reads,
    scan,
    unwaived,
)
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.test_pods import ray_objects

Outcome = list[Finding] | ScanError
Seed = Callable[[dict[str, StackResult], Path], tuple[Path, str, Any]]
"""Copies a synthesis into a folder and breaks it: (the copy, the framework to scan it with,
what the test needs to know of what it seeded)."""

SEEDS: dict[str, Seed] = {}


def seed(function: Seed) -> Seed:
    """Register a seeded tree: every seed is scanned in the one checkov batch of the run."""
    SEEDS[function.__name__] = function
    return function


@dataclass(frozen=True)
class Scans:
    """Every scan of this module, from one checkov batch (:func:`synth.scan.scan`)."""

    stacks: dict[str, list[Outcome]]
    """stack -> its outcome per framework (FRAMEWORKS' order)."""
    seeded: dict[str, tuple[Any, Outcome]]
    """seed name -> what it seeded, and its scan's outcome."""


def _scan_everything(synthesized: dict[str, StackResult], trees: Path) -> Scans:
    requests = [(synthesized[s].written.directory, f) for s in STACKS for f in FRAMEWORKS]
    seeded: dict[str, tuple[Path, str, Any]] = {}
    for name, make in SEEDS.items():
        (trees / name).mkdir(parents=True)
        seeded[name] = make(synthesized, trees / name)
    outcomes = scan(
        requests + [(directory, framework) for directory, framework, _ in seeded.values()]
    )
    width = len(FRAMEWORKS)
    return Scans(
        stacks={s: outcomes[i * width : (i + 1) * width] for i, s in enumerate(STACKS)},
        seeded={
            name: (info, outcome)
            for (name, (_, _, info)), outcome in zip(
                seeded.items(), outcomes[len(requests) :], strict=True
            )
        },
    )


@pytest.fixture(scope="session")
def scans(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    synthesized: dict[str, StackResult],
    reference_dir: Path,
) -> Scans:
    """The stacks and every seeded tree, scanned once per test run by one checkov process.

    Only with the reference data (``reference_dir`` skips, or fails under .ci/run, without
    it): the synthesis writes the observability charts' pods from it, and their waivers would
    otherwise waive nothing.

    checkov takes seconds to start and under one to scan a tree, so one batch serves the whole
    module; the pytest-xdist workers share it as they share the synthesis (tests/conftest.py):
    the first makes it under a lock and saves it in the run's directory, the others read it.
    """
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if hasattr(request.config, "workerinput") else base) / "scan-batch"
    out.mkdir(exist_ok=True)
    with (out / "scan.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = out / "scans.pickle"
        if saved.exists():
            result: Scans = pickle.loads(saved.read_bytes())
            return result
        result = _scan_everything(synthesized, out / "trees")
        saved.write_bytes(pickle.dumps(result))
        return result


def _found(outcome: Outcome) -> list[Finding]:
    """A scan's findings, or the error that says why it does not count, raised."""
    if isinstance(outcome, ScanError):
        raise outcome
    return outcome


@pytest.fixture(scope="module")
def findings(scans: Scans) -> dict[str, list[Finding]]:
    return {
        stack: [f for outcome in scans.stacks[stack] for f in _found(outcome)] for stack in STACKS
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
    """What the manifests alone never show: the runtimes' and node sets' pods, and those of the
    observability charts (synth/chart_pods.py)."""
    resources = {f.resource for f in findings["prod"]}
    assert any(r.startswith("Pod.slurm.") for r in resources)
    assert any(r.startswith("Pod.ml-research.") for r in resources)
    assert {"Pod.monitoring.prometheus-monitoring-prometheus-0",
            "Pod.monitoring-nodes.dcgm-exporter"} <= resources  # fmt: skip


@pytest.mark.slow
def test_the_aws_scan_reads_the_terraform_export(findings: dict[str, list[Finding]]) -> None:
    assert any(f.resource.startswith("aws_s3_bucket.") for f in findings["prod"])
    assert {f.file for f in findings["prod"]} >= {"terraform-plan.json"}


def _plan_copy(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, dict[str, Any]]:
    copy = root / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    return copy, json.loads((copy / "terraform-plan.json").read_text())


def _write_plan(directory: Path, plan: dict[str, Any]) -> None:
    (directory / "terraform-plan.json").write_text(json.dumps(plan))


@seed
def aws_violation(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, str]:
    """A bucket that stops logging, and a group opened to SSH from anywhere (its address)."""
    directory, plan = _plan_copy(synthesized, root)
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
    return directory, TERRAFORM_PLAN, str(group["address"])


@pytest.mark.slow
def test_a_seeded_aws_violation_fails_the_gate(scans: Scans) -> None:
    """A bucket that stops logging, and a group opened to SSH from anywhere.

    (A group with a ``self`` rule passes CKV_AWS_24 whatever else it allows, so the seed is
    the API group, which has no inline rules.)
    """
    group, outcome = scans.seeded["aws_violation"]
    left = {(f.check, f.resource) for f in unwaived(_found(outcome), load_waivers(), "dev")}
    assert left == {
        ("CKV_AWS_18", "aws_s3_bucket.storage-data"),
        # No bucket logs into it any more, so it is a bucket without logging as well.
        ("CKV_AWS_18", "aws_s3_bucket.storage-access-logs"),
        ("CKV_AWS_24", group),
    }


@seed
def efs_violation(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, str]:
    """The model store's file system unencrypted, and a team access point without a POSIX user
    (the file system's address)."""
    directory, plan = _plan_copy(synthesized, root)
    file_system = ""
    for section in (plan["planned_values"]["root_module"], plan["configuration"]["root_module"]):
        for resource in section["resources"]:
            if resource["type"] == "aws_efs_file_system":
                file_system = str(resource["address"])
                if "values" in resource:
                    resource["values"]["encrypted"] = False
                    resource["values"].pop("kms_key_id", None)
                else:
                    resource["expressions"].pop("kms_key_id", None)
            if resource["address"] == "aws_efs_access_point.storage-models-ml-dev":
                (resource.get("values") or resource["expressions"]).pop("posix_user", None)
    _write_plan(directory, plan)
    return directory, TERRAFORM_PLAN, file_system


@pytest.mark.slow
def test_the_scan_sees_the_model_store(scans: Scans, findings: dict[str, list[Finding]]) -> None:
    """checkov reads the EFS resources of the export: as synthesized they pass its EFS checks
    (encryption under a customer key, access points with a user and a root), and an
    unencrypted file system or an access point without a user fails the gate."""
    efs_checks = {"CKV_AWS_42", "CKV_AWS_184", "CKV_AWS_329", "CKV_AWS_330"}
    for stack in STACKS:
        assert not [f for f in findings[stack] if f.check in efs_checks], stack
    file_system, outcome = scans.seeded["efs_violation"]
    assert file_system == "aws_efs_file_system.storage-models"
    left = {(f.check, f.resource) for f in unwaived(_found(outcome), load_waivers(), "dev")}
    assert {("CKV_AWS_42", file_system), ("CKV_AWS_184", file_system)} <= left
    assert ("CKV_AWS_330", "aws_efs_access_point.storage-models-ml-dev") in left


@seed
def admin_policy(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, str]:
    """Karpenter's role policy granting everything as well (its address)."""
    directory, plan = _plan_copy(synthesized, root)
    policy = next(
        r
        for r in plan["planned_values"]["root_module"]["resources"]
        if r["address"] == "aws_iam_role_policy.karpenter-controller-iam-integration"
    )
    document = json.loads(policy["values"]["policy"])
    document["Statement"].append({"Effect": "Allow", "Action": "*", "Resource": "*"})
    policy["values"]["policy"] = json.dumps(document)
    _write_plan(directory, plan)
    return directory, TERRAFORM_PLAN, str(policy["address"])


@pytest.mark.slow
def test_a_seeded_admin_policy_fails_the_gate(scans: Scans) -> None:
    """A role policy that names another resource (Karpenter's names its node role and queue)
    and grants everything: checkov must read the document, not lose it as an identifier."""
    policy, outcome = scans.seeded["admin_policy"]
    left = {(f.check, f.resource) for f in unwaived(_found(outcome), load_waivers(), "dev")}
    assert ("CKV_AWS_62", policy) in left or ("CKV_AWS_63", policy) in left
    assert {resource for _, resource in left} == {policy}


@seed
def duplicate_plan_resource(
    synthesized: dict[str, StackResult], root: Path
) -> tuple[Path, str, None]:
    """Two resources at one address."""
    directory, plan = _plan_copy(synthesized, root)
    resources = plan["planned_values"]["root_module"]["resources"]
    resources.append(dict(resources[0]))
    _write_plan(directory, plan)
    return directory, TERRAFORM_PLAN, None


@pytest.mark.slow
def test_a_plan_resource_checkov_does_not_read_fails_the_scan(scans: Scans) -> None:
    """Two resources at one address: checkov keeps one, so it read fewer than it was given."""
    _, outcome = scans.seeded["duplicate_plan_resource"]
    with pytest.raises(ScanError, match=r"terraform_plan read \d+ of \d+ resources"):
        _found(outcome)


def _seeded(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str]:
    """dev's synthesis with one training pod made privileged on the host's network."""
    copy = root / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    path = next((copy / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = load_yaml(path.read_text())
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    path.write_text(yaml.safe_dump(pod))
    return copy, f"Pod.ml-dev.{pod['metadata']['name']}"


@seed
def privileged_pod(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, str]:
    """:func:`_seeded` (the pod's resource id)."""
    directory, resource = _seeded(synthesized, root)
    return directory, KUBERNETES, resource


@pytest.mark.slow
def test_a_seeded_violation_fails_the_gate(scans: Scans) -> None:
    resource, outcome = scans.seeded["privileged_pod"]
    found = _found(outcome)
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


@seed
def token_without_network_policy(
    synthesized: dict[str, StackResult], root: Path
) -> tuple[Path, str, str]:
    """A training pod that mounts its token, in a synthesis without NetworkPolicies."""
    copy = root / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    path = next((copy / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = load_yaml(path.read_text())
    pod["spec"]["automountServiceAccountToken"] = True
    path.write_text(yaml.safe_dump(pod))
    for policy in (copy / "manifests").glob("NetworkPolicy.*.yaml"):
        policy.unlink()
    return copy, KUBERNETES, f"Pod.ml-dev.{pod['metadata']['name']}"


@pytest.mark.slow
def test_checkov_still_finds_a_pod_with_a_token_and_no_network_policy(scans: Scans) -> None:
    """The two pod checks run: a training pod that mounts its token, in a synthesis without
    NetworkPolicies, is found by both (else the test above could pass on checks that never ran)."""
    resource, outcome = scans.seeded["token_without_network_policy"]
    checks = {f.check for f in _found(outcome) if f.resource == resource}
    assert {"CKV_K8S_38", "CKV2_K8S_6"} <= checks, checks


@seed
def skip_annotation(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, None]:
    """:func:`_seeded`, its pod annotated to skip the privileged check."""
    directory, _ = _seeded(synthesized, root)
    path = next((directory / "pods").glob("Pod.ml-dev.torch-*-node.yaml"))
    pod = load_yaml(path.read_text())
    pod["metadata"]["annotations"]["checkov.io/skip1"] = "CKV_K8S_16=because I said so"
    path.write_text(yaml.safe_dump(pod))
    return directory, KUBERNETES, None


@pytest.mark.slow
def test_a_skip_annotation_cannot_silence_a_finding(scans: Scans) -> None:
    """checkov honours ``checkov.io/skip`` annotations, which would bypass the waiver file."""
    _, outcome = scans.seeded["skip_annotation"]
    with pytest.raises(ScanError, match="skipped 1 check"):
        _found(outcome)


@seed
def unreadable_document(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, None]:
    """dev's synthesis with a pod that is not YAML."""
    copy = root / "dev"
    shutil.copytree(synthesized["dev"].written.directory, copy)
    (copy / "pods" / "Pod.broken.yaml").write_text("kind: Pod\nmetadata: [unclosed\n")
    return copy, KUBERNETES, None


@pytest.mark.slow
def test_a_document_checkov_cannot_read_fails_the_scan(scans: Scans) -> None:
    _, outcome = scans.seeded["unreadable_document"]
    with pytest.raises(ScanError, match=r"kubernetes read \d+ of \d+"):
        _found(outcome)


@seed
def privileged_login(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, None]:
    """prod's synthesis with the Slurm login pod privileged."""
    copy = root / "prod"
    shutil.copytree(synthesized["prod"].written.directory, copy)
    path = copy / "pods" / "Pod.slurm.slurm-login-login.yaml"
    pod = load_yaml(path.read_text())
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    path.write_text(yaml.safe_dump(pod))
    return copy, KUBERNETES, None


@pytest.mark.slow
def test_node_set_waivers_do_not_cover_the_login_pod(scans: Scans) -> None:
    """slurmd is privileged by design; a privileged login pod is a finding."""
    _, outcome = scans.seeded["privileged_login"]
    left = unwaived(_found(outcome), load_waivers(), "prod")
    assert {f.resource for f in left} == {"Pod.slurm.slurm-login-login"}
    # privileged, and (its drop of NET_RAW replaced) raw sockets again
    assert {f.check for f in left} == {"CKV_K8S_16", "CKV_K8S_28"}


SLURM_DAEMONS = {
    "slurm-controller-0",
    "slurm-restapi",
    "slurm-accounting-0",
    "slurm-accounting-db-0",
}


@seed
def privileged_daemons(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, None]:
    """prod's synthesis with Slurm's daemons and database privileged."""
    copy = root / "prod"
    shutil.copytree(synthesized["prod"].written.directory, copy)
    for name in SLURM_DAEMONS:
        path = copy / "pods" / f"Pod.slurm.{name}.yaml"
        pod = load_yaml(path.read_text())
        pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        path.write_text(yaml.safe_dump(pod))
    return copy, KUBERNETES, None


@pytest.mark.slow
def test_node_set_waivers_do_not_cover_slurms_daemons_or_database(scans: Scans) -> None:
    """slurm-controller-0, slurm-accounting-0 and slurm-accounting-db-0 end in -0 like a node
    set's pod; a privileged one is a finding, not slurmd's waived privilege."""
    _, outcome = scans.seeded["privileged_daemons"]
    left = unwaived(_found(outcome), load_waivers(), "prod")
    privileged = {f.resource for f in left if f.check == "CKV_K8S_16"}
    assert privileged == {f"Pod.slurm.{name}" for name in SLURM_DAEMONS}


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


@seed
def lost_policy_document(synthesized: dict[str, StackResult], root: Path) -> tuple[Path, str, str]:
    """A role policy without its document (its address)."""
    directory, plan = _plan_copy(synthesized, root)
    policy = next(
        r for r in plan["planned_values"]["root_module"]["resources"]
        if r["type"] == "aws_iam_role_policy"
    )  # fmt: skip
    del policy["values"]["policy"]
    _write_plan(directory, plan)
    return directory, TERRAFORM_PLAN, str(policy["address"])


@pytest.mark.slow
def test_a_policy_document_lost_from_the_export_fails_the_scan(scans: Scans) -> None:
    """checkov reports a check it cannot evaluate as nothing at all: without the sentinel a
    role policy with no document would pass (how nine of twelve once went unread)."""
    policy, outcome = scans.seeded["lost_policy_document"]
    with pytest.raises(ScanError, match=rf"did not evaluate CKV_AWS_290 on {policy}"):
        _found(outcome)


def test_checkov_counts_a_workloads_pod_template_as_a_pod_of_its_own() -> None:
    """The scan holds checkov to reading every resource it was given; a Deployment (the Katib
    database's) is two to checkov: itself and the Pod of its template."""
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "db", "namespace": "katib"},
        "spec": {"template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": []}}},
    }
    assert resources_checkov_reads(deployment) == 2
    unlabelled = {**deployment, "spec": {"template": {"metadata": {}, "spec": {}}}}
    assert resources_checkov_reads(unlabelled) == 1
    assert resources_checkov_reads({**deployment, "kind": "RayCluster"}) == 1
    assert resources_checkov_reads({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}) == 1


def test_the_scan_hands_checkov_each_ray_pod_template_as_a_pod(tmp_path: Path) -> None:
    """checkov reads no pod template of a RayCluster, RayJob or RayService (not among its
    workload kinds): synthesis writes each as a Pod to ``pods/``, which the scan copies, and
    counts as one resource each."""
    stack = tmp_path / "stack"
    (stack / "manifests").mkdir(parents=True)
    (stack / "pods").mkdir()
    objects = ray_objects()
    for kind, manifest in objects.items():
        assert resources_checkov_reads(manifest) == 1
        (stack / "manifests" / f"{kind}.yaml").write_text(yaml.safe_dump(manifest))
    pods = pods_of({kind: manifest for kind, manifest in objects.items()})
    for name, pod in pods.items():
        (stack / "pods" / name).write_text(yaml.safe_dump(pod))
    run = _prepared(stack, KUBERNETES, tmp_path / "scratch")
    copied = {p.name for p in (tmp_path / "scratch" / "documents").iterdir()}
    assert {f"pods-{name}" for name in pods} <= copied
    assert run.given == len(objects) + len(pods) == 3 + 7


@pytest.mark.slow
def test_the_scan_reads_the_acceptance_agents_pod_template(
    findings: dict[str, list[Finding]],
) -> None:
    """checkov holds every stack's agent DaemonSets (both vendors' in prod) to its pod rules: the
    agent's pod template is in the second opinion, its findings waived with reasons."""
    names = {acceptance_gate.agent_name(vendor) for vendor in ("nvidia", "neuron")}
    for name in names:
        on_agent = {
            f.check
            for f in findings["prod"]
            if f.resource == f"DaemonSet.{acceptance_gate.NAMESPACE}.{name}"
        }
        # CKV_K8S_8: the agent has no liveness probe, which checkov asks of every pod.
        assert "CKV_K8S_8" in on_agent, (name, sorted({f.resource for f in findings["prod"]}))
