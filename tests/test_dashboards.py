"""The dashboards as code: every piece reads back through grafana-foundation-sdk's own models
to the same JSON, every query parses as PromQL, folders follow teams and uids are stable.

The SDK's models are generated from Grafana's kinds (the dashboard, each panel plugin's options,
each data source's query) at the Grafana release the pin targets, and parse what they know:
a key a kind does not define, or a value nested where the kind has none, is lost on the way
back and the comparison fails. The SDK's JSON schemas are not shipped in its package and are
upstream files, so they are not copied here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import promql_parser
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import (
    bargauge,
    cloudwatch,
    prometheus,
    stat,
    table,
    text,
    timeseries,
)
from grafana_foundation_sdk.models.dashboard import Dashboard as DashboardModel

from components.config import PlatformConfig
from components.config.platform import parse_platform_config
from components.metric_names import COLD_START_STAGES, GANG_COLD_START_RULE
from components.observability.dashboards import (
    EFA_TX_BYTES,
    FLEET_FOLDER,
    UID_MAX,
    UID_MIN,
    Dashboard,
    dashboard_uid,
    platform_dashboards,
    prometheus_queries,
)
from components.observability.rules import NEURON_POD_UTILIZATION_RULE, rule_groups
from tests import promtool
from tests.conftest import STACKS, stack_data

PANEL_MODELS: dict[str, Any] = {
    "timeseries": timeseries.Options,
    "stat": stat.Options,
    "table": table.Options,
    "bargauge": bargauge.Options,
    "text": text.Options,
}
"""Each panel plugin the dashboards use -> the SDK's model of its options."""
QUERY_MODELS: dict[str, Any] = {
    "prometheus": prometheus.Dataquery,
    "cloudwatch": cloudwatch.CloudWatchMetricsQuery,
}
"""Each data source the dashboards query -> the SDK's model of its query."""


def _errors(instance: dict[str, Any], model: Any) -> list[str]:
    """What the SDK's model of ``instance``'s kind does not read back as given."""
    again = json.loads(JSONEncoder().encode(model.from_json(instance)))
    return [
        f"{key}: {instance.get(key)!r} read back as {again.get(key)!r}"
        for key in sorted(set(instance) | set(again))
        if instance.get(key) != again.get(key)
    ]


@cache
def _config(stack: str) -> PlatformConfig:
    return parse_platform_config(stack_data(stack))


def _panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        panel
        for top in model["panels"]
        for panel in (top, *top.get("panels", []))
        if panel["type"] != "row"
    ]


def test_every_dashboard_validates_and_round_trips() -> None:
    """Each stack's dashboards: the dashboard, each panel's options and each query read back
    through the SDK's model of their kind to the same JSON."""
    problems: list[str] = []
    kinds_seen: set[str] = set()
    for stack in STACKS:
        for dashboard in platform_dashboards(_config(stack)):
            where = f"{stack} {dashboard.uid}"
            problems += [f"{where} {e}" for e in _errors(dashboard.model, DashboardModel)]
            for panel in _panels(dashboard.model):
                kinds_seen.add(panel["type"])
                problems += [
                    f"{where} panel {panel['title']!r} options {e}"
                    for e in _errors(panel["options"], PANEL_MODELS[panel["type"]])
                ]
                ref_ids = [target["refId"] for target in panel.get("targets", [])]
                if len(set(ref_ids)) != len(ref_ids) or "" in ref_ids:
                    problems.append(f"{where} panel {panel['title']!r} refIds {ref_ids}")
                for target in panel.get("targets", []):
                    source = target["datasource"]["type"]
                    problems += [
                        f"{where} panel {panel['title']!r} query {e}"
                        for e in _errors(target, QUERY_MODELS[source])
                    ]
            ids = [panel["id"] for panel in dashboard.model["panels"]]
            if len(set(ids)) != len(ids):
                problems.append(f"{where} panel ids repeat: {ids}")
    assert not problems, "\n".join(problems)
    assert kinds_seen == {"timeseries", "stat", "table", "bargauge", "text"}


def test_every_query_parses_as_promql() -> None:
    """Every panel and variable query of every stack's dashboards parses (promql-parser)."""
    failures: list[str] = []
    parsed = 0
    for stack in STACKS:
        for dashboard in platform_dashboards(_config(stack)):
            for expression in prometheus_queries(dashboard.model):
                try:
                    promql_parser.parse(expression)
                except ValueError as error:
                    failures.append(f"{stack} {dashboard.uid}: {error}\n  {expression}")
                parsed += 1
    assert not failures, "\n".join(failures)
    assert parsed > 100


