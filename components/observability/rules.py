"""Recording rules and alerts as PrometheusRules, and the AWS-side alarms the fleet lacks.

Each rule group is its own PrometheusRule in the monitoring namespace, labelled ``release:
monitoring`` so that the chart's Prometheus loads it: kube-prometheus-stack 88.5.3
templates/prometheus/prometheus.yaml selects rules by ``release: <release name>`` while
``ruleSelectorNilUsesHelmValues`` is true (its default, values.yaml). Pure builders return the
groups as the PrometheusRule spec writes them; :func:`register_rules` makes the objects. Every
alert carries ``runbook_url`` (its section of docs/how-to/alert-runbooks.md), a summary and a
description naming what and where.

Inputs, exactly as the exporters at our pins label them (docs: concepts, observability, "Which
metrics exist"):

- DCGM exporter (NVIDIA/dcgm-exporter 4.5.3-4.8.2, chart 4.8.2): ``DCGM_FI_DEV_XID_ERRORS``
  (gauge, the last XID), ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``, ``DCGM_FI_DEV_UNCORRECTABLE_
  REMAPPED_ROWS`` (counters), ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` (gauge), each with ``gpu``,
  ``UUID``, ``modelName`` and ``Hostname`` (the node: the chart sets ``NODE_NAME``,
  internal/pkg/hostname/hostname.go); etc/default-counters.csv leaves the DBE counter commented
  out, so the sources lane's counters file must list it.
- kube-state-metrics v2.20.0 (chart 8.4.0, kube-prometheus-stack 88.5.3 Chart.yaml):
  ``kube_node_status_allocatable{node,resource,unit}`` (resource sanitised: ``nvidia_com_gpu``,
  internal/store/node.go), ``kube_node_labels{node,label_*}`` with :data:`NODE_LABELS`
  allowlisted, ``kube_node_spec_taint{node,key,value,effect}``,
  ``kube_node_status_condition{node,condition,status}``, ``kube_pod_info{namespace,pod,node,..}``,
  ``kube_pod_annotations{namespace,pod,annotation_*}`` with :data:`POD_ANNOTATIONS`
  allowlisted, ``kube_pod_created``, ``kube_pod_status_phase{phase}``,
  ``kube_pod_status_unschedulable``, ``kube_pod_status_ready_time{namespace,pod,uid}``,
  ``kube_resourcequota{namespace,resourcequota,resource,type}`` (type ``hard`` or ``used``,
  ``resource`` the quota's key as written, ``requests.nvidia.com/gpu``;
  internal/store/resourcequota.go), ``kube_pod_container_resource_requests`` and
  ``kube_pod_init_container_resource_requests{namespace,pod,container,resource,unit}``
  (``resource`` sanitised, ``nvidia_com_gpu``; cores, bytes or a count) and
  ``kube_pod_init_container_info{namespace,pod,container,restart_policy}`` (internal/store/
  pod.go).
- Karpenter v1.14.1: ``karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type}``
  (pkg/metrics/metrics.go; reason ``insufficient_capacity`` when a launch finds no capacity,
  pkg/controllers/nodeclaim/lifecycle/launch.go),
  ``karpenter_cloudprovider_errors_total{controller,method,provider,error}``
  (pkg/cloudprovider/metrics/cloudprovider.go).
- Volcano v1.15.1: a PodGroup's phase (kube-state-metrics custom resource state,
  :data:`~components.metric_names.PODGROUP_PHASE_METRIC`): Pending until its queue admits it.
- Kubeflow Trainer v2.3.0: a TrainJob's ``spec.suspend`` and conditions (kube-state-metrics
  custom resource state, :data:`~components.metric_names.TRAINJOB_SUSPENDED_METRIC`,
  :data:`~components.metric_names.TRAINJOB_CONDITION_METRIC`).
- Slurm 26.05 (SchedMD/slurm slurm-26-05-3-1 src/plugins/metrics/openmetrics/openmetrics.c):
  ``slurm_partition_nodes_down``, ``_drained`` and ``_fail`` ``{partition}``, served on
  ``/metrics/partitions``, one of the endpoints the Slinky operator's ServiceMonitor scrapes by
  default (slurm-operator v1.2.1 internal/builder/controllerbuilder/
  controller_servicemonitor.go).
- The EFA exporter (images/efa-exporter): ``trainingplatform_efa_devices{node}`` and
  ``trainingplatform_efa_<counter>_total{node,device,port}``, the counters the EFA driver's
  ``hw_counters`` name (amzn/amzn-drivers efa_linux_3.1.0 kernel/linux/efa/src/efa_verbs.c,
  ``EFA_DEFINE_PORT_STATS``).
- neuron-monitor's Prometheus bridge (the image components/versions.py pins):
  ``neuroncore_utilization_ratio{neuroncore,runtime_tag,instance_id,..}``, no pod
  (aws-neuron/aws-neuron-sdk v2.31.1 src/examples/neuron-monitor/neuron-monitor-grafana.json);
  the scrape adds ``node``.
- The cold-start ledger's own inputs (:mod:`components.metric_names`).
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog, health_marks
from components.config import LustreConfig, NodePoolConfig, PlatformConfig
from components.first_step import FIRST_STEP_CONTAINER
from components.metric_names import (
    COLD_START_BUDGET_METRIC,
    COLD_START_QUANTILE_RULES,
    EFA_DEVICES_METRIC,
    FIRST_STEP_METRIC,
    FSX_CLOUDWATCH_DIMENSION,
    FSX_CLOUDWATCH_NAMESPACE,
    GANG_COLD_START_RULE,
    GANG_QUEUE_WAIT_RULE,
    MONITORING_NAMESPACE,
    MONITORING_RELEASE,
    NODECLAIM_CONDITION_METRIC,
    PODGROUP_CREATED_METRIC,
    PODGROUP_MIN_MEMBER_METRIC,
    PODGROUP_MIN_RESOURCES_METRIC,
    PODGROUP_PHASE_METRIC,
    RULE_PREFIX,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    SLURM_NAMESPACE,
    TRAINJOB_CONDITION_METRIC,
    TRAINJOB_FINISHED_CONDITIONS,
    TRAINJOB_SUSPENDED_METRIC,
    efa_port_counter,
)
from components.node_pools import POOL_LABEL as PLATFORM_POOL_NODE_LABEL
from components.observability.efa_exporter import JOB as EFA_JOB
from components.observability.ledger import (
    FIRST_STEP_JOB,
    FIRST_STEP_SLURM_JOB,
    KUBE_STATE_METRICS_JOB,
    POD_GROUP_ANNOTATION,
    POD_GROUP_LABEL,
    prometheus_label,
)
from components.observability.ledger import NODEPOOL_LABEL as LEDGER_NODEPOOL_LABEL
from components.observability.sources import DCGM_JOB, NEURON_MONITOR_NAME
from components.teams import OTHER_NEURON_RESOURCES, TEAM_QUOTA, resource_quota_spec

RUNBOOKS_PAGE: Final = "docs/how-to/alert-runbooks.md"
"""The runbooks page, by its path in the repository (the platform has no published site to link):
each alert's ``runbook_url`` is its section there, ``<page>#<alert name, lower-cased>``, the
anchor the docs build gives a ``## <AlertName>`` heading."""

RULE_LABELS: Final = {"release": MONITORING_RELEASE}
"""Labels of every PrometheusRule: the chart's Prometheus selects rules by them."""

INSTANCE_TYPE_LABEL: Final = "label_node_kubernetes_io_instance_type"
NODEPOOL_LABEL: Final = LEDGER_NODEPOOL_LABEL
PLATFORM_POOL_LABEL: Final = prometheus_label("label", PLATFORM_POOL_NODE_LABEL)
"""Label of ``kube_node_labels`` with the node's platform pool (``trainingplatform.io/pool``):
a pool's nodes carry it from its NodePool and from its ``<pool>-slurm`` NodePool alike
(components/node_pools.py, pool_labels), so the alerts that compare a node with its catalog
entry cover Slurm's nodes too."""
NODE_LABELS: Final = (
    "node.kubernetes.io/instance-type",
    "karpenter.sh/nodepool",
    PLATFORM_POOL_NODE_LABEL,
)
"""Node labels kube-state-metrics must allowlist (``--metric-labels-allowlist=nodes=[...]``):
the alerts that compare a node with its catalog entry read its type and pools from them."""
GROUP_ANNOTATION: Final = POD_GROUP_ANNOTATION
"""Pod annotation naming the Volcano PodGroup (components/observability/ledger.py)."""
POD_ANNOTATIONS: Final = (GROUP_ANNOTATION,)
"""Pod annotations kube-state-metrics must allowlist (``--metric-annotations-allowlist=pods=
[...]``): a gang's pods are found by their group."""
GROUP_LABEL: Final = POD_GROUP_LABEL

# --------------------------------------------------------------------------- thresholds

