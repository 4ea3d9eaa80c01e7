"""Names the observability pieces share: where the metrics stack runs, and our own metrics.

Stdlib only: the node-side programs (the EFA exporter and the first-step exporter, built into
their own images) import it as the components do, so a metric's name is spelt once.
"""

from __future__ import annotations

from typing import Final

MONITORING_NAMESPACE: Final = "monitoring"
"""Namespace of the metrics stack (kube-prometheus-stack) and the platform's exporters."""
MONITORING_RELEASE: Final = "monitoring"
"""Release name and ``fullnameOverride`` of kube-prometheus-stack."""
PROMETHEUS_PORT: Final = 9090
PROMETHEUS_URL: Final = (
    f"http://{MONITORING_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc:{PROMETHEUS_PORT}"
)
"""The chart's Prometheus service: ``<fullname>-prometheus``, the fullname being
``fullnameOverride`` (kube-prometheus-stack 88.5.3 templates/prometheus/service.yaml)."""
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
    "nodes_launched",
    "nodes_registered",
    "nodes_initialized",
    "pods_running",
    "first_step",
)
"""The ledger's stages: the gang's last node launched (Karpenter's Launched), joined the cluster
(Registered), ready and accepted (Initialized), all its pods running, and its first step."""
COLD_START_QUANTILE_RULES: Final = {
    0.5: f"{RULE_PREFIX}:gang_cold_start_seconds:p50_1d",
    0.95: f"{RULE_PREFIX}:gang_cold_start_seconds:p95_1d",
}
"""Recording rules: per pool and stage, the quantile of :data:`GANG_COLD_START_RULE` over the
gangs that started cold in the last day (labels ``nodepool``, ``stage``)."""
COLD_START_BUDGET_METRIC: Final = f"{RULE_PREFIX}:cold_start_budget_seconds"
"""Recording rule: each pool's cold-start budget (label ``nodepool``), a constant from config,
which the ColdStartOverBudget alert compares the ``first_step`` stage with."""
SLURM_JOB_SUBMIT_METRIC: Final = f"{RULE_PREFIX}_slurm_job_submit_timestamp_seconds"
"""Gauge per Slurm job and node (label ``slurm_job_id``): the job's submission, which a Slurm
job's TaskProlog writes beside its :data:`FIRST_STEP_METRIC` file, so the ledger measures Slurm
cold starts (a Slurm job has no PodGroup)."""