def test_cold_start_quantiles_say_they_are_rolling() -> None:
    """The quantile rules are over the 24 h before each point, not calendar days: the panels
    that show them say so (review B, finding 3)."""
    (cold,) = [d for d in platform_dashboards(_config("prod")) if d.uid == "tp-cold-starts"]
    titles = [str(panel.get("title", "")) for panel in cold.model.get("panels") or []]
    quantiles = [title for title in titles if "p50" in title or "p95" in title]
    assert quantiles and all("rolling 24 h" in title for title in quantiles), titles
    assert not [title for title in titles if "day" in title.replace("day's end", "")], titles


def test_the_ledger_compares_the_budget_with_what_the_alert_does() -> None:
    """The budget table shows the quantiles of the stage ColdStartOverBudget compares with
    the budget (the first step less the queue wait), not the first step, which counts time a
    gang waited in its queue; the quantile panels show every stage, queue admission too."""
    config = _config("prod")
    (cold,) = [d for d in platform_dashboards(config) if d.uid == "tp-cold-starts"]
    panels = cold.model.get("panels") or []
    (table,) = [p for p in panels if "budget" in str(p.get("title", ""))]
    quantiles = [t["expr"] for t in table["targets"] if ":p" in t["expr"]]
    assert quantiles and all('stage="cold_start"' in expr for expr in quantiles), quantiles
    (alert,) = [
        r
        for g in rule_groups(config)
        for r in g["rules"]
        if r.get("alert") == "ColdStartOverBudget"
    ]
    assert f'{GANG_COLD_START_RULE}{{stage="cold_start"}}' in alert["expr"]
    series = [
        t["expr"] for p in panels if "per stage" in str(p.get("title", "")) for t in p["targets"]
    ]
    assert series and not any("stage=" in expr for expr in series), series
    assert {"admitted", "cold_start"} <= set(COLD_START_STAGES)