XID_WINDOW: Final = "5m"
"""A GPU's XID is new when the last XID changed within this window (ten scrapes)."""
CRITICAL_XIDS: Final = {
    48: "double-bit ECC error",
    74: "NVLink critical error",
    79: "GPU fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "ECC unrecovered error",
}
"""XIDs that mean the GPU must be drained and reset or replaced: DCGM's "devastating" XIDs,
which its health watch fails a GPU for whichever subsystems are watched (NVIDIA/DCGM v4.5.3
modules/health/DcgmHealthWatch.cpp ``BuildXidMappings``)."""
ECC_WINDOW: Final = "10m"
"""Uncorrectable errors counted over ten minutes: any one is an alert."""
NODE_SETTLE_FOR: Final = "15m"
"""How long a node may miss a GPU or an EFA interface, or not be Ready, before an alert: a new
node advertises its devices once the device plugins start (minutes after launch), and Karpenter
removes a node that never turns Ready within its registration window."""
EFA_RATE_WINDOW: Final = "10m"
EFA_ERROR_COUNTERS: Final = (
    "rx_drops",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
"""EFA port counters that count failures, not traffic (efa_verbs.c ``EFA_DEFINE_PORT_STATS``)."""
EFA_ERROR_RATE_PER_SECOND: Final = 0.1
"""Errors per second on one interface, sustained for :data:`EFA_RATE_WINDOW`, that alert: six a
minute for ten minutes is a link or a peer going bad, not a stray drop."""
EFA_RETRANSMIT_RATIO: Final = 0.01
"""Retransmitted packets per packet sent that alert: SRD retransmits under congestion as a
matter of course, well under a percent; above it the path is lossy and collectives slow."""
EFA_ALERT_FOR: Final = "10m"
KARPENTER_WINDOW: Final = "15m"
"""Launch failures counted over a quarter hour: one failed launch is worth a look."""
QUANTILE_INTERVAL: Final = "5m"
"""How often the day-long quantiles are evaluated: a range of a day over every gang is costly,
and the dashboard shows days."""
NODE_UNHEALTHY_FOR: Final = "15m"
"""How long Slurm may count nodes down, drained or failed before the alert: a node drained for
scale-in is removed within a minute of its last job's end, a restarted slurmd is back in
minutes."""
TAINT_FOR: Final = "5m"

LEDGER_WINDOW_SECONDS: Final = 15 * 60
LEDGER_WINDOW: Final = f"{LEDGER_WINDOW_SECONDS // 60}m"
"""How long after a gang's first step its ledger entry is still recorded: its stages are then
final, and a later restart (pods replaced on new nodes by a JobSet restart, drift,
consolidation or Ray's autoscaler) would otherwise look like a new cold start of hours."""
LEDGER_LOOKBACK: Final = "1d"
"""How far back a gang's first step is remembered, so that a restarted gang stays settled while
its new pods start: their first step comes minutes after the old pods' series ends."""
COLD_START_STUCK_FOR: Final = "5m"
"""How long a cold gang must have been past its budget before the alert: a series missing for a
scrape or two does not fire it."""
GANG_FIRST_STEP_RULE: Final = f"{RULE_PREFIX}:gang_first_step_timestamp_seconds"
"""Recording rule: Unix time of the first step of each gang's earliest pod (labels
``namespace``, ``podgroup``)."""

GANG_ADMITTED_RULE: Final = f"{RULE_PREFIX}:gang_admitted_timestamp_seconds"
"""Recording rule: Unix time (to the scrape) each gang's PodGroup was first seen admitted by its
queue, in any phase but Pending (labels ``namespace``, ``podgroup``); kept at its first value."""
GANG_PODS_RUNNING_RULE: Final = f"{RULE_PREFIX}:gang_pods_running_timestamp_seconds"
"""Recording rule: Unix time each gang first had all its pods Ready, the last of them (labels
``namespace``, ``podgroup``); kept at its first value, so a pod restarted later moves nothing."""

SLURM_JOB_NODE_RULE: Final = f"{RULE_PREFIX}:slurm_job_node:info"
"""Recording rule: 1 per node of a Slurm job (labels ``namespace``, ``slurm_job_id``, ``node``,
``nodepool``: the node's platform pool, not its ``<pool>-slurm`` NodePool)."""
SLURM_JOB_SUBMIT_RULE: Final = f"{RULE_PREFIX}:slurm_job_submit_timestamp_seconds"
"""Recording rule: Unix time each Slurm job was submitted (labels ``namespace``,
``slurm_job_id``)."""
SLURM_JOB_START_RULE: Final = f"{RULE_PREFIX}:slurm_job_start_timestamp_seconds"
"""Recording rule: Unix time slurmctld started each Slurm job (labels ``namespace``,
``slurm_job_id``)."""
SLURM_JOB_FIRST_STEP_RULE: Final = f"{RULE_PREFIX}:slurm_job_first_step_timestamp_seconds"
"""Recording rule: Unix time of each Slurm job's earliest first step (labels ``namespace``,
``slurm_job_id``)."""

GANG_PENDING_RULE: Final = f"{RULE_PREFIX}:gang_pending_seconds"
"""Recording rule: seconds since the oldest pending pod of each gang was created, or, for a
waiting gang with no live pod, since its PodGroup was created or it last had one (labels
``namespace``, ``podgroup``, ``queue``; :func:`gang_rules`)."""
GANG_LIVE_RULE: Final = f"{RULE_PREFIX}:gang_live_pods_timestamp_seconds"
"""Recording rule: the evaluation's Unix time, for each gang that has a live (Pending or
Running) pod or whose TrainJob is suspended or finished (labels ``namespace``, ``podgroup``);
its last value says when the gang last had one, so a gang whose pods are replaced at once (a
JobSet's restart) is not pending since its PodGroup was made, and a resumed TrainJob is not
pending since its suspension."""
GANG_LIVE_LOOKBACK: Final = "1d"
"""How far back :data:`GANG_LIVE_RULE` is read: a gang without live pods for longer counts
from its PodGroup's creation, which is then longer than any alert's minutes."""
GANG_PENDING_REASON_RULE: Final = f"{RULE_PREFIX}:gang_pending_reason_seconds"
"""Recording rule: :data:`GANG_PENDING_RULE` with a ``reason`` label: ``quota``, ``queue``,
``capacity`` or ``unknown`` (the first that holds, in that order)."""
GANG_POD_REQUEST_RULE: Final = f"{RULE_PREFIX}:gang_pod_request:max"
"""Recording rule: per resource, the largest request of any one pod of each gang that has fewer
live pods than its ``minMember``, counted as a ResourceQuota counts a pod (labels ``namespace``,
``podgroup``, ``resource`` as kube-state-metrics names a container's: ``nvidia_com_gpu``,
``cpu`` in cores, ``memory`` in bytes). It stands for the request of each pod the gang lacks;
a gang with no pod has none (its PodGroup's ``minResources`` stands in,
:func:`quota_shortfall_rules`)."""
GANG_QUOTA_SHORTFALL_RULE: Final = f"{RULE_PREFIX}:gang_quota_shortfall"
"""Recording rule: how much more of a resource its team quota would need for one more pod of a
gang that lacks pods (:data:`GANG_POD_REQUEST_RULE`, or for a gang with no pod its PodGroup's
``minResources`` over ``minMember``, minus the quota's ``hard`` less ``used``; one pod for
``pods``), where that is above 0 (labels ``namespace``, ``podgroup``, ``resource``:
the quota's own name, ``requests.nvidia.com/gpu``). GangPending's ``quota`` reason."""
NEURON_POD_UTILIZATION_RULE: Final = f"{RULE_PREFIX}:pod_neuroncore_utilization:avg"
"""Recording rule: the mean NeuronCore utilisation (0-1) of the node a running pod holds Neuron
devices on (labels ``namespace``, ``pod``, ``node``). Per node, not per core: where two pods
hold devices of one node, each gets the node's mean (:func:`neuron_attribution_rules`)."""
NEURON_MONITOR_JOB: Final = f"{MONITORING_NAMESPACE}/{NEURON_MONITOR_NAME}"
"""The ``job`` label of neuron-monitor's series: ``<namespace>/<name>`` of its PodMonitor, which
sets no ``jobLabel`` (prometheus-operator pkg/prometheus/promcfg.go, generatePodMonitorConfig,
read at v0.93.0)."""
POD_GANG_RULE: Final = f"{RULE_PREFIX}:pod_gang:info"
"""Recording rule: 1 per pod of a gang (labels ``namespace``, ``pod``, ``podgroup``, ``node``)."""
GANG_NODE_RULE: Final = f"{RULE_PREFIX}:gang_node:info"
"""Recording rule: 1 per node of a gang (labels ``namespace``, ``podgroup``, ``node``)."""
REASONS: Final = ("quota", "queue", "capacity", "unknown")
GANG_PENDING_REASON_TEMPLATE: Final = (
    "{{ with printf `"
    + GANG_PENDING_REASON_RULE
    + '{namespace="%s", podgroup="%s"}` $labels.namespace $labels.podgroup | query }}'
    '{{ . | first | label "reason" }}{{ else }}unknown{{ end }}'
)
"""GangPending's reason, read from :data:`GANG_PENDING_REASON_RULE` when the annotation is
rendered (Prometheus' ``query``, ``first`` and ``label`` template functions, prometheus
template/template.go). As a label it would change the alert's identity whenever the reason
does (capacity, then unknown once the pods are bound), and re-notify."""

STAGE_CONDITIONS: Final = {
    "nodes_launched": "Launched",
    "nodes_registered": "Registered",
    "nodes_initialized": "Initialized",
}
"""The ledger's node stages and the NodeClaim condition each reads (kubernetes-sigs/karpenter
v1.14.1 pkg/apis/v1/nodeclaim_status.go)."""


@dataclass(frozen=True)
class AlertDoc:
    """What an alert's annotations and runbook say."""

    summary: str
    description: str


def runbook_url(alert: str, site: str | None = None) -> str:
    """The alert's section of the runbooks page (mkdocs anchors are the lower-cased title).

    Args:
        alert: the alert's name, which is its section's title.
        site: ``observability.runbooksUrl``, the published docs site's root; None (default):
            the page's path in the repository.
    """
    if site is None:
        return f"{RUNBOOKS_PAGE}#{alert.lower()}"
    # mkdocs' directory URLs: docs/how-to/alert-runbooks.md is served at how-to/alert-runbooks/.
    page = RUNBOOKS_PAGE.removeprefix("docs/").removesuffix(".md")
    return f"{site.rstrip('/')}/{page}/#{alert.lower()}"


def alert(
    name: str,
    expr: str,
    *,
    severity: str,
    summary: str,
    description: str,
    for_: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One alerting rule as a PrometheusRule spec writes it.

    Args:
        name: the alert's name (and its runbook section's title).
        expr: PromQL; every series it returns is an alert.
        severity: ``critical`` (act now: a job is failing or will) or ``warning`` (look today).
        summary: one line naming what and where (Go templates over ``$labels``).
        description: what it means and the first thing to do.
        for_: how long the condition must hold; none: it alerts at once.
        labels: more labels of the alert.
    """
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ is not None:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **(labels or {})}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": runbook_url(name),
    }
    return rule


def record(name: str, expr: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One recording rule.

    Args:
        name: the series it records.
        expr: PromQL.
        labels: labels set on every series it records (they tell rules of one name apart).
    """
    rule: dict[str, Any] = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = labels
    return rule


def group(name: str, rules: list[dict[str, Any]], interval: str | None = None) -> dict[str, Any]:
    """A rule group: its rules are evaluated in order, each seeing the ones before.

    Args:
        name: the group's name (unique in the Prometheus), also the PrometheusRule's name.
        rules: its rules.
        interval: how often it is evaluated; none: the Prometheus' evaluation interval.
    """
    built: dict[str, Any] = {"name": name}
    if interval is not None:
        built["interval"] = interval
    built["rules"] = rules
    return built


def _alternatives(values: Iterable[str]) -> str:
    """A regular expression matching exactly these label values (dots escaped)."""
    return "|".join(sorted({v.replace(".", "\\\\.") for v in values}))


def _expected_per_node(counts: dict[int, tuple[set[str], set[str]]]) -> str:
    """A vector of each managed node's expected count, by (pools, instance types) per count.

    A node is a pool's by its platform pool label, so the pool's Slurm nodes (from its
    ``<pool>-slurm`` NodePool) count too.

    Labels: ``node``, ``nodepool`` (the Karpenter NodePool), ``instance_type``; value: the
    count the catalog gives.
    """
    parts = []
    for count, (pools, types) in sorted(counts.items()):
        nodes = (
            f'kube_node_labels{{{PLATFORM_POOL_LABEL}=~"{_alternatives(pools)}", '
            f'{INSTANCE_TYPE_LABEL}=~"{_alternatives(types)}"}}'
        )
        renamed = (
            f'label_replace(label_replace({nodes}, "nodepool", "$1", "{NODEPOOL_LABEL}", '
            f'"(.*)"), "instance_type", "$1", "{INSTANCE_TYPE_LABEL}", "(.*)")'
        )
        parts.append(f"{count} * group by (node, nodepool, instance_type) ({renamed})")
    return " or ".join(f"({part})" for part in parts)


def _missing_alert(
    name: str,
    expected: str,
    actual: str,
    *,
    what: str,
    severity: str,
) -> dict[str, Any]:
    """Alert on nodes that have fewer of a device than their instance type's catalog count."""
    have = f"(({actual}) or on(node) (0 * ({expected})))"
    return alert(
        name,
        f"(({expected}) - on(node) group_left() {have}) > 0",
        severity=severity,
        for_=NODE_SETTLE_FOR,
        summary=f"Node {{{{ $labels.node }}}} ({{{{ $labels.nodepool }}}}) is missing "
        f"{{{{ $value }}}} {what}",
        description=f"The node, a {{{{ $labels.instance_type }}}}, has fewer {what} than its "
        f"instance type has (components/catalog.py) for {NODE_SETTLE_FOR}. Gangs that need "
        "the whole node cannot land on it. Drain it so that Karpenter replaces it.",
    )


def accelerator_rules(config: PlatformConfig) -> list[dict[str, Any]]:
    """GPU errors, and GPUs and EFA interfaces missing from the nodes that should have them.

    Args:
        config: the validated platform (its pools give each node's expected counts).
    """
    node_of = "{{ $labels.Hostname }}"
    gpu = f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.UUID }}}}) on {node_of}"
    # Each input only from its exporter's job: a series of the same name from another target
    # must not fire or hide an alert on another team's node.
    dcgm = f'{{job="{DCGM_JOB}"}}'
    efa_job = f'job="{EFA_JOB}"'
    xids = f"DCGM_FI_DEV_XID_ERRORS{dcgm}"
    critical = " or ".join(f"{xids} == {xid}" for xid in sorted(CRITICAL_XIDS))
    rules = [
        alert(
            "GPUXidError",
            f"({xids} > 0) and (changes({xids}[{XID_WINDOW}]) > 0)",
            severity="warning",
            summary=f"{gpu} reported XID {{{{ $value }}}}",
            description="The GPU driver reported a new XID error in the last "
            f"{XID_WINDOW}. Application XIDs (13, 31, 43, 45) point at the job; others at the "
            "GPU: see the runbook's table.",
        ),
        alert(
            "GPUCriticalXid",
            critical,
            severity="critical",
            summary=f"{gpu} reported critical XID {{{{ $value }}}}",
            description="The last XID of the GPU is one DCGM's health check fails a GPU for ("
            + ", ".join(f"{xid}: {what}" for xid, what in sorted(CRITICAL_XIDS.items()))
            + "). Jobs on the node will fail or hang: drain the node and let it be replaced.",
        ),
        alert(
            "GPUUncorrectableECC",
            f"(increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{dcgm}[{ECC_WINDOW}]) > 0)"
            f" or (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{dcgm}[{ECC_WINDOW}]) > 0)"
            f" or (DCGM_FI_DEV_ROW_REMAP_FAILURE{dcgm} > 0)",
            severity="critical",
            summary=f"{gpu} has uncorrectable memory errors",
            description="Double-bit ECC errors, rows remapped for uncorrectable errors, or a "
            f"failed row remap in the last {ECC_WINDOW}. The GPU's memory corrupts data: "
            "drain the node; a failed remap means the GPU must be replaced.",
        ),
    ]
    gpus: dict[int, tuple[set[str], set[str]]] = {}
    efa: dict[int, tuple[set[str], set[str]]] = {}
    for pool in config.node_pools:
        for name in pool.instance_types:
            entry = catalog.lookup(name)
            if entry.accelerator == "nvidia":
                pools, types = gpus.setdefault(entry.accelerators, (set(), set()))
                pools.add(pool.name)
                types.add(name)
            if pool.uses_efa:
                pools, types = efa.setdefault(entry.efa_interfaces, (set(), set()))
                pools.add(pool.name)
                types.add(name)
    if gpus:
        rules.append(
            _missing_alert(
                "GPUMissing",
                _expected_per_node(gpus),
                'sum by (node) (kube_node_status_allocatable{resource="nvidia_com_gpu"})',
                what="allocatable GPUs",
                severity="critical",
            )
        )
    if efa:
        rules.append(
            _missing_alert(
                "EFAInterfaceMissing",
                _expected_per_node(efa),
                f"max by (node) ({EFA_DEVICES_METRIC}{{{efa_job}}})",
                what="EFA interfaces",
                severity="critical",
            )
        )
        where = "interface {{ $labels.device }} port {{ $labels.port }} on {{ $labels.node }}"
        terms = [
            f"label_replace(sum by (node, device, port) (rate({efa_port_counter(c)}{{{efa_job}}}"
            f'[{EFA_RATE_WINDOW}])) > {EFA_ERROR_RATE_PER_SECOND}, "counter", "{c}", "", "")'
            for c in EFA_ERROR_COUNTERS
        ]
        terms.append(
            f"label_replace(sum by (node, device, port) (rate({efa_port_counter('retrans_pkts')}"
            f"{{{efa_job}}}[{EFA_RATE_WINDOW}])) / sum by (node, device, port) (rate("
            f"{efa_port_counter('tx_pkts')}{{{efa_job}}}[{EFA_RATE_WINDOW}])) > "
            f'{EFA_RETRANSMIT_RATIO}, "counter", "retrans_pkts", "", "")'
        )
        rules.append(
            alert(
                "EFAErrorsRising",
                " or ".join(terms),
                severity="warning",
                for_=EFA_ALERT_FOR,
                summary=f"EFA {where}: {{{{ $labels.counter }}}} rising",
                description=f"Over {EFA_RATE_WINDOW}, {{{{ $labels.counter }}}} rose faster "
                f"than the platform allows ({EFA_ERROR_RATE_PER_SECOND} errors a second, or "
                f"retransmits above {EFA_RETRANSMIT_RATIO:.0%} of packets sent). Collectives "
                "through this interface slow down or fail; run a fabric test on the node.",
            )
        )
    return rules


