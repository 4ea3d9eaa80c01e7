"""The metrics sources (components/observability/sources.py): where each exporter runs, what
it tolerates and exports, what its nodes leave it, and the monitors that scrape the controllers.

Placement is judged by the jobs model's scheduler rules (synth/jobs: taints, node selector,
required affinity) on each stack's synthesized NodePools, not by the builders' own constants.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from components import platform_network, versions, workloads
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.config import NodePoolConfig
from components.metric_names import MONITORING_NAMESPACE, NODE_EXPORTERS_NAMESPACE
from components.observability import metric_catalog, sources
from synth.jobs.daemonsets import dcgm_exporter
from synth.jobs.model import Stack
from synth.jobs.placement import untolerated
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.reference_paths import chart_dir
from tests.schemas import validation_errors

NEURON_MONITOR = f"DaemonSet {NODE_EXPORTERS_NAMESPACE}/{sources.NEURON_MONITOR_NAME}"


def _pool(**raw: Any) -> NodePoolConfig:
    return NodePoolConfig.model_validate({"name": "x", "maxNodes": 2, **raw})


@pytest.mark.parametrize("stack", STACKS)
def test_each_exporter_runs_on_exactly_its_pools_through_every_taint(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """The DCGM exporter lands on every GPU NodePool (Slurm's too) and nothing else, the Neuron
    monitor on every Trainium one; both tolerate the NodePools' taints and startup taints (the
    acceptance gate's, the FSx driver's), and the unhealthy taint a failed node gets."""
    result = synthesized[stack]
    model = Stack(StackView.from_records(result.records))
    accelerators = {p.name: p.instance.accelerator_resource for p in result.config.node_pools}
    wanted = {GPU_RESOURCE: "dcgm-exporter", NEURON_RESOURCE: NEURON_MONITOR}
    exporters = {p.release: p for p in model.plugins if p.release in wanted.values()}
    assert set(exporters) == {wanted[a] for a in accelerators.values()}, stack
    unhealthy = {"key": "trainingplatform.io/unhealthy", "value": "acceptance",
                 "effect": "NoSchedule"}  # fmt: skip
    for pool in model.pools:
        accelerator = accelerators.get(pool.name.removesuffix("-slurm"))
        for resource, name in wanted.items():
            if name not in exporters:
                continue
            exporter = exporters[name]
            assert exporter.runs_on(pool) == (accelerator == resource), (stack, pool.name, name)
            if accelerator == resource:
                # Every startup taint: the acceptance gate's where the pool is gated, the FSx
                # driver's where it mounts Lustre (a NoExecute one would evict the exporter).
                taints = [*pool.startup_taints, unhealthy]
                assert untolerated(exporter.tolerations, taints) == [], (pool.name, name)


def test_the_jobs_model_needs_no_chart_defaults_of_the_dcgm_exporter(
    reference_dir: Path,
) -> None:
    """The stack's values state where the exporter lands and what it requests, so the chart's
    defaults under them (the reference values.yaml, which a synthesis may lack) change nothing
    the jobs model counts; and it requests what whole-node pods leave it."""
    defaults = load_yaml(
        (
            reference_dir / "charts" / chart_dir(versions.DCGM_EXPORTER_CHART) / "values.yaml"
        ).read_text()
    )
    values = sources.dcgm_values([_pool(instanceTypes=["p5.48xlarge"])])
    exporter = dcgm_exporter(values)
    assert exporter == dcgm_exporter(values, defaults)
    assert exporter.tolerations and exporter.affinity
    requests = values["resources"]["requests"]
    assert requests == defaults["resources"]["requests"]  # the chart's own sizing
    dcgm = next(e for e in workloads.NODE_EXPORTERS if e.name == "dcgm-exporter")
    assert requests == {"cpu": f"{dcgm.cpu_millis}m", "memory": f"{dcgm.memory_mib}Mi"}


def test_a_new_source_on_a_pool_is_subtracted_from_its_whole_node_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    efa_pool = _pool(instanceTypes=["p5.48xlarge"])
    plain_pool = _pool(instanceTypes=["g5.xlarge"])
    trainium = _pool(instanceTypes=["trn1.32xlarge"])
    assert {e.name for e in workloads.node_exporters(efa_pool)} == {"dcgm-exporter", "efa-exporter"}
    assert {e.name for e in workloads.node_exporters(plain_pool)} == {"dcgm-exporter"}
    assert {e.name for e in workloads.node_exporters(trainium)} == {
        "neuron-monitor",
        "efa-exporter",
    }
    before = {id(p): workloads.whole_node_memory_mib(p) for p in (efa_pool, plain_pool, trainium)}
    added = workloads.NodeExporter("probe", cpu_millis=10, memory_mib=40, efa=True)
    shipped = workloads.NODE_EXPORTERS
    monkeypatch.setattr(workloads, "NODE_EXPORTERS", (*shipped, added))
    assert workloads.whole_node_memory_mib(efa_pool) == before[id(efa_pool)] - 40
    assert workloads.whole_node_memory_mib(plain_pool) == before[id(plain_pool)]
    assert workloads.whole_node_memory_mib(trainium) == before[id(trainium)] - 40
    gpu_only = dataclasses.replace(added, accelerator=GPU_RESOURCE)
    monkeypatch.setattr(workloads, "NODE_EXPORTERS", (*shipped, gpu_only))
    assert workloads.whole_node_memory_mib(trainium) == before[id(trainium)]
    assert workloads.whole_node_memory_mib(efa_pool) == before[id(efa_pool)] - 40


def test_the_counters_file_has_what_the_alerts_and_dashboards_read(
    synthesized: dict[str, StackResult],
) -> None:
    """The ConfigMap the stack registers is the catalogue's counters file, so every DCGM field
    a rule or panel reads (tests/test_metric_catalog.py holds them to the catalogue) is asked
    for, the alerts' ECC and XID fields among them."""
    view = StackView.from_records(synthesized["prod"].records)
    (configmap,) = [
        c for c in view.of_kind("ConfigMap") if c["metadata"]["name"] == "dcgm-exporter-counters"
    ]
    assert configmap["data"]["counters.csv"] == metric_catalog.dcgm_counters_csv()
    # The file is mounted by subPath, which sees no update: a new list of fields rolls the
    # pods through their digest.
    annotations = view.releases["dcgm-exporter"]["values"]["podAnnotations"]
    digest = hashlib.sha256(metric_catalog.dcgm_counters_csv().encode()).hexdigest()
    assert annotations == {sources.COUNTERS_DIGEST_ANNOTATION: digest}
    other = sources.dcgm_values([], (), "DCGM_FI_DEV_GPU_UTIL, gauge, busy\n")["podAnnotations"]
    assert other != annotations
    fields = {counter.field for counter in metric_catalog.DCGM_COUNTERS}
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} <= fields
    configmap = sources.dcgm_counters_configmap("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization\n")
    assert configmap["data"] == {"counters.csv": "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization\n"}
    with pytest.raises(ValueError, match="line 2: 'GPU_UTIL, gauge'"):
        sources.dcgm_counters_configmap("# fields\nGPU_UTIL, gauge\n")


