"""The cold-start ledger's inputs: what kube-state-metrics exports, and each pod's first step.

Pure builders (docs: concepts, observability, "The cold-start ledger"):

- :func:`kube_state_metrics_values`: the kube-state-metrics subchart's values (the lead merges
  them under ``kube-state-metrics`` of kube-prometheus-stack 88.5.3, whose Chart.yaml pins the
  subchart 8.4.0, kube-state-metrics v2.20.0): custom resource state for Volcano's PodGroups
  and Karpenter's NodeClaims (:data:`PODGROUP_CREATED_METRIC`,
  :data:`NODECLAIM_CONDITION_METRIC`), the RBAC to list them, and the pods' gang annotation and
  the nodes' pool labels by allowlist;
- the PodMonitor (:func:`first_step_pod_monitor`) of the first-step exporter every training
  pod runs beside it (components/first_step.py, which the runtimes, Ray and Slurm build their
  pods with; the namespaces admit only Prometheus to its port). Nothing is pushed from a team
  pod.
"""

from __future__ import annotations

import re
from typing import Any, Final

from components.first_step import FIRST_STEP_PORT_NAME, first_step_labels
from components.metric_names import (
    FIRST_STEP_METRIC,
    MONITORING_NAMESPACE,
    NODECLAIM_CONDITION_METRIC,
    PODGROUP_CREATED_METRIC,
    PODGROUP_MIN_MEMBER_METRIC,
    PODGROUP_PHASE_METRIC,
    PODGROUP_PHASES,
    RULE_PREFIX,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
)

# --- kube-state-metrics -------------------------------------------------------------------

POD_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""The annotation naming a pod's PodGroup: Volcano's podgroup controller puts it on every pod it
gang-schedules (volcano-sh/volcano v1.15.1 pkg/controllers/podgroup/pg_controller_handler.go,
updatePodAnnotations; the key is staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/
labels.go, KubeGroupNameAnnotationKey), and Volcano's job controller on its own jobs' pods
(pkg/controllers/job/job_controller_util.go)."""
NODE_LABELS: Final = (
    "karpenter.sh/nodepool",
    "node.kubernetes.io/instance-type",
    "karpenter.sh/capacity-type",
    "trainingplatform.io/pool",
)
"""Node labels ``kube_node_labels`` carries: the Karpenter NodePool (kubernetes-sigs/karpenter
v1.14.1 pkg/apis/v1/labels.go, NodePoolLabelKey), the instance type and capacity type, and the
platform's pool (a pool's Slurm nodes come from its ``<pool>-slurm`` NodePool)."""

_INVALID_LABEL_CHARACTER: Final = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_label(prefix: str, key: str) -> str:
    """The label kube-state-metrics makes of a Kubernetes label or annotation key.

    ``<prefix>_<key>`` with every character but letters, digits and ``_`` made ``_``
    (kubernetes/kube-state-metrics v2.20.0 internal/store/utils.go, SanitizeLabelName).

    Args:
        prefix: ``label`` or ``annotation``.
        key: the Kubernetes key, e.g. ``karpenter.sh/nodepool``.
    """
    return _INVALID_LABEL_CHARACTER.sub("_", f"{prefix}_{key}")


POD_GROUP_LABEL: Final = prometheus_label("annotation", POD_GROUP_ANNOTATION)
"""Label of ``kube_pod_annotations`` with the pod's PodGroup (``annotation_scheduling_k8s_io_
group_name``): the rules join a pod's phase and first step to its gang through it."""
NODEPOOL_LABEL: Final = prometheus_label("label", NODE_LABELS[0])
"""Label of ``kube_node_labels`` with the node's Karpenter NodePool."""

KUBE_STATE_METRICS_JOB: Final = "kube-state-metrics"
"""The ``job`` label of kube-state-metrics' series: its ServiceMonitor's ``jobLabel`` is the
Service's ``app.kubernetes.io/name`` (prometheus-community/helm-charts kube-state-metrics-8.4.0
charts/kube-state-metrics/templates/servicemonitor.yaml), the chart's name. The ledger reads
its custom resource series only from this job, so no other target can supply them."""