_PENDING: Final = (
    'kube_pod_status_phase{phase="Pending"} unless on(namespace, pod) kube_pod_info{node!=""}'
)
"""Pods not yet on a node: Pending and unbound. A pod bound to a node and pulling its images is
Pending too, but it is starting, not waiting (kube-state-metrics v2.20.0 internal/store/pod.go:
``kube_pod_info``'s ``node`` is the pod's ``spec.nodeName``, empty until it is bound)."""
_UNSCHEDULABLE: Final = "kube_pod_status_unschedulable"
_LIVE: Final = 'kube_pod_status_phase{phase=~"Pending|Running"}'
"""Live pods: those a ResourceQuota counts (every pod not Succeeded or Failed, Kubernetes
docs, "Resource Quotas") and that can still run. A Job keeps its Failed pods while it makes
replacements (backoffLimit), so counting them would make a gang whose replacements the quota
refused look complete."""


def _pods_of_gangs(selector: str) -> str:
    """Pods matching a kube-state-metrics pod selector, with their gang as ``podgroup``.

    One series per pod (labels ``namespace``, ``pod``, ``podgroup``), so that joins on the pod
    stay one-to-one whatever else the annotations' series carry.
    """
    annotated = f'kube_pod_annotations{{{GROUP_LABEL}!=""}}'
    return (
        f'max by (namespace, pod, podgroup) (label_replace({annotated}, "podgroup", "$1", '
        f'"{GROUP_LABEL}", "(.+)") * on(namespace, pod) group_left() '
        f"(max by (namespace, pod) ({selector}) == 1))"
    )


_QUOTA_REQUESTS_PREFIX: Final = "requests."
_QUOTA_PODS: Final = "pods"
_QUOTA_BARE_REQUESTS: Final = ("cpu", "memory")
"""Quota resources that count requests without the ``requests.`` prefix (Kubernetes, "Resource
Quotas", compute resource quota: ``cpu`` is ``requests.cpu``, ``memory`` ``requests.memory``)."""
_LABEL_INVALID: Final = re.compile(r"[^a-zA-Z0-9_]")


def quota_request_name(key: str) -> str:
    """The resource whose pod requests a ResourceQuota's ``key`` counts, as Kubernetes names it.

    A quota's ``requests.<name>`` counts what pods request of ``<name>``, and ``cpu`` and
    ``memory`` are ``requests.cpu`` and ``requests.memory`` (Kubernetes docs, "Resource
    Quotas"): ``requests.nvidia.com/gpu`` is ``nvidia.com/gpu``, the key a PodGroup's
    ``spec.minResources`` uses.

    Args:
        key: a key of a quota's ``hard`` (:func:`components.teams.resource_quota_spec`).

    Raises:
        ValueError: ``key`` counts no request of the pods (``pods``, ``limits.*``,
            ``count/*``): GangPending's quota reason would not know what a pod needs of it.
    """
    if key.startswith(_QUOTA_REQUESTS_PREFIX):
        return key.removeprefix(_QUOTA_REQUESTS_PREFIX)
    if key in _QUOTA_BARE_REQUESTS:
        return key
    raise ValueError(
        f"quota resource {key!r} counts no request of a pod: GangPending's quota reason "
        f"maps only 'requests.<resource>', {', '.join(_QUOTA_BARE_REQUESTS)} and "
        f"'{_QUOTA_PODS}' to what a gang's pod needs"
    )


def quota_pod_resource(key: str) -> str:
    """The ``resource`` label of the pods' requests that a ResourceQuota's ``key`` counts.

    kube-state-metrics labels a container's request of a resource with its name sanitized,
    every character outside ``[a-zA-Z0-9_]`` made ``_`` (kube-state-metrics v2.20.0
    internal/store/pod.go ``kube_pod_container_resource_requests``, internal/store/utils.go
    ``SanitizeLabelName``), while ``kube_resourcequota``'s ``resource`` is the quota's key as
    written (internal/store/resourcequota.go): ``requests.nvidia.com/gpu`` is ``nvidia_com_gpu``.

    Args:
        key: a key of a quota's ``hard`` (:func:`quota_request_name`).

    Raises:
        ValueError: ``key`` counts no request of the pods (:func:`quota_request_name`).
    """
    return ksm_resource(quota_request_name(key))