def _by_folder(dashboards: list[Dashboard]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for dashboard in dashboards:
        folders.setdefault(dashboard.folder, set()).add(dashboard.uid)
    return folders


def test_folders_follow_teams() -> None:
    """The fleet folder holds the platform's dashboards; each team's folder its jobs and queue,
    the namespace fixed to the team and its queries naming only its queue."""
    config = _config("staging")
    dashboards = platform_dashboards(config)
    teams = sorted(team.name for team in config.teams)
    assert len(teams) > 1
    assert _by_folder(dashboards) == {
        FLEET_FOLDER: {
            "tp-fleet",
            "tp-fleet-jobs",
            "tp-fleet-queues",
            "tp-cold-starts",
            "tp-storage",
            "tp-slurm",
        },
        **{team: {f"tp-{team}-jobs", f"tp-{team}-queue"} for team in teams},
    }
    for dashboard in dashboards:
        if dashboard.folder == FLEET_FOLDER:
            continue
        team = dashboard.folder
        others = [name for name in teams if name != team]
        variables = {v["name"]: v for v in dashboard.model["templating"].get("list", [])}
        if dashboard.uid.endswith("-jobs"):
            assert variables["namespace"]["type"] == "constant"
            assert variables["namespace"]["query"] == team
        queries = "\n".join(prometheus_queries(dashboard.model))
        if dashboard.uid.endswith("-queue"):
            assert f'queue_name="{team}"' in queries
        assert not any(f'"{other}"' in queries for other in others), dashboard.uid


def test_uids_are_unique_short_and_stable_under_team_reordering() -> None:
    """A uid derives from names: the same dashboards whatever order the teams are listed in,
    every uid unique within Grafana's 8-40 characters, long team names shortened apart."""
    raw = stack_data("staging")
    config = parse_platform_config(raw)
    dashboards = platform_dashboards(config)
    uids = [dashboard.uid for dashboard in dashboards]
    assert len(set(uids)) == len(uids)
    assert all(UID_MIN <= len(uid) <= UID_MAX for uid in uids), uids

    raw["teams"] = list(reversed(raw["teams"]))
    reordered = platform_dashboards(parse_platform_config(raw))
    assert [t.name for t in parse_platform_config(raw).teams] != [t.name for t in config.teams]
    assert {d.uid: (d.folder, d.json()) for d in reordered} == {
        d.uid: (d.folder, d.json()) for d in dashboards
    }

    long_a, long_b = "a" * 60 + "-one", "a" * 60 + "-two"
    shortened = {dashboard_uid(long_a, "jobs"), dashboard_uid(long_b, "jobs")}
    assert len(shortened) == 2
    assert all(len(uid) == UID_MAX for uid in shortened)
    assert dashboard_uid(long_a, "jobs") == dashboard_uid(long_a, "jobs")


def test_optional_dashboards_follow_the_stack() -> None:
    """No Slurm dashboard without Slurm, no storage dashboard without the file system; a stack
    with no teams still gets valid dashboards whose queries parse."""
    config = _config("staging")
    assert {"tp-slurm", "tp-storage"} <= {d.uid for d in platform_dashboards(config)}
    bare = config.model_copy(
        update={
            "slurm": config.slurm.model_copy(update={"enabled": False}),
            "storage": config.storage.model_copy(update={"lustre": None}),
            "teams": [],
        }
    )
    dashboards = platform_dashboards(bare)
    assert {d.uid for d in dashboards} == {
        "tp-fleet",
        "tp-fleet-jobs",
        "tp-fleet-queues",
        "tp-cold-starts",
    }
    for dashboard in dashboards:
        assert not _errors(dashboard.model, DashboardModel), dashboard.uid
        for expression in prometheus_queries(dashboard.model):
            promql_parser.parse(expression)


def _query(dashboard: Dashboard, panel: str, legend: str, **variables: str) -> str:
    """The expression of the target with ``legend`` in the panel titled ``panel``, as
    Prometheus receives it: Grafana's macros and the given dashboard variables substituted."""
    for found in _panels(dashboard.model):
        if found["title"] != panel:
            continue
        for target in found.get("targets", []):
            if target.get("legendFormat", "") == legend:
                expression: str = target["expr"]
                for name, value in variables.items():
                    expression = expression.replace(f"${name}", value)
                model = {"panels": [{"type": "x", "targets": [{**target, "expr": expression}]}]}
                return next(prometheus_queries(model))
    raise AssertionError(f"{dashboard.uid}: no query {legend!r} in panel {panel!r}")


def _promtool(tmp_path: Path, series: dict[str, str], cases: list[dict[str, Any]]) -> None:
    """Evaluate ``cases`` (promtool ``promql_expr_test`` entries) on ``series`` at 10m."""
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "promql_expr_test": [{**case, "eval_time": "10m"} for case in cases],
            }
        ],
    }
    path = tmp_path / "dashboards.test.yaml"
    path.write_text(json.dumps(test))
    result = promtool.run("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_fleet_and_job_queries_compute_what_their_panels_say(tmp_path: Path) -> None:
    """On synthetic kube-state-metrics and DCGM series (promtool): a pool's accelerators
    allocatable, busy (running pods only) and idle, busy per team, the reserved nodes' share,
    and a gang's per-pod utilisation, slowest pod and median pod."""
    dashboards = {d.uid: d for d in platform_dashboards(_config("staging"))}
    fleet, jobs = dashboards["tp-fleet"], dashboards["tp-fleet-jobs"]
    pool = "label_karpenter_sh_nodepool"
    kind = "label_karpenter_sh_capacity_type"
    gpus = 'resource="nvidia_com_gpu",unit="integer"'
    gang = "annotation_scheduling_k8s_io_group_name"
    series = {
        f'kube_node_labels{{node="n1",{pool}="p5",{kind}="reserved"}}': "1x10",
        f'kube_node_labels{{node="n2",{pool}="p5",{kind}="on-demand"}}': "1x10",
        f'kube_node_labels{{node="c1",{pool}="general",{kind}="on-demand"}}': "1x10",
        f'kube_node_status_allocatable{{node="n1",{gpus}}}': "8x10",
        f'kube_node_status_allocatable{{node="n2",{gpus}}}': "8x10",
        f'kube_pod_container_resource_requests{{namespace="a",pod="a-0",container="c",node="n1",{gpus}}}': "8x10",
        f'kube_pod_container_resource_requests{{namespace="b",pod="b-0",container="c",node="n2",{gpus}}}': "4x10",
        # Scheduled but not running (pulling its image): requests, holds nothing yet.
        f'kube_pod_container_resource_requests{{namespace="b",pod="b-1",container="c",node="n2",{gpus}}}': "2x10",
        'kube_pod_status_phase{namespace="a",pod="a-0",phase="Running"}': "1x10",
        'kube_pod_status_phase{namespace="b",pod="b-0",phase="Running"}': "1x10",
        'kube_pod_status_phase{namespace="b",pod="b-1",phase="Running"}': "0x10",
        'kube_pod_status_phase{namespace="b",pod="b-1",phase="Pending"}': "1x10",
        # Gang g1 of team a: three pods; a-9 belongs to another gang.
        f'kube_pod_annotations{{namespace="a",pod="a-0",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-1",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-2",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-9",{gang}="g2"}}': "1x10",
        # Values whose means are exact in binary; n3 is in no pool.
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-0",gpu="0",Hostname="n1"}': "75x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-0",gpu="1",Hostname="n1"}': "25x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-1",gpu="0",Hostname="n2"}': "50x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-2",gpu="0",Hostname="n3"}': "10x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-9",gpu="0",Hostname="n3"}': "5x10",
    }
    allocation = "Allocatable, busy and idle per pool"
    reserved = "Reservations in use (capacity type reserved)"
    stragglers = "Stragglers: slowest pod and median pod utilisation"
    selected = {"namespace": "a", "gang": "g1"}
    cases = [
        {
            "expr": _query(fleet, allocation, "{{nodepool}} allocatable"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 16}],
        },
        {
            "expr": _query(fleet, allocation, "{{nodepool}} busy"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 12}],
        },
        {
            "expr": _query(fleet, allocation, "{{nodepool}} idle"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 4}],
        },
        {
            "expr": _query(fleet, "Busy per team", "{{namespace}}"),
            "exp_samples": [
                {"labels": '{namespace="a"}', "value": 8},
                {"labels": '{namespace="b"}', "value": 4},
            ],
        },
        {
            "expr": _query(fleet, reserved, "{{nodepool}} reserved"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 8}],
        },
        {
            "expr": _query(fleet, reserved, "{{nodepool}} busy"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 8}],
        },
        {
            "expr": _query(fleet, "Utilisation per pool", "{{nodepool}}"),
            "exp_samples": [{"labels": '{nodepool="p5"}', "value": 0.5}],
        },
        {
            "expr": _query(jobs, "GPU utilisation per pod", "{{pod}}", **selected),
            "exp_samples": [
                {"labels": '{pod="a-0"}', "value": 50},
                {"labels": '{pod="a-1"}', "value": 50},
                {"labels": '{pod="a-2"}', "value": 10},
            ],
        },
        {
            "expr": _query(jobs, stragglers, "slowest pod", **selected),
            "exp_samples": [{"labels": "{}", "value": 10}],
        },
        {
            "expr": _query(jobs, stragglers, "median pod", **selected),
            "exp_samples": [{"labels": "{}", "value": 50}],
        },
    ]
    _promtool(tmp_path, series, cases)


