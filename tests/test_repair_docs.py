"""The restart settings the node-acceptance page states are the ones the stacks render (issue 44,
item 6).

docs/concepts/node-acceptance.md "## Repair" shows, per way of running a job, the setting that
brings a gang back after its node is replaced. Each row's value is read here from every
stack's synthesized objects (TrainingRuntimes, the Slurm and Karpenter releases' values), the
legacy example the migration page runs, and the gate's config defaults, so a change of any of
them fails until the page says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from components.config.acceptance import AcceptanceConfig
from synth.output import HELM_RELEASE_TYPE
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import docs_pages
from tests.team_objects import team_runtimes

PAGE: Final = "concepts/node-acceptance.md"
TABLE_SECTION: Final = "### How a running gang resumes"
CLUSTER_RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
UNSET: Final = "unset"
ROW: Final = re.compile(
    r"^\| (?P<path>[^|]+?) \| `(?P<setting>[^`]+)` \| (?P<value>[^|]+?) \|", re.M
)


def stated() -> dict[tuple[str, str], Any]:
    """(path, setting) -> the value the page's table states (``unset`` as None)."""
    repair = docs_pages.section(docs_pages.page(PAGE), "## Repair")
    table = docs_pages.section(repair, TABLE_SECTION)
    rows: dict[tuple[str, str], Any] = {}
    for row in ROW.finditer(table):
        cell = row["value"].strip()
        value = None if cell == UNSET else load_yaml(cell.strip("`"))
        rows[(row["path"].strip(), row["setting"])] = value
    return rows


def _values(found: Iterable[Any]) -> set[Any]:
    return {repr(value) for value in found}


def _runtimes(results: dict[str, StackResult]) -> list[dict[str, Any]]:
    """The JobSet specs of the teams' runtimes: the table is about how a team's gang resumes
    (the fabric test's runtimes never restart, tests/test_fabric_test.py)."""
    return [
        record.inputs["spec"]["template"]["spec"]
        for result in results.values()
        for record in [
            *team_runtimes(result.records),
            *(r for r in result.records if r.type == CLUSTER_RUNTIME),
        ]
    ]


def _release_values(results: dict[str, StackResult], release: str) -> list[dict[str, Any]]:
    return [
        record.inputs.get("values") or {}
        for result in results.values()
        for record in result.records
        if record.type == HELM_RELEASE_TYPE and record.inputs.get("name", record.name) == release
    ]


def _legacy_example() -> dict[str, Any]:
    page = docs_pages.page("how-to/migrate-a-pytorchjob.md")
    body = re.search(r"<!-- runs-on: \w+ -->\n```yaml\n(.*?)```", page, re.S)
    assert body, "the migration page lost its PyTorchJob"
    job: dict[str, Any] = load_yaml(body[1])
    assert job["kind"] == "PyTorchJob"
    return job


def rendered(results: dict[str, StackResult]) -> dict[tuple[str, str], set[str]]:
    """(path, setting) -> every value the stacks (or the documented example) give it."""
    jobsets = _runtimes(results)
    jobs = [
        replicated["template"]["spec"] for spec in jobsets for replicated in spec["replicatedJobs"]
    ]
    legacy = _legacy_example()["spec"]
    slurm_conf = [
        values["controller"]["extraConfMap"] for values in _release_values(results, "slurm")
    ]
    karpenter = _release_values(results, "karpenter")
    defaults = AcceptanceConfig()
    assert jobsets and jobs and slurm_conf and karpenter, "a stack lost what the table describes"
    return {
        ("TrainJob", "failurePolicy.maxRestarts"): _values(s["failurePolicy"]["maxRestarts"] for s in jobsets),
        ("TrainJob", "failurePolicy.restartStrategy"): _values(s["failurePolicy"]["restartStrategy"] for s in jobsets),
        ("TrainJob", "failurePolicy.rules[0].action"): _values(s["failurePolicy"]["rules"][0]["action"] for s in jobsets),
        ("TrainJob", "backoffLimit"): _values(job["backoffLimit"] for job in jobs),
        ("TrainJob", "podFailurePolicy.rules[0].action"): _values(job["podFailurePolicy"]["rules"][0]["action"] for job in jobs),
        ("TrainJob", "restartPolicy"): _values(job["template"]["spec"]["restartPolicy"] for job in jobs),
        ("Legacy job", "restartPolicy"): _values(spec["restartPolicy"] for spec in legacy["pytorchReplicaSpecs"].values()),
        ("Legacy job", "elasticPolicy.maxRestarts"): _values([legacy["elasticPolicy"].get("maxRestarts")]),
        ("Legacy job", "runPolicy.backoffLimit"): _values([legacy["runPolicy"].get("backoffLimit")]),
        ("Slurm", "JobRequeue"): _values(conf.get("JobRequeue") for conf in slurm_conf),
        ("Slurm", "RequeueExit"): _values(conf.get("RequeueExit") for conf in slurm_conf),
        ("Karpenter", "featureGates.nodeRepair"): _values(v["settings"]["featureGates"].get("nodeRepair") for v in karpenter),
        ("Gate", "replaceFailedNodes"): _values([defaults.replace_failed_nodes]),
        ("Gate", "maxReplacementsPerPoolPerHour"): _values([defaults.max_replacements_per_pool_per_hour]),
    }  # fmt: skip


def test_the_repair_table_states_what_the_stacks_render(
    synthesized: dict[str, StackResult],
) -> None:
    table = stated()
    actual = rendered(synthesized)
    assert set(table) == set(actual), "the table's rows and the settings checked differ"
    wrong = {
        key: (table[key], sorted(values))
        for key, values in actual.items()
        if values != {repr(table[key])}
    }
    assert wrong == {}, "stated value vs rendered values (one value on every stack wanted)"
