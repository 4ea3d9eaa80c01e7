"""Which metrics exist (the catalogue per exporter) and the PromQL check that holds queries to it."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from components import metric_names as names
from components.config.platform import parse_platform_config
from components.observability import dashboards, metric_catalog, rules
from components.observability.metric_catalog import (
    DCGM_COUNTERS,
    EXPORTERS,
    SLURM,
    DcgmCounter,
    Metric,
    dcgm_counters_csv,
    known_metrics,
    platform_metrics,
    read_dcgm_counters_csv,
)
from components.slurm.autoscaling import demand_query
from tests.conftest import STACKS, stack_data
from tests.promql import (
    PromQLSyntaxError,
    UnboundedNameError,
    metric_names,
    unknown_metrics,
)

DCGM_FIELD_TABLE: Final = Path(__file__).parent / "data" / "dcgm_fields_4.5.3.txt"
"""DCGM's field table at the DCGM release the pinned dcgm-exporter builds with, compiled from
NVIDIA/DCGM v4.5.3 dcgmlib/dcgm_fields.h (the file's header says how)."""

SHAPES: Final = {
    "plain_selector": {"plain_selector"},
    'with_labels{job="a", pod=~"b.*"}': {"with_labels"},
    "rate(in_range[5m])": {"in_range"},
    "in_offset offset 5m and in_at @ 1700000000": {"in_offset", "in_at"},
    '{__name__="by_name_label", job="x"}': {"by_name_label"},
    '{__name__=~"alt_one|alt_two"}': {"alt_one", "alt_two"},
    '{__name__=~"(paren_one|paren_two)"}': {"paren_one", "paren_two"},
    'or_branches{a="1" or b="2"}': {"or_branches"},
    '{__name__="or_one" or __name__="or_two"}': {"or_one", "or_two"},
    'label_replace(in_call, "dst", "$1", "src", "(.*)")': {"in_call"},
    "sum by (pool) (in_aggregation)": {"in_aggregation"},
    "topk(scalar(in_param), in_topk)": {"in_param", "in_topk"},
    'count_values("value", in_count_values)': {"in_count_values"},
    "quantile(0.9, in_quantile)": {"in_quantile"},
    "left_side / on (node) group_left (pool) right_side": {"left_side", "right_side"},
    "left_bool > bool 3": {"left_bool"},
    "-in_unary": {"in_unary"},
    "((in_parens))": {"in_parens"},
    "max_over_time(in_subquery[1h:5m])": {"in_subquery"},
    "max_over_time(rate(in_nested_subquery[5m])[1h:])": {"in_nested_subquery"},
    "histogram_quantile(0.95, sum by (le) (rate(in_histogram_bucket[5m])))": {
        "in_histogram_bucket"
    },
    "trainingplatform:recorded:p95 > on (nodepool) group_left trainingplatform:budget": {
        "trainingplatform:recorded:p95",
        "trainingplatform:budget",
    },
    "vector(1) + time()": set(),
}
"""One expression per place a selector can sit, each naming its own metrics: a shape the
walk misses loses its names and fails its case."""


@pytest.mark.parametrize("expression", sorted(SHAPES))
def test_the_parser_finds_the_names_in_every_shape(expression: str) -> None:
    assert metric_names(expression) == SHAPES[expression]


def test_unknown_metrics_are_named_and_recorded_ones_are_known() -> None:
    expression = "sum(rate(DCGM_FI_DEV_XID_ERROS[5m])) / trainingplatform:made_up + up"
    assert unknown_metrics(expression, known_metrics(), set()) == {
        "DCGM_FI_DEV_XID_ERROS",
        "trainingplatform:made_up",
    }
    assert unknown_metrics(expression, known_metrics(), {"trainingplatform:made_up"}) == {
        "DCGM_FI_DEV_XID_ERROS"
    }


def test_expressions_that_do_not_parse_or_cannot_be_listed_are_refused() -> None:
    broken = "sum(rate(up[5m])"
    with pytest.raises(PromQLSyntaxError, match=r"sum\(rate\(up\[5m\]\)' does not parse"):
        metric_names(broken)
    # A pattern or a negative name matcher may select anything: refused outright.
    for unbounded in ('{__name__=~"karpenter_.*"}', '{__name__!="up", job="x"}',
                      '{__name__!~"up", job="x"}', '{job="karpenter"}', 'up or {pod="x"}'):  # fmt: skip
        with pytest.raises(UnboundedNameError, match="PromQL"):
            metric_names(unbounded)


def test_the_dcgm_counters_file_round_trips_in_the_exporters_format() -> None:
    rendered = dcgm_counters_csv()
    assert read_dcgm_counters_csv(rendered) == DCGM_COUNTERS
    assert rendered.splitlines()[2] == "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %)."
    # The exporter's own file, as it is laid out (NVIDIA/dcgm-exporter 4.5.3-4.8.2
    # etc/default-counters.csv): comments, blank lines, spaces padding the columns.
    upstream = (
        "# Format\n# DCGM FIELD, Prometheus metric type, help message\n\n"
        "DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n"
        "# DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.\n"
        "DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).\n"
    )
    assert read_dcgm_counters_csv(upstream) == (
        DcgmCounter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
        DcgmCounter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    )
    with pytest.raises(ValueError, match=r"line 1 .* expected 3 fields, got 4"):
        read_dcgm_counters_csv("DCGM_FI_DEV_GPU_UTIL, gauge, busy, idle\n")
    with pytest.raises(ValueError, match="type 'rate' is not one of"):
        read_dcgm_counters_csv("DCGM_FI_DEV_GPU_UTIL, rate, GPU utilization\n")
    with pytest.raises(ValueError, match="without commas"):
        DcgmCounter("DCGM_FI_DEV_GPU_UTIL", "gauge", "busy, or idle")


def _dcgm_field_table() -> dict[str, int]:
    """Field identifier -> number, from the table compiled from dcgm_fields.h at the pin."""
    table = {}
    for line in DCGM_FIELD_TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            field, number = line.split()
            table[field] = int(number)
    return table


def test_every_dcgm_field_the_platform_asks_for_is_in_dcgms_field_table() -> None:
    table = _dcgm_field_table()
    assert len(table) > 600 and table["DCGM_FI_DEV_GPU_UTIL"] == 203
    asked = {counter.field for counter in DCGM_COUNTERS}
    assert asked - set(table) == set()
    # What the dashboards and alerts need (issue 45): utilisation and its DCP ratios, memory,
    # power, temperature, XID, volatile ECC, row remapping, NVLink and PCIe throughput.
    needed = {
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
    }  # fmt: skip
    assert needed - asked == set()
    # A field the table does not hold would be refused by the exporter at start-up.
    assert "DCGM_FI_DEV_GPU_UTILISATION" not in table


def test_the_slurm_autoscaling_query_names_only_slurms_metrics() -> None:
    query = demand_query("gpu-a")
    assert metric_names(query) == {
        "slurm_partition_nodes_alloc",
        "slurm_partition_nodes_mixed",
        "slurm_partition_jobs_min_job_nodes_nohold",
    }
    assert metric_names(query) <= SLURM.names()
    assert unknown_metrics(query, known_metrics(), set()) == set()


def test_a_metrics_type_decides_the_names_a_query_selects() -> None:
    assert Metric("h_seconds", "histogram").series() == {
        "h_seconds_bucket", "h_seconds_sum", "h_seconds_count"
    }  # fmt: skip
    assert Metric("s_seconds", "summary").series() == {
        "s_seconds",
        "s_seconds_sum",
        "s_seconds_count",
    }
    assert Metric("volcano_job_retry_counts", "counter").series() == {
        "volcano_job_retry_counts", "volcano_job_retry_counts_total"
    }  # fmt: skip
    assert Metric("a_total", "counter").series() == {"a_total"}
    assert Metric("volcano_job_retry_counts", "counter").series(openmetrics=False) == {
        "volcano_job_retry_counts"
    }
    # dcgm-exporter writes its own text format: its counters keep their names.
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in known_metrics()
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_total" not in known_metrics()
    with pytest.raises(ValueError, match="not a Prometheus metric name"):
        Metric("neuron-core", "gauge")
    known = known_metrics()
    # Histograms are known by their series, not their family name.
    assert "karpenter_pods_provisioning_startup_duration_seconds_bucket" in known
    assert "karpenter_pods_provisioning_startup_duration_seconds" not in known
    # A summary's quantiles are the family name itself.
    assert {"karpenter_pods_startup_duration_seconds",
            "karpenter_pods_startup_duration_seconds_count"} <= known  # fmt: skip


def test_the_catalogue_holds_what_the_issue_relies_on_and_cites_its_sources() -> None:
    known = known_metrics()
    relied_on = {
        "karpenter_scheduler_unschedulable_pods_count", "karpenter_nodeclaims_created_total",
        "karpenter_cloudprovider_instance_launch_failures_total", "volcano_unschedule_job_count",
        "volcano_queue_allocated_scalar_resources", "volcano_queue_deserved_scalar_resources",
        "volcano_queue_capacity_scalar_resources", "volcano_queue_pod_group_pending_count",
        "kube_pod_status_phase", "kube_pod_created", "kube_node_status_condition",
        "node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "container_memory_working_set_bytes", "node_pressure_io_stalled_seconds_total",
        "controller_runtime_reconcile_total", "workqueue_depth", "keda_scaler_metrics_value",
        "jobset_failed_total", "neuroncore_utilization_ratio", "up", "ALERTS",
    }  # fmt: skip
    assert relied_on - known == set()
    for exporter in EXPORTERS:
        assert exporter.sources, f"{exporter.name} cites nothing"
        families = [metric.name for metric in exporter.metrics]
        assert len(families) == len(set(families)), f"{exporter.name} lists a metric twice"
    # The platform's own, built from names.py rather than copied.
    own = platform_metrics().names()
    assert {names.FIRST_STEP_METRIC, names.SLURM_JOB_SUBMIT_METRIC, names.SLURM_JOB_START_METRIC,
            names.PODGROUP_CREATED_METRIC,
            names.PODGROUP_MIN_MEMBER_METRIC, names.PODGROUP_MIN_RESOURCES_METRIC,
            names.PODGROUP_PHASE_METRIC,
            names.NODECLAIM_CONDITION_METRIC,
            names.TRAINJOB_SUSPENDED_METRIC, names.TRAINJOB_CONDITION_METRIC,
            *names.EFA_METRICS} == own  # fmt: skip
    assert own <= known
    assert "DataReadBytes" in metric_catalog.FSX_LUSTRE_CLOUDWATCH_METRICS


@pytest.mark.parametrize("stack", STACKS)
def test_every_rule_and_dashboard_query_names_real_metrics(stack: str) -> None:
    """Each stack's alerts, recording rules and dashboard queries parse and select only
    metrics an exporter at our pins writes, or that a rule of the stack records."""
    config = parse_platform_config(stack_data(stack))
    groups = rules.rule_groups(config)
    recorded = {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}
    expressions = {
        f"rule {rule.get('alert') or rule['record']}": rule["expr"]
        for group in groups
        for rule in group["rules"]
    }
    for dashboard in dashboards.platform_dashboards(config):
        for index, query in enumerate(dashboards.prometheus_queries(dashboard.model)):
            expressions[f"dashboard {dashboard.uid} query {index}"] = query
    known = known_metrics()
    unknown = {
        where: sorted(missing)
        for where, expression in expressions.items()
        if (missing := unknown_metrics(expression, known, recorded))
    }
    assert not unknown, unknown
    # The walk saw the alerts and the ledger, and they read the exporters they are about.
    selected = set().union(*(metric_names(e) for e in expressions.values()))
    assert names.FIRST_STEP_METRIC in selected
    assert any(name.startswith("DCGM_FI_") for name in selected)
    # GangPending's quota reason weighs a pod of the gang (its sidecars and init containers as
    # the quota counts them) against what the team quota has left.
    gangs = next(g for g in groups if g["name"] == f"{names.RULE_PREFIX}-gangs")
    read = set().union(*(metric_names(rule["expr"]) for rule in gangs["rules"]))
    assert {
        "kube_pod_container_resource_requests",
        "kube_pod_init_container_resource_requests",
        "kube_pod_init_container_info",
        "kube_resourcequota",
        # a suspended or finished TrainJob's PodGroup, kept without pods, does not pend
        names.TRAINJOB_SUSPENDED_METRIC,
        names.TRAINJOB_CONDITION_METRIC,
    } <= read