def test_queue_and_efa_queries_compute_what_their_panels_say(tmp_path: Path) -> None:
    """The queues' guarantee line is each team's configured guarantee, beside Volcano's
    deserved; a gang's EFA throughput is per node of its pods, other nodes left out."""
    config = _config("prod")
    dashboards = {d.uid: d for d in platform_dashboards(config)}
    queues, jobs = dashboards["tp-fleet-queues"], dashboards["tp-fleet-jobs"]
    panel = "Guarantee, deserved, allocated and capability"
    gang = "annotation_scheduling_k8s_io_group_name"
    series = {
        'volcano_queue_deserved_scalar_resources{queue_name="ml-research",resource="nvidia.com/gpu"}': "96x10",
        'volcano_queue_deserved_scalar_resources{queue_name="other",resource="nvidia.com/gpu"}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-0",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-1",{gang}="g1"}}': "1x10",
        'kube_pod_info{namespace="a",pod="a-0",node="n1"}': "1x10",
        'kube_pod_info{namespace="a",pod="a-1",node="n2"}': "1x10",
        'kube_pod_info{namespace="a",pod="a-9",node="n3"}': "1x10",
        # 60 MB a minute on each of two devices of n1, on one of n2; n3 runs another job.
        f'{EFA_TX_BYTES}{{node="n1",device="rdmap0",port="1"}}': "0+60000000x10",
        f'{EFA_TX_BYTES}{{node="n1",device="rdmap1",port="1"}}': "0+60000000x10",
        f'{EFA_TX_BYTES}{{node="n2",device="rdmap0",port="1"}}': "0+60000000x10",
        f'{EFA_TX_BYTES}{{node="n3",device="rdmap0",port="1"}}': "0+60000000x10",
    }
    guarantees = {team.name: team.queue.guarantee.gpus for team in config.teams}
    cases = [
        {
            "expr": _query(queues, panel, "{{queue_name}} guarantee"),
            "exp_samples": [
                {"labels": f'{{queue_name="{name}"}}', "value": gpus}
                for name, gpus in sorted(guarantees.items())
            ],
        },
        {
            "expr": _query(queues, panel, "{{queue_name}} deserved"),
            "exp_samples": [
                {
                    "labels": 'volcano_queue_deserved_scalar_resources{queue_name="ml-research",'
                    'resource="nvidia.com/gpu"}',
                    "value": 96,
                }
            ],
        },
        {
            "expr": _query(
                jobs, "EFA throughput per node", "{{node}} sent", namespace="a", gang="g1"
            ),
            "exp_samples": [
                {"labels": '{node="n1"}', "value": 2_000_000},
                {"labels": '{node="n2"}', "value": 1_000_000},
            ],
        },
    ]
    _promtool(tmp_path, series, cases)