def ksm_resource(name: str) -> str:
    """A Kubernetes resource name as kube-state-metrics labels a pod's request of it.

    Every character outside ``[a-zA-Z0-9_]`` becomes ``_`` (kube-state-metrics v2.20.0
    internal/store/utils.go ``SanitizeLabelName``): ``aws.amazon.com/neuron`` is
    ``aws_amazon_com_neuron``.

    Args:
        name: the resource (``nvidia.com/gpu``).
    """
    return _LABEL_INVALID.sub("_", name)


def _tagged(expr: str, part: str) -> str:
    """``expr`` with a ``part`` label, so that two vectors of the same labels survive ``or``."""
    return f'label_replace({expr}, "part", "{part}", "", "")'


_SIDECAR_RESTART_POLICY: Final = "Always"
"""An init container's ``restartPolicy`` that makes it a native sidecar (Kubernetes, "Sidecar
Containers"); kube-state-metrics writes it as ``restart_policy``, empty where unset."""


def _pod_requests() -> str:
    """Each pod's request per resource as a ResourceQuota counts it.

    One series per pod and resource (labels ``namespace``, ``pod``, ``resource``). A quota
    counts a pod's effective request (Kubernetes docs, "Init Containers" and "Sidecar
    Containers", resource sharing within containers: "Quota and limits are applied based on
    the effective Pod request"): its containers plus its native sidecars (init containers with
    ``restartPolicy: Always``), or an ordinary init container plus the sidecars started before
    it where that is more. kube-state-metrics gives no order, so this is the sidecars plus the
    larger of the containers and the largest ordinary init container: exact where the sidecars
    come first, as the platform's first-step exporter does (components/first_step.py), more
    otherwise.

    Which init containers are sidecars: ``kube_pod_init_container_info``'s ``restart_policy``
    says so, but kube-state-metrics v2.20.0 writes that series only for an init container the
    kubelet has reported a status of (internal/store/pod.go,
    ``createPodInitContainerInfoFamilyGenerator``: one series per entry of
    ``status.initContainerStatuses``), and no other series carries the policy; a pod not yet
    on a node, the pods GangPending judges, has none. There only the platform's own native
    sidecar, :data:`components.first_step.FIRST_STEP_CONTAINER`, counts as one; every other
    init container is ordinary (its request is taken at most, not added). Counting every
    unreported init container as a sidecar would add KubeRay's ``wait-gcs-ready`` (200m and
    256Mi on every worker while init container injection is on, its default: ray-project/
    kuberay v1.7.0 ray-operator/controllers/ray/common/pod.go, ``DefaultWorkerPodTemplate``)
    to each worker's request, and a user's init container that requests GPUs would double the
    pod's GPUs and give a false quota reason. A user's own native sidecar on an unbound pod is
    taken as ordinary, so the pod's request may be counted short by it.
    The pods run no RuntimeClass with overhead, which the quota would add.
    """
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'
    per_container = "max by (namespace, pod, container, resource) "  # one per KSM replica
    containers = (
        f"sum by (namespace, pod, resource) ({per_container}"
        f"(kube_pod_container_resource_requests{{{ksm}}}))"
    )
    init = f"{per_container}(kube_pod_init_container_resource_requests{{{ksm}}})"
    reported = f"kube_pod_init_container_info{{{ksm}}}"
    sidecar = (
        f'(kube_pod_init_container_info{{{ksm}, restart_policy="{_SIDECAR_RESTART_POLICY}"}} '
        "or (group by (namespace, pod, container) (kube_pod_init_container_resource_requests"
        f'{{{ksm}, container="{FIRST_STEP_CONTAINER}"}}) '
        f"unless on(namespace, pod, container) {reported}))"
    )
    plain = (
        f"max by (namespace, pod, resource) ({init} unless on(namespace, pod, container) {sidecar})"
    )
    sidecars = (
        f"sum by (namespace, pod, resource) ({init} and on(namespace, pod, container) {sidecar})"
    )
    main = (
        f"max by (namespace, pod, resource) ({_tagged(containers, 'containers')} or "
        f"{_tagged(plain, 'init')})"
    )
    return (
        f"sum by (namespace, pod, resource) ({_tagged(main, 'main')} or "
        f"{_tagged(sidecars, 'sidecars')})"
    )


def _quota_left(namespace_quota: str, key: str) -> str:
    """What the team quota has left of ``key`` per namespace: ``hard`` less ``used``.

    Args:
        namespace_quota: the quota's name (:data:`components.teams.TEAM_QUOTA`).
        key: the quota's resource, as written in its ``hard``.
    """
    selector = (
        f'job="{KUBE_STATE_METRICS_JOB}", resourcequota="{namespace_quota}", resource="{key}"'
    )
    return (
        f'(max by (namespace) (kube_resourcequota{{{selector}, type="hard"}}) '
        f'- max by (namespace) (kube_resourcequota{{{selector}, type="used"}}))'
    )


def quota_shortfall_rules(config: PlatformConfig, short: str, podless: str) -> list[dict[str, Any]]:
    """The team quota's shortfall for one more pod of each gang that lacks pods.

    A gang lacks pods when Kubernetes refused to create some (the quota's admission refuses a
    pod whose requests, added to ``used``, exceed ``hard``). It is short of quota on a resource
    when the quota has less left than one pod of the gang requests. What one pod requests:

    - where the gang has pods, the largest request among them, per resource
      (:data:`GANG_POD_REQUEST_RULE`), since the pods of a gang are normally alike (a missing
      pod larger than every existing one, a launcher's workers, is not seen);
    - where it has none (the quota refused every pod, the most common case once a team's quota
      is used up), its PodGroup's ``spec.minResources`` divided by its ``minMember``
      (:data:`~components.metric_names.PODGROUP_MIN_RESOURCES_METRIC`): the gang's average
      pod. That is at most its largest pod, so a shortfall it shows is real; a quota with room
      for the average but not for a larger pod (a Ray head beside GPU workers) is not seen.
      Who writes ``minResources`` on the platform's job paths: Trainer's volcano plugin, the
      sum of each pod set's effective request (``resourcehelpers.PodRequests``, as the quota
      counts) times its count, with ``minMember`` the pods' count (kubeflow/trainer v2.3.0
      pkg/runtime/framework/plugins/volcano/volcano.go, ``Build``; pkg/runtime/runtime.go);
      KubeRay's Volcano batch scheduler, the head and each worker group's ``minReplicas``
      (containers' requests, or limits where a container requests nothing, and no init
      container), with ``minMember`` those pods' count; a RayJob's submitter is in its
      ``minResources`` but not its ``minMember`` (ray-project/kuberay v1.7.0 ray-operator/
      controllers/ray/batchscheduler/volcano/volcano_scheduler.go, ``handleRayJob``,
      ``calculatePodGroupParams``; controllers/ray/utils/util.go, ``CalculateMinResources``),
      which raises the average by the submitter's share. Volcano's podgroup controller writes
      one too (the pod's request times ``minMember``), but makes a PodGroup only from a pod it
      sees (volcano v1.15.1 pkg/controllers/podgroup/pg_controller_handler.go,
      ``buildPodGroupFromPod``), so its gangs start with a pod, and lose it only where the
      pod's controller outlives it (the PodGroup is the controller's, ``newPGOwnerReferences``,
      :func:`gang_rules`); Slurm's jobs have no PodGroup. A PodGroup without
      ``minResources`` (one written by hand) gives no quota reason for a gang without pods: it
      falls to ``queue`` or ``unknown``.

    One pod is the measure, not every missing pod: while room for one is left its controller
    creates it, and the next one finds the quota short. The resources are exactly those the
    team quota sets (:func:`components.teams.resource_quota_spec`'s ``hard``, of the stack's
    teams), read from that quota only (:data:`components.teams.TEAM_QUOTA`), not from the
    scoped quota of system priority pods.

    Args:
        config: the validated platform (its teams and pools decide the quota's resources).
        short: PromQL: the gangs (``namespace``, ``podgroup``) with fewer live pods than they
            need, none included.
        podless: PromQL: the gangs among them with no live pod at all.
    """
    keys = sorted(
        {
            key
            for team in config.teams
            for key in resource_quota_spec(team, config.node_pools)["hard"]
        }
    )
    if not keys:  # no team, no team quota
        return []
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'
    annotated = f'kube_pod_annotations{{{GROUP_LABEL}!=""}}'
    largest = (
        f"max by (namespace, podgroup, resource) ({_pod_requests()} * on(namespace, pod) "
        f"group_left(podgroup) {_pods_of_gangs(annotated)}) and on(namespace, podgroup) ({short})"
    )
    members = f"max by (namespace, podgroup) ({PODGROUP_MIN_MEMBER_METRIC}{{{ksm}}})"
    terms = []
    for key in keys:
        if key == _QUOTA_PODS:
            need = f"group by (namespace, podgroup) ({short})"  # one pod
        else:
            from_pods = (
                f"max by (namespace, podgroup) "
                f'({GANG_POD_REQUEST_RULE}{{resource="{quota_pod_resource(key)}"}} > 0)'
            )
            group_total = (
                f"max by (namespace, podgroup) ({PODGROUP_MIN_RESOURCES_METRIC}{{{ksm}, "
                f'resource="{quota_request_name(key)}"}})'
            )
            average = (
                f"(({group_total} / on(namespace, podgroup) {members}) > 0) "
                f"and on(namespace, podgroup) ({podless})"
            )
            need = f"({from_pods} or {average})"
        left = _quota_left(TEAM_QUOTA, key)
        terms.append(
            f'label_replace({need} - on(namespace) group_left() {left} > 0, "resource", '
            f'"{key}", "", "")'
        )
    return [
        record(GANG_POD_REQUEST_RULE, largest),
        record(GANG_QUOTA_SHORTFALL_RULE, " or ".join(terms)),
    ]


