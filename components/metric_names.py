"""Names the observability pieces share: where the metrics stack runs, and our own metrics.

Stdlib only: the node-side programs (the EFA exporter and the first-step exporter, built into
their own images) import it as the components do, so a metric's name is spelt once.
"""

from __future__ import annotations

from typing import Final

MONITORING_NAMESPACE: Final = "monitoring"
"""Namespace of the metrics stack (kube-prometheus-stack) and the monitors of every source."""
NODE_EXPORTERS_NAMESPACE: Final = "monitoring-nodes"
"""Namespace of the node-level exporters that need the host (the DCGM exporter, neuron-monitor,
the EFA exporter): its Pod Security admits them, :data:`MONITORING_NAMESPACE`'s baseline does
not (components/observability/stack.py)."""
SLURM_NAMESPACE: Final = "slurm"
"""Namespace of Slinky's Slurm cluster (components/slurm: its daemons and slurmd pods): the
ledger reads a Slurm job's first-step samples only from its pods."""
FSX_CLOUDWATCH_NAMESPACE: Final = "AWS/FSx"
"""CloudWatch namespace of Amazon FSx's metrics (dimension ``FileSystemId``): the FSx alarms,
the storage dashboard and the metric catalog read it."""
FSX_CLOUDWATCH_DIMENSION: Final = "FileSystemId"
"""The dimension of FSx's CloudWatch metrics that names the file system."""
MONITORING_RELEASE: Final = "monitoring"
"""Release name and ``fullnameOverride`` of kube-prometheus-stack."""
PROMETHEUS_PORT: Final = 9090
PROMETHEUS_URL: Final = (
    f"http://{MONITORING_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc:{PROMETHEUS_PORT}"
)
"""The chart's Prometheus service: ``<fullname>-prometheus``, the fullname being
``fullnameOverride`` (kube-prometheus-stack 88.5.3 templates/prometheus/service.yaml)."""
PROMETHEUS_SERVICE_ACCOUNT: Final = f"{MONITORING_RELEASE}-prometheus"
"""Prometheus' service account, which the metrics stack names in the chart's values and the
JobSet metrics reader and the AMP Pod Identity role are bound to (kube-prometheus-stack 88.5.3
templates/_helpers.tpl, ``kube-prometheus-stack.prometheus.serviceAccountName``)."""
SCRAPE_INTERVAL: Final = "30s"
"""How often Prometheus scrapes every target (the ServiceMonitors' and PodMonitors' default)."""

RULE_PREFIX: Final = "trainingplatform"
"""Prefix of every recording rule the platform defines (``trainingplatform:<what>``), and of
the metrics its own programs export (``trainingplatform_<what>``)."""

EFA_EXPORTER_PORT: Final = 9500
"""Port of the EFA exporter's ``/metrics`` on each EFA node (images/efa-exporter)."""

FIRST_STEP_PORT: Final = 9501
"""Port on which a training pod serves its first-step timestamp (the ledger's last stage)."""
FIRST_STEP_METRIC: Final = f"{RULE_PREFIX}_first_step_timestamp_seconds"
"""Gauge: Unix time at which the pod's training program finished its first step; absent until
then. The cold-start ledger takes a gang's first step as the earliest of its pods'."""
FIRST_STEP_POD_LABEL: Final = "trainingplatform.io/first-step-metrics"
"""Pod label (value ``"true"``) of the pods that serve :data:`FIRST_STEP_METRIC`; the
PodMonitor selects it and the team namespaces admit Prometheus to :data:`FIRST_STEP_PORT`."""

