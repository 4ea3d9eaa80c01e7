"""Offline synthesis: ``python -m synth <stack>... | --all [--out DIR]``.

``python -m synth reference [--write [README]]`` prints or writes the configuration reference.
``python -m synth jobs <stack> [--json]`` answers, for every team x runtime and Slurm partition,
whether a job runs and on how many nodes (the jobs model).

Runs the real program under Pulumi's mock engine with each stack file's config, writes what the
stack would create and runs the policy pack over it (see README, "Offline synthesis" and
"Policy gates"). ``python -m synth check <resources.json> --stack NAME`` runs only the pack.
Exit status: 0 on success, 1 on a mandatory policy violation or a promised job path that cannot
run, 2 on an invalid stack, policy config or resources file (one line per problem, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.config_reference import render_reference, update_readme
from policies.offline import PolicyConfigError, load_policy_config, mandatory
from synth.engine import ResourceRecord
from synth.jobs import report as jobs_report
from synth.jobs.model import all_runnable
from synth.run import InvalidStack, check_policies, policy_summary, synthesize_stack
from synth.stackfile import REPOSITORY_ROOT, stack_names

DEFAULT_OUT = Path("build/synth")


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--project-dir``, shared by the commands that synthesize."""
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=REPOSITORY_ROOT,
        help="directory with Pulumi.yaml and its stack files (default: this repository)",
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["reference"]:
        if args[1:2] == ["--write"]:
            readme = Path(args[2] if len(args) > 2 else "README.md")
            readme.write_text(update_readme(readme.read_text()))
            print(f"configuration reference written to {readme}")
        else:
            print(render_reference(), end="")
        return 0
    if args[:1] == ["check"]:
        return check(args[1:])
    if args[:1] == ["jobs"]:
        return jobs(args[1:])
    parser = argparse.ArgumentParser(
        prog="python -m synth",
        description="Synthesize stacks offline: resources.json, manifests/ and helm/ per stack.",
        epilog="'python -m synth reference [--write [README]]' prints (or writes into the "
        "README) the configuration reference.",
    )
    parser.add_argument("stacks", nargs="*", help="stack names (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--all", action="store_true", help="synthesize every stack")
    _add_output_options(parser)
    options = parser.parse_args(args)
    stacks: list[str] = stack_names(options.project_dir) if options.all else options.stacks
    if not stacks:
        parser.error("name a stack or pass --all")
    status = 0
    for stack in stacks:
        try:
            result = synthesize_stack(stack, options.out, options.project_dir)
        except InvalidStack as exc:
            for line in exc.lines:
                print(f"{stack}: {line}", file=sys.stderr)
            status = 2
            continue
        print(result.summary)
        if result.blocked and status == 0:
            status = 1
    return status


def jobs(argv: list[str]) -> int:
    """``jobs <stack> [--json]``: synthesize the stack and print what its jobs can get."""
    parser = argparse.ArgumentParser(
        prog="python -m synth jobs",
        description="For each team x training runtime and each Slurm partition: can a job run "
        "here, on how many nodes, and if not, why (modelled on the controllers' code). Exit 0 "
        "when every path the stack promises is runnable, 1 otherwise, 2 for a bad stack.",
    )
    parser.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    _add_output_options(parser)
    options = parser.parse_args(argv)
    try:
        result = synthesize_stack(options.stack, options.out, options.project_dir)
    except InvalidStack as exc:
        for line in exc.lines:
            print(f"{options.stack}: {line}", file=sys.stderr)
        return 2
    if options.json:
        print(jobs_report.as_json(result.jobs), end="")
    else:
        print(jobs_report.table(options.stack, result.jobs))
    return 0 if all_runnable(result.jobs) else 1


def check(argv: list[str]) -> int:
    """``check <resources.json> --stack NAME``: run the pack over a (possibly edited) plan."""
    parser = argparse.ArgumentParser(
        prog="python -m synth check",
        description="Run the policy pack over a resources.json with a stack's policy config; "
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
