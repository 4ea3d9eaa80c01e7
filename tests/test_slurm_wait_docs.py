"""The docs' figure for a job on an empty pool matches the platform's own intervals (issue 41,
item 7).

docs/concepts/slurm.md "How long a job waits on an empty pool" lists each stage from `sbatch`
to the job running, with its bound and its source. The stages the platform sets (the demand
query's pending window, Prometheus's scrape interval, KEDA's polling interval) must state the
values components/slurm/autoscaling.py has, and the summary's arithmetic must follow from them,
so a change of any of them fails here until the page is rewritten.
"""

from __future__ import annotations

import re
from typing import Final

from components import metric_names as observability_names
from components.slurm import autoscaling
from tests import docs_pages

PAGE: Final = "concepts/slurm.md"
SECTION: Final = "## How long a job waits on an empty pool"
ANCHOR: Final = "#how-long-a-job-waits-on-an-empty-pool"

HPA_SYNC_SECONDS: Final = 15
"""kube-controller-manager's ``--horizontal-pod-autoscaler-sync-period`` default
(kubernetes/kubernetes pkg/controller/podautoscaler/config/v1alpha1/defaults.go)."""
KARPENTER_BATCH_IDLE_SECONDS: Final = 1
KARPENTER_BATCH_MAX_SECONDS: Final = 10
"""Karpenter's ``BATCH_IDLE_DURATION`` and ``BATCH_MAX_DURATION`` defaults
(kubernetes-sigs/karpenter v1.14.1 pkg/operator/options/options.go)."""

SOURCE: Final = re.compile(
    r"[\w.-]+/[\w./-]+\.(?:py|go|c)\b"  # a file: this repository's or an upstream one's
    r"|https://docs\.aws\.amazon\.com/\S+"  # AWS documentation
)
"""What a row's source cell must hold: a file to read, or an AWS documentation page."""


def seconds(duration: str) -> int:
    """Seconds of a Prometheus duration such as ``30s`` or ``1m`` (one unit, as the code has).

    Args:
        duration: the duration as components/slurm/autoscaling.py writes it.
    """
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, f"not a one-unit duration: {duration!r}"
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def spoken(total: int) -> str:
    """How the page writes a duration: ``1 minute``, ``2 minutes``, ``30 s``."""
    if total % 60:
        return f"{total} s"
    minutes = total // 60
    return f"{minutes} minute" + ("s" if minutes > 1 else "")


def table(section: str) -> dict[int, list[str]]:
    """The stage table's rows by number: the cells (stage, bound, source) of each.

    Args:
        section: the section's Markdown.
    """
    rows: dict[int, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            rows[int(cells[0])] = cells[1:]
    return rows


def wait_problems(section: str, *, window: str, scrape: str, polling: int) -> list[str]:
    """What the section says that the platform's intervals contradict.

    Args:
        section: the section's Markdown.
        window: the demand query's pending window (``PENDING_WINDOW``).
        scrape: Prometheus's scrape interval (``SCRAPE_INTERVAL``).
        polling: KEDA's polling interval in seconds (``POLLING_INTERVAL_SECONDS``).
    """
    rows = table(section)
    w, s = seconds(window), seconds(scrape)
    expected = {
        1: (
            "PENDING_WINDOW",
            f"over the last {spoken(w)}",
            f"{w - s} s after the first scrape that sees it (the {spoken(w)} window less one"
            f" {s} s scrape)",
        ),
        2: ("SCRAPE_INTERVAL", "", f"at most {s} s"),
        3: ("POLLING_INTERVAL_SECONDS", "", f"at most {polling} s"),
    }
    problems = []
    for number, (constant, stage, bound) in expected.items():
        if number not in rows:
            problems.append(f"row {number} is missing")
            continue
        stage_cell, bound_cell, source_cell = rows[number]
        if constant not in source_cell:
            problems.append(f"row {number} does not cite {constant}: {source_cell!r}")
        if stage not in stage_cell:
            problems.append(f"row {number} does not say {stage!r}: {stage_cell!r}")
        if bound_cell != bound:
            problems.append(f"row {number} bound is {bound_cell!r}, the code gives {bound!r}")
    most = w + polling + HPA_SYNC_SECONDS + KARPENTER_BATCH_MAX_SECONDS
    prose = " ".join(section.split())
    for claim in (
        f"between {w - s} s and {w} s after `sbatch`",
        f"at least {w - s + KARPENTER_BATCH_IDLE_SECONDS} s",
        f"at most {w} + {polling} + {HPA_SYNC_SECONDS} + {KARPENTER_BATCH_MAX_SECONDS} = {most} s",
        f"the bounded {w - s + KARPENTER_BATCH_IDLE_SECONDS} to {most} s",
    ):
        if claim not in prose:
            problems.append(f"the summary does not say {claim!r}")
    return problems


def _section() -> str:
    return docs_pages.section(docs_pages.page(PAGE), SECTION)


def test_the_stages_the_platform_sets_state_its_values() -> None:
    assert (
        wait_problems(
            _section(),
            window=autoscaling.PENDING_WINDOW,
            scrape=observability_names.SCRAPE_INTERVAL,
            polling=autoscaling.POLLING_INTERVAL_SECONDS,
        )
        == []
    )


def test_a_changed_interval_makes_the_page_wrong() -> None:
    real = {
        "window": autoscaling.PENDING_WINDOW,
        "scrape": observability_names.SCRAPE_INTERVAL,
        "polling": autoscaling.POLLING_INTERVAL_SECONDS,
    }
    for change in ({"window": "2m"}, {"scrape": "15s"}, {"polling": 60}):
        assert wait_problems(_section(), **{**real, **change}), change  # type: ignore[arg-type]


def test_every_stage_has_a_bound_and_a_source() -> None:
    rows = table(_section())
    assert sorted(rows) == list(range(1, 11))
    for number, (stage, bound, source) in rows.items():
        assert stage and bound, f"row {number} is empty"
        assert SOURCE.search(source), f"row {number} cites no file or AWS page: {source!r}"


def test_the_stages_without_a_bound_say_so() -> None:
    rows = table(_section())
    unbounded = {number for number, (_, bound, _) in rows.items() if "no bound" in bound}
    assert unbounded == {5, 6, 7, 8, 9}
    assert "Rows 5, 7, 8 and 9 and the `CreateFleet` call have no bound" in " ".join(
        _section().split()
    )


def test_the_old_figure_points_to_the_section() -> None:
    grow = docs_pages.section(docs_pages.page(PAGE), "## Node sets that grow with the queue")
    (bullet,) = [line for line in grow.splitlines() if "How long a cold partition takes" in line]
    assert ANCHOR in bullet
    assert "5 to 10 minutes" not in docs_pages.page(PAGE)
    pending = docs_pages.section(
        docs_pages.page("how-to/submit-a-slurm-job.md"), "## If your job stays pending"
    )
    assert f"../{PAGE}{ANCHOR}" in pending
    for command in ("squeue -j", "kubectl get nodeclaims", "kubectl get events"):
        assert command in pending
