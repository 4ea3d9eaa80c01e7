"""Every pod template a stack creates passes its namespace's Pod Security enforce level.

The platform's own workloads (the objects the synthesis writes to ``manifests/``) and the
dcgm-exporter chart's DaemonSet as the jobs model renders it from the release's values
(:func:`synth.jobs.daemonsets.dcgm_exporter_pod`), each judged by :func:`tests.pod_security.
refusals` at the ``pod-security.kubernetes.io/enforce`` level of the namespace the stack gives
it. A namespace the stack does not label enforces nothing (the API server's default,
``privileged``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from components.config import NodePoolConfig
from components.metric_names import MONITORING_NAMESPACE, NODE_EXPORTERS_NAMESPACE
from components.observability import efa_exporter, sources
from synth.jobs.daemonsets import dcgm_exporter_pod
from synth.jobs.view import StackView
from synth.run import StackResult
from tests.conftest import STACKS
from tests.pod_security import refusals

ENFORCE = "pod-security.kubernetes.io/enforce"
WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job")


def _pod_templates(view: StackView) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(what, namespace, pod spec) of every workload the stack creates and of the DCGM chart."""
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
    if release is not None:
        values = dict(release.get("values") or {})
        yield "dcgm-exporter chart DaemonSet", str(release["namespace"]), dcgm_exporter_pod(values)


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
    for what, namespace, pod in _pod_templates(view):
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
    dcgm = refusals(dcgm_exporter_pod(sources.dcgm_values([gpu])), "baseline")
    assert any('"HostPath Volumes"' in p for p in dcgm), dcgm
    assert any('"Capabilities"' in p and "SYS_ADMIN" in p for p in dcgm), dcgm
    neuron = sources.neuron_monitor_daemonset([trainium])["spec"]["template"]["spec"]
    assert any('"Privileged Containers"' in p for p in refusals(neuron, "baseline"))
    efa = efa_exporter.exporter_daemonset([gpu], image="x")["template"]["spec"]
    assert any('"HostPath Volumes"' in p for p in refusals(efa, "baseline"))
    assert refusals(efa, "privileged") == []
