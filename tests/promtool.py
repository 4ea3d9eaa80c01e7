"""promtool for the rule tests: where it is, and unit-test files generated from Python.

``promtool check rules`` lints rule files; ``promtool test rules`` evaluates them over synthetic
series and compares what fires or is recorded with what a test expects (Prometheus 2.42
docs/configuration/unit_testing_rules.md). The binary comes from scripts/promtool-setup (Debian's
``prometheus`` package, unpacked into .cache/promtool), or from ``PROMTOOL``. Where neither gives
one the tests fail, saying how to install it: a rule nobody evaluated is not a tested rule.
"""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from synth.stackfile import REPOSITORY_ROOT

SETUP: Final = REPOSITORY_ROOT / "scripts" / "promtool-setup"
INSTALLED: Final = REPOSITORY_ROOT / ".cache" / "promtool" / "promtool"
ENV: Final = "PROMTOOL"
INTERVAL: Final = "30s"
"""The synthetic series' step: the platform's scrape interval."""
EVALUATION_INTERVAL: Final = "1m"
"""How often the rules are evaluated over them: every other step, half the work of every step
(promtool evaluates every group from the start to each test's end)."""


@functools.cache
def promtool() -> Path:
    """The promtool binary: ``PROMTOOL``, or the one scripts/promtool-setup installs (it runs
    here when needed, and waits for an install already under way)."""
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    result = subprocess.run([str(SETUP)], capture_output=True, text=True, check=False)
    if result.returncode != 0 or not INSTALLED.is_file():
        pytest.fail(
            "promtool is needed to test the alert and recording rules and could not be "
            f"installed:\n{result.stderr}\nRun scripts/promtool-setup (it unpacks Debian's "
            f"prometheus package into .cache/promtool), or set {ENV} to a promtool binary."
        )
    return INSTALLED


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool with ``args``; the caller asserts on the result."""
    return subprocess.run([str(promtool()), *args], capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class Fired:
    """One alert a test expects: its labels (beyond ``alertname`` and the rule's own) and the
    value its annotations are rendered with."""

    labels: dict[str, str]
    value: float
    annotations: dict[str, str] = field(default_factory=dict)
    """Annotations as rendered, for those whose templates query Prometheus (the rest are
    rendered here from the rule's templates)."""


@dataclass
class Case:
    """One evaluation of the rules over synthetic series.

    ``series`` maps a series (``name{label="value"}``) to its values in promtool's expanding
    notation (``0+1x10``: ten steps from 0 up by 1; one step is :data:`INTERVAL`). ``alerts``
    maps an alert's name to those expected to fire at ``at`` (an empty list: none may fire);
    ``records`` maps an expression to the samples it must give (labels and value).
    """

    name: str
    at: str
    series: dict[str, str]
    alerts: dict[str, list[Fired]] = field(default_factory=dict)
    records: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)


_TEMPLATE: Final = re.compile(r"\{\{\s*(\$labels\.(\w+)|\$value(\s*\|\s*(\w+))?)\s*\}\}")


def humanize_duration(seconds: float) -> str:
    """Prometheus' ``humanizeDuration`` (prometheus v2.42.0 template/template.go)."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    v = abs(seconds)
    if v >= 1:
        whole = int(v)
        days, hours = whole // 86400, whole // 3600 % 24
        minutes, secs = whole // 60 % 60, whole % 60
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {secs}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {secs}s"
        if minutes:
            return f"{sign}{minutes}m {secs}s"
        return f"{sign}{v:.4g}s"
    raise NotImplementedError("sub-second durations are not rendered here")


def render(template: str, labels: dict[str, str], value: float) -> str:
    """An annotation as Prometheus renders it, for the subset of templates the rules use."""

    def one(match: re.Match[str]) -> str:
        if match.group(2):
            return labels.get(match.group(2), "")
        function = match.group(4)
        if function is None:
            return f"{value:g}" if not math.isinf(value) else "+Inf"
        if function == "humanizeDuration":
            return humanize_duration(value)
        raise NotImplementedError(f"template function {function}")

    return _TEMPLATE.sub(one, template)


def unit_tests(rule_file: str | list[str], rules: list[dict[str, Any]], cases: list[Case]) -> str:
    """A promtool unit-test file for ``cases`` over the rule file (path relative to it).

    Args:
        rule_file: the rules' file name, beside the test file (or several).
        rules: every rule of the file (the alerts' static labels and annotation templates).
        cases: the evaluations.
    """
    alerts = {rule["alert"]: rule for rule in rules if "alert" in rule}
    tests = []
    for case in cases:
        alert_tests = []
        for name, fired in case.alerts.items():
            rule = alerts[name]
            expected = []
            for one in fired:
                labels = {**one.labels, **rule.get("labels", {})}
                expected.append(
                    {
                        "exp_labels": labels,
                        "exp_annotations": {
                            key: one.annotations.get(key) or render(text, labels, one.value)
                            for key, text in rule["annotations"].items()
                        },
                    }
                )
            alert_tests.append({"eval_time": case.at, "alertname": name, "exp_alerts": expected})
        expr_tests = [
            {
                "expr": expr,
                "eval_time": case.at,
                "exp_samples": [
                    {"labels": _series(labels), "value": value} for labels, value in samples
                ],
            }
            for expr, samples in case.records.items()
        ]
        test: dict[str, Any] = {
            "name": case.name,
            "interval": INTERVAL,
            "input_series": [
                {"series": series, "values": values} for series, values in case.series.items()
            ],
        }
        if alert_tests:
            test["alert_rule_test"] = alert_tests
        if expr_tests:
            test["promql_expr_test"] = expr_tests
        tests.append(test)
    document = {
        "rule_files": [rule_file] if isinstance(rule_file, str) else rule_file,
        "evaluation_interval": EVALUATION_INTERVAL,
        "tests": tests,
    }
    return yaml.safe_dump(document, sort_keys=False, width=1000)


NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A metric (or recording rule) name, and every other word of an expression: a superset."""


def needed_groups(groups: list[dict[str, Any]], case: Case) -> list[int]:
    """The groups (indices) a case's evaluation needs: those of the alerts it expects and of
    the recording rules its expressions read, with the groups of every recording rule those
    groups' rules read, transitively. Nothing else can change what the case asserts: an alert
    test names its alert, and no rule here reads ``ALERTS`` (the test checks it)."""
    owner = {
        rule.get("alert") or rule["record"]: index
        for index, group in enumerate(groups)
        for rule in group["rules"]
    }
    records = {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}
    need = {owner[name] for name in case.alerts}
    need |= {owner[w] for expr in case.records for w in NAME.findall(expr) if w in records}
    while True:
        words = {w for i in need for rule in groups[i]["rules"] for w in NAME.findall(rule["expr"])}
        more = {owner[w] for w in words if w in records} - need
        if not more:
            return sorted(need)
        need |= more


def unit_test_files(directory: Path, groups: list[dict[str, Any]], cases: list[Case]) -> list[Path]:
    """promtool unit-test files for ``cases``, each evaluating only the groups it needs.

    promtool evaluates every rule of a test file's ``rule_files`` at every step of each test,
    whichever rules the test reads; over all seven groups that was most of the alert rules'
    test (8.7 of its 11 CPU-seconds). Each group goes to its own ``group-<n>.yaml`` and the
    cases that need the same groups (:func:`needed_groups`) share a test file over just those:
    the same assertions in 3.5 CPU-seconds, all files in one ``promtool test rules``.

    Args:
        directory: where the files are written (an empty folder).
        groups: every rule group, as ``rules.rule_groups`` makes them.
        cases: the evaluations; each lands in exactly one file.
    """
    every_rule = [rule for group in groups for rule in group["rules"]]
    for index, group in enumerate(groups):
        rules_yaml = yaml.safe_dump({"groups": [group]}, sort_keys=False, width=1000)
        (directory / f"group-{index}.yaml").write_text(rules_yaml)
    by_groups: dict[tuple[int, ...], list[Case]] = {}
    for case in cases:
        by_groups.setdefault(tuple(needed_groups(groups, case)), []).append(case)
    files = []
    for number, (needed, shared) in enumerate(by_groups.items()):
        path = directory / f"rules_test-{number}.yaml"
        path.write_text(unit_tests([f"group-{i}.yaml" for i in needed], every_rule, shared))
        files.append(path)
    return files


def _series(labels: dict[str, str]) -> str:
    """A series in promtool's notation: ``name{a="b"}``, or ``{a="b"}`` without a name."""
    name = labels.get("__name__", "")
    rest = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}"
