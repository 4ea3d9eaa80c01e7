"""A second opinion: checkov's AWS and Kubernetes rules on what a stack creates, with waivers.

checkov (pinned in requirements-scan.txt, in its own virtualenv ``.venv-scan``) reads the
stack's ``manifests/`` and ``pods/`` together, so that its graph checks connect a pod with the
NetworkPolicies and ServiceAccounts beside it, and ``terraform-plan.json`` (the AWS resources
in the Terraform plan shape, :mod:`synth.terraform`) with its ``terraform_plan`` framework,
whose graph checks follow the references between resources. Every finding must be waived in
``policies/scan-waivers.yaml`` by check, resource and stack, with the reason; a waiver that
waives nothing is an error too, so the file says what is true today.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml

CHECKOV: Final = REPOSITORY_ROOT / ".venv-scan" / "bin" / "checkov"
WAIVERS: Final = REPOSITORY_ROOT / "policies" / "scan-waivers.yaml"
SETUP_HINT: Final = "VENV=.venv-scan scripts/setup requirements-scan.txt"
CHECK_ID: Final = re.compile(r"CKV2?_(K8S|AWS)_\d+")
SCANNED_FOLDERS: Final = ("manifests", "pods")
PLAN_FILE: Final = "terraform-plan.json"


class ScanError(Exception):
    """The scan could not run, or its waiver file is malformed (the message says which)."""


@dataclass(frozen=True)
class Finding:
    """One failed check on one resource."""

    check: str
    name: str
    resource: str
    """checkov's id of the resource: ``Kind.namespace.name``, or a Terraform address
    (``aws_s3_bucket.storage-datasets``)."""
    file: str


@dataclass(frozen=True)
class Waiver:
    """Findings a reviewer accepted, and why."""

    check: str
    resources: tuple[str, ...]
    """Shell patterns over resource ids (``Pod.slurm.*``)."""
    reason: str
    stacks: tuple[str, ...] = field(default=())
    """Stacks it applies to; empty: every stack."""
    except_stacks: tuple[str, ...] = field(default=())
    """Stacks it never applies to (``prod``, where a new environment should copy dev's)."""
    closed_by: tuple[str, ...] = field(default=())
    """The dependency bot's groups (``renovate.json``) whose pull requests fix the finding, for
    a waiver that only waits for digests: when one has, the waiver waives nothing and goes."""

    def waives(self, finding: Finding, stack: str) -> bool:
        """Whether this waiver covers ``finding`` in ``stack``."""
        return (
            finding.check == self.check
            and (not self.stacks or stack in self.stacks)
            and stack not in self.except_stacks
            and any(fnmatch.fnmatchcase(finding.resource, p) for p in self.resources)
        )


def load_waivers(path: Path = WAIVERS) -> list[Waiver]:
    """Read and check the waiver file: each entry a known check id, patterns and a reason.

    Raises:
        ScanError: naming the entry and what is wrong with it.
    """
    entries = load_yaml(path.read_text()) or []
    if not isinstance(entries, list):
        raise ScanError(f"{path.name}: a list of waivers")
    waivers = []
    for index, entry in enumerate(entries):
        where = f"{path.name}[{index}]"
        keys = {"check", "resources", "stacks", "exceptStacks", "reason", "closedBy"}
        if not isinstance(entry, dict) or set(entry) - keys:
            raise ScanError(
                f"{where}: keys check, resources, stacks or exceptStacks (optional), reason, "
                "closedBy (optional)"
            )
        check, reason = str(entry.get("check", "")), str(entry.get("reason", "")).strip()
        resources, stacks = entry.get("resources") or [], entry.get("stacks") or []
        excepted = entry.get("exceptStacks") or []
        closed_by = entry.get("closedBy") or []
        if not isinstance(closed_by, list) or not all(isinstance(g, str) for g in closed_by):
            raise ScanError(f"{where}.closedBy: a list of renovate.json group names")
        if not CHECK_ID.fullmatch(check):
            raise ScanError(f"{where}.check: got {check!r}; allowed: a checkov id, CKV_K8S_8")
        if not resources or not all(isinstance(r, str) for r in resources):
            raise ScanError(f"{where}.resources: a list of resource id patterns")
        if len(reason) < 20:
            raise ScanError(f"{where}.reason: why the finding is accepted, in a sentence")
        waivers.append(
            Waiver(check, tuple(resources), reason, tuple(map(str, stacks)),
                   tuple(map(str, excepted)), tuple(closed_by))
        )  # fmt: skip
    return waivers


def _results(output: str) -> list[dict[str, Any]]:
    """Checkov's JSON output: one document, or a list of them (one per framework)."""
    document = json.loads(output)
    return document if isinstance(document, list) else [document]


def _scratch_environment(scratch: Path) -> dict[str, str]:
    """A clean environment for checkov, in which nothing turns a check off.

    No ``CKV_*`` or ``BC_*`` setting (``CKV_SKIP_CHECK`` drops checks), and a home and working
    directory without a ``.checkov.yaml``.
    """
    return {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LANG": "C.UTF-8"}


POLICY_SENTINELS: Final = {
    "aws_iam_role_policy": "CKV_AWS_290",
    "aws_iam_role": "CKV_AWS_60",
    "aws_s3_bucket_policy": "CKV_AWS_70",
    "aws_kms_key": "CKV_AWS_33",
    "aws_sqs_queue_policy": "CKV_AWS_72",
}
"""A check that reads each type's policy document. checkov reports a check it could not
evaluate (no document to read) as neither passed nor failed, so an export that lost a document
would pass silently: each resource of these types must have been evaluated by its sentinel."""


def _evaluated(results: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(check, resource) of every check checkov evaluated, passed or failed."""
    return {
        (check["check_id"], check["resource"])
        for result in results
        for kind in ("passed_checks", "failed_checks")
        for check in (result.get("results") or {}).get(kind, [])
    }


POD_TEMPLATE_KINDS: Final = frozenset(
    {"Deployment", "DeploymentConfig", "DaemonSet", "Job", "ReplicaSet",
     "ReplicationController", "StatefulSet"}
)  # fmt: skip
"""Kinds whose pod template checkov reads as a Pod of its own (checkov 3.3.30
checkov/kubernetes/kubernetes_utils.py, SUPPORTED_POD_CONTAINERS_TYPES)."""


def resources_checkov_reads(document: Any) -> int:
    """How many resources checkov counts in one parsed manifest.

    The object, plus the Pod it makes of the pod template of a workload kind with a name or
    labels (checkov 3.3.30 checkov/kubernetes/graph_builder/local_graph.py,
    _extract_nested_resources_recursive; kubernetes_utils.py, is_invalid_k8_pod_definition).
    """
    if not isinstance(document, Mapping) or document.get("kind") not in POD_TEMPLATE_KINDS:
        return 1
    template = (document.get("spec") or {}).get("template")
    if not isinstance(template, Mapping) or not document.get("metadata"):
        return 1
    metadata = template.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(template.get("spec"), (dict, list)):
        return 1
    if metadata.get("name") is None and metadata.get("labels") is None:
        return 1
    return 2


KUBERNETES: Final = "kubernetes"
TERRAFORM_PLAN: Final = "terraform_plan"
FRAMEWORKS: Final = (KUBERNETES, TERRAFORM_PLAN)
"""checkov's frameworks for a stack: its manifests and pods, then its Terraform plan export."""
BATCH: Final = Path(__file__).with_name("checkov_batch.py")


@dataclass(frozen=True)
class _Run:
    """One checkov scan, prepared: what it reads and what it must have read."""

    framework: str
    target: list[str]
    """What to scan (``--file`` or ``--directory`` and the path)."""
    given: int
    """How many resources the target holds."""
    where: Path
    """The stack directory, for messages."""
    sentinels: Mapping[str, str]
    """Resource address -> a check that must have evaluated it (:data:`POLICY_SENTINELS`)."""

    def argv(self) -> list[str]:
        """The arguments of its checkov run (``--quiet`` drops the passed checks sentinels need)."""
        return [*self.target, "--framework", self.framework, "--output", "json",
                *([] if self.sentinels else ["--quiet"]), "--skip-download",
                "--no-fail-on-crash"]  # fmt: skip


def _prepared(stack_dir: Path, framework: str, scratch: Path) -> _Run:
    """Copy what ``framework`` reads of ``stack_dir`` into ``scratch`` (a new folder).

    Raises:
        ScanError: the stack holds nothing to scan, or no plan export.
    """
    scratch.mkdir()
    if framework == KUBERNETES:
        documents = scratch / "documents"
        documents.mkdir()
        given = 0
        for folder in SCANNED_FOLDERS:
            for path in sorted((stack_dir / folder).glob("*.yaml")):
                shutil.copy(path, documents / f"{folder}-{path.name}")
                try:
                    document = load_yaml(path.read_text())
                except yaml.YAMLError:
                    document = None  # checkov reports its own parsing error for it
                given += resources_checkov_reads(document)
        if not given:
            raise ScanError(f"{stack_dir} holds no manifests or pods to scan")
        return _Run(framework, ["--directory", str(documents)], given, stack_dir, {})
    if framework != TERRAFORM_PLAN:
        raise ScanError(f"framework {framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    plan = stack_dir / PLAN_FILE
    if not plan.exists():
        raise ScanError(f"{plan} is missing: synthesize the stack first")
    resources = json.loads(plan.read_text())["planned_values"]["root_module"]["resources"]
    sentinels = {
        r["address"]: POLICY_SENTINELS[r["type"]]
        for r in resources
        if r["type"] in POLICY_SENTINELS
    }
    shutil.copy(plan, scratch / PLAN_FILE)
    return _Run(
        framework, ["--file", str(scratch / PLAN_FILE)], len(resources), stack_dir, sentinels
    )


def _judged(run: _Run, answer: Mapping[str, Any]) -> list[Finding]:
    """Hold one scan to reading everything it was given, and return its findings.

    Raises:
        ScanError: no JSON answer, fewer resources read than given, a parsing error, a
            skipped check, or a sentinel check that did not evaluate its resource.
    """
    framework, where = run.framework, run.where
    try:
        results = _results(str(answer.get("stdout", "")))
    except json.JSONDecodeError:
        message = f"checkov gave no JSON (exit {answer.get('exit')}): {answer.get('error', '')}"
        raise ScanError(message[-600:]) from None
    summary = {
        key: sum(int((r.get("summary") or {}).get(key, 0)) for r in results)
        for key in ("resource_count", "skipped", "parsing_errors")
    }
    if summary["resource_count"] != run.given or summary["parsing_errors"]:
        raise ScanError(
            f"checkov {framework} read {summary['resource_count']} of {run.given} resources "
            f"({summary['parsing_errors']} parsing error(s)) in {where}"
        )
    if summary["skipped"]:
        raise ScanError(
            f"checkov skipped {summary['skipped']} check(s) in {where}: a skip annotation "
            "(checkov.io/skip) bypasses the waiver file; waive in policies/scan-waivers.yaml"
        )
    evaluated = _evaluated(results)
    unread = sorted(
        f"{check} on {address}"
        for address, check in run.sentinels.items()
        if (check, address) not in evaluated
    )
    if unread:
        raise ScanError(
            f"checkov did not evaluate {', '.join(unread)} in {where}: the export holds no "
            "policy document for it to read (synth/terraform.py)"
        )
    return sorted(
        (
            Finding(f["check_id"], f["check_name"], f["resource"], Path(f["file_path"]).name)
            for result in results
            for f in (result.get("results") or {}).get("failed_checks", [])
        ),
        key=lambda f: (f.check, f.resource),
    )


def _checked_scratch(scratch_dir: str, checkov: Path) -> Path:
    """The scratch directory, once checkov exists and no hidden path component hides files."""
    if not checkov.exists():
        raise ScanError(f"checkov is not installed at {checkov}: run {SETUP_HINT}")
    scratch = Path(scratch_dir)
    if any(part.startswith(".") for part in scratch.parts):
        raise ScanError(f"{scratch} has a hidden component, whose files checkov skips")
    return scratch


def scan(
    requests: Sequence[tuple[Path, str]], checkov: Path = CHECKOV
) -> list[list[Finding] | ScanError]:
    """Run checkov on each (stack directory, framework), all in one process.

    checkov takes about three seconds to import itself and about one to scan a stack, so a
    batch imports it once (:mod:`synth.checkov_batch`) and runs each scan in a process forked
    from that import, as a ``checkov`` command of its own would run: what one scan reads never
    reaches another.

    Each scan must read every document it is given: checkov silently skips paths with a hidden
    component, files it cannot parse, and checks an environment variable, a config file or an
    inline ``checkov.io/skip`` annotation turns off, so each of those is an error here, not a
    pass. The ``terraform_plan`` scan must also have evaluated each policy document
    (:data:`POLICY_SENTINELS`).

    Args:
        requests: ``(DIR/<stack> as synth writes it, framework)`` pairs; the framework is
            ``kubernetes`` (the stack's ``manifests/`` and ``pods/``) or ``terraform_plan``
            (its ``terraform-plan.json``).
        checkov: the checkov executable; the scans run on the interpreter beside it.

    Returns:
        Per request, in order: its findings, or the :class:`ScanError` saying why the scan
        does not count (nothing to scan, no JSON answer, fewer resources read than given, a
        parsing error, a skipped check, an unread policy document).

    Raises:
        ScanError: checkov is not installed, or the batch gave no answer at all.
    """
    with tempfile.TemporaryDirectory(prefix="scan-") as scratch_dir:
        scratch = _checked_scratch(scratch_dir, checkov)
        outcomes: list[list[Finding] | ScanError | _Run] = []
        for index, (stack_dir, framework) in enumerate(requests):
            try:
                outcomes.append(_prepared(stack_dir, framework, scratch / f"scan{index}"))
            except ScanError as exc:
                outcomes.append(exc)
        runs = [o for o in outcomes if isinstance(o, _Run)]
        if not runs:
            return [o for o in outcomes if not isinstance(o, _Run)]
        answers = scratch / "answers"
        answers.mkdir()
        done = subprocess.run(
            [str(checkov.parent / "python"), "-I", str(BATCH), str(answers)],
            input=json.dumps([run.argv() for run in runs]), capture_output=True, text=True,
            check=False, timeout=600, cwd=scratch, env=_scratch_environment(scratch),
        )  # fmt: skip
        if done.returncode:
            message = f"checkov gave no JSON (exit {done.returncode}): {done.stderr[-500:]}"
            raise ScanError(message)
        replies = [
            json.loads(path.read_text()) if path.exists() else {"error": done.stderr[-500:]}
            for path in (answers / f"{index}.json" for index in range(len(runs)))
        ]
        judged = iter(zip(runs, replies, strict=True))
        results: list[list[Finding] | ScanError] = []
        for outcome in outcomes:
            if not isinstance(outcome, _Run):
                results.append(outcome)
                continue
            run, answer = next(judged)
            try:
                results.append(_judged(run, answer))
            except ScanError as exc:
                results.append(exc)
        return results


def _only(outcomes: list[list[Finding] | ScanError]) -> list[Finding]:
    """The findings of a one-request :func:`scan`, or its error raised."""
    (outcome,) = outcomes
    if isinstance(outcome, ScanError):
        raise outcome
    return outcome


def stack_findings(stack_dirs: Sequence[Path], checkov: Path = CHECKOV) -> list[list[Finding]]:
    """Both frameworks' findings for each stack, in one :func:`scan`.

    Args:
        stack_dirs: ``DIR/<stack>`` directories as ``synth`` writes them.
        checkov: the checkov executable.

    Returns:
        Per stack, in order: its Kubernetes findings, then its AWS ones.

    Raises:
        ScanError: the first scan that does not count (see :func:`scan`).
    """
    outcomes = scan([(d, f) for d in stack_dirs for f in FRAMEWORKS], checkov)
    for outcome in outcomes:
        if isinstance(outcome, ScanError):
            raise outcome
    flat = [o for o in outcomes if not isinstance(o, ScanError)]
    width = len(FRAMEWORKS)
    return [
        [finding for found in flat[i : i + width] for finding in found]
        for i in range(0, len(flat), width)
    ]


def kubernetes_findings(stack_dir: Path, checkov: Path = CHECKOV) -> list[Finding]:
    """Run checkov's Kubernetes framework on one stack's manifests and pods (see :func:`scan`).

    Args:
        stack_dir: ``DIR/<stack>`` as ``synth`` writes it.
        checkov: the checkov executable.

    Raises:
        ScanError: checkov is not installed, did not answer in JSON, read fewer documents than
            it was given, could not parse one, or skipped a check.
    """
    return _only(scan([(stack_dir, KUBERNETES)], checkov))


def aws_findings(stack_dir: Path, checkov: Path = CHECKOV) -> list[Finding]:
    """Run checkov's ``terraform_plan`` framework on one stack's ``terraform-plan.json``.

    Held to the same rules as :func:`kubernetes_findings`: it must read every resource the
    export holds.

    Args:
        stack_dir: ``DIR/<stack>`` as ``synth`` writes it.
        checkov: the checkov executable.

    Raises:
        ScanError: as :func:`kubernetes_findings`, the stack has no plan export, or a policy
            document checkov could not read (:data:`POLICY_SENTINELS`).
    """
    return _only(scan([(stack_dir, TERRAFORM_PLAN)], checkov))


def unwaived(findings: Iterable[Finding], waivers: Sequence[Waiver], stack: str) -> list[Finding]:
    """The findings of ``stack`` that no waiver covers."""
    return [f for f in findings if not any(w.waives(f, stack) for w in waivers)]


def idle(waivers: Sequence[Waiver], findings: dict[str, list[Finding]]) -> list[Waiver]:
    """Waivers that cover no finding of the scanned stacks (stale, or misspelt).

    Args:
        waivers: the waiver file.
        findings: stack -> its findings, for every stack scanned.
    """
    return [
        w
        for w in waivers
        if not any(w.waives(f, stack) for stack, found in findings.items() for f in found)
    ]


def render(stack: str, findings: list[Finding], waivers: Sequence[Waiver]) -> str:
    """One line per unwaived finding, and the totals."""
    open_findings = unwaived(findings, waivers, stack)
    lines = [
        f"{stack}: checkov (AWS and Kubernetes): {len(findings)} finding(s), "
        f"{len(findings) - len(open_findings)} waived, {len(open_findings)} not waived"
    ]
    lines += [
        f"  {f.check} {f.resource} ({f.file}): {f.name}"
        for f in open_findings
    ]  # fmt: skip
    if open_findings:
        lines.append(f"  (fix them, or waive each in {WAIVERS.relative_to(REPOSITORY_ROOT)} "
                     "with its check, resources, stacks and reason)")  # fmt: skip
    return "\n".join(lines)
