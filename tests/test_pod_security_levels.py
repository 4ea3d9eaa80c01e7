"""Every pod template a stack creates passes its namespace's Pod Security enforce level.

The platform's own workloads (the objects the synthesis writes to ``manifests/``) and the
dcgm-exporter chart's pod as the synthesis rebuilds it from the release's values over the
chart's reference defaults (:func:`synth.chart_pods.dcgm_exporter_pod`, in ``pods/`` where the
reference data is there), each judged by :func:`tests.pod_security.refusals` at the
``pod-security.kubernetes.io/enforce`` level of the namespace the stack gives it. A namespace the stack does not label enforces nothing (the API server's default,
``privileged``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from components.config import NodePoolConfig
from components.metric_names import MONITORING_NAMESPACE, NODE_EXPORTERS_NAMESPACE
from components.observability import efa_exporter, sources
from synth.chart_pods import chart_defaults, dcgm_exporter_pod
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.pod_security import refusals

ENFORCE = "pod-security.kubernetes.io/enforce"
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job")


def _pod_templates(view: StackView, pods: Path) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(what, namespace, pod spec) of every workload the stack creates and of the DCGM chart.

    Args:
        view: the stack's objects.
        pods: its ``pods/`` directory, which holds the DCGM chart's pod where the reference
            data was there (tests/test_pods.py fails or skips as that data says otherwise).
    """
    for kind in (*WORKLOADS, "CronJob"):
        for manifest in view.of_kind(kind):
            spec = manifest.get("spec") or {}
            if kind == "CronJob":
                spec = (spec.get("jobTemplate") or {}).get("spec") or {}
            metadata = manifest.get("metadata") or {}
            namespace = str(metadata.get("namespace") or "default")
            pod = (spec.get("template") or {}).get("spec") or {}
            yield f"{kind} {namespace}/{metadata.get('name')}", namespace, pod
    release = view.releases.get(sources.DCGM_RELEASE)
    written = pods / f"Pod.{NODE_EXPORTERS_NAMESPACE}.{sources.DCGM_RELEASE}.yaml"
    if release is not None and written.exists():
        pod = load_yaml(written.read_text())
        yield "dcgm-exporter chart DaemonSet", str(release["namespace"]), pod["spec"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_template_passes_its_namespaces_enforce_level(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    view = StackView.from_records(synthesized[stack].records)
    levels = {
        str(ns["metadata"]["name"]): str((ns["metadata"].get("labels") or {}).get(ENFORCE))
        for ns in view.of_kind("Namespace")
        if ENFORCE in (ns["metadata"].get("labels") or {})
    }
    judged: dict[str, str] = {}
    refused: dict[str, list[str]] = {}
    for what, namespace, pod in _pod_templates(view, synthesized[stack].written.directory / "pods"):
        level = levels.get(namespace, "privileged")
        judged[what] = level
        if problems := refusals(pod, level):
            refused[f"{what} (enforce {level})"] = problems
    assert not refused, refused
    # Pods under an enforcing level were judged, not only unlabelled namespaces' (the
    # acceptance agents: restricted).
    assert "restricted" in judged.values(), judged
    assert levels[MONITORING_NAMESPACE] == "baseline"
    # The node exporters the stack runs are judged, and their namespace admits them.
    exporters = [w for w in judged if "dcgm-exporter" in w or sources.NEURON_MONITOR_NAME in w
                 or "efa-exporter" in w]  # fmt: skip
    assert all(NODE_EXPORTERS_NAMESPACE in w or "chart" in w for w in exporters), exporters


def test_baseline_refuses_each_node_exporter() -> None:
    """Why the exporters need their own namespace: baseline refuses each, for its own reason."""
    gpu = NodePoolConfig.model_validate(
        {"name": "gpu", "maxNodes": 2, "instanceTypes": ["p5.48xlarge"]}
    )
    trainium = NodePoolConfig.model_validate(
        {"name": "trn", "maxNodes": 2, "instanceTypes": ["trn2.48xlarge"]}
    )
    neuron = sources.neuron_monitor_daemonset([trainium])["spec"]["template"]["spec"]
    assert any('"Privileged Containers"' in p for p in refusals(neuron, "baseline"))
    efa = efa_exporter.exporter_daemonset([gpu], image="x")["template"]["spec"]
    assert any('"HostPath Volumes"' in p for p in refusals(efa, "baseline"))
    assert refusals(efa, "privileged") == []


def test_baseline_refuses_the_dcgm_exporter(reference_dir: Path) -> None:
    """The chart's exporter (its reference defaults under the stack's values) needs the host's
    pod-resources directory and SYS_ADMIN: baseline refuses both, privileged admits it."""
    gpu = NodePoolConfig.model_validate(
        {"name": "gpu", "maxNodes": 2, "instanceTypes": ["p5.48xlarge"]}
    )
    defaults = chart_defaults(reference_dir).dcgm_exporter
    release = {"release": sources.DCGM_RELEASE, "namespace": NODE_EXPORTERS_NAMESPACE,
               "values": sources.dcgm_values([gpu])}  # fmt: skip
    pod = dcgm_exporter_pod(release, defaults)["spec"]
    dcgm = refusals(pod, "baseline")
    assert any('"HostPath Volumes"' in p for p in dcgm), dcgm
    assert any('"Capabilities"' in p and "SYS_ADMIN" in p for p in dcgm), dcgm
    assert refusals(pod, "privileged") == []