# The cold-start ledger (docs: concepts, observability). kube-state-metrics exports the objects'
# timestamps (its custom resource state for Karpenter's NodeClaims and Volcano's PodGroups; the
# pods' group annotation and the nodes' pool label by allowlist); the recording rules below turn
# them into one series per gang and stage.
PODGROUP_CREATED_METRIC: Final = f"{RULE_PREFIX}_podgroup_created_timestamp_seconds"
"""Gauge per Volcano PodGroup (labels ``namespace``, ``podgroup``, ``queue``): its creation
time, which is the gang's submission (kube-state-metrics custom resource state)."""
PODGROUP_MIN_MEMBER_METRIC: Final = f"{RULE_PREFIX}_podgroup_min_member"
"""Gauge per Volcano PodGroup (labels ``namespace``, ``podgroup``, ``queue``): its
``spec.minMember``, the pods the gang needs; a gang with fewer pods than that could not create
the rest (kube-state-metrics custom resource state)."""
PODGROUP_MIN_RESOURCES_METRIC: Final = f"{RULE_PREFIX}_podgroup_min_resources"
"""Gauge per Volcano PodGroup and resource (labels ``namespace``, ``podgroup``, ``queue``,
``resource``: the key of its ``spec.minResources`` as written, ``nvidia.com/gpu``): what the
whole gang requests, in cores, bytes or a count (kube-state-metrics custom resource state
parses the quantities). Absent where the PodGroup sets no ``minResources``."""
PODGROUP_PHASE_METRIC: Final = f"{RULE_PREFIX}_podgroup_phase"
"""State set per Volcano PodGroup (labels ``namespace``, ``podgroup``, ``queue``, ``phase``):
1 for its ``status.phase``, 0 for the others. ``Pending`` is not yet admitted by its queue,
``Inqueue`` admitted and waiting for nodes (kube-state-metrics custom resource state)."""
PODGROUP_PHASES: Final = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
"""A PodGroup's phases (volcano-sh/volcano v1.15.1 staging/src/volcano.sh/apis/pkg/apis/
scheduling/v1beta1/types.go, PodGroupPhase)."""
TRAINJOB_SUSPENDED_METRIC: Final = f"{RULE_PREFIX}_trainjob_suspended"
"""Gauge per Kubeflow TrainJob (labels ``namespace``, ``trainjob``): its ``spec.suspend``, 1
when suspended, 0 when not or unset (kube-state-metrics custom resource state). A suspended
TrainJob keeps its PodGroup, named as it is, without pods: GangPending leaves it out."""
TRAINJOB_CONDITION_METRIC: Final = f"{RULE_PREFIX}_trainjob_condition"
"""Gauge per Kubeflow TrainJob and condition (labels ``namespace``, ``trainjob``,
``condition``: ``Suspended``, ``Complete``, ``Failed``...): 1 while the condition's status is
True, 0 while False or Unknown (kube-state-metrics custom resource state)."""
TRAINJOB_FINISHED_CONDITIONS: Final = ("Complete", "Failed")
"""The conditions of a finished TrainJob, either True (kubeflow/trainer v2.3.0
pkg/util/trainjob/trainjob.go, ``IsTrainJobFinished``; the types are
pkg/apis/trainer/v1alpha1/trainjob_types.go ``TrainJobComplete``, ``TrainJobFailed``)."""
NODECLAIM_CONDITION_METRIC: Final = f"{RULE_PREFIX}_nodeclaim_condition_timestamp_seconds"
"""Gauge per Karpenter NodeClaim and condition (labels ``nodeclaim``, ``nodepool``, ``node``,
``condition``: Launched, Registered, Initialized): the condition's last transition time
(kube-state-metrics custom resource state). Initialized waits for the startup taints, so on a
gated pool it is the time the node was accepted."""
GANG_COLD_START_RULE: Final = f"{RULE_PREFIX}:gang_cold_start_seconds"
"""Recording rule: seconds from a gang's submission to each stage of its cold start (labels
``namespace``, ``podgroup`` or ``slurm_job_id``, ``nodepool``, ``stage``), for gangs that waited
for new nodes. Stages, in order: :data:`COLD_START_STAGES`."""
COLD_START_STAGES: Final = (
    "admitted",
    "nodes_launched",
    "nodes_registered",
    "nodes_initialized",
    "pods_running",
    "first_step",
    "cold_start",
)
"""The ledger's stages: the gang's queue admitted it (a Slurm job: slurmctld started it), its
last node launched (Karpenter's Launched), joined the cluster (Registered), ready and accepted
(Initialized), all its pods running, its first step, and ``cold_start``: the first step less
the gang's queue wait (:data:`GANG_QUEUE_WAIT_RULE`), what its pool's budget is compared with.
Admission comes first on a pool that has nodes and after them on one that waited for them."""
GANG_QUEUE_WAIT_RULE: Final = f"{RULE_PREFIX}:gang_queue_wait_seconds"
"""Recording rule: seconds of a cold gang's (or Slurm job's) time that were its queue's, not
its pool's: from when its nodes were ready (or its submission, if later) to its admission; 0
when it was admitted before its nodes were ready (labels ``namespace``, ``podgroup`` or
``slurm_job_id``, ``nodepool``)."""
COLD_START_QUANTILE_RULES: Final = {
    0.5: f"{RULE_PREFIX}:gang_cold_start_seconds:p50_1d",
    0.95: f"{RULE_PREFIX}:gang_cold_start_seconds:p95_1d",
}
"""Recording rules: per pool and stage, the quantile of :data:`GANG_COLD_START_RULE` over the
gangs that started cold in the 24 hours before each evaluation, a rolling window, not a
calendar day (labels ``nodepool``, ``stage``)."""
COLD_START_BUDGET_METRIC: Final = f"{RULE_PREFIX}:cold_start_budget_seconds"
"""Recording rule: each pool's cold-start budget (label ``nodepool``), a constant from config,
which the ColdStartOverBudget alert compares the ``cold_start`` stage with."""

