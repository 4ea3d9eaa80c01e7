"""Grafana dashboards as code: the fleet's, each team's, and the cold-start ledger's.

Built with grafana-foundation-sdk's builders (requirements.txt pins the SDK generated from
Grafana 10.1's schema) and serialised with its ``JSONEncoder``; nothing here is hand-written
dashboard JSON. :func:`platform_dashboards` is pure: the metrics stack registers each
:class:`Dashboard` as a ConfigMap that Grafana's dashboard sidecar loads into its folder
(docs: concepts, observability, "Dashboards").

Every query is PromQL over metrics that the exporters at our pins export; their names are spelt
once, in the constants below, each beside the upstream file that defines it. Labels that only
exist because kube-state-metrics was told to copy them (a node's pool and capacity type, a
pod's gang) are listed in :data:`KSM_NODE_LABELS_ALLOWLIST` and
:data:`KSM_POD_ANNOTATIONS_ALLOWLIST`, which the metrics stack passes to kube-state-metrics.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from grafana_foundation_sdk.builders import (
    bargauge,
    cloudwatch,
    common,
    prometheus,
    stat,
    table,
    text,
    timeseries,
)
from grafana_foundation_sdk.builders.dashboard import (
    ConstantVariable,
    QueryVariable,
    Row,
)
from grafana_foundation_sdk.builders.dashboard import (
    Dashboard as DashboardBuilder,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import cloudwatch as cloudwatch_models
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dashboard_models
from grafana_foundation_sdk.models import prometheus as prometheus_models
from grafana_foundation_sdk.models import text as text_models
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    VariableHide,
    VariableRefresh,
    VariableSort,
)

from components import catalog
from components.metric_names import (
    CLOUDWATCH_DATASOURCE_UID,
    COLD_START_BUDGET_METRIC,
    COLD_START_QUANTILE_RULES,
    COLD_START_STAGES,
    FSX_CLOUDWATCH_DIMENSION,
    FSX_CLOUDWATCH_NAMESPACE,
    GANG_COLD_START_RULE,
    PROMETHEUS_DATASOURCE_UID,
    efa_port_counter,
)
from components.observability.ledger import POD_GROUP_ANNOTATION
from components.observability.rules import NEURON_POD_UTILIZATION_RULE
from components.storage.capacity import release_schedules

if TYPE_CHECKING:
    from grafana_foundation_sdk.cog import builder as cogbuilder

    from components.config import PlatformConfig, TeamConfig

# --- Where the dashboards go ---------------------------------------------------------------

FLEET_FOLDER: Final = "Fleet"
"""Folder of the platform's dashboards (every team reads it; docs: concepts, observability)."""
UID_PREFIX: Final = "tp"
"""First part of every dashboard uid (``tp-<name>``), so ours never collide with imported ones."""
UID_MAX: Final = 40
"""Grafana's longest dashboard uid (grafana/grafana-foundation-sdk v10.1.x+cog-v0.0.x
jsonschema/dashboard.jsonschema.json: "Unique dashboard identifier ... string (8-40)")."""
UID_MIN: Final = 8
PANEL_HEIGHT: Final = 8
"""Grid rows per panel (the grid is 24 columns wide)."""

PROMETHEUS: Final = DataSourceRef(type_val="prometheus", uid=PROMETHEUS_DATASOURCE_UID)
CLOUDWATCH: Final = DataSourceRef(type_val="cloudwatch", uid=CLOUDWATCH_DATASOURCE_UID)

# --- The metrics the queries name, per exporter -----------------------------------------------

