"""The EFA exporter: the EFA devices' sysfs counters as Prometheus metrics, per node.

It runs on every node of an EFA pool (components/observability/efa_exporter.py, built from
images/efa-exporter) and serves :data:`components.metric_names.EFA_METRICS` on
:data:`components.metric_names.EFA_EXPORTER_PORT`. It imports only the standard library,
prometheus_client and the shared names (pyproject.toml's import contracts hold it to that).
"""