_PODGROUP_API: Final = ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
_NODECLAIM_API: Final = ("karpenter.sh", "v1", "NodeClaim", "nodeclaims")


def _metric_suffix(name: str) -> str:
    # custom resource state names a metric <metricNamePrefix>_<name> (registry_factory.go,
    # fullName): the prefix is the platform's, so the names are names.py's.
    prefix = f"{RULE_PREFIX}_"
    assert name.startswith(prefix), name
    return name[len(prefix) :]


def custom_resource_state_config() -> dict[str, Any]:
    """kube-state-metrics' custom resource state: a PodGroup's creation, a NodeClaim's conditions.

    Shape: ``spec.resources[]`` of kubernetes/kube-state-metrics v2.20.0
    pkg/customresourcestate/config.go (``Resource``, ``Generator``, ``Metric``) and
    config_metrics_types.go (``MetricGauge``). kube-state-metrics decodes it without refusing
    unknown keys (pkg/app/server.go, resolveCustomResourceConfig: a plain YAML decoder), so a
    misspelt key would be dropped silently: tests/test_cold_start_ledger.py checks every key
    against those types. A timestamp string becomes its Unix seconds (registry_factory.go,
    toFloat64: ``time.Parse(time.RFC3339, ...)``). kube-state-metrics adds
    ``customresource_group``, ``customresource_version`` and ``customresource_kind`` to every
    series (registry_factory.go, compile).

    - :data:`PODGROUP_CREATED_METRIC` ``{namespace, podgroup, queue}``: the PodGroup's
      ``metadata.creationTimestamp`` (a gang's submission; Volcano's PodGroup has
      ``spec.queue``, volcano v1.15.1 staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/
      types.go);
    - :data:`PODGROUP_MIN_MEMBER_METRIC` ``{namespace, podgroup, queue}``: its
      ``spec.minMember`` (the same types.go, ``MinMember``), the pods the gang needs;
    - :data:`PODGROUP_PHASE_METRIC` ``{namespace, podgroup, queue, phase}``: its
      ``status.phase`` as a state set (``MetricStateSet``, config_metrics_types.go);
    - :data:`NODECLAIM_CONDITION_METRIC` ``{nodeclaim, nodepool, node, condition, status}``:
      each condition's ``lastTransitionTime`` (Launched, Registered, Initialized and the others:
      kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodeclaim_status.go; ``status.nodeName``
      there too). ``status`` (``True``, ``False``, ``Unknown``) lets the rules take only the
      transitions to True.
    """
    podgroup_group, podgroup_version, podgroup_kind, podgroup_plural = _PODGROUP_API
    claim_group, claim_version, claim_kind, claim_plural = _NODECLAIM_API
    return {
        "spec": {
            "resources": [
                {
                    "groupVersionKind": {
                        "group": podgroup_group,
                        "version": podgroup_version,
                        "kind": podgroup_kind,
                    },
                    "resourcePlural": podgroup_plural,
                    "metricNamePrefix": RULE_PREFIX,
                    "labelsFromPath": {
                        "namespace": ["metadata", "namespace"],
                        "podgroup": ["metadata", "name"],
                        "queue": ["spec", "queue"],
                    },
                    "metrics": [
                        {
                            "name": _metric_suffix(PODGROUP_CREATED_METRIC),
                            "help": "Unix time the PodGroup (a gang) was created.",
                            "each": {
                                "type": "Gauge",
                                "gauge": {"path": ["metadata", "creationTimestamp"]},
                            },
                        },
                        {
                            "name": _metric_suffix(PODGROUP_MIN_MEMBER_METRIC),
                            "help": "Pods the PodGroup (a gang) needs: its spec.minMember.",
                            "each": {"type": "Gauge", "gauge": {"path": ["spec", "minMember"]}},
                        },
                        {
                            "name": _metric_suffix(PODGROUP_PHASE_METRIC),
                            "help": "The PodGroup's phase (Pending: not yet admitted by its "
                            "queue; Inqueue: admitted).",
                            "each": {
                                "type": "StateSet",
                                "stateSet": {
                                    "path": ["status", "phase"],
                                    "labelName": "phase",
                                    "list": list(PODGROUP_PHASES),
                                },
                            },
                        },
                    ],
                },
                {
                    "groupVersionKind": {
                        "group": claim_group,
                        "version": claim_version,
                        "kind": claim_kind,
                    },
                    "resourcePlural": claim_plural,
                    "metricNamePrefix": RULE_PREFIX,
                    "labelsFromPath": {
                        "nodeclaim": ["metadata", "name"],
                        "nodepool": ["metadata", "labels", NODE_LABELS[0]],
                        "node": ["status", "nodeName"],
                    },
                    "metrics": [
                        {
                            "name": _metric_suffix(NODECLAIM_CONDITION_METRIC),
                            "help": "Unix time of the NodeClaim condition's last transition.",
                            "each": {
                                "type": "Gauge",
                                "gauge": {
                                    "path": ["status", "conditions"],
                                    "valueFrom": ["lastTransitionTime"],
                                    "labelsFromPath": {
                                        "condition": ["type"],
                                        "status": ["status"],
                                    },
                                },
                            },
                        }
                    ],
                },
            ]
        }
    }