def gang_rules(config: PlatformConfig) -> list[dict[str, Any]]:
    """How long each gang has pended and why, and the alert past the configured minutes.

    A gang pends while any of its pods is Pending and not yet bound to a node (a bound pod
    pulling its images is starting, not waiting; a cold pool's pods stay unbound while their
    nodes launch and pass the acceptance gate, which the default minutes allow for), since the
    oldest such pod was created; or while its PodGroup waits (phase ``Pending`` or
    ``Inqueue``, ``minMember`` above 0) and no pod of it is live (Pending or Running), since
    the PodGroup was created or the gang last had a live pod, whichever is later
    (:data:`GANG_LIVE_RULE`): a gang none of whose pods could be created, which a used-up quota
    makes, and which a gang restarting its pods (a JobSet's restart) is for moments only.
    Finished gangs are not: Volcano's scheduler gives a PodGroup whose ``minMember`` pods have
    all run and finished (Succeeded or Failed) the phase ``Completed`` (volcano v1.15.1
    pkg/scheduler/framework/session.go, ``getPodGroupPhase``; ``ScheduledStatus`` and
    ``CompletedStatus``, pkg/scheduler/api/helpers.go), and KubeRay sets a finished RayJob's
    ``minMember`` to 0 once its cluster is gone (volcano_scheduler.go,
    ``CleanupOnCompletion``). Volcano moves a PodGroup without pods back to ``Pending`` (or
    leaves it ``Inqueue``: ``getPodGroupPhase`` with no pod; pkg/scheduler/framework/
    job_updater.go, ``updateJob``, writes every PodGroup's status, pods or not), so a gang
    whose owner stopped it without deleting its PodGroup would pend from its last pod. A
    TrainJob's is such a gang when it is suspended (its JobSet's pods deleted) or finished
    and its pods deleted (by hand, a JobSet's TTL, or its deadline: Trainer deletes the JobSet
    of a TrainJob past ``activeDeadlineSeconds``, pkg/controller/trainjob_controller.go,
    ``reconcileDeadline``): Trainer's volcano plugin keeps the PodGroup, owned by the
    TrainJob, and rebuilds it while the TrainJob is suspended (kubeflow/trainer v2.3.0
    pkg/runtime/framework/plugins/volcano/volcano.go, ``Build``). The PodGroup has the
    TrainJob's name (``Build``; ``EnforcePodGroupPolicy`` names it on the pods), so a gang
    without pods whose TrainJob has ``spec.suspend`` true or a ``Complete`` or ``Failed``
    condition True (pkg/util/trainjob/trainjob.go, ``IsTrainJobFinished``) does not pend.
    Not seen through: a suspended RayCluster or RayJob, whose PodGroup (``ray-<name>-pg``)
    KubeRay keeps with its ``minMember`` while it deletes the pods (ray-project/kuberay v1.7.0
    ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go: only a finished
    RayJob's PodGroup is resized, in ``CleanupOnCompletion``), and a PodGroup Volcano's
    podgroup controller made for the pods of a controller that outlives them (it is owned by
    the pod's controller: volcano v1.15.1 pkg/controllers/podgroup/pg_controller_handler.go,
    ``newPGOwnerReferences``); a notebook's pod has no controller, so its PodGroup goes with
    it. Failed pods are not live: a Job whose pod failed keeps it while its controller creates
    a replacement, which the quota may refuse.

    Its reason is the first that holds: it lacks pods and its team quota has less left of some
    resource than one of its pods requests (:func:`quota_shortfall_rules`); its PodGroup is
    still Pending (its Volcano queue, or an ancestor, has not admitted it); it was admitted and
    its pods are unschedulable (no node fits and Karpenter has not brought one); otherwise
    unknown. A gang without pods whose quota shows no shortfall (its PodGroup sets no
    ``minResources``, or a pod larger than its average is refused, or something other than
    the quota refuses its pods: a webhook, a LimitRange) is ``queue`` while its queue has not
    admitted it and ``unknown`` after: its controller's and Jobs' events say why.

    Args:
        config: the validated platform (``observability.gangPendingAlertMinutes``; its teams'
            quotas for the quota reason).
    """
    minutes = config.observability.gang_pending_alert_minutes
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'

    # Volcano's enqueue action moves a PodGroup from Pending to Inqueue once its queue's
    # capacity (and its ancestors', enableHierarchy) admits it (volcano v1.15.1 pkg/scheduler/
    # actions/enqueue/enqueue.go; pkg/scheduler/plugins/capacity/capacity.go,
    # checkJobEnqueueableHierarchically, the only JobEnqueueableFn of components/scheduling.py's
    # tiers): still Pending is the queue's doing. Enqueue does not ask for the gang's pods, so
    # a gang without pods may be admitted.
    # Volcano marks every pending task unschedulable, admitted or not (pkg/scheduler/cache/
    # cache.go), so capacity is an admitted gang's unschedulable pods only.
    def phase(phases: str) -> str:
        selector = f'{ksm}, phase=~"{phases}"'
        return f"max by (namespace, podgroup) ({PODGROUP_PHASE_METRIC}{{{selector}}}) == 1"

    # A ResourceQuota counts a created pod as used, Pending or not, until it ends: a full quota
    # blocks only a gang that has fewer live pods than it needs (Kubernetes refused to create
    # the rest), not one whose pods exist and wait for nodes.
    members = f"count by (namespace, podgroup) ({_pods_of_gangs(_LIVE)})"
    needs = f"max by (namespace, podgroup) ({PODGROUP_MIN_MEMBER_METRIC}{{{ksm}}})"
    stopped_jobs = (
        f"max by (namespace, trainjob) ({TRAINJOB_SUSPENDED_METRIC}{{{ksm}}} == 1) or "
        f"max by (namespace, trainjob) ({TRAINJOB_CONDITION_METRIC}{{{ksm}, "
        f'condition=~"{"|".join(TRAINJOB_FINISHED_CONDITIONS)}"}} == 1)'
    )
    # A TrainJob's PodGroup has its name (volcano.go, Build).
    stopped = f'label_replace({stopped_jobs}, "podgroup", "$1", "trainjob", "(.+)")'
    podless = (
        f"(({needs} > 0) and on(namespace, podgroup) ({phase('Pending|Inqueue')})) "
        f"unless on(namespace, podgroup) {members} unless on(namespace, podgroup) {stopped}"
    )
    short = f"({needs} > on(namespace, podgroup) {members}) or ({podless})"
    shortfall = quota_shortfall_rules(config, short, podless)

    pods_pending = (
        f"max by (namespace, podgroup) ((time() - max by (namespace, pod) (kube_pod_created)) "
        f"* on(namespace, pod) group_left(podgroup) ({_pods_of_gangs(_PENDING)}))"
    )
    created = f"max by (namespace, podgroup) ({PODGROUP_CREATED_METRIC}{{{ksm}}})"
    last_live = f"last_over_time({GANG_LIVE_RULE}[{GANG_LIVE_LOOKBACK}])"
    since = (
        f"max by (namespace, podgroup) ({_tagged(created, 'created')} or "
        f"{_tagged(last_live, 'live')})"
    )
    group_pending = f"(time() - {since}) and on(namespace, podgroup) ({podless})"
    with_queue = (
        f"({pods_pending} or {group_pending}) * on(namespace, podgroup) group_left(queue) "
        f"group by (namespace, podgroup, queue) ({PODGROUP_CREATED_METRIC}{{{ksm}}})"
    )
    capacity = f"count by (namespace, podgroup) ({_pods_of_gangs(_UNSCHEDULABLE)})"
    checks = {
        "quota": f"{GANG_PENDING_RULE} and on(namespace, podgroup) {GANG_QUOTA_SHORTFALL_RULE}",
        "queue": f"{GANG_PENDING_RULE} and on(namespace, podgroup) ({phase('Pending')})",
        "capacity": f"{GANG_PENDING_RULE} and on(namespace, podgroup) "
        f"({phase('Inqueue|Unknown')}) and on(namespace, podgroup) {capacity}",
        "unknown": GANG_PENDING_RULE,
    }
    if not shortfall:
        del checks["quota"]
    reasons = " or on(namespace, podgroup) ".join(
        f'label_replace({check}, "reason", "{reason}", "", "")' for reason, check in checks.items()
    )
    return [
        # A stopped TrainJob's gang counts as live: its clock starts again when it resumes,
        # not at its suspension (or creation), in the seconds before Trainer makes its pods.
        record(
            GANG_LIVE_RULE,
            f"0 * ({members} or max by (namespace, podgroup) ({stopped})) + time()",
        ),
        record(GANG_PENDING_RULE, with_queue),
        *shortfall,
        record(GANG_PENDING_REASON_RULE, reasons),
        alert(
            "GangPending",
            f"{GANG_PENDING_RULE} > {minutes * 60}",
            severity="warning",
            summary="Gang {{ $labels.namespace }}/{{ $labels.podgroup }} (queue "
            "{{ $labels.queue }}) pending for {{ $value | humanizeDuration }}: "
            + GANG_PENDING_REASON_TEMPLATE,
            description=f"A pod of the gang has waited for a node for more than {minutes} "
            "minutes (observability.gangPendingAlertMinutes), or the gang has had no live pod "
            "for that long since its PodGroup was made or its pods last lived. The reason "
            "says why: quota (the gang lacks pods and its team quota has less left of a "
            "resource than one of its pods requests, or than its PodGroup's minResources "
            "divided by its minMember where it has no pod; "
            f"{GANG_QUOTA_SHORTFALL_RULE} names the resource), queue (the Volcano queue has "
            "not admitted the gang: no room under its capability or an ancestor's), capacity "
            "(admitted, but no node fits and Karpenter has not launched one) or unknown (for "
            "a gang without pods: something other than a quota it can judge refuses them; "
            "its job's and Jobs' events say what). The reason is read when the alert is sent, "
            "not a label, so a change of reason is the same alert.",
        ),
    ]


def neuron_attribution_rules() -> list[dict[str, Any]]:
    """NeuronCore utilisation attributed to the pods that hold a node's Neuron devices.

    neuron-monitor's Prometheus bridge labels its series with the instance (``instance_id``,
    ``instance_type``, ``availability_zone``), the NeuronCore (``neuroncore``) and the Neuron
    runtime's tag (``runtime_tag``), never a pod or namespace: the SDK's dashboard groups
    ``neuroncore_utilization_ratio`` by ``neuroncore`` and ``instance_id`` (aws-neuron/
    aws-neuron-sdk v2.31.1 src/examples/neuron-monitor/neuron-monitor-grafana.json), the user
    guide's JSON report keys runtimes by tag and pid and names no pod unless ``k8s_info`` is on
    (tools/neuron-sys-tools/neuron-monitor-user-guide.rst), and the other labels are the
    catalogue's, read from the bridge script (components/observability/metric_catalog.py
    ``NEURON_MONITOR``: the script is not in the SDK's repository). The scrape adds ``node``
    (:func:`components.observability.sources.node_relabelings`). Its pod mapping (the
    ``neuron-monitor-k8s-info.py`` companion, ``--enable-k8s-info``) is Beta, off by default,
    and came with aws-neuronx-tools 2.23.16.0 (Neuron 2.23.0, release-notes/components/
    dev-tools.rst), after the image the platform runs was first published. So a node's
    utilisation goes to the running pods that request Neuron devices on it
    (``kube_pod_container_resource_requests``, whose ``node`` is the pod's
    ``spec.nodeName``, kube-state-metrics v2.20.0 internal/store/pod.go), under every name
    the device plugin hands them out by. Training pods on Trainium pools take the whole node
    (components/workloads.py ``node_resources``), so this is the pod's own; where two pods
    hold devices of one node, each gets the node's mean. The bridge reports the cores that a
    Neuron runtime has loaded, so the mean is over the cores in use, per logical NeuronCore
    on Trn2 (dev-tools.rst, Neuron Developer Tools 2.20.204.0). A node with no runtime
    loaded, whose pods hold devices and run no model yet (or have stopped), has no
    utilisation series at all; its holders get 0 where the node's neuron-monitor is scraped
    (``up`` of its job, which carries ``node`` from the target's relabeling), and nothing
    where it is not, so a dashboard counts idle accelerators and does not show a monitor
    that is down as idle.
    """
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'
    names = "|".join(ksm_resource(r) for r in (catalog.NEURON_RESOURCE, *OTHER_NEURON_RESOURCES))
    holders = (
        f"group by (namespace, pod, node) (kube_pod_container_resource_requests{{{ksm}, "
        f'resource=~"{names}", node!=""}} > 0) and on(namespace, pod) '
        f'(max by (namespace, pod) (kube_pod_status_phase{{{ksm}, phase="Running"}}) == 1)'
    )
    neuron = f'job="{NEURON_MONITOR_JOB}"'
    per_node = f"avg by (node) (neuroncore_utilization_ratio{{{neuron}}})"
    # A holder on a node whose monitor is scraped and reports no loaded core is idle: 0, not
    # absent, so that dashboards count it. A node whose monitor is down stays absent.
    monitored = f"max by (node) (up{{{neuron}}}) == 1"
    idle = f"0 * ({holders} and on(node) ({monitored}))"
    return [
        record(
            NEURON_POD_UTILIZATION_RULE,
            f"({per_node} * on(node) group_right() ({holders})) or on(namespace, pod) {idle}",
        )
    ]