PROMETHEUS_DATASOURCE_UID: Final = "prometheus"
"""Grafana data source uid of the fleet's Prometheus; the dashboards name it, the metrics stack
provisions it with this uid (kube-prometheus-stack 88.5.3 values.yaml
``grafana.sidecar.datasources.uid`` defaults to it)."""
CLOUDWATCH_DATASOURCE_UID: Final = "cloudwatch"
"""Grafana data source uid of CloudWatch (FSx, the release schedules); as above."""
# The EFA exporter (images/efa-exporter, efa_exporter/). The EFA kernel driver publishes its
# counters in sysfs: per port under /sys/class/infiniband/<device>/ports/<port>/hw_counters
# (amzn/amzn-drivers efa_linux_3.1.0 kernel/linux/efa/src/efa_verbs.c EFA_DEFINE_PORT_STATS,
# filled by efa_fill_port_stats from the device's basic, messages, RDMA read, RDMA write and
# network statistics; the network ones, retrans_*, exist since efa_linux_2.17.0) and per device
# under /sys/class/infiniband/<device>/hw_counters (EFA_DEFINE_DEVICE_STATS, the driver's own
# admin queue and verbs error counts; alloc_mr_err and get_dma_mr_err only in builds with
# kernel verbs). node_exporter v1.12.1's infiniband collector reads none of the EFA names
# (prometheus/node_exporter v1.12.1 collector/infiniband_linux.go pushes the InfiniBand
# counters and a fixed list of mlx5 hw_counters only).
EFA_DEVICES_METRIC: Final = f"{RULE_PREFIX}_efa_devices"
"""Gauge per node: the EFA devices the exporter found (an alert compares it with the node's
interfaces in the catalog)."""
EFA_METRICS: Final[dict[str, str]] = {
    # Counters per port (labels device, port): the driver's port statistics.
    f"{RULE_PREFIX}_efa_tx_bytes_total": "ports/<port>/hw_counters/tx_bytes",
    f"{RULE_PREFIX}_efa_tx_packets_total": "ports/<port>/hw_counters/tx_pkts",
    f"{RULE_PREFIX}_efa_rx_bytes_total": "ports/<port>/hw_counters/rx_bytes",
    f"{RULE_PREFIX}_efa_rx_packets_total": "ports/<port>/hw_counters/rx_pkts",
    f"{RULE_PREFIX}_efa_rx_drops_total": "ports/<port>/hw_counters/rx_drops",
    f"{RULE_PREFIX}_efa_send_bytes_total": "ports/<port>/hw_counters/send_bytes",
    f"{RULE_PREFIX}_efa_send_work_requests_total": "ports/<port>/hw_counters/send_wrs",
    f"{RULE_PREFIX}_efa_recv_bytes_total": "ports/<port>/hw_counters/recv_bytes",
    f"{RULE_PREFIX}_efa_recv_work_requests_total": "ports/<port>/hw_counters/recv_wrs",
    f"{RULE_PREFIX}_efa_rdma_read_bytes_total": "ports/<port>/hw_counters/rdma_read_bytes",
    f"{RULE_PREFIX}_efa_rdma_read_work_requests_total": "ports/<port>/hw_counters/rdma_read_wrs",
    f"{RULE_PREFIX}_efa_rdma_read_errors_total": "ports/<port>/hw_counters/rdma_read_wr_err",
    f"{RULE_PREFIX}_efa_rdma_read_response_bytes_total": (
        "ports/<port>/hw_counters/rdma_read_resp_bytes"
    ),
    f"{RULE_PREFIX}_efa_rdma_write_bytes_total": "ports/<port>/hw_counters/rdma_write_bytes",
    f"{RULE_PREFIX}_efa_rdma_write_work_requests_total": (
        "ports/<port>/hw_counters/rdma_write_wrs"
    ),
    f"{RULE_PREFIX}_efa_rdma_write_errors_total": "ports/<port>/hw_counters/rdma_write_wr_err",
    f"{RULE_PREFIX}_efa_rdma_write_received_bytes_total": (
        "ports/<port>/hw_counters/rdma_write_recv_bytes"
    ),
    f"{RULE_PREFIX}_efa_retransmitted_bytes_total": "ports/<port>/hw_counters/retrans_bytes",
    f"{RULE_PREFIX}_efa_retransmitted_packets_total": "ports/<port>/hw_counters/retrans_pkts",
    f"{RULE_PREFIX}_efa_retransmit_timeout_events_total": (
        "ports/<port>/hw_counters/retrans_timeout_events"
    ),
    f"{RULE_PREFIX}_efa_unresponsive_remote_events_total": (
        "ports/<port>/hw_counters/unresponsive_remote_events"
    ),
    f"{RULE_PREFIX}_efa_impaired_remote_connection_events_total": (
        "ports/<port>/hw_counters/impaired_remote_conn_events"
    ),
    # Counters per device (label device): the driver's admin queue and verbs errors.
    f"{RULE_PREFIX}_efa_admin_command_errors_total": "hw_counters/cmds_err",
    f"{RULE_PREFIX}_efa_admin_commands_without_completion_total": (
        "hw_counters/no_completion_cmds"
    ),
    f"{RULE_PREFIX}_efa_keep_alives_received_total": "hw_counters/keep_alive_rcvd",
    # One series per failed verb (label operation: the file's name less "_err"); the last two
    # files exist only where the driver was built with kernel verbs, and are read if present.
    f"{RULE_PREFIX}_efa_verbs_errors_total": (
        "hw_counters/alloc_pd_err hw_counters/create_qp_err hw_counters/create_cq_err "
        "hw_counters/reg_mr_err hw_counters/alloc_ucontext_err hw_counters/create_ah_err "
        "hw_counters/mmap_err hw_counters/alloc_mr_err hw_counters/get_dma_mr_err"
    ),
    # Gauges. Per node: the EFA devices found (an alert compares it with the node's interfaces).
    EFA_DEVICES_METRIC: "<device>/device/driver (a link to the driver named efa)",
    # Per device: the files above that could not be read or parsed in this scrape (0: none).
    f"{RULE_PREFIX}_efa_scrape_errors": "every file above, of that device",
}
"""Metric of the EFA exporter -> what it reads, relative to ``/sys/class/infiniband/<device>``
(space-separated where it reads several files). The exporter serves them on
:data:`EFA_EXPORTER_PORT`; a device that disappears takes its series with it."""


