"""One stack, end to end: load, validate, synthesize, write. Shared by the CLI and the tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pulumi.errors import RunError

from components.config import ConfigError, PlatformConfig
from components.config.slurm import BIND_PASSWORD_KEY, bind_password_problems
from components.platform import INVALID_CONFIG, deploy, validated_config
from policies.offline import (
    Finding,
    PolicyConfigError,
    evaluate,
    load_policy_config,
    mandatory,
    write_report,
)
from synth import examples as documentation_examples
from synth.engine import ResourceRecord, synthesize
from synth.jobs import report as jobs_report
from synth.jobs.model import PathReport, all_runnable, evaluate_jobs
from synth.jobs.view import StackView
from synth.output import WrittenStack, resource_label, summary, write_stack
from synth.stackfile import REPOSITORY_ROOT, StackFile, StackFileError, load_stack


class InvalidStack(Exception):
    """A stack that cannot be synthesized because of its files; ``lines`` are for the user."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class StackResult:
    """Everything one synthesis produced."""

    stack: str
    config: PlatformConfig
    records: list[ResourceRecord]
    written: WrittenStack
    findings: list[Finding]
    jobs: list[PathReport]
    """The jobs model's answer for every team x runtime and Slurm partition."""
    examples: list[documentation_examples.ExampleValue] = field(default_factory=list)
    """Values the stack file still has from the documentation (a warning, never a failure)."""

    def summary(self, *, long: bool = False) -> str:
        """What the CLI prints: totals and resources by component, policy findings, jobs.

        Args:
            long: also list resource counts by type (``--long``).

        """
        parts = [
            summary(self.stack, self.written, self.records, long=long),
            policy_summary(self.findings),
            jobs_report.summary(self.jobs),
            documentation_examples.summary(self.examples, long=long),
        ]
        return "\n".join(part for part in parts if part)

    @property
    def blocked(self) -> bool:
        """True when the stack must not be deployed.

        A mandatory policy failed, or a job path the stack promises cannot run.
        """
        return bool(mandatory(self.findings)) or not all_runnable(self.jobs)


def validated(stack_file: StackFile) -> PlatformConfig:
    """The stack's validated platform config, or :class:`InvalidStack` with one line a problem.

    Every check the program's ``load_config`` makes is made here, the directory's bind
    password too (from the stack file's keys), so a config the program would refuse is
    reported as problem lines before the run, never as the run's error with a traceback.
    """
    try:
        config = validated_config(
            stack_file.platform,
            stack=stack_file.stack,
            aws_region=stack_file.config.get("aws:region"),
        )
        key = f"{stack_file.project}:{BIND_PASSWORD_KEY}"
        problems = bind_password_problems(
            config, present=key in stack_file.config, secret=key in stack_file.secret_keys
        )
        if problems:
            raise ConfigError(problems)
    except ConfigError as exc:
        raise InvalidStack([str(problem) for problem in exc.problems]) from None
    return config


def synthesize_stack(stack: str, out: Path, root: Path = REPOSITORY_ROOT) -> StackResult:
    """Validate the stack file, run the program under mocks and write ``out/<stack>/``.

    Args:
        stack: stack name (``Pulumi.<stack>.yaml`` in the project's stack config directory).
        out: output root; this stack's files go to ``out/<stack>/``.
        root: directory holding ``Pulumi.yaml`` (default: this repository).

    Raises:
        InvalidStack: the stack or project file is missing or invalid; nothing was registered.

    """
    try:
        stack_file = load_stack(stack, root)
    except StackFileError as exc:
        raise InvalidStack([str(exc)]) from None
    config = validated(stack_file)
    try:
        policy_config = load_policy_config(stack)
    except PolicyConfigError as exc:
        raise InvalidStack([str(exc)]) from None
    try:
        run = synthesize(stack_file, deploy, region=config.region, account_id=config.account_id)
    except RunError as exc:
        # A check only the program makes: its problem lines, as validated()'s are printed.
        if not str(exc).startswith(INVALID_CONFIG):
            raise
        raise InvalidStack(str(exc).removeprefix(INVALID_CONFIG).splitlines()) from None
    written = write_stack(run.records, out / stack)
    findings = check_policies(run.records, policy_config, out / stack / "policy-report.json")
    jobs = evaluate_jobs(StackView.from_records(run.records), config=config)
    jobs_report.write(jobs, out / stack / "jobs.json")
    examples = documentation_examples.example_values(stack_file.platform)
    return StackResult(stack, config, run.records, written, findings, jobs, examples)


def check_policies(
    records: list[ResourceRecord], policy_config: dict[str, object], report: Path
) -> list[Finding]:
    """Run the policy pack over ``records`` and write the report.

    Raises:
        InvalidStack: the policy config does not fit the pack.

    """
    try:
        findings = evaluate(records, dict(policy_config))
    except PolicyConfigError as exc:
        raise InvalidStack([f"policy config: {exc}"]) from None
    write_report(findings, report)
    return findings


def policy_summary(findings: list[Finding]) -> str:
    """One line of totals, then every finding, mandatory ones first.

    Each finding is ``LEVEL policy: resource: message``, the resource as ``type name``.

    Args:
        findings: what the policy pack reported.

    """
    blocking = mandatory(findings)
    lines = [
        f"  policies: {len(blocking)} mandatory violation(s), "
        f"{len(findings) - len(blocking)} advisory finding(s)"
    ]
    ordered = sorted(findings, key=lambda f: (f not in blocking, f.policy, f.urn, f.message))
    lines += [
        f"    {f.enforcementLevel.upper()} {f.policy}: {resource_label(f.urn)}: {f.message}"
        for f in ordered
    ]
    return "\n".join(lines)