def capacity_rules() -> list[dict[str, Any]]:
    """Karpenter's failed launches: no capacity (in a reservation or the zone), or errors."""
    return [
        alert(
            "KarpenterInsufficientCapacity",
            "sum by (nodepool, capacity_type) (increase(karpenter_nodeclaims_disrupted_total"
            f'{{reason="insufficient_capacity"}}[{KARPENTER_WINDOW}])) > 0',
            severity="warning",
            summary="Pool {{ $labels.nodepool }} ({{ $labels.capacity_type }}) could not "
            "launch nodes: insufficient capacity",
            description="EC2 had no capacity for the pool's NodeClaims in the last "
            f"{KARPENTER_WINDOW}; Karpenter deleted them and will retry. On a reserved pool the "
            "capacity reservation is used up or expired; otherwise the zone is out of the "
            "instance type. Gangs waiting on this pool stay pending.",
        ),
        alert(
            "KarpenterLaunchErrors",
            "sum by (error) (increase(karpenter_cloudprovider_errors_total"
            f'{{method="Create", error!="InsufficientCapacityError"}}[{KARPENTER_WINDOW}])) > 0',
            severity="warning",
            summary="Karpenter launches failing: {{ $labels.error }}",
            description=f"Launches failed in the last {KARPENTER_WINDOW} for a reason other "
            "than capacity (an empty error is one Karpenter does not classify: its log says "
            "which). A NodeClassNotReadyError means the EC2NodeClass cannot resolve its AMI, "
            "subnets or security groups.",
        ),
    ]


SLURM_UNHEALTHY_STATES: Final = ("down", "drained", "fail")
"""Slurm's per-partition node counts the alert reads (SchedMD/slurm slurm-26-05-3-1
src/slurmctld/statistics.c, _statistics_part_aggregate_node): ``down`` (base state DOWN),
``drained`` (the DRAIN flag on a node that runs no job) and ``fail`` (the FAIL flag). Not
``draining``: a node still running jobs while it drains is what the Slinky operator makes on
scale-in, for as long as its jobs run (slurm-operator v1.2.1 internal/controller/nodeset/
nodeset_sync.go: it deletes the pod once the node is drained, rechecking every 30 s). The counts
overlap (a DOWN node with DRAIN or FAIL is in two; src/common/slurm_protocol_defs.h), so the
alert takes their largest, not their sum."""


def node_health_rules() -> list[dict[str, Any]]:
    """Nodes unhealthy in Slurm (down, drained, failed) or in Kubernetes (tainted, not Ready)."""
    counts = " or ".join(
        f'label_replace(sum by (partition) (slurm_partition_nodes_{state}), "state", "{state}", '
        '"", "")'
        for state in SLURM_UNHEALTHY_STATES
    )
    return [
        alert(
            "SlurmNodesUnhealthy",
            f"max by (partition) ({counts}) > 0",
            severity="warning",
            for_=NODE_UNHEALTHY_FOR,
            summary="Slurm partition {{ $labels.partition }} has at least {{ $value }} nodes "
            "down, drained or failed",
            description=f"For {NODE_UNHEALTHY_FOR} slurmctld has counted nodes of the "
            "partition as down, drained (no job left) or failed; its jobs have fewer nodes. "
            "Nodes draining for a scale-in while their jobs run do not count. `sinfo -R` "
            "names each node and the reason.",
        ),
        alert(
            "NodeUnhealthyTainted",
            f'kube_node_spec_taint{{key="{health_marks.UNHEALTHY_TAINT_KEY}"}} > 0',
            severity="warning",
            for_=TAINT_FOR,
            summary="Node {{ $labels.node }} is marked unhealthy by {{ $labels.value }}",
            description=f"The node carries the {health_marks.UNHEALTHY_TAINT_KEY} taint (set "
            "by the acceptance agent, the Slurm health mirror or the monitoring, as its value "
            "says); no new pod lands on it. Its trainingplatform.io/unhealthy-reason "
            "annotation says why.",
        ),
        alert(
            "NodeNotReady",
            'kube_node_status_condition{condition="Ready", status="true"} == 0',
            severity="warning",
            for_=NODE_SETTLE_FOR,
            summary="Node {{ $labels.node }} is not Ready",
            description=f"The kubelet has not reported Ready for {NODE_SETTLE_FOR}; pods on "
            "the node are not running or not reachable.",
        ),
    ]


def _remembered(rule: str, now: str, key: str, since: str) -> str:
    """A time kept at its first value: the rule's own last value, or ``now`` when it has none.

    A recording rule may read its own earlier samples; ``last_over_time`` over
    :data:`LEDGER_LOOKBACK` carries the first value forward, so a later change (a pod restarted,
    a PodGroup back to Pending when it lost a pod) moves nothing. A remembered value older than
    ``since`` (the gang's submission) belonged to a deleted gang of the same name: dropped.

    Args:
        rule: the rule's own name.
        now: the time as seen at this evaluation (labels ``key``).
        key: the labels that name a gang or job, comma-separated.
        since: the gang's submission time (labels ``key``).
    """
    return (
        f"(last_over_time({rule}[{LEDGER_LOOKBACK}]) >= on({key}) group_left() {since}) or ({now})"
    )