def efa_port_counter(counter_file: str) -> str:
    """The EFA exporter's metric of one per-port ``hw_counters`` file, e.g. ``retrans_pkts``.

    Rules and dashboards name EFA counters by the driver's file, so a metric's name is spelt
    once, in :data:`EFA_METRICS`.

    Args:
        counter_file: the file's name under ``ports/<port>/hw_counters``.

    Raises:
        KeyError: the exporter reads no such file.
    """
    source = f"ports/<port>/hw_counters/{counter_file}"
    for metric, read in EFA_METRICS.items():
        if read == source:
            return metric
    raise KeyError(f"the EFA exporter reads no per-port counter {counter_file!r}")


SLURM_JOB_SUBMIT_METRIC: Final = f"{RULE_PREFIX}_slurm_job_submit_timestamp_seconds"
"""Gauge per Slurm job and node (label ``slurm_job_id``): the job's submission, which a Slurm
job's TaskProlog writes beside its :data:`FIRST_STEP_METRIC` file, so the ledger measures Slurm
cold starts (a Slurm job has no PodGroup)."""
SLURM_JOB_START_METRIC: Final = f"{RULE_PREFIX}_slurm_job_start_timestamp_seconds"
"""Gauge per Slurm job and node (label ``slurm_job_id``): when slurmctld started the job (its
nodes allocated), which the TaskProlog writes in the same file as :data:`SLURM_JOB_SUBMIT_METRIC`:
the end of the job's wait in Slurm's queue."""