def test_the_exporter_reads_our_counters_file_with_pod_attribution(
    synthesized: dict[str, StackResult],
) -> None:
    view = StackView.from_records(synthesized["prod"].records)
    values = view.values(sources.DCGM_RELEASE)
    assert values is not None
    assert values["arguments"] == ["-f", sources.DCGM_COUNTERS_PATH]
    (mount,) = values["extraVolumeMounts"]
    (volume,) = values["extraConfigMapVolumes"]
    assert mount["name"] == volume["name"]
    assert mount["mountPath"] == sources.DCGM_COUNTERS_PATH
    # A configMap volume reads its pod's namespace: the release's, the node exporters'.
    assert view.releases[sources.DCGM_RELEASE]["namespace"] == NODE_EXPORTERS_NAMESPACE
    (configmap,) = [m for m in view.of_kind("ConfigMap", NODE_EXPORTERS_NAMESPACE)
                    if m["metadata"]["name"] == volume["configMap"]["name"]]  # fmt: skip
    assert mount["subPath"] in configmap["data"]
    # The kubelet's pod-resources directory, which the chart mounts where the exporter looks.
    assert values["kubeletPath"] == "/var/lib/kubelet/pod-resources"
    # The chart's ServiceMonitor is off; ours keeps the node and its pool on every series.
    assert values["serviceMonitor"] == {"enabled": False}
    (monitor,) = [m for m in view.of_kind("ServiceMonitor", MONITORING_NAMESPACE)
                  if m["metadata"]["name"] == sources.DCGM_RELEASE]  # fmt: skip
    assert monitor["spec"]["attachMetadata"] == {"node": True}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NODE_EXPORTERS_NAMESPACE]}
    relabel = monitor["spec"]["endpoints"][0]["relabelings"]
    targets = {r.get("targetLabel"): r.get("sourceLabels") for r in relabel}
    assert targets["node"] == ["__meta_kubernetes_pod_node_name"]
    assert targets["nodepool"] == ["__meta_kubernetes_node_label_karpenter_sh_nodepool"]
    assert relabel[-1] == {"action": "labeldrop",
                           "regex": "pod|namespace|container|service|endpoint"}  # fmt: skip