def ledger_rules(config: PlatformConfig) -> list[dict[str, Any]]:
    """The cold-start ledger: each cold gang's seconds from submission to each stage.

    Inputs and their labels:

    - ``PODGROUP_CREATED_METRIC{namespace, podgroup, queue}``: the gang's submission time;
    - ``PODGROUP_PHASE_METRIC{namespace, podgroup, queue, phase}``: whether its queue has
      admitted it (any phase but Pending);
    - ``NODECLAIM_CONDITION_METRIC{nodeclaim, nodepool, node, condition, status}``: when each
      NodeClaim turned Launched, Registered and Initialized (``status="True"`` only: a
      condition still Unknown has a transition time too);
    - ``kube_pod_annotations{namespace, pod, annotation_scheduling_k8s_io_group_name}`` and
      ``kube_pod_info{namespace, pod, node}``: the gang's pods and their nodes;
    - ``kube_pod_status_ready_time{namespace, pod}``: when each pod turned Ready;
    - ``FIRST_STEP_METRIC{namespace, pod}``: when each pod finished its first step (the
      PodMonitor's target labels).

    The custom resource series are read only from kube-state-metrics' job and the first step
    only from the first-step PodMonitor's (:data:`~components.observability.ledger.
    KUBE_STATE_METRICS_JOB`, :data:`~components.observability.ledger.FIRST_STEP_JOB`): a
    series of the same name from any other target (a team's pod) is not the ledger's.

    A gang is cold when its last node launched after it was submitted (it waited for a new
    node); a gang whose nodes all existed has no ledger entry. A gang is recorded only until
    :data:`LEDGER_WINDOW` after its first step: each stage keeps the value of the gang's first
    start, and a restart later (within :data:`LEDGER_LOOKBACK` of the last first step seen) is
    not a new cold start. A gang's nodes are normally in one pool (the runtimes and node sets
    are per pool); one whose nodes came from two counts once, every stage under the pool whose
    nodes launched last, so each gang is one sample in its pool's quantiles. Each stage is the
    last node (or pod) to reach it, except the first step, the earliest pod's.

    Queue wait: Volcano marks a gang's pending pods Unschedulable whether or not its queue has
    admitted it (volcano-sh/volcano v1.15.1 pkg/scheduler/cache/cache.go,
    ``RecordJobStatusEvent``: every Pending task of every job of the session;
    pkg/scheduler/api/job_info.go, ``TaskSchedulingReason``), and Karpenter provisions for any
    pod so marked (kubernetes-sigs/karpenter v1.14.1 pkg/utils/pod/scheduling.go,
    ``IsProvisionable`` and ``FailedToSchedule``; pkg/controllers/provisioning/provisioner.go,
    ``GetPendingPods``), so a NodeClaim's creation says nothing of admission. Admission is the
    PodGroup leaving Pending (volcano v1.15.1 pkg/scheduler/actions/enqueue/enqueue.go; the
    capacity plugin's ``checkJobEnqueueableHierarchically``). On a fleet with no node of the
    gang's accelerator Volcano's ``root`` queue does not know it
    (pkg/scheduler/plugins/capacity/capacity.go, ``buildHierarchicalQueueAttrs``), so
    admission waits for the first such node: the pool's doing. The queue wait
    (:data:`GANG_QUEUE_WAIT_RULE`) is therefore only the time from the gang's nodes being
    initialized (or its submission, if later) to its admission, and 0 for a gang admitted
    before its nodes were ready; the ``cold_start`` stage is the first step less it.

    Args:
        config: the validated platform (each pool's cold-start budget).
    """
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'
    key = "namespace, podgroup"
    created = f"max by ({key}) ({PODGROUP_CREATED_METRIC}{{{ksm}}})"
    pods = (
        f'label_replace(kube_pod_annotations{{{GROUP_LABEL}!=""}}, "podgroup", "$1", '
        f'"{GROUP_LABEL}", "(.+)") * on(namespace, pod) group_left(node) '
        'max by (namespace, pod, node) (kube_pod_info{node!=""})'
    )
    rules = [
        record(POD_GANG_RULE, f"group by (namespace, pod, podgroup, node) ({pods})"),
        record(GANG_NODE_RULE, f"group by (namespace, podgroup, node) ({POD_GANG_RULE})"),
    ]
    first_step = (
        f'min by ({key}) (max by (namespace, pod) ({FIRST_STEP_METRIC}{{job="'
        f'{FIRST_STEP_JOB}"}}) '
        f"* on(namespace, pod) group_left(podgroup) {POD_GANG_RULE})"
    )
    rules.append(record(GANG_FIRST_STEP_RULE, first_step))
    # The scrape at which the PodGroup was first seen in any phase but Pending.
    admitted_now = (
        f'min by ({key}) (timestamp({PODGROUP_PHASE_METRIC}{{{ksm}, phase!="Pending"}} == 1))'
    )
    rules.append(
        record(GANG_ADMITTED_RULE, _remembered(GANG_ADMITTED_RULE, admitted_now, key, created))
    )
    not_ready = f"({POD_GANG_RULE} unless on(namespace, pod) kube_pod_status_ready_time)"
    ready = (
        f"max by ({key}) (max by (namespace, pod) (kube_pod_status_ready_time) "
        f"* on(namespace, pod) group_left(podgroup) {POD_GANG_RULE}) "
        f"unless on({key}) {not_ready}"
    )
    rules.append(
        record(GANG_PODS_RUNNING_RULE, _remembered(GANG_PODS_RUNNING_RULE, ready, key, created))
    )
    # Gangs that had their first step more than the window ago: settled, recorded no more.
    settled = f"last_over_time({GANG_FIRST_STEP_RULE}[{LEDGER_LOOKBACK}] offset {LEDGER_WINDOW})"
    # The ledger's Slurm series (slurm_job_id, no podgroup) are not a gang's.
    launched = f'{GANG_COLD_START_RULE}{{stage="nodes_launched", podgroup!=""}}'
    # A gang whose nodes came from two pools is the last-launched pool's.
    pool_of = f"on({key}) group_left(nodepool) (0 * {launched})"
    slurm = _slurm_ledger_rules()
    rules.extend(slurm.rules)
    for stage, condition in STAGE_CONDITIONS.items():
        claims = (
            f'{NODECLAIM_CONDITION_METRIC}{{{ksm}, condition="{condition}", status="True", '
            'node!=""}'
        )
        # Claims not yet registered have no node: left out, or they would collide on node="".
        per_pool = (
            f"max by ({key}, nodepool) (max by (node, nodepool) ({claims}) "
            f"* on(node) group_right(nodepool) {GANG_NODE_RULE}) "
            f"- on({key}) group_left() {created}"
        )
        # The first stage decides which gangs are cold and their pool; the later ones follow.
        expr = (
            f"(topk by ({key}) (1, {per_pool}) > 0) unless on({key}) {settled}"
            if stage == "nodes_launched"
            else f"max by ({key}) ({per_pool}) + {pool_of}"
        )
        # One rule per stage for gangs and Slurm jobs alike (their labels differ).
        expr = f"({expr}) or ({slurm.stages[stage]})"
        rules.append(record(GANG_COLD_START_RULE, expr, {"stage": stage}))
    for stage, when in (
        ("admitted", GANG_ADMITTED_RULE),
        ("pods_running", GANG_PODS_RUNNING_RULE),
        ("first_step", GANG_FIRST_STEP_RULE),
    ):
        expr = f"({when} - on({key}) {created}) + {pool_of}"
        if stage in slurm.stages:
            expr = f"({expr}) or ({slurm.stages[stage]})"
        rules.append(record(GANG_COLD_START_RULE, expr, {"stage": stage}))
    admitted = f'{GANG_COLD_START_RULE}{{stage="admitted", podgroup!=""}}'
    initialized = f'{GANG_COLD_START_RULE}{{stage="nodes_initialized", podgroup!=""}}'
    wait = (
        f"max without (stage) (clamp_min({admitted} - ignoring(stage) {initialized}, 0)) "
        f"or max without (stage) (0 * {launched})"
    )
    rules.append(record(GANG_QUEUE_WAIT_RULE, f"({wait}) or ({slurm.queue_wait})"))
    rules.append(
        record(
            GANG_COLD_START_RULE,
            f'{GANG_COLD_START_RULE}{{stage="first_step"}} - ignoring(stage) '
            f"{GANG_QUEUE_WAIT_RULE}",
            {"stage": "cold_start"},
        )
    )
    rules.extend(
        record(COLD_START_BUDGET_METRIC, f"vector({budget_seconds(pool)})", {"nodepool": pool.name})
        for pool in config.node_pools
    )
    budget = f"on(nodepool) group_left() {COLD_START_BUDGET_METRIC}"
    # Gangs and Slurm jobs with a first step: its cold start proper.
    took = f'max without (stage) ({GANG_COLD_START_RULE}{{stage="cold_start"}})'
    gang_wait = f'{GANG_QUEUE_WAIT_RULE}{{podgroup!=""}}'
    # A cold gang whose pods are not all running yet, and has no first step: the time so far,
    # less its queue wait.
    stuck = (
        f"((time() - {created}) - on({key}) group_right() {gang_wait}) "
        f"unless on({key}) {GANG_PODS_RUNNING_RULE} unless on({key}) {GANG_FIRST_STEP_RULE}"
    )
    # Once all its pods have run, the clock of a gang without a first step stops there: its
    # program may simply not mark one. Judged for the ledger window after, as a first step is.
    ran = (
        f"(({GANG_PODS_RUNNING_RULE} - on({key}) {created}) - on({key}) group_right() "
        f"{gang_wait}) unless on({key}) {GANG_FIRST_STEP_RULE} "
        f"and on({key}) (time() - {GANG_PODS_RUNNING_RULE} < {LEDGER_WINDOW_SECONDS})"
    )
    terms = (took, stuck, ran, slurm.started)
    rules.append(
        alert(
            "ColdStartOverBudget",
            " or ".join(f"(({term}) > {budget})" for term in terms),
            severity="warning",
            for_=COLD_START_STUCK_FOR,
            # A gang's podgroup or a Slurm job's id (namespace slurm): the other is empty.
            summary="{{ $labels.namespace }}/{{ $labels.podgroup }}{{ $labels.slurm_job_id }} is "
            "{{ $value | humanizeDuration }} into its cold start on pool "
            "{{ $labels.nodepool }}, past the pool's budget",
            description="Less the time it waited for its queue once its nodes were ready, the "
            "gang (or Slurm job) took longer than the pool's cold-start budget "
            "(nodePools[].coldStartBudgetMinutes) to its first training step, or has taken "
            "longer so far with its pods not all running yet, or took longer to its pods "
            "running (a Slurm job: to its start) and has marked no first step. A gang whose "
            "pods all run and that marks no first step is judged at its pods running, for "
            f"{LEDGER_WINDOW} after; it is not held to the budget while it runs. The ledger's "
            "dashboard shows which stage took the time.",
        )
    )
    return rules


@dataclass(frozen=True)
class _SlurmLedger:
    """What :func:`_slurm_ledger_rules` gives :func:`ledger_rules`."""

    rules: list[dict[str, Any]]
    """The rules of the jobs' nodes, submissions, starts and first steps."""
    stages: dict[str, str]
    """Each stage's expression, recorded with the gangs' (one rule per stage)."""
    queue_wait: str
    """Each cold job's queue wait (labels ``namespace``, ``slurm_job_id``, ``nodepool``)."""
    started: str
    """The alert's term for a cold job with no first step: its seconds to its start, less its
    queue wait, for :data:`LEDGER_WINDOW` after it started."""


def _slurm_ledger_rules() -> _SlurmLedger:
    """The ledger's Slurm jobs: each cold job's seconds from submission to each stage.

    Inputs, each read only from the slurmd pods' first-step PodMonitor's job
    (:data:`~components.observability.ledger.FIRST_STEP_SLURM_JOB`, which scrapes nothing but
    :data:`SLURM_NAMESPACE`) and that namespace (a team's pod serving the same names is not
    Slurm's):

    - ``SLURM_JOB_SUBMIT_METRIC{namespace, pod, slurm_job_id}`` and
      ``SLURM_JOB_START_METRIC{...}``: the job's submission and start, written by the
      TaskProlog on each node the job runs a task on (components/first_step.py), so its
      slurmd pods, and through ``kube_pod_info`` their nodes, are the job's;
    - ``FIRST_STEP_METRIC{namespace, pod, slurm_job_id}``: the job's first step;
    - ``kube_node_labels``: each node's platform pool (``trainingplatform.io/pool``): a pool's
      Slurm nodes come from its ``<pool>-slurm`` NodePool, and the budgets are the pool's;
    - ``kube_pod_status_ready_time`` of its slurmd pods: when its nodes were ready for Slurm;
    - the NodeClaims' conditions, as for gangs.

    Stages are recorded under ``namespace="slurm"``, ``slurm_job_id`` and the platform pool of
    its last-launched node: ``admitted`` (slurmctld started it: it allocates only nodes whose
    slurmd has registered, so a cold job starts after its nodes), ``nodes_launched``,
    ``nodes_registered``, ``nodes_initialized`` (the job's last node) and ``first_step`` (the
    earliest). ``pods_running`` is not defined for a Slurm job: its slurmd pods run before it
    starts, and its tasks are processes, not pods. A job is cold when its last node launched
    after it was submitted, and is recorded, as a gang is, only until :data:`LEDGER_WINDOW`
    after its first step (each stage keeps its first value). Its queue wait is the time from its
    last slurmd pod Ready (or its submission, if later) to its start: the time it waited behind
    other jobs or limits with its nodes up.
    """
    job = f'job="{FIRST_STEP_SLURM_JOB}", namespace="{SLURM_NAMESPACE}", slurm_job_id!=""'
    ksm = f'job="{KUBE_STATE_METRICS_JOB}"'
    key = "namespace, slurm_job_id"
    pools = (
        f'max by (node, nodepool) (label_replace(kube_node_labels{{{PLATFORM_POOL_LABEL}!=""}}, '
        f'"nodepool", "$1", "{PLATFORM_POOL_LABEL}", "(.+)"))'
    )
    nodes = (
        f"group by ({key}, node, nodepool) "
        f"(max by ({key}, pod) ({SLURM_JOB_SUBMIT_METRIC}{{{job}}}) "
        f"* on(namespace, pod) group_left(node) max by (namespace, pod, node) "
        f'(kube_pod_info{{namespace="{SLURM_NAMESPACE}", node!=""}}) '
        f"* on(node) group_left(nodepool) {pools})"
    )
    rules = [
        record(SLURM_JOB_NODE_RULE, nodes),
        record(SLURM_JOB_SUBMIT_RULE, f"max by ({key}) ({SLURM_JOB_SUBMIT_METRIC}{{{job}}})"),
        record(SLURM_JOB_START_RULE, f"min by ({key}) ({SLURM_JOB_START_METRIC}{{{job}}})"),
        record(SLURM_JOB_FIRST_STEP_RULE, f"min by ({key}) ({FIRST_STEP_METRIC}{{{job}}})"),
    ]
    settled = (
        f"last_over_time({SLURM_JOB_FIRST_STEP_RULE}[{LEDGER_LOOKBACK}] offset {LEDGER_WINDOW})"
    )
    launched = f'{GANG_COLD_START_RULE}{{stage="nodes_launched", slurm_job_id!=""}}'
    since = f"on({key}) group_left() {SLURM_JOB_SUBMIT_RULE}"
    pool_of = f"on({key}) group_left(nodepool) (0 * {launched})"
    stages: dict[str, str] = {}
    for stage, condition in STAGE_CONDITIONS.items():
        claims = (
            f'{NODECLAIM_CONDITION_METRIC}{{{ksm}, condition="{condition}", status="True", '
            'node!=""}'
        )
        # The claim's own nodepool is the <pool>-slurm NodePool: the job's node rule has the
        # platform pool.
        per_pool = (
            f"max by ({key}, nodepool) (max by (node) ({claims}) "
            f"* on(node) group_right() {SLURM_JOB_NODE_RULE}) - {since}"
        )
        stages[stage] = (
            f"(topk by ({key}) (1, {per_pool}) > 0) unless on({key}) {settled}"
            if stage == "nodes_launched"
            else f"max by ({key}) ({per_pool}) + {pool_of}"
        )
    stages["admitted"] = f"(({SLURM_JOB_START_RULE}) - {since}) + {pool_of}"
    stages["first_step"] = f"(({SLURM_JOB_FIRST_STEP_RULE}) - {since}) + {pool_of}"
    slurmd_ready = (
        f"max by ({key}) (max by ({key}, pod) ({SLURM_JOB_SUBMIT_METRIC}{{{job}}}) * 0 "
        f"+ on(namespace, pod) group_left() max by (namespace, pod) "
        f'(kube_pod_status_ready_time{{namespace="{SLURM_NAMESPACE}"}}))'
    )
    admitted = f'{GANG_COLD_START_RULE}{{stage="admitted", slurm_job_id!=""}}'
    queue_wait = (
        f"max without (stage) (clamp_min({admitted} - on({key}) group_left() "
        f"clamp_min({slurmd_ready} - on({key}) {SLURM_JOB_SUBMIT_RULE}, 0), 0)) "
        f"or max without (stage) (0 * {launched})"
    )
    started = (
        f"(max without (stage) ({admitted}) - "
        f'{GANG_QUEUE_WAIT_RULE}{{slurm_job_id!=""}}) '
        f"unless on({key}) {SLURM_JOB_FIRST_STEP_RULE} "
        f"and on({key}) (time() - {SLURM_JOB_START_RULE} < {LEDGER_WINDOW_SECONDS})"
    )
    return _SlurmLedger(rules, stages, queue_wait, started)


