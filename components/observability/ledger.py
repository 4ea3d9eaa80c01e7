"""The cold-start ledger's inputs: what kube-state-metrics exports, and each pod's first step.

Pure builders (docs: concepts, observability, "The cold-start ledger"):

- :func:`kube_state_metrics_values`: the kube-state-metrics subchart's values (the lead merges
  them under ``kube-state-metrics`` of kube-prometheus-stack 88.5.3, whose Chart.yaml pins the
  subchart 8.4.0, kube-state-metrics v2.20.0): custom resource state for Volcano's PodGroups
  and Karpenter's NodeClaims (:data:`PODGROUP_CREATED_METRIC`,
  :data:`NODECLAIM_CONDITION_METRIC`) and Trainer's TrainJobs' suspension and conditions (for
  GangPending), the RBAC to list them, and the pods' gang annotation and
  the nodes' pool labels by allowlist;
- the PodMonitors (:func:`first_step_pod_monitor`, :func:`slurm_first_step_pod_monitor`) of
  the first-step exporter every training pod runs beside it (components/first_step.py, which
  the runtimes, Ray and Slurm build their pods with; the namespaces admit only Prometheus to
  its port). Nothing is pushed from a team pod.
"""

from __future__ import annotations

import re
from typing import Any, Final

from components.first_step import FIRST_STEP_PORT_NAME, first_step_labels, slurm_jobs_per_node
from components.metric_names import (
    FIRST_STEP_METRIC,
    MONITORING_NAMESPACE,
    NODECLAIM_CONDITION_METRIC,
    PODGROUP_CREATED_METRIC,
    PODGROUP_MIN_MEMBER_METRIC,
    PODGROUP_MIN_RESOURCES_METRIC,
    PODGROUP_PHASE_METRIC,
    PODGROUP_PHASES,
    RULE_PREFIX,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    SLURM_NAMESPACE,
    TRAINJOB_CONDITION_METRIC,
    TRAINJOB_SUSPENDED_METRIC,
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
_TRAINJOB_API: Final = ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")


def _metric_suffix(name: str) -> str:
    # custom resource state names a metric <metricNamePrefix>_<name> (registry_factory.go,
    # fullName): the prefix is the platform's, so the names are names.py's.
    prefix = f"{RULE_PREFIX}_"
    assert name.startswith(prefix), name
    return name[len(prefix) :]


def custom_resource_state_config() -> dict[str, Any]:
    """kube-state-metrics' custom resource state: PodGroups, NodeClaims' conditions, TrainJobs.

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
    - :data:`PODGROUP_MIN_RESOURCES_METRIC` ``{namespace, podgroup, queue, resource}``: each
      entry of its ``spec.minResources`` (a ResourceList: the same types.go, ``MinResources``),
      one series per key. A gauge whose path is a map gives one series per entry, the key in
      the ``labelFromKey`` label, written as it is (``nvidia.com/gpu``, not sanitised), and
      with no ``valueFrom`` the entry itself is the value (registry_factory.go,
      ``compiledGauge.Values``); a quantity string ("8", "64Gi", "500m") becomes its number
      (toFloat64: ``resource.ParseQuantity``, ``AsApproximateFloat64``: 8, 68719476736, 0.5).
      A PodGroup without ``minResources`` has no such series;
    - :data:`PODGROUP_PHASE_METRIC` ``{namespace, podgroup, queue, phase}``: its
      ``status.phase`` as a state set (``MetricStateSet``, config_metrics_types.go);
    - :data:`NODECLAIM_CONDITION_METRIC` ``{nodeclaim, nodepool, node, condition, status}``:
      each condition's ``lastTransitionTime`` (Launched, Registered, Initialized and the others:
      kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodeclaim_status.go; ``status.nodeName``
      there too). ``status`` (``True``, ``False``, ``Unknown``) lets the rules take only the
      transitions to True;
    - :data:`TRAINJOB_SUSPENDED_METRIC` ``{namespace, trainjob}``: a TrainJob's
      ``spec.suspend`` (a bool: toFloat64 makes it 1 or 0; ``nilIsZero`` makes an unset one
      0, registry_factory.go ``compiledGauge.value``, though the CRD defaults it to false:
      kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go, ``Suspend``);
    - :data:`TRAINJOB_CONDITION_METRIC` ``{namespace, trainjob, condition}``: each of its
      ``status.conditions`` (``metav1.Condition``, the same file), 1 where ``status`` is
      ``True`` (toFloat64 reads "True" as 1, "False" and "Unknown" as 0).

    GangPending leaves out a gang without pods whose TrainJob is suspended or finished
    (:func:`components.observability.rules.gang_rules`): Trainer keeps the PodGroup of both.
    """
    return {
        "spec": {
            "resources": [
                _custom_resource(
                    _PODGROUP_API,
                    {
                        "namespace": ["metadata", "namespace"],
                        "podgroup": ["metadata", "name"],
                        "queue": ["spec", "queue"],
                    },
                    [
                        _gauge(
                            PODGROUP_CREATED_METRIC,
                            "Unix time the PodGroup (a gang) was created.",
                            {"path": ["metadata", "creationTimestamp"]},
                        ),
                        _gauge(
                            PODGROUP_MIN_MEMBER_METRIC,
                            "Pods the PodGroup (a gang) needs: its spec.minMember.",
                            {"path": ["spec", "minMember"]},
                        ),
                        _gauge(
                            PODGROUP_MIN_RESOURCES_METRIC,
                            "What the PodGroup (a gang) requests in all, per resource: its "
                            "spec.minResources.",
                            {"path": ["spec", "minResources"], "labelFromKey": "resource"},
                        ),
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
                ),
                _custom_resource(
                    _NODECLAIM_API,
                    {
                        "nodeclaim": ["metadata", "name"],
                        "nodepool": ["metadata", "labels", NODE_LABELS[0]],
                        "node": ["status", "nodeName"],
                    },
                    [
                        _gauge(
                            NODECLAIM_CONDITION_METRIC,
                            "Unix time of the NodeClaim condition's last transition.",
                            {
                                "path": ["status", "conditions"],
                                "valueFrom": ["lastTransitionTime"],
                                "labelsFromPath": {"condition": ["type"], "status": ["status"]},
                            },
                        )
                    ],
                ),
                _custom_resource(
                    _TRAINJOB_API,
                    {"namespace": ["metadata", "namespace"], "trainjob": ["metadata", "name"]},
                    [
                        _gauge(
                            TRAINJOB_SUSPENDED_METRIC,
                            "1 while the TrainJob is suspended (its spec.suspend).",
                            {"path": ["spec", "suspend"], "nilIsZero": True},
                        ),
                        _gauge(
                            TRAINJOB_CONDITION_METRIC,
                            "1 while the TrainJob's condition is True.",
                            {
                                "path": ["status", "conditions"],
                                "valueFrom": ["status"],
                                "labelsFromPath": {"condition": ["type"]},
                            },
                        ),
                    ],
                ),
            ]
        }
    }


def _custom_resource(
    api: tuple[str, str, str, str],
    labels: dict[str, list[str]],
    metrics: list[dict[str, Any]],
) -> dict[str, Any]:
    """One ``spec.resources[]`` entry: a kind, the labels every series of it gets, its metrics.

    Args:
        api: (group, version, kind, plural) of the custom resource.
        labels: label name to the field path it is read from (``labelsFromPath``).
        metrics: its generators (:func:`_gauge` or a state set).
    """
    group, version, kind, plural = api
    return {
        "groupVersionKind": {"group": group, "version": version, "kind": kind},
        "resourcePlural": plural,
        "metricNamePrefix": RULE_PREFIX,
        "labelsFromPath": labels,
        "metrics": metrics,
    }


def _gauge(metric: str, help_text: str, gauge: dict[str, Any]) -> dict[str, Any]:
    """A gauge generator of custom resource state (``MetricGauge``, config_metrics_types.go).

    Args:
        metric: the full metric name (``RULE_PREFIX`` + ``_`` + the generator's name).
        help_text: its ``# HELP`` text.
        gauge: the gauge's ``path`` and optional ``valueFrom``, ``labelFromKey``,
            ``labelsFromPath`` and ``nilIsZero``.
    """
    return {
        "name": _metric_suffix(metric),
        "help": help_text,
        "each": {"type": "Gauge", "gauge": gauge},
    }


def custom_resource_rbac() -> list[dict[str, Any]]:
    """The ClusterRole rules kube-state-metrics needs to list and watch the three kinds.

    The subchart adds ``rbac.extraRules`` to its ClusterRole, and with
    ``rbac.customResourceState.createClusterRoleRules`` (default true) the CRD list/watch
    custom resource state discovers kinds with (prometheus-community/helm-charts
    kube-state-metrics-8.4.0 charts/kube-state-metrics/templates/role.yaml).
    """
    return [
        {"apiGroups": [group], "resources": [plural], "verbs": ["list", "watch"]}
        for group, _, _, plural in (_PODGROUP_API, _NODECLAIM_API, _TRAINJOB_API)
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
"""The ``job`` label of what the training pods' first-step PodMonitor scrapes: ``<namespace>/
<name>`` of the PodMonitor, as it sets no ``jobLabel`` (prometheus-operator pkg/prometheus/
promcfg.go, generatePodMonitorConfig, read at v0.93.0; the v0.93.1 CRD's ``jobLabel`` says the
same). The rules read a pod's first step only from this job."""
FIRST_STEP_SLURM_MONITOR_NAME: Final = "first-step-slurm"
FIRST_STEP_SLURM_JOB: Final = f"{MONITORING_NAMESPACE}/{FIRST_STEP_SLURM_MONITOR_NAME}"
"""The ``job`` label of the slurmd pods' first-step PodMonitor: the rules read a Slurm job's
times and first step only from this job, which scrapes :data:`SLURM_NAMESPACE` alone."""
FIRST_STEP_METRIC_NAMES: Final = (
    FIRST_STEP_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    SLURM_JOB_START_METRIC,
)
"""The only names the first-step PodMonitors keep: the exporter serves whatever the training
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
FIRST_STEP_KEPT_LABELS: Final = ("__name__", *FIRST_STEP_TARGET_LABELS, FIRST_STEP_SAMPLE_LABEL)
"""Every label a kept sample may have after the label filter (``labelkeep``)."""
FIRST_STEP_LABEL_LIMIT: Final = len(FIRST_STEP_KEPT_LABELS) + 4
"""Labels a sample may have, ``__name__`` included, after the relabelling (prometheus v3.14.0
scrape/scrape.go, verifyLabelLimits, after the sample mutator): the label filter already bounds
them to :data:`FIRST_STEP_KEPT_LABELS`, so this is a second guard, with room to spare so that
it is never the one that fails a scrape, whole, with every job on the node."""
FIRST_STEP_SAMPLE_LIMIT: Final = 64
"""Samples one training pod's exporter may serve after the relabelling: its first step is one;
more is a scrape failure, not a flood of series."""
SLURM_SAMPLES_PER_JOB: Final = len(FIRST_STEP_METRIC_NAMES)
"""Samples each Slurm job serves on each of its nodes: first step, submit and start."""


def slurm_first_step_sample_limit() -> int:
    """Samples one slurmd pod's exporter may serve: the most its node's jobs can write.

    :data:`SLURM_SAMPLES_PER_JOB` per job, for as many jobs as a node can run at once
    (components/first_step.py, slurm_jobs_per_node: one per vCPU of the catalog's largest
    instance type). Past the limit a scrape fails whole (prometheus v3.14.0 docs/configuration/
    configuration.md, ``sample_limit``: "the entire scrape will be treated as failed"), which
    would drop every job of that node from the ledger, so the limit is the node's, not a
    guess.
    """
    return SLURM_SAMPLES_PER_JOB * slurm_jobs_per_node()


def first_step_metric_relabelings() -> list[dict[str, Any]]:
    """Keep only the first-step names, and of their labels only the target's and the job id.

    Prometheus applies ``metric_relabel_configs`` to each scraped sample after the target's
    labels are attached; ``labelkeep`` drops every label its regex does not match (prometheus
    v3 docs/configuration/configuration.md, relabel_config), so ``__name__`` is kept by name.
    """
    return [
        {
            "sourceLabels": ["__name__"],
            "regex": "|".join(FIRST_STEP_METRIC_NAMES),
            "action": "keep",
        },
        {"regex": "|".join(FIRST_STEP_KEPT_LABELS), "action": "labelkeep"},
    ]


def _first_step_monitor(
    name: str,
    namespaces: dict[str, Any],
    sample_limit: int,
    relabelings: list[dict[str, Any]],
) -> dict[str, Any]:
    """A PodMonitor of the pods with the exporter, on its port, with the label filter."""
    endpoint: dict[str, Any] = {
        "port": FIRST_STEP_PORT_NAME,
        "path": "/metrics",
        "metricRelabelings": first_step_metric_relabelings(),
    }
    if relabelings:
        endpoint["relabelings"] = relabelings
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": MONITORING_NAMESPACE},
        "spec": {
            "namespaceSelector": namespaces,
            "selector": {"matchLabels": first_step_labels()},
            "sampleLimit": sample_limit,
            "labelLimit": FIRST_STEP_LABEL_LIMIT,
            "podMetricsEndpoints": [endpoint],
        },
    }


def first_step_pod_monitor() -> dict[str, Any]:
    """The PodMonitor of the training pods with the exporter, in any namespace but Slurm's.

    kube-prometheus-stack's Prometheus selects every PodMonitor
    (``podMonitorSelectorNilUsesHelmValues: false``); ``namespaceSelector.any`` reaches the
    team namespaces, and a target relabelling drops :data:`SLURM_NAMESPACE`'s pods (a
    namespace selector names namespaces, it cannot leave one out), which
    :func:`slurm_first_step_pod_monitor` scrapes with a limit of their own. The exporter
    serves what a team's container writes, so the monitor keeps only
    :data:`FIRST_STEP_METRIC_NAMES` with the target's labels and
    :data:`FIRST_STEP_SAMPLE_LABEL` (:func:`first_step_metric_relabelings`), and bounds each
    scrape with ``sampleLimit`` (:data:`FIRST_STEP_SAMPLE_LIMIT`) and ``labelLimit``
    (:data:`FIRST_STEP_LABEL_LIMIT`), which the operator writes as the scrape's
    ``sample_limit`` and ``label_limit`` (prometheus-operator v0.93.0 pkg/prometheus/
    promcfg.go, ``sampleLimitKey``, ``labelLimitKey``; Prometheus applies both after the
    relabelling, and a scrape past either fails whole: prometheus v3.14.0 docs/configuration/
    configuration.md). Fields of the prometheus-operator v0.93.1 CRD
    monitoring.coreos.com_podmonitors.yaml (``spec.sampleLimit``, ``spec.labelLimit``,
    ``podMetricsEndpoints[].relabelings``, ``[].metricRelabelings``).
    """
    not_slurm = {
        "sourceLabels": ["__meta_kubernetes_namespace"],
        "regex": SLURM_NAMESPACE,
        "action": "drop",
    }
    return _first_step_monitor(
        FIRST_STEP_MONITOR_NAME, {"any": True}, FIRST_STEP_SAMPLE_LIMIT, [not_slurm]
    )


def slurm_first_step_pod_monitor() -> dict[str, Any]:
    """The PodMonitor of the slurmd pods' exporters: :data:`SLURM_NAMESPACE` only.

    A slurmd pod serves three samples for each job on its node, and a node with
    ``CR_Core_Memory`` runs many small jobs at once: its own monitor's ``sampleLimit`` is
    :func:`slurm_first_step_sample_limit`, and the training pods keep their tight one. The
    same label filter and ``labelLimit`` as :func:`first_step_pod_monitor`.
    """
    return _first_step_monitor(
        FIRST_STEP_SLURM_MONITOR_NAME,
        {"matchNames": [SLURM_NAMESPACE]},
        slurm_first_step_sample_limit(),
        [],
    )


def ledger_manifests() -> list[dict[str, Any]]:
    """What the metrics stack registers for the ledger besides its values: the PodMonitors."""
    return [first_step_pod_monitor(), slurm_first_step_pod_monitor()]