# kube-state-metrics v2.20.0: kube-prometheus-stack 88.5.3 (Chart.yaml) pulls the
# kube-state-metrics chart 8.4.0, appVersion 2.20.0 (prometheus-community/helm-charts
# kube-state-metrics-8.4.0 charts/kube-state-metrics/Chart.yaml).
KSM_NODE_ALLOCATABLE: Final = "kube_node_status_allocatable"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/node.go: ``resource`` is the resource
name with every character outside ``[a-zA-Z0-9_]`` replaced by ``_`` (``nvidia_com_gpu``),
``unit`` ``integer`` for extended resources (internal/store/utils.go SanitizeLabelName)."""
KSM_NODE_LABELS: Final = "kube_node_labels"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/node.go: ``label_<sanitized key>`` for
each node label in ``--metric-labels-allowlist``."""
KSM_POD_REQUESTS: Final = "kube_pod_container_resource_requests"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/pod.go (labels ``namespace``, ``pod``,
``container``, ``node``, ``resource``, ``unit``)."""
KSM_POD_PHASE: Final = "kube_pod_status_phase"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/pod.go (label ``phase``)."""
KSM_POD_ANNOTATIONS: Final = "kube_pod_annotations"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/pod.go: ``annotation_<sanitized key>``
for each pod annotation in ``--metric-annotations-allowlist``."""
KSM_POD_INFO: Final = "kube_pod_info"
"""kubernetes/kube-state-metrics v2.20.0 internal/store/pod.go (label ``node``)."""

NODEPOOL_NODE_LABEL: Final = "karpenter.sh/nodepool"
"""Karpenter's label of a node's NodePool (components/node_pools.py NODE_POOL_LABEL)."""
CAPACITY_TYPE_NODE_LABEL: Final = "karpenter.sh/capacity-type"
"""Karpenter's capacity-type label; ``reserved`` on nodes launched into a capacity reservation
(kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go CapacityTypeReserved)."""
GANG_ANNOTATION: Final = POD_GROUP_ANNOTATION
"""Volcano's annotation naming a pod's PodGroup: the gang (components/observability/ledger.py)."""
KSM_NODE_LABELS_ALLOWLIST: Final = (NODEPOOL_NODE_LABEL, CAPACITY_TYPE_NODE_LABEL)
"""Node labels the dashboards need kube-state-metrics to copy into :data:`KSM_NODE_LABELS`
(``--metric-labels-allowlist=nodes=[...]``)."""
KSM_POD_ANNOTATIONS_ALLOWLIST: Final = (GANG_ANNOTATION,)
"""Pod annotations the dashboards need in :data:`KSM_POD_ANNOTATIONS`
(``--metric-annotations-allowlist=pods=[...]``)."""

# dcgm-exporter 4.8.2 (NVIDIA/dcgm-exporter tag 4.5.3-4.8.2): the DCGM fields the platform asks
# it for (components/observability/metric_catalog.py DCGM_COUNTERS, its counters file).
# Labels: ``Hostname`` is the node (NODE_NAME, deployment/templates/daemonset.yaml and
# internal/pkg/hostname/hostname.go); ``pod`` and ``namespace`` are the pod holding the GPU
# (internal/pkg/transformation/const.go), which survive the scrape only with the
# ServiceMonitor's honorLabels (the chart's serviceMonitor.honorLabels; else they are renamed
# exported_pod and exported_namespace).
DCGM_GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
"""GPU utilisation, percent."""
DCGM_FB_USED: Final = "DCGM_FI_DEV_FB_USED"
"""Frame buffer (GPU memory) used, MiB."""
DCGM_FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
"""Frame buffer free, MiB."""
DCGM_NVLINK_TX: Final = "DCGM_FI_PROF_NVLINK_TX_BYTES"
"""NVLink bytes sent per second, all links (a profiling field, a gauge)."""
DCGM_NVLINK_RX: Final = "DCGM_FI_PROF_NVLINK_RX_BYTES"
"""NVLink bytes received per second, all links."""
DCGM_TENSOR_ACTIVE: Final = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
"""Ratio of cycles the tensor pipe is active."""
DCGM_HOST_LABEL: Final = "Hostname"

# neuron-monitor's Prometheus bridge (neuron-monitor-prometheus.py, aws-neuron/aws-neuron-sdk
# tools/neuron-sys-tools/neuron-monitor-user-guide.rst); the names as in the SDK's own
# dashboard, src/examples/neuron-monitor/neuron-monitor-grafana.json. The bridge labels no
# node: the scrape adds it (:data:`SCRAPED_NODE_LABEL`).
NEURONCORE_UTILIZATION: Final = "neuroncore_utilization_ratio"
"""Per NeuronCore (label ``neuroncore``), 0-1."""
NEURON_MEMORY_USED: Final = "neuron_runtime_memory_used_bytes"
"""Per memory location (label ``memory_location``), bytes."""

# The EFA exporter (images/efa-exporter): one counter per hw_counters file of each EFA device
# and port (labels ``device``, ``port``), named after amzn/amzn-drivers efa_linux_3.1.0
# kernel/linux/efa/src/efa_verbs.c EFA_DEFINE_PORT_STATS.
EFA_TX_BYTES: Final = efa_port_counter("tx_bytes")
EFA_RX_BYTES: Final = efa_port_counter("rx_bytes")
EFA_RETRANS_PKTS: Final = efa_port_counter("retrans_pkts")

SCRAPED_NODE_LABEL: Final = "node"
"""Label with the node's name that the EFA exporter's and neuron-monitor's monitors add from
``__meta_kubernetes_pod_node_name`` (their programs do not know it)."""

# Volcano v1.15.1: the scheduler's pkg/scheduler/metrics/queue.go (label ``queue_name``; scalar
# resources also ``resource``, the resource's name unchanged) and the controller's
# pkg/controllers/metrics/queue.go. Volcano exports no guarantee: it comes from config.
VOLCANO_QUEUE_ALLOCATED: Final = "volcano_queue_allocated_scalar_resources"
VOLCANO_QUEUE_DESERVED: Final = "volcano_queue_deserved_scalar_resources"
VOLCANO_QUEUE_CAPABILITY: Final = "volcano_queue_capacity_scalar_resources"
VOLCANO_QUEUE_REQUEST: Final = "volcano_queue_request_scalar_resources"
VOLCANO_PODGROUPS_PENDING: Final = "volcano_queue_pod_group_pending_count"
VOLCANO_PODGROUPS_INQUEUE: Final = "volcano_queue_pod_group_inqueue_count"
VOLCANO_PODGROUPS_RUNNING: Final = "volcano_queue_pod_group_running_count"

# Karpenter v1.14.1 pkg/controllers/metrics/nodepool/controller.go (labels ``nodepool``,
# ``resource_type``: the resource name lower-cased, "-" as "_"; pkg/metrics/constants.go).
KARPENTER_NODEPOOL_USAGE: Final = "karpenter_nodepools_usage"
KARPENTER_NODEPOOL_LIMIT: Final = "karpenter_nodepools_limit"

# Slurm 26.05 slurmctld's OpenMetrics (SchedMD/slurm slurm-26-05-3-1
# src/plugins/metrics/openmetrics/openmetrics.c): cluster-wide gauges and per partition
# (label ``partition``).
SLURM_NODE_STATES: Final = ("alloc", "mixed", "idle", "drain", "down")
"""Node states shown, each ``slurm_nodes_<state>`` and ``slurm_partition_nodes_<state>``."""
SLURM_JOB_STATES: Final = ("running", "pending")
"""Job states shown, each ``slurm_jobs_<state>`` and ``slurm_partition_jobs_<state>``."""
SLURM_PARTITION_GPUS_ALLOC: Final = "slurm_partition_jobs_gpus_alloc"

# Amazon FSx for Lustre in CloudWatch (namespace AWS/FSx, dimension FileSystemId; the stack's
# alarms: components/storage/capacity.py), and the release schedules' failures queue (AWS/SQS).
FSX_READ_BYTES: Final = "DataReadBytes"
FSX_WRITE_BYTES: Final = "DataWriteBytes"
FSX_METADATA_OPERATIONS: Final = "MetadataOperations"
FSX_FREE_CAPACITY: Final = "FreeDataStorageCapacity"
FSX_CLIENT_CONNECTIONS: Final = "ClientConnections"
SQS_NAMESPACE: Final = "AWS/SQS"
SQS_MESSAGES_SENT: Final = "NumberOfMessagesSent"
RELEASE_FAILURES_QUEUE_PATTERN: Final = "/.*-lustre-release-failures.*/"
"""The release schedules' dead-letter queue: components/storage/capacity.py names the Pulumi
resource ``storage-lustre-release-failures`` in every stack, and the queue is that name plus
Pulumi's suffix; so the dashboard's variable lists each such queue of the account and region."""

# --- The accelerators ---------------------------------------------------------------------


@dataclass(frozen=True)
class Accelerator:
    """One kind of accelerator: how each source names it and where its utilisation is."""

    title: str
    resource: str
    """Kubernetes extended resource (Volcano and Karpenter keep the name as it is)."""

    @property
    def ksm_resource(self) -> str:
        """The resource as kube-state-metrics labels it (``nvidia_com_gpu``)."""
        return _sanitized(self.resource)


GPU: Final = Accelerator("NVIDIA GPUs", catalog.GPU_RESOURCE)
NEURON: Final = Accelerator("Neuron devices", catalog.NEURON_RESOURCE)


@dataclass(frozen=True)
class Dashboard:
    """One dashboard, ready for Grafana.

    Attributes:
        uid: stable and unique, derived from names (at most 40 characters).
        title: shown in Grafana.
        folder: title of the Grafana folder it goes in (:data:`FLEET_FOLDER` or a team's).
        model: the dashboard JSON (grafana-foundation-sdk's model, serialised).
    """

    uid: str
    title: str
    folder: str
    model: dict[str, Any] = field(hash=False)

    def json(self) -> str:
        """The model as the ConfigMap's file content (sorted keys, so it is stable)."""
        return json.dumps(self.model, sort_keys=True, indent=1)


# --- Public ---------------------------------------------------------------------------------


def platform_dashboards(config: PlatformConfig) -> list[Dashboard]:
    """Every dashboard of a stack: the fleet folder's, then one folder per team.

    Fleet folder: fleet, jobs (any team), queues, cold starts, and where configured storage
    (``storage.lustre``) and Slurm (``slurm.enabled``). Each team's folder: its jobs and its
    queue, the ``namespace`` variable fixed to the team.

    Args:
        config: the validated platform.
    """
    kinds = accelerators(config)
    efa = any(pool.uses_efa for pool in config.node_pools)
    dashboards = [
        _fleet(config, kinds),
        _jobs(kinds, team=None, efa=efa),
        _queues(config.teams, kinds, folder=FLEET_FOLDER),
        _cold_starts(),
    ]
    if config.storage.lustre is not None:
        dashboards.append(_storage(config))
    if config.slurm.enabled:
        dashboards.append(_slurm())
    for team in sorted(config.teams, key=lambda t: t.name):
        dashboards.append(_jobs(kinds, team=team.name, efa=efa))
        dashboards.append(_queues([team], kinds, folder=team.name))
    return dashboards


def accelerators(config: PlatformConfig) -> list[Accelerator]:
    """The accelerator kinds the stack's pools have, GPUs first (no rows for absent kinds).

    Args:
        config: the validated platform.
    """
    resources = {pool.instance.accelerator_resource for pool in config.node_pools}
    return [kind for kind in (GPU, NEURON) if kind.resource in resources]


def team_folders(config: PlatformConfig) -> dict[str, TeamConfig]:
    """Folder title -> the team that owns it (its groups get the folder's permissions).

    Args:
        config: the validated platform.
    """
    return {team.name: team for team in config.teams}


def dashboard_uid(*parts: str) -> str:
    """A uid from names: ``tp-<parts>``, shortened with a digest past 40 characters.

    Args:
        parts: the names that identify the dashboard (e.g. team, "jobs").
    """
    uid = "-".join((UID_PREFIX, *parts))
    if len(uid) <= UID_MAX:
        return uid
    digest = hashlib.sha256(uid.encode()).hexdigest()[:8]
    return f"{uid[: UID_MAX - len(digest) - 1]}-{digest}"


GRAFANA_MACROS: Final = {"$__rate_interval": "2m", "$__interval": "1m", "$__range": "1d"}
"""Grafana's interval macros in our queries, and a duration each stands for when a query is
parsed outside Grafana (Grafana substitutes them before Prometheus sees the query)."""


def prometheus_queries(model: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression of a dashboard model, as Prometheus would receive it.

    Panel targets and the expressions inside query variables' ``label_values(...)``, with
    :data:`GRAFANA_MACROS` substituted (dashboard variables such as ``$namespace`` stand inside
    label matchers' strings, so they parse as they are).

    Args:
        model: a :attr:`Dashboard.model`.
    """
    expressions: list[str] = []
    for panel in _panels(model):
        for target in panel.get("targets") or []:
            if (target.get("datasource") or {}).get("type") == "prometheus" and "expr" in target:
                expressions.append(target["expr"])
    for variable in (model.get("templating") or {}).get("list") or []:
        source = (variable.get("datasource") or {}).get("type")
        if variable.get("type") == "query" and source == "prometheus":
            expressions.append(_variable_expression(variable["query"]))
    for expression in expressions:
        expanded = expression
        for macro, duration in GRAFANA_MACROS.items():
            expanded = expanded.replace(macro, duration)
        yield expanded


# --- Dashboards -----------------------------------------------------------------------------


def _fleet(config: PlatformConfig, kinds: Sequence[Accelerator]) -> Dashboard:
    reserved = sorted(p.name for p in config.node_pools if p.capacity_type == "reserved")
    builder = _dashboard(
        "fleet",
        "Fleet: accelerators per pool and team",
        "Accelerators allocatable, busy (requested by running pods) and idle per Karpenter "
        "pool, who uses them, reservations in use, and utilisation.",
    )
    for kind in kinds:
        allocatable = _per_pool(_allocatable(kind))
        busy = _per_pool(_busy(kind))
        builder = (
            builder.with_row(Row(kind.title))
            .with_panel(
                _timeseries("Allocatable, busy and idle per pool", "short", 12)
                .with_target(
                    _prom(f"sum by (nodepool) ({allocatable})", "{{nodepool}} allocatable")
                )
                .with_target(_prom(f"sum by (nodepool) ({busy})", "{{nodepool}} busy"))
                .with_target(
                    _prom(
                        f"sum by (nodepool) ({allocatable}) - "
                        f"(sum by (nodepool) ({busy}) or 0 * sum by (nodepool) ({allocatable}))",
                        "{{nodepool}} idle",
                    )
                )
            )
            .with_panel(
                _bargauge("Busy per team", 6).with_target(
                    _prom(f"sum by (namespace) ({_busy(kind)})", "{{namespace}}", instant=True)
                )
            )
            .with_panel(
                _stat("Busy of allocatable", "percentunit", 6).with_target(
                    _prom(f"sum({_busy(kind)}) / sum({_allocatable(kind)})", kind.title)
                )
            )
            .with_panel(
                _table("Busy per pool and team", 12).with_target(
                    _prom(
                        f"sum by (nodepool, namespace) ({_per_pool(_busy(kind))})",
                        "",
                        instant=True,
                        table=True,
                    )
                )
            )
            .with_panel(
                _timeseries("Reservations in use (capacity type reserved)", "short", 12)
                .description(
                    "Pools launching into capacity reservations: "
                    + (", ".join(reserved) if reserved else "none in this stack")
                    + ". Reserved nodes carry karpenter.sh/capacity-type=reserved."
                )
                .with_target(
                    _prom(
                        f"sum by (nodepool) ({_per_pool(_allocatable(kind), reserved=True)})",
                        "{{nodepool}} reserved",
                    )
                )
                .with_target(
                    _prom(
                        f"sum by (nodepool) ({_per_pool(_busy(kind), reserved=True)})",
                        "{{nodepool}} busy",
                    )
                )
            )
            .with_panel(
                _timeseries("Pool usage and limit (Karpenter)", "short", 12)
                .with_target(
                    _prom(
                        f'{KARPENTER_NODEPOOL_USAGE}{{resource_type="{_karpenter(kind)}"}}',
                        "{{nodepool}} launched",
                    )
                )
                .with_target(
                    _prom(
                        f'{KARPENTER_NODEPOOL_LIMIT}{{resource_type="{_karpenter(kind)}"}}',
                        "{{nodepool}} limit",
                    )
                )
            )
            .with_panel(
                _timeseries("Utilisation per pool", "percentunit", 12)
                .min(0)
                .max(1)
                .with_target(_prom(_pool_utilisation(kind), "{{nodepool}}"))
            )
            .with_panel(
                _timeseries("Utilisation per team", "percentunit", 12)
                .description(
                    "Mean utilisation of the accelerators each team's pods hold: DCGM labels a "
                    "GPU with its pod. " + _NEURON_PER_POD
                )
                .min(0)
                .max(1)
                .with_target(_prom(_team_utilisation(kind), "{{namespace}}"))
            )
        )
    return _built(builder, FLEET_FOLDER)


def _jobs(kinds: Sequence[Accelerator], team: str | None, efa: bool) -> Dashboard:
    key = "fleet-jobs" if team is None else f"{team}-jobs"
    builder = _dashboard(
        key,
        f"Jobs: {'any team' if team is None else team}",
        "One gang (a Volcano PodGroup: its pods' scheduling.k8s.io/group-name): accelerator "
        "utilisation and memory per pod, NVLink and EFA throughput per node, stragglers.",
    )
    builder = builder.with_variable(_namespace_variable(team)).with_variable(
        _query_variable(
            "gang",
            f'label_values({KSM_POD_ANNOTATIONS}{{namespace="$namespace", '
            f'{_annotation(GANG_ANNOTATION)}!=""}}, {_annotation(GANG_ANNOTATION)})',
        )
    )
    pods = _gang_pods()
    if GPU in kinds:
        per_pod = f"avg by (pod) ({DCGM_GPU_UTIL} * on (namespace, pod) group_left () {pods})"
        builder = (
            builder.with_row(Row("NVIDIA GPUs"))
            .with_panel(
                _timeseries("GPU utilisation per pod", "percent", 12)
                .min(0)
                .max(100)
                .with_target(_prom(per_pod, "{{pod}}"))
            )
            .with_panel(
                _timeseries("Tensor pipe active per pod", "percentunit", 12)
                .min(0)
                .max(1)
                .with_target(
                    _prom(
                        f"avg by (pod) ({DCGM_TENSOR_ACTIVE} * on (namespace, pod) "
                        f"group_left () {pods})",
                        "{{pod}}",
                    )
                )
            )
            .with_panel(
                _timeseries("GPU memory used per pod", "mbytes", 12)
                .with_target(
                    _prom(
                        f"sum by (pod) ({DCGM_FB_USED} * on (namespace, pod) group_left () {pods})",
                        "{{pod}} used",
                    )
                )
                .with_target(
                    _prom(
                        f"sum by (pod) (({DCGM_FB_USED} + {DCGM_FB_FREE}) * on (namespace, pod) "
                        f"group_left () {pods})",
                        "{{pod}} total",
                    )
                )
            )
            .with_panel(
                _timeseries("NVLink throughput per pod", "Bps", 12)
                .description(
                    f"{DCGM_NVLINK_TX} plus {DCGM_NVLINK_RX}, summed over the pod's GPUs "
                    "(bytes a second, averaged by DCGM over its sampling interval)."
                )
                .with_target(
                    _prom(
                        f"sum by (pod) (({DCGM_NVLINK_TX} + {DCGM_NVLINK_RX}) "
                        f"* on (namespace, pod) group_left () {pods})",
                        "{{pod}}",
                    )
                )
            )
            .with_panel(
                _timeseries("Stragglers: slowest pod and median pod utilisation", "percent", 12)
                .description(
                    "A pod far below the median holds the gang back (every step waits for "
                    "the slowest rank)."
                )
                .with_target(_prom(f"min({per_pod})", "slowest pod"))
                .with_target(_prom(f"quantile(0.5, {per_pod})", "median pod"))
            )
            .with_panel(
                _table("Pods by utilisation relative to the median", 12).with_target(
                    _prom(
                        f"sort({per_pod} / scalar(quantile(0.5, {per_pod})))",
                        "",
                        instant=True,
                        table=True,
                    )
                )
            )
        )
    if NEURON in kinds:
        nodes = _gang_nodes()
        per_pod = (
            f"avg by (pod) ({NEURON_POD_UTILIZATION_RULE} * on (namespace, pod) group_left () "
            f"{pods})"
        )
        builder = (
            builder.with_row(Row("Neuron devices"))
            .with_panel(
                _timeseries("NeuronCore utilisation per pod", "percentunit", 12)
                .description(_NEURON_PER_POD)
                .min(0)
                .max(1)
                .with_target(_prom(per_pod, "{{pod}}"))
            )
            .with_panel(
                _timeseries("Neuron runtime memory per node", "bytes", 12).with_target(
                    _prom(
                        f"sum by ({SCRAPED_NODE_LABEL}) ({NEURON_MEMORY_USED} * on "
                        f"({SCRAPED_NODE_LABEL}) group_left () {nodes})",
                        "{{node}}",
                    )
                )
            )
            .with_panel(
                _timeseries("NeuronCore stragglers: slowest pod and median pod", "percentunit", 12)
                .with_target(_prom(f"min({per_pod})", "slowest pod"))
                .with_target(_prom(f"quantile(0.5, {per_pod})", "median pod"))
            )
        )
    if efa:
        nodes = _gang_nodes()
        builder = (
            builder.with_row(Row("EFA"))
            .with_panel(
                _timeseries("EFA throughput per node", "Bps", 12)
                .with_target(_prom(_efa_rate(EFA_TX_BYTES, nodes), "{{node}} sent"))
                .with_target(_prom(_efa_rate(EFA_RX_BYTES, nodes), "{{node}} received"))
            )
            .with_panel(
                _timeseries("EFA retransmitted packets per node", "pps", 12).with_target(
                    _prom(_efa_rate(EFA_RETRANS_PKTS, nodes), "{{node}}")
                )
            )
        )
    return _built(builder, FLEET_FOLDER if team is None else team)


def _queues(teams: Sequence[TeamConfig], kinds: Sequence[Accelerator], folder: str) -> Dashboard:
    fleet = folder == FLEET_FOLDER
    key = "fleet-queues" if fleet else f"{teams[0].name}-queue"
    names = "|".join(sorted(team.name for team in teams))
    selector = f'queue_name=~"{names or ".+"}"' if fleet else f'queue_name="{teams[0].name}"'
    builder = _dashboard(
        key,
        "Queues: every team" if fleet else f"Queue: {teams[0].name}",
        "Each team's Volcano queue: guarantee (from config: Volcano exports none), deserved, "
        "allocated and capability, and its gangs pending, waiting in the queue and running.",
    )
    for kind in kinds:
        resource = f'resource="{kind.resource}"'
        panel = _timeseries("Guarantee, deserved, allocated and capability", "short", 24)
        if teams:
            panel = panel.with_target(_prom(_guarantees(teams, kind), "{{queue_name}} guarantee"))
        builder = builder.with_row(Row(kind.title)).with_panel(
            panel.with_target(
                _prom(
                    f"{VOLCANO_QUEUE_DESERVED}{{{selector}, {resource}}}",
                    "{{queue_name}} deserved",
                )
            )
            .with_target(
                _prom(
                    f"{VOLCANO_QUEUE_ALLOCATED}{{{selector}, {resource}}}",
                    "{{queue_name}} allocated",
                )
            )
            .with_target(
                _prom(
                    f"{VOLCANO_QUEUE_CAPABILITY}{{{selector}, {resource}}}",
                    "{{queue_name}} capability",
                )
            )
            .with_target(
                _prom(
                    f"{VOLCANO_QUEUE_REQUEST}{{{selector}, {resource}}}",
                    "{{queue_name}} requested",
                )
            )
        )
    builder = (
        builder.with_row(Row("Gangs"))
        .with_panel(
            _timeseries("Gangs pending, in queue and running", "short", 16)
            .with_target(
                _prom(f"{VOLCANO_PODGROUPS_PENDING}{{{selector}}}", "{{queue_name}} pending")
            )
            .with_target(
                _prom(f"{VOLCANO_PODGROUPS_INQUEUE}{{{selector}}}", "{{queue_name}} in queue")
            )
            .with_target(
                _prom(f"{VOLCANO_PODGROUPS_RUNNING}{{{selector}}}", "{{queue_name}} running")
            )
        )
        .with_panel(
            _bargauge("Pending gangs now", 8).with_target(
                _prom(f"{VOLCANO_PODGROUPS_PENDING}{{{selector}}}", "{{queue_name}}", instant=True)
            )
        )
    )
    return _built(builder, folder)


def _cold_starts() -> Dashboard:
    key = "cold-starts"
    builder = _dashboard(
        key,
        "Cold starts: submit to first step per pool",
        "The cold-start ledger: for gangs that waited for new nodes, seconds from submission "
        "to each stage (" + ", ".join(COLD_START_STAGES) + "), p50 and p95 per pool over a "
        "rolling 24 h (each point: the gangs of the 24 h before it, not a calendar day), "
        "each pool's budget, and the latest cold starts. admitted is when the gang's queue "
        "admitted it (a Slurm job: its start); cold_start is the first step less the time the "
        "gang waited for its queue with its nodes up, what the budget is compared with.",
    )
    builder = builder.with_variable(
        _query_variable(
            "nodepool",
            f"label_values({COLD_START_QUANTILE_RULES[0.95]}, nodepool)",
            multi=True,
        )
    )
    pool = 'nodepool=~"$nodepool"'
    for quantile, rule in sorted(COLD_START_QUANTILE_RULES.items()):
        percent = f"p{round(quantile * 100)}"
        panel = (
            _timeseries(f"{percent} per stage, rolling 24 h", "s", 12)
            .interval("1h")
            .with_target(_prom(f"{rule}{{{pool}}}", "{{nodepool}} {{stage}}"))
        )
        if quantile == max(COLD_START_QUANTILE_RULES):
            panel = panel.with_target(
                _prom(f"{COLD_START_BUDGET_METRIC}{{{pool}}}", "{{nodepool}} budget")
            )
        builder = builder.with_panel(panel)
    # The last stage, cold_start (the first step less the queue wait), is what the budget
    # and ColdStartOverBudget compare.
    budgeted = f'stage="{COLD_START_STAGES[-1]}"'
    builder = builder.with_panel(
        _table(
            "Per pool, rolling 24 h to each day's end: cold start (first step less queue "
            "wait) p50, p95, budget",
            12,
        )
        .interval("1d")
        .with_target(
            _prom(
                f"{COLD_START_QUANTILE_RULES[0.5]}{{{pool}, {budgeted}}}",
                "p50",
                table=True,
            )
        )
        .with_target(
            _prom(
                f"{COLD_START_QUANTILE_RULES[0.95]}{{{pool}, {budgeted}}}",
                "p95",
                table=True,
            )
        )
        .with_target(_prom(f"{COLD_START_BUDGET_METRIC}{{{pool}}}", "budget", table=True))
    ).with_panel(
        _table("Cold starts of the last 24 h, per gang and stage", 12).with_target(
            _prom(
                f"last_over_time({GANG_COLD_START_RULE}{{{pool}}}[1d])",
                "",
                instant=True,
                table=True,
            )
        )
    )
    return _built(builder, FLEET_FOLDER)


def _storage(config: PlatformConfig) -> Dashboard:
    lustre = config.storage.lustre
    assert lustre is not None
    key = "storage"
    schedules = release_schedules(lustre)
    lines = [
        f"- `{association.file_system_path}`: files unread for "
        f"{association.release_after_days} days, `{expression}` (UTC)"
        for association, expression in schedules
    ]
    builder = _dashboard(
        key,
        "Storage: the Lustre file system",
        "FSx for Lustre from CloudWatch (AWS/FSx): throughput, metadata operations, free "
        "capacity, client connections, and the daily release tasks.",
    ).with_variable(
        QueryVariable("filesystem")
        .label("File system")
        .datasource(CLOUDWATCH)
        .query(
            {
                "queryType": "dimensionValues",
                "namespace": FSX_CLOUDWATCH_NAMESPACE,
                "region": "default",
                "metricName": FSX_FREE_CAPACITY,
                "dimensionKey": FSX_CLOUDWATCH_DIMENSION,
                "refId": "filesystem",
            }
        )
        .refresh(VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(VariableSort.ALPHABETICAL_ASC)
    )
    builder = builder.with_variable(
        QueryVariable("release_queue")
        .label("Release failures queue")
        .datasource(CLOUDWATCH)
        .query(
            {
                "queryType": "dimensionValues",
                "namespace": SQS_NAMESPACE,
                "region": "default",
                "metricName": SQS_MESSAGES_SENT,
                "dimensionKey": "QueueName",
                "refId": "release_queue",
            }
        )
        .regex(RELEASE_FAILURES_QUEUE_PATTERN)
        .refresh(VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(VariableSort.ALPHABETICAL_ASC)
    )
    builder = (
        builder.with_panel(
            _timeseries("Throughput", "Bps", 12, CLOUDWATCH).targets(
                [
                    *_fsx(FSX_READ_BYTES, "Sum", "read", per_second=True),
                    *_fsx(FSX_WRITE_BYTES, "Sum", "written", per_second=True),
                ]
            )
        )
        .with_panel(
            _timeseries("Metadata operations", "ops", 12, CLOUDWATCH).targets(
                list(_fsx(FSX_METADATA_OPERATIONS, "Sum", "operations", per_second=True))
            )
        )
        .with_panel(
            _timeseries("Free capacity", "bytes", 12, CLOUDWATCH)
            .description(
                f"Summed over the storage targets; the stack's alarm fires under "
                f"{lustre.free_capacity_alarm_percent}% of {lustre.storage_capacity_gib} GiB."
            )
            .targets(list(_fsx(FSX_FREE_CAPACITY, "Sum", "free", period="60")))
        )
        .with_panel(
            _timeseries("Client connections", "short", 12, CLOUDWATCH).targets(
                list(_fsx(FSX_CLIENT_CONNECTIONS, "Sum", "connections"))
            )
        )
        .with_panel(
            _timeseries("Release tasks that could not start", "short", 12, CLOUDWATCH).with_target(
                cloudwatch.CloudWatchMetricsQuery()
                .datasource(CLOUDWATCH)
                .ref_id("release_failures")
                .query_mode(cloudwatch_models.CloudWatchQueryMode.METRICS)
                .metric_query_type(cloudwatch_models.MetricQueryType.SEARCH)
                .metric_editor_mode(cloudwatch_models.MetricEditorMode.BUILDER)
                .region("default")
                .namespace(SQS_NAMESPACE)
                .metric_name(SQS_MESSAGES_SENT)
                .dimensions({"QueueName": "$release_queue"})
                .match_exact(True)
                .statistic("Sum")
                .label("failed runs")
            )
        )
        .with_panel(
            text.Panel()
            .title("Release schedules")
            .span(12)
            .height(8)
            .mode(text_models.TextMode.MARKDOWN)
            .content(
                "Daily FSx release tasks free files that S3 already holds:\n\n"
                + ("\n".join(lines) if lines else "no path sets releaseAfterDays.")
                + "\n\nA run FSx refused lands in the failures queue (panel on the left) and "
                "its alarm fires."
            )
        )
    )
    return _built(builder, FLEET_FOLDER)


def _slurm() -> Dashboard:
    key = "slurm"
    builder = _dashboard(
        key,
        "Slurm: partitions, jobs and nodes",
        "slurmctld's own OpenMetrics (metrics/openmetrics): nodes by state, jobs by state, "
        "per partition.",
    )
    builder = (
        builder.with_row(Row("Cluster"))
        .with_panel(
            _timeseries("Nodes by state", "short", 12).with_target(
                _prom(
                    " or ".join(
                        f'label_replace(slurm_nodes_{state}, "state", "{state}", "", "")'
                        for state in SLURM_NODE_STATES
                    ),
                    "{{state}}",
                )
            )
        )
        .with_panel(
            _timeseries("Jobs by state", "short", 12).with_target(
                _prom(
                    " or ".join(
                        f'label_replace(slurm_jobs_{state}, "state", "{state}", "", "")'
                        for state in SLURM_JOB_STATES
                    ),
                    "{{state}}",
                )
            )
        )
        .with_row(Row("Partitions"))
    )
    for state in SLURM_JOB_STATES:
        builder = builder.with_panel(
            _timeseries(f"Jobs {state} per partition", "short", 8).with_target(
                _prom(f"slurm_partition_jobs_{state}", "{{partition}}")
            )
        )
    builder = builder.with_panel(
        _timeseries("GPUs allocated per partition", "short", 8).with_target(
            _prom(SLURM_PARTITION_GPUS_ALLOC, "{{partition}}")
        )
    ).with_panel(
        _table("Nodes per partition and state", 24).with_target(
            _prom(
                " or ".join(
                    f'label_replace(slurm_partition_nodes_{state}, "state", "{state}", "", "")'
                    for state in SLURM_NODE_STATES
                ),
                "",
                instant=True,
                table=True,
            )
        )
    )
    return _built(builder, FLEET_FOLDER)


# --- Queries --------------------------------------------------------------------------------


def _sanitized(name: str) -> str:
    """A label key or resource name as kube-state-metrics spells it in a label (or its value).

    kubernetes/kube-state-metrics v2.20.0 internal/store/utils.go SanitizeLabelName.
    """
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _label(node_label: str) -> str:
    return f"label_{_sanitized(node_label)}"


def _annotation(pod_annotation: str) -> str:
    return f"annotation_{_sanitized(pod_annotation)}"


def _node_pools(reserved: bool = False) -> str:
    """One series per node (labels ``node``, ``nodepool``): its Karpenter pool."""
    pool = _label(NODEPOOL_NODE_LABEL)
    selector = f'{pool}!=""'
    if reserved:
        selector += f', {_label(CAPACITY_TYPE_NODE_LABEL)}="reserved"'
    return (
        f'max by (node, nodepool) (label_replace({KSM_NODE_LABELS}{{{selector}}}, "nodepool", '
        f'"$1", "{pool}", "(.+)"))'
    )


def _allocatable(kind: Accelerator) -> str:
    return f'{KSM_NODE_ALLOCATABLE}{{resource="{kind.ksm_resource}", unit="integer"}}'


def _busy(kind: Accelerator) -> str:
    """Accelerators requested by running pods (labels namespace, pod, node, ...)."""
    return (
        f'{KSM_POD_REQUESTS}{{resource="{kind.ksm_resource}", unit="integer"}} '
        f'* on (namespace, pod) group_left () ({KSM_POD_PHASE}{{phase="Running"}} == 1)'
    )


def _per_pool(series: str, reserved: bool = False) -> str:
    """Series with a ``node`` label, given each node's pool (``nodepool``)."""
    return f"({series}) * on (node) group_left (nodepool) {_node_pools(reserved)}"


def _karpenter(kind: Accelerator) -> str:
    return kind.resource.lower().replace("-", "_")


def _pool_utilisation(kind: Accelerator) -> str:
    if kind is GPU:
        pools = f'label_replace({_node_pools()}, "{DCGM_HOST_LABEL}", "$1", "node", "(.+)")'
        return (
            f"avg by (nodepool) ({DCGM_GPU_UTIL} / 100 * on ({DCGM_HOST_LABEL}) "
            f"group_left (nodepool) {pools})"
        )
    return (
        f"avg by (nodepool) ({NEURONCORE_UTILIZATION} * on ({SCRAPED_NODE_LABEL}) "
        f"group_left (nodepool) {_node_pools()})"
    )


_NEURON_PER_POD: Final = (
    "neuron-monitor labels no pod: a node's NeuronCores (those a Neuron runtime uses) count "
    "for the running pods that hold its Neuron devices, so two pods sharing a node each show "
    "the node's mean (" + NEURON_POD_UTILIZATION_RULE + ")."
)


def _team_utilisation(kind: Accelerator) -> str:
    """Mean utilisation (0-1) of the accelerators each team's pods hold (label namespace)."""
    if kind is GPU:
        return f'avg by (namespace) ({DCGM_GPU_UTIL}{{namespace!=""}}) / 100'
    return f"avg by (namespace) ({NEURON_POD_UTILIZATION_RULE})"


def _gang_pods() -> str:
    """One series per pod of the selected gang (labels namespace, pod)."""
    return (
        f'max by (namespace, pod) ({KSM_POD_ANNOTATIONS}{{namespace="$namespace", '
        f'{_annotation(GANG_ANNOTATION)}="$gang"}})'
    )


def _gang_nodes() -> str:
    """One series per node running a pod of the selected gang (label ``node``)."""
    return (
        f"max by ({SCRAPED_NODE_LABEL}) ({KSM_POD_INFO} * on (namespace, pod) group_left () "
        f"{_gang_pods()})"
    )


def _efa_rate(counter: str, nodes: str) -> str:
    return (
        f"sum by ({SCRAPED_NODE_LABEL}) (rate({counter}[$__rate_interval]) * on "
        f"({SCRAPED_NODE_LABEL}) group_left () {nodes})"
    )


def _guarantees(teams: Sequence[TeamConfig], kind: Accelerator) -> str:
    """Each team's guarantee from config, as a series labelled ``queue_name``."""
    amounts = [
        (team.name, team.queue.guarantee.resources()[kind.resource])
        for team in sorted(teams, key=lambda t: t.name)
    ]
    return " or ".join(
        f'label_replace(vector({amount}), "queue_name", "{name}", "", "")'
        for name, amount in amounts
    )


def _variable_expression(query: Any) -> str:
    """The PromQL inside a query variable's ``label_values(<expr>, <label>)``."""
    text_query = query if isinstance(query, str) else str(query.get("query", ""))
    match = re.fullmatch(r"label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)", text_query, re.S)
    return match.group(1) if match else text_query


# --- Builders -------------------------------------------------------------------------------


def _dashboard(key: str, title: str, description: str) -> DashboardBuilder:
    return (
        DashboardBuilder(title)
        .uid(dashboard_uid(key))
        .description(description)
        .tags(["trainingplatform"])
        .readonly()
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("utc")
    )


def _built(builder: DashboardBuilder, folder: str) -> Dashboard:
    built = builder.build()
    # Panel ids and query refIds: numbered here, in order, as Grafana's editor would.
    panels = [
        panel
        for top in built.panels or []
        for panel in (top, *(top.panels if isinstance(top, dashboard_models.RowPanel) else ()))
    ]
    for number, panel in enumerate(panels, start=1):
        panel.id_val = number
        if isinstance(panel, dashboard_models.Panel):
            for index, target in enumerate(panel.targets or []):
                if isinstance(target, prometheus_models.Dataquery) and not target.ref_id:
                    target.ref_id = chr(ord("A") + index)
    model = json.loads(JSONEncoder(sort_keys=True).encode(built))
    return Dashboard(uid=model["uid"], title=model["title"], folder=folder, model=model)


def _namespace_variable(team: str | None) -> cogbuilder.Builder[dashboard_models.VariableModel]:
    if team is not None:
        return ConstantVariable("namespace").value(team).label("Team")
    return _query_variable("namespace", f"label_values({KSM_POD_ANNOTATIONS}, namespace)")


def _query_variable(
    name: str, query: str, multi: bool = False
) -> cogbuilder.Builder[dashboard_models.VariableModel]:
    variable = (
        QueryVariable(name)
        .datasource(PROMETHEUS)
        .query(query)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .hide(VariableHide.DONT_HIDE)
    )
    if multi:
        variable = variable.multi(True).include_all(True).all_value(".*")
    return variable


def _prom(
    expr: str, legend: str, instant: bool = False, table: bool = False
) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).datasource(PROMETHEUS)
    if legend:
        query = query.legend_format(legend)
    query = query.instant() if instant else query.range()
    if table:
        query = query.format(prometheus_models.PromQueryFormat.TABLE)
    return query


def _fsx(
    metric: str, statistic: str, label: str, per_second: bool = False, period: str = ""
) -> list[cloudwatch.CloudWatchMetricsQuery]:
    """A CloudWatch query of the selected file system; per second: Sum / PERIOD (metric math).

    Throughput and operations are published as a Sum per period (FSx for Lustre user guide,
    "Monitoring with Amazon CloudWatch"), so the rate is the sum over the period's seconds.
    """
    query = (
        cloudwatch.CloudWatchMetricsQuery()
        .datasource(CLOUDWATCH)
        .ref_id(label)
        .id(label)
        .query_mode(cloudwatch_models.CloudWatchQueryMode.METRICS)
        .metric_query_type(cloudwatch_models.MetricQueryType.SEARCH)
        .metric_editor_mode(cloudwatch_models.MetricEditorMode.BUILDER)
        .region("default")
        .namespace(FSX_CLOUDWATCH_NAMESPACE)
        .metric_name(metric)
        .dimensions({FSX_CLOUDWATCH_DIMENSION: "$filesystem"})
        .match_exact(True)
        .statistic(statistic)
        .label(label)
    )
    if period:
        query = query.period(period)
    if not per_second:
        return [query]
    return [
        query.hide(True),
        cloudwatch.CloudWatchMetricsQuery()
        .datasource(CLOUDWATCH)
        .ref_id(f"{label}_per_second")
        .query_mode(cloudwatch_models.CloudWatchQueryMode.METRICS)
        .metric_query_type(cloudwatch_models.MetricQueryType.SEARCH)
        .metric_editor_mode(cloudwatch_models.MetricEditorMode.CODE)
        .region("default")
        .expression(f"{label} / PERIOD({label})")
        .label(f"{label} per second"),
    ]


def _timeseries(
    title: str, unit: str, width: int, source: DataSourceRef = PROMETHEUS
) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .unit(unit)
        .span(width)
        .height(PANEL_HEIGHT)
        .datasource(source)
        .legend(
            common.VizLegendOptions()
            .show_legend(True)
            .display_mode(common_models.LegendDisplayMode.TABLE)
            .placement(common_models.LegendPlacement.BOTTOM)
            .calcs(["lastNotNull", "max"])
        )
        .tooltip(
            common.VizTooltipOptions()
            .mode(common_models.TooltipDisplayMode.MULTI)
            .sort(common_models.SortOrder.DESCENDING)
        )
    )


def _stat(title: str, unit: str, width: int) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .unit(unit)
        .span(width)
        .height(PANEL_HEIGHT)
        .datasource(PROMETHEUS)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
    )


def _bargauge(title: str, width: int) -> bargauge.Panel:
    return (
        bargauge.Panel()
        .title(title)
        .span(width)
        .height(PANEL_HEIGHT)
        .datasource(PROMETHEUS)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]))
        .orientation(common_models.VizOrientation.HORIZONTAL)
    )


def _table(title: str, width: int) -> table.Panel:
    return (
        table.Panel()
        .title(title)
        .span(width)
        .height(PANEL_HEIGHT)
        .datasource(PROMETHEUS)
        .show_header(True)
    )


def _panels(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in model.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []
