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
