"""The fleet's observability: metrics stack, sources, dashboards, alerts and the cold-start ledger.

Modules (docs: concepts, observability):
- ``names``: the namespace, release, ports and the names of the metrics the platform's own
  programs export, shared by the components, the images and the tests;
- ``metrics_stack``: kube-prometheus-stack grown into the fleet's (Prometheus sized from config,
  Grafana, kube-state-metrics, remote write to Amazon Managed Service for Prometheus);
- ``sources``: the exporters each pool needs (DCGM, Neuron monitor, EFA) and the monitors of the
  controllers (Volcano, Karpenter, Trainer, JobSet, KEDA, Slurm);
- ``metric_catalog`` and ``promql``: the metrics each exporter at our pins exports, and the check
  that every expression names only those;
- ``rules``: recording rules (the cold-start ledger among them) and alerts, as PrometheusRules;
- ``dashboards``: Grafana dashboards built with grafana-foundation-sdk.
"""