def custom_resource_rbac() -> list[dict[str, Any]]:
    """The ClusterRole rules kube-state-metrics needs to list and watch the two kinds.

    The subchart adds ``rbac.extraRules`` to its ClusterRole, and with
    ``rbac.customResourceState.createClusterRoleRules`` (default true) the CRD list/watch
    custom resource state discovers kinds with (prometheus-community/helm-charts
    kube-state-metrics-8.4.0 charts/kube-state-metrics/templates/role.yaml).
    """
    return [
        {"apiGroups": [group], "resources": [plural], "verbs": ["list", "watch"]}
        for group, _, _, plural in (_PODGROUP_API, _NODECLAIM_API)
    ]


def kube_state_metrics_values() -> dict[str, Any]:
    """The kube-state-metrics subchart's values for the ledger (under ``kube-state-metrics``).

    Keys of prometheus-community/helm-charts kube-state-metrics-8.4.0
    charts/kube-state-metrics/values.yaml (``customResourceState.enabled`` and ``.config``,
    ``rbac.extraRules``, ``metricAnnotationsAllowList``, ``metricLabelsAllowlist``; the
    deployment passes them as ``--custom-resource-state-config-file``,
    ``--metric-annotations-allowlist`` and ``--metric-labels-allowlist``, templates/
    deployment.yaml). The subchart's defaults are not in the reference data: these keys are
    unverified by the values walker and checked by tests/test_cold_start_ledger.py only.
    The default collectors (pods and nodes among them) stay.
    """
    return {
        "customResourceState": {"enabled": True, "config": custom_resource_state_config()},
        "rbac": {"extraRules": custom_resource_rbac()},
        "metricAnnotationsAllowList": [f"pods=[{POD_GROUP_ANNOTATION}]"],
        "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABELS)}]"],
    }