def test_neuron_and_team_utilisation_follow_the_pods(tmp_path: Path) -> None:
    """On synthetic series (promtool): a gang's NeuronCore utilisation per pod and its
    stragglers come from the per-pod attribution rule, and the fleet's utilisation per team
    averages each team's GPUs (DCGM's pod labels) and Neuron pods (the rule)."""
    dashboards = {d.uid: d for d in platform_dashboards(_config("staging"))}
    fleet, jobs = dashboards["tp-fleet"], dashboards["tp-fleet-jobs"]
    gang = "annotation_scheduling_k8s_io_group_name"
    rule = NEURON_POD_UTILIZATION_RULE
    series = {
        f'{rule}{{namespace="a",pod="a-0",node="t1"}}': "0.5x10",
        f'{rule}{{namespace="a",pod="a-1",node="t2"}}': "0.25x10",
        f'{rule}{{namespace="a",pod="a-9",node="t3"}}': "0.75x10",
        f'{rule}{{namespace="b",pod="b-0",node="t3"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-0",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-1",{gang}="g1"}}': "1x10",
        f'kube_pod_annotations{{namespace="a",pod="a-9",{gang}="g2"}}': "1x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-5",gpu="0",Hostname="n1"}': "80x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="a",pod="a-5",gpu="1",Hostname="n1"}': "40x10",
        'DCGM_FI_DEV_GPU_UTIL{namespace="b",pod="b-5",gpu="0",Hostname="n2"}': "20x10",
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n2"}': "0x10",  # no pod holds it
    }
    selected = {"namespace": "a", "gang": "g1"}
    stragglers = "NeuronCore stragglers: slowest pod and median pod"
    per_team = [
        target["expr"]
        for panel in _panels(fleet.model)
        if panel["title"] == "Utilisation per team"
        for target in panel["targets"]
    ]
    assert len(per_team) == 2  # GPUs, then Neuron devices
    cases = [
        {
            "expr": _query(jobs, "NeuronCore utilisation per pod", "{{pod}}", **selected),
            "exp_samples": [
                {"labels": '{pod="a-0"}', "value": 0.5},
                {"labels": '{pod="a-1"}', "value": 0.25},
            ],
        },
        {
            "expr": _query(jobs, stragglers, "slowest pod", **selected),
            "exp_samples": [{"labels": "{}", "value": 0.25}],
        },
        {
            "expr": per_team[0],
            "exp_samples": [
                {"labels": '{namespace="a"}', "value": 0.6},
                {"labels": '{namespace="b"}', "value": 0.2},
            ],
        },
        {
            "expr": per_team[1],
            "exp_samples": [
                {"labels": '{namespace="a"}', "value": 0.5},
                {"labels": '{namespace="b"}', "value": 1},
            ],
        },
    ]
    _promtool(tmp_path, series, cases)
