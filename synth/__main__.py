"""Offline synthesis: ``python -m synth <stack>... | --all [--long] [--out DIR]``.

``python -m synth reference [--write [DIR]]`` prints the configuration reference, or rewrites the
generated part of every reference page of the documentation (``docs/reference/``).
``python -m synth jobs <stack> [--json]`` answers, for every team x runtime and Slurm partition,
whether a job runs and on how many nodes (the jobs model).
``python -m synth diff <stack> --base DIR`` synthesizes the stack and shows what changed against
an earlier synthesis in ``DIR`` (an output root or one stack's directory).
``python -m synth scan <stack>... | --all`` runs checkov over what the stacks run; every finding
must be waived. ``--help`` lists every sub-command (``synth.COMMANDS``).

Runs the real program under Pulumi's mock engine with each stack file's config, writes what the
stack would create and runs the policy pack over it (docs/concepts/offline-synthesis.md and
policy-gates.md). ``python -m synth check <resources.json> --stack NAME`` runs only the pack.
Exit status: 0 on success, 1 on a mandatory policy violation or a promised job path that cannot
run, 2 on an invalid stack, policy config or resources file (one line per problem, no traceback)
or an unknown option (argparse's usage). ``diff`` exits 0 when nothing changed, 1 when something
did or when a cluster, file system, association, bucket, key or volume would be replaced (unless
``--allow-replace``), a protected resource would be deleted or replaced (``pulumi up`` refuses
it, so ``--allow-replace`` does not), an association would collide with one still there, a
reservation would be left behind, or an EKS cluster would get a subnet of a new zone (EKS
refuses it) (``synth.diff.GATE_REFUSALS``), and 2 for a bad stack or a base
directory that holds no synthesis; with ``--gate`` (CI: a pull request is meant to change things)
only a refusal exits 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

from components.config_reference import render_reference
from policies.offline import PolicyConfigError, load_policy_config, mandatory
from synth import COMMANDS
from synth import scan as scanning
from synth.baseline import main as baseline_main
from synth.diff import (
    NoSynthesis,
    diff_syntheses,
    gate_refusals,
    load_synthesis,
    render,
    synthesis_directory,
)
from synth.engine import ResourceRecord
from synth.jobs import report as jobs_report
from synth.jobs.model import all_runnable, evaluate_jobs
from synth.jobs.view import StackView
from synth.reference_pages import REFERENCE_DIR, parts, write_pages
from synth.replacements import AUDIT_PAGE, with_audit
from synth.run import (
    InvalidStack,
    StackResult,
    check_policies,
    policy_summary,
    synthesize_stack,
)
from synth.stackfile import REPOSITORY_ROOT, stack_names

DEFAULT_OUT = Path("build/synth")


def _command_parser(command: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``scripts/synth <command>``: no abbreviated options.

    Args:
        command: the sub-command (``jobs``).
        description: what it does and its exit statuses, for ``--help``.
    """
    return argparse.ArgumentParser(
        allow_abbrev=False, prog=f"scripts/synth {command}", description=description
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--project-dir``, shared by the commands that synthesize.

    Args:
        parser: the command's parser, which gets both options.

    """
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=REPOSITORY_ROOT,
        help="directory with Pulumi.yaml and its stack files (default: this repository)",
    )


def synthesize_parser() -> argparse.ArgumentParser:
    """The default command: ``<stack>... | --all [--long] [--out DIR] [--project-dir DIR]``."""
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="scripts/synth",
        description="Synthesize stacks offline: resources.json, manifests/ and helm/ per stack.",
        epilog="Sub-commands (each with --help): " + "; ".join(COMMANDS.values()) + ".",
    )
    parser.add_argument("stacks", nargs="*", help="stack names (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--all", action="store_true", help="synthesize every stack")
    _add_long_option(parser)
    _add_output_options(parser)
    return parser


def _add_long_option(parser: argparse.ArgumentParser) -> None:
    """``--long``: the summary also counts resources by type."""
    parser.add_argument(
        "--long", action="store_true", help="also list resource counts by type in the summary"
    )


def reference_parser() -> argparse.ArgumentParser:
    """``reference [--write [DIR]]``."""
    parser = _command_parser(
        "reference",
        "Print the configuration reference (Markdown), or rewrite the generated part of every "
        f"reference page in {REFERENCE_DIR}/ (configuration, policies, this CLI, the bill of "
        "materials) between its markers.",
    )
    parser.add_argument(
        "--write",
        nargs="?",
        type=Path,
        const=REPOSITORY_ROOT / REFERENCE_DIR,
        default=None,
        metavar="DIR",
        help=f"rewrite the pages in DIR (default {REFERENCE_DIR}) instead of printing",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status (argparse exits 2 on a bad option).

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    """
    # The program under the mock engine allocates a future per input of every resource: under
    # the default thresholds (700, 10, 10) the cyclic collector walks the loaded providers again
    # and again (measured: 8.0 against 7.0 CPU seconds for `synth dev`; tests/__init__.py does
    # the same for the suite).
    gc.set_threshold(10_000, 20, 50)
    args = list(sys.argv[1:] if argv is None else argv)
    command, rest = (args[0], args[1:]) if args[:1] and args[0] in COMMANDS else ("", args)
    if command == "reference":
        return reference(rest)
    if command == "check":
        return check(rest)
    if command == "jobs":
        return jobs(rest)
    if command == "diff":
        return diff(rest)
    if command == "scan":
        return scan(rest)
    if command == "baseline":
        return baseline_main(rest)
    return synthesize_all(rest)


def reference(argv: list[str]) -> int:
    """``reference [--write [DIR]]``: print the configuration reference, or rewrite the pages.

    Args:
        argv: the arguments after ``reference``.

    """
    options = reference_parser().parse_args(argv)
    if options.write is None:
        print(render_reference(), end="")
        return 0
    directory: Path = options.write
    try:
        written = write_pages(directory, parts(main))
    except (OSError, ValueError) as exc:
        print(f"{directory}: cannot rewrite the reference pages ({exc})", file=sys.stderr)
        return 2
    audit = REPOSITORY_ROOT / AUDIT_PAGE
    if directory.resolve() == (REPOSITORY_ROOT / REFERENCE_DIR).resolve():
        # the forecast's audit of replacement rules lives beside the concept it belongs to
        page = audit.read_text()
        if with_audit(page) != page:
            audit.write_text(with_audit(page))
            written.append(audit)
    for path in written:
        print(f"rewrote {path}")
    if not written:
        print(f"every page in {directory} is current")
    return 0


def synthesize_all(argv: list[str]) -> int:
    """The default command: synthesize each named stack (or ``--all``) and print its summary.

    Args:
        argv: stack names and options.

    """
    parser = synthesize_parser()
    options = parser.parse_args(argv)
    if options.all and options.stacks:
        parser.error("name stacks or pass --all, not both")
    stacks: list[str] = stack_names(options.project_dir) if options.all else options.stacks
    if not stacks:
        parser.error("name a stack or pass --all")
    status = 0
    for stack in stacks:
        try:
            result = synthesize_stack(stack, options.out, options.project_dir)
        except InvalidStack as exc:
            _print_invalid(stack, exc)
            status = 2
            continue
        _print_notes(result)
        print(result.summary(long=options.long))
        if result.blocked and status == 0:
            status = 1
    return status


def _synthesized(stack: str, options: argparse.Namespace) -> StackResult | None:
    """Synthesize ``stack`` into ``options.out``; None (its problems printed) when invalid."""
    try:
        result = synthesize_stack(stack, options.out, options.project_dir)
    except InvalidStack as exc:
        _print_invalid(stack, exc)
        return None
    _print_notes(result)
    return result


def _print_notes(result: StackResult) -> None:
    """One ``<stack>: <note>`` line on stderr per thing the synthesis left out."""
    for note in result.written.notes:
        print(f"{result.stack}: {note}", file=sys.stderr)


def _print_invalid(stack: str, exc: InvalidStack) -> None:
    """One ``<stack>: <problem>`` line per problem, on stderr."""
    for line in exc.lines:
        print(f"{stack}: {line}", file=sys.stderr)


def diff_parser() -> argparse.ArgumentParser:
    """``diff <stack> --base DIR [--out DIR] [--project-dir DIR]``."""
    parser = _command_parser(
        "diff",
        "Synthesize the stack (to --out) and show what changed against an earlier "
        "synthesis: resources added, removed and changed (with the input keys that changed), "
        "and changed Kubernetes manifests and Helm values, each change that replaces its "
        "resource marked with the provider rule behind it. Exit 0 when nothing changed, 1 when "
        "something did or on a refusal: a cluster, file system, association, bucket, key or "
        "volume replaced (unless --allow-replace), a protected resource deleted or replaced "
        "(which pulumi up refuses, --allow-replace or not), an association that AWS refuses to "
        "create while the old one exists, or a capacity reservation left behind by a reserved "
        "pool's new placement group; 2 for a bad stack or a base directory without a synthesis.",
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument(
        "--base",
        type=Path,
        required=True,
        metavar="DIR",
        help="an earlier synthesis: an output root (build/synth) or one stack's directory",
    )
    parser.add_argument(
        "--allow-replace",
        action="store_true",
        help="accept replacing clusters, file systems, associations, buckets, keys and volumes",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help="exit 1 only for a refusal, each listed under its heading: replacements refused "
        "(without --allow-replace), protected resources refused (deleted or replaced), creates "
        "AWS refuses (an association colliding with one still there), reservations left behind "
        "(a reserved pool's placement group moved), cluster zones refused (an EKS cluster given a "
        "subnet of a zone it was not created in); 0 for other changes (for CI)",
    )
    _add_output_options(parser)
    return parser


def diff(argv: list[str]) -> int:
    """``diff <stack> --base DIR``: synthesize now and print what changed against ``DIR``.

    The base is read before synthesizing, so ``--base`` may be the ``--out`` directory itself
    (compare with the last run, then replace it).

    Args:
        argv: the arguments after ``diff``.

    """
    options = diff_parser().parse_args(argv)
    try:
        base_dir = synthesis_directory(options.base, options.stack)
        base = load_synthesis(base_dir)
    except NoSynthesis as exc:
        print(str(exc), file=sys.stderr)
        return 2
    result = _synthesized(options.stack, options)
    if result is None:
        return 2
    changes = diff_syntheses(base, load_synthesis(result.written.directory))
    print(render(options.stack, base_dir, changes, allow_replace=options.allow_replace))
    if gate_refusals(changes, allow_replace=options.allow_replace):
        return 1
    return 0 if changes.empty or options.gate else 1


def jobs(argv: list[str]) -> int:
    """``jobs <stack> [--json]``: synthesize the stack and print what its jobs can get.

    Args:
        argv: the arguments after ``jobs``.

    """
    parser = _command_parser(
        "jobs",
        "For each team x training runtime, Katib trial and Ray pool, and each Slurm "
        "partition: can a job run here, on how many nodes, and if not, why (modelled on the "
        "controllers' code). Exit 0 when every path the stack promises is runnable, 1 "
        "otherwise, 2 for a bad stack.",
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument(
        "--hours",
        type=int,
        metavar="N",
        help="check a Slurm job of N hours (sbatch --time) against each partition's MaxTime "
        "and each team's MaxWall: a partition that refuses it is not runnable",
    )
    _add_output_options(parser)
    options = parser.parse_args(argv)
    if options.hours is not None and options.hours < 1:
        parser.error(f"--hours: got {options.hours}; allowed: a whole number of hours, 1 or more")
    result = _synthesized(options.stack, options)
    if result is None:
        return 2
    reports = result.jobs
    if options.hours is not None:
        reports = evaluate_jobs(
            StackView.from_records(result.records), job_hours=options.hours, config=result.config
        )
    if options.json:
        print(jobs_report.as_json(reports), end="")
    else:
        print(jobs_report.table(options.stack, reports))
    return 0 if all_runnable(reports) else 1


def scan(argv: list[str]) -> int:
    """``scan <stack>... | --all``: synthesize, then run checkov on what the stacks run.

    Args:
        argv: the arguments after ``scan``.

    """
    parser = _command_parser(
        "scan",
        "Synthesize each stack and run checkov's Kubernetes rules on its manifests "
        "and pods and its AWS rules on terraform-plan.json; every finding must be "
        "waived in policies/scan-waivers.yaml. Exit 0 when "
        "none is left and no waiver is idle, 1 otherwise, 2 for a bad stack or no checkov.",
    )
    parser.add_argument("stacks", nargs="*", help="stack names (default: dev)")
    parser.add_argument("--all", action="store_true", help="every stack in stacks/")
    _add_output_options(parser)
    options = parser.parse_args(argv)
    stacks = stack_names(options.project_dir) if options.all else (options.stacks or ["dev"])
    try:
        waivers = scanning.load_waivers()
        directories = []
        for stack in stacks:
            result = _synthesized(stack, options)
            if result is None:
                return 2
            directories.append(result.written.directory)
        # One checkov batch for every stack: its import costs more than a stack's scan.
        found = dict(zip(stacks, scanning.stack_findings(directories), strict=True))
        for stack in stacks:
            print(scanning.render(stack, found[stack], waivers))
    except scanning.ScanError as exc:
        print(f"scan: {exc}", file=sys.stderr)
        return 2
    status = 0 if not any(scanning.unwaived(f, waivers, s) for s, f in found.items()) else 1
    if options.all:
        for waiver in scanning.idle(waivers, found):
            closed = (
                f" (closed by the {' / '.join(waiver.closed_by)} update)"
                if waiver.closed_by
                else ""
            )
            print(
                f"idle waiver: {waiver.check} {list(waiver.resources)} waives nothing{closed}; "
                "drop it"
            )
            status = 1
    return status


def check(argv: list[str]) -> int:
    """``check <resources.json> --stack NAME``: run the pack over a (possibly edited) plan.

    Args:
        argv: the arguments after ``check``.

    """
    parser = _command_parser(
        "check",
        "Run the policy pack over a resources.json with a stack's policy config; "
        "writes policy-report.json beside it.",
    )
    parser.add_argument("resources", type=Path, help="a resources.json written by synthesis")
    parser.add_argument("--stack", required=True, help="whose policies/config/<stack>.json")
    options = parser.parse_args(argv)
    try:
        entries = json.loads(options.resources.read_text())
        records = [ResourceRecord.from_json(entry) for entry in entries]
        findings = check_policies(
            records,
            load_policy_config(options.stack),
            options.resources.with_name("policy-report.json"),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"{options.resources}: cannot read resources ({exc})", file=sys.stderr)
        return 2
    except (InvalidStack, PolicyConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"{options.stack}: {len(records)} resources checked")
    print(policy_summary(findings))
    return 1 if mandatory(findings) else 0


if __name__ == "__main__":
    sys.exit(main())