FIRST_STEP_MONITOR_NAME: Final = "first-step"
FIRST_STEP_JOB: Final = f"{MONITORING_NAMESPACE}/{FIRST_STEP_MONITOR_NAME}"
"""The ``job`` label of what the first-step PodMonitor scrapes: ``<namespace>/<name>`` of the
PodMonitor, as it sets no ``jobLabel`` (prometheus-operator pkg/prometheus/promcfg.go,
generatePodMonitorConfig, read at v0.93.0; the v0.93.1 CRD's ``jobLabel`` says the same). The
rules read the first step only from this job."""
FIRST_STEP_METRIC_NAMES: Final = (
    FIRST_STEP_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    SLURM_JOB_START_METRIC,
)
"""The only names the first-step PodMonitor keeps: the exporter serves whatever the training
container writes to its file, so a team could otherwise put any series (a NodeClaim's
condition, a DCGM XID, an EFA device count of another team's node) into the fleet's
Prometheus."""
FIRST_STEP_SAMPLE_LABEL: Final = "slurm_job_id"
"""The one label of the file's samples the rules read (a Slurm job's; a pod's first step is
labelled by its target's namespace and pod)."""
FIRST_STEP_TARGET_LABELS: Final = ("namespace", "container", "pod", "job", "endpoint", "instance")
"""What Prometheus labels a PodMonitor's target with (promcfg.go, generatePodMonitorConfig:
namespace, container, pod, job, endpoint; ``instance`` is Prometheus' own). With
``honorLabels`` false a sample's own ``namespace`` or ``pod`` becomes ``exported_*``, which the
label filter drops."""
FIRST_STEP_SAMPLE_LIMIT: Final = 64
"""Samples one exporter may serve: a pod's first step, or a Slurm node's three per job that
runs on it (first step, submit and start); more is a scrape failure, not a flood of series."""


def first_step_metric_relabelings() -> list[dict[str, Any]]:
    """Keep only the first-step names, and of their labels only the target's and the job id.

    Prometheus applies ``metric_relabel_configs`` to each scraped sample after the target's
    labels are attached; ``labelkeep`` drops every label its regex does not match (prometheus
    v3 docs/configuration/configuration.md, relabel_config), so ``__name__`` is kept by name.
    """
    keep = ("__name__", *FIRST_STEP_TARGET_LABELS, FIRST_STEP_SAMPLE_LABEL)
    return [
        {
            "sourceLabels": ["__name__"],
            "regex": "|".join(FIRST_STEP_METRIC_NAMES),
            "action": "keep",
        },
        {"regex": "|".join(keep), "action": "labelkeep"},
    ]


def first_step_pod_monitor() -> dict[str, Any]:
    """The PodMonitor of every pod with the exporter, in any namespace, on its port.

    kube-prometheus-stack's Prometheus selects every PodMonitor
    (``podMonitorSelectorNilUsesHelmValues: false``); ``namespaceSelector.any`` reaches team
    namespaces and ``slurm`` alike. The exporter serves what a team's container writes, so the
    monitor keeps only :data:`FIRST_STEP_METRIC_NAMES` with the target's labels and
    :data:`FIRST_STEP_SAMPLE_LABEL` (:func:`first_step_metric_relabelings`), and bounds each
    scrape with ``sampleLimit`` and ``labelLimit`` (applied after the relabelling; a scrape
    past either fails whole). Fields of the prometheus-operator v0.93.1 CRD
    monitoring.coreos.com_podmonitors.yaml (``spec.sampleLimit``, ``spec.labelLimit``,
    ``podMetricsEndpoints[].metricRelabelings``).
    """
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": FIRST_STEP_MONITOR_NAME, "namespace": MONITORING_NAMESPACE},
        "spec": {
            "namespaceSelector": {"any": True},
            "selector": {"matchLabels": first_step_labels()},
            "sampleLimit": FIRST_STEP_SAMPLE_LIMIT,
            # __name__, the target's labels and the job id: no sample has more.
            "labelLimit": 2 + len(FIRST_STEP_TARGET_LABELS),
            "podMetricsEndpoints": [
                {
                    "port": FIRST_STEP_PORT_NAME,
                    "path": "/metrics",
                    "metricRelabelings": first_step_metric_relabelings(),
                }
            ],
        },
    }


def ledger_manifests() -> list[dict[str, Any]]:
    """What the metrics stack registers for the ledger besides its values: the PodMonitor."""
    return [first_step_pod_monitor()]