def quantile_rules() -> list[dict[str, Any]]:
    """The ledger's p50 and p95 per pool and stage over the gangs of a rolling 24 h.

    Each value is over the gangs recorded in the 24 hours before it, not a calendar day; a gang
    is recorded only until shortly after its first step (:data:`LEDGER_WINDOW`), so it counts
    in the 24 h after its cold start and no longer. Each gang counts once: its largest value
    over the window (a stage can move later, e.g. when a pod restarts before the gang is Ready).
    """
    return [
        record(
            name,
            f"quantile by (nodepool, stage) ({q}, max_over_time({GANG_COLD_START_RULE}[1d]))",
        )
        for q, name in sorted(COLD_START_QUANTILE_RULES.items())
    ]


def budget_seconds(pool: NodePoolConfig) -> int:
    """A pool's cold-start budget, seconds: its own, or its instance families' default.

    Args:
        pool: the pool.
    """
    minutes = pool.cold_start_budget_minutes
    if minutes is None:
        minutes = catalog.cold_start_budget_minutes(pool.instance_types)
    return minutes * 60


def rule_groups(config: PlatformConfig) -> list[dict[str, Any]]:
    """Every rule group of the platform, each to be one PrometheusRule.

    Args:
        config: the validated platform.
    """
    groups = [
        group(f"{RULE_PREFIX}-accelerators", accelerator_rules(config)),
        group(f"{RULE_PREFIX}-gangs", gang_rules(config)),
        group(f"{RULE_PREFIX}-capacity", capacity_rules()),
        group(f"{RULE_PREFIX}-node-health", node_health_rules()),
        group(f"{RULE_PREFIX}-cold-start-ledger", ledger_rules(config)),
        group(f"{RULE_PREFIX}-cold-start-quantiles", quantile_rules(), QUANTILE_INTERVAL),
    ]
    if any(p.instance.accelerator_resource == catalog.NEURON_RESOURCE for p in config.node_pools):
        groups.append(group(f"{RULE_PREFIX}-neuron", neuron_attribution_rules()))
    site = config.observability.runbooks_url
    if site is not None:
        for rule in (rule for each in groups for rule in each["rules"] if "alert" in rule):
            rule["annotations"]["runbook_url"] = runbook_url(rule["alert"], site)
    return groups


def prometheus_rule(rule_group: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule object of one group (prometheus-operator v0.93.1 CRD).

    Args:
        rule_group: a group of :func:`rule_groups`.
    """
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": rule_group["name"],
            "namespace": MONITORING_NAMESPACE,
            "labels": dict(RULE_LABELS),
        },
        "spec": {"groups": [rule_group]},
    }


def register_rules(
    config: PlatformConfig,
    *,
    ready: Sequence[pulumi.Resource],
    provider: pulumi.ProviderResource,
    opts: pulumi.ResourceOptions | None = None,
) -> list[k8s.apiextensions.CustomResource]:
    """Create one PrometheusRule per rule group.

    Args:
        config: the validated platform.
        ready: what the rules wait for (the metrics stack's release, which installs the
            PrometheusRule CRD and the namespace).
        provider: the cluster's Kubernetes provider.
        opts: resource options (a parent).
    """
    options = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(provider=provider, depends_on=list(ready))
    )
    made = []
    for rule_group in rule_groups(config):
        manifest = prometheus_rule(rule_group)
        made.append(
            k8s.apiextensions.CustomResource(
                f"rules-{rule_group['name']}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=typing.cast(Any, manifest["spec"]),
                opts=options,
            )
        )
    return made


# --------------------------------------------------------------------------- CloudWatch

FSX_THROUGHPUT_ALARM_PERCENT: Final = 80
"""Share of the file system's throughput capacity at which the saturation alarm fires: past it
reads and writes queue, and checkpoints and data loading slow down."""
FSX_THROUGHPUT_PERIOD_SECONDS: Final = 300
FSX_THROUGHPUT_PERIODS: Final = 3
"""Fifteen minutes in a row: a checkpoint's burst is minutes; a quarter hour is saturation."""


def fsx_throughput_capacity_bytes(lustre: LustreConfig) -> int:
    """The file system's throughput capacity, bytes a second: MB/s per TiB times its TiB.

    FSx for Lustre PERSISTENT_2 provisions ``PerUnitStorageThroughput`` MB/s for each TiB of
    storage (FSx for Lustre User Guide, "Amazon FSx for Lustre performance").

    Args:
        lustre: the file system's config.
    """
    return math.floor(lustre.throughput_per_tib * 10**6 * lustre.storage_capacity_gib / 1024)


def fsx_throughput_alarm_args(
    config: PlatformConfig, lustre: LustreConfig, file_system_id: pulumi.Input[str]
) -> dict[str, Any]:
    """Arguments of the throughput saturation alarm (``aws.cloudwatch.MetricAlarm``).

    It watches read plus write bytes a second, from ``AWS/FSx`` ``DataReadBytes`` and
    ``DataWriteBytes`` (``Sum`` over a period divided by its seconds is the throughput; FSx for
    Lustre User Guide, "Amazon FSx for Lustre metrics"), and fires above
    :data:`FSX_THROUGHPUT_ALARM_PERCENT` of the capacity.

    The free-capacity alarm already exists (components/storage/capacity.py); this is the one
    the storage lacked.

    Args:
        config: the validated platform (the cluster's name, in the description).
        lustre: the file system's config (capacity, throughput per TiB, alarm actions).
        file_system_id: the file system.
    """
    threshold = fsx_throughput_capacity_bytes(lustre) * FSX_THROUGHPUT_ALARM_PERCENT // 100

    def metric(query_id: str, name: str) -> aws.cloudwatch.MetricAlarmMetricQueryArgs:
        return aws.cloudwatch.MetricAlarmMetricQueryArgs(
            id=query_id,
            return_data=False,
            metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(
                namespace=FSX_CLOUDWATCH_NAMESPACE,
                metric_name=name,
                dimensions={FSX_CLOUDWATCH_DIMENSION: file_system_id},
                period=FSX_THROUGHPUT_PERIOD_SECONDS,
                stat="Sum",
            ),
        )

    return {
        "alarm_description": f"{config.name}: the Lustre file system has moved more than "
        f"{FSX_THROUGHPUT_ALARM_PERCENT}% of its {lustre.throughput_per_tib} MB/s per TiB "
        "throughput for 15 minutes (docs/how-to/alert-runbooks.md, FSxThroughputSaturated)",
        "metric_queries": [
            metric("read", "DataReadBytes"),
            metric("write", "DataWriteBytes"),
            aws.cloudwatch.MetricAlarmMetricQueryArgs(
                id="throughput",
                expression="(read + write) / PERIOD(read)",
                label="Bytes a second read and written",
                return_data=True,
            ),
        ],
        "comparison_operator": "GreaterThanThreshold",
        "threshold": threshold,
        "evaluation_periods": FSX_THROUGHPUT_PERIODS,
        "treat_missing_data": "notBreaching",
        "alarm_actions": list(lustre.alarm_actions),
        "ok_actions": list(lustre.alarm_actions),
    }


def register_fsx_alarms(
    name: str,
    config: PlatformConfig,
    *,
    file_system_id: pulumi.Input[str],
    opts: pulumi.ResourceOptions | None = None,
) -> list[aws.cloudwatch.MetricAlarm]:
    """The FSx alarms the storage lacks (throughput saturation), where the stack has Lustre.

    Args:
        name: prefix of the alarms' resource names.
        config: the validated platform.
        file_system_id: the Lustre file system (the storage component's ``file_system_id``).
        opts: resource options (a parent).
    """
    lustre = config.storage.lustre
    if lustre is None:
        return []
    return [
        aws.cloudwatch.MetricAlarm(
            f"{name}-lustre-throughput",
            **fsx_throughput_alarm_args(config, lustre, file_system_id),
            opts=opts,
        )
    ]