def test_every_monitor_reaches_a_port_opened_to_prometheus(
    synthesized: dict[str, StackResult],
) -> None:
    """Each controller monitor names a Service port whose listener admits the monitoring
    namespace; the HTTPS ones scrape with TLS, and JobSet's, which authorizes, with a token."""
    monitors = {m["metadata"]["name"]: m for m in sources.controller_monitors()}
    assert set(monitors) == {
        "volcano-scheduler",
        "volcano-controllers",
        "karpenter",
        "kubeflow-trainer",
        "jobset",
    }
    ports = {
        "volcano-scheduler": sources.VOLCANO_SCHEDULER_METRICS_PORT,
        "volcano-controllers": sources.VOLCANO_CONTROLLER_METRICS_PORT,
        "karpenter": platform_network.KARPENTER_METRICS_PORT,
        "kubeflow-trainer": sources.TRAINER_METRICS_PORT,
        "jobset": sources.JOBSET_METRICS_PORT,
    }
    for name, monitor in monitors.items():
        (namespace,) = monitor["spec"]["namespaceSelector"]["matchNames"]
        if namespace == platform_network.KUBE_SYSTEM_NAMESPACE:
            fence = platform_network.KARPENTER_FENCE
            assert fence.port == ports[name] and fence.clients, name
            continue
        opened = [listener for listener in platform_network.LISTENERS[namespace]
                  if listener.port == ports[name]]  # fmt: skip
        assert opened and MONITORING_NAMESPACE in opened[0].clients, name
    endpoints = {name: m["spec"]["endpoints"][0] for name, m in monitors.items()}
    assert endpoints["jobset"]["scheme"] == "https"
    assert endpoints["jobset"]["bearerTokenFile"] == sources.PROMETHEUS_TOKEN_FILE
    assert endpoints["kubeflow-trainer"]["scheme"] == "https"
    assert "bearerTokenFile" not in endpoints["kubeflow-trainer"]
    assert "scheme" not in endpoints["karpenter"]
    for stack in STACKS:
        view = StackView.from_records(synthesized[stack].records)
        found = {m["metadata"]["name"] for m in view.of_kind("ServiceMonitor")}
        assert set(monitors) <= found, stack
        keda = view.values("keda") or {}
        assert keda["prometheus"]["operator"] == {"enabled": True,
                                                  "serviceMonitor": {"enabled": True}}  # fmt: skip
        volcano = (view.values("volcano") or {})["custom"]
        assert volcano["scheduler_metrics_enable"] and volcano["controller_metrics_enable"]
        assert volcano["metrics_enable"] is False
    for port in (sources.DCGM_PORT, sources.NEURON_MONITOR_PORT):
        opened = [listener for listener in platform_network.LISTENERS[NODE_EXPORTERS_NAMESPACE]
                  if listener.port == port]  # fmt: skip
        assert opened and opened[0].clients == (MONITORING_NAMESPACE,), port
    neuron = sources.neuron_pod_monitor()["spec"]["namespaceSelector"]
    assert neuron == {"matchNames": [NODE_EXPORTERS_NAMESPACE]}


def test_every_source_object_is_valid_against_its_schema(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """The DaemonSet, the ConfigMap and every monitor, against Kubernetes' schemas and the
    Prometheus Operator's CRDs at its pin (reference data), unknown fields refused."""
    result = synthesized["prod"]
    view = StackView.from_records(result.records)
    version = result.config.cluster.kubernetes_version
    kinds = ("DaemonSet", "ConfigMap", "ServiceMonitor", "PodMonitor")
    checked = [m for kind in kinds for namespace in (MONITORING_NAMESPACE, NODE_EXPORTERS_NAMESPACE)
               for m in view.of_kind(kind, namespace)]  # fmt: skip
    names = {(m["kind"], m["metadata"]["name"]) for m in checked}
    assert {("DaemonSet", "neuron-monitor"), ("PodMonitor", "neuron-monitor"),
            ("ServiceMonitor", "dcgm-exporter"), ("ServiceMonitor", "jobset"),
            ("ConfigMap", "dcgm-exporter-counters")} <= names  # fmt: skip
    for manifest in checked:
        errors = validation_errors(manifest, version, reference_dir / "crds")
        assert errors == [], (manifest["kind"], manifest["metadata"]["name"], errors)


def test_prometheus_may_read_the_metrics_jobset_authorizes(
    synthesized: dict[str, StackResult],
) -> None:
    """JobSet asks the API server whether the scraper may get /metrics: Prometheus' account
    (the chart's name for it under the release's fullname) is bound to a role that says so."""
    view = StackView.from_records(synthesized["staging"].records)
    roles = {m["metadata"]["name"]: m for m in view.of_kind("ClusterRole")}
    subject = {"kind": "ServiceAccount", "name": "monitoring-prometheus",
               "namespace": MONITORING_NAMESPACE}  # fmt: skip
    granted = [
        roles[b["roleRef"]["name"]]["rules"]
        for b in view.of_kind("ClusterRoleBinding")
        if subject in b.get("subjects", []) and b["roleRef"]["name"] in roles
    ]
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in [
        rule for rules in granted for rule in rules
    ]
