"""The device plugins' DaemonSets: which NodePools' nodes they run on, what they request there.

Each chart renders its DaemonSet's placement from its values (read from the templates at the
pinned versions; the defaults below are the charts' values.yaml, which a test compares with the
reference copies):
- nvidia-device-plugin 0.20.0 (NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/
  templates/daemonset-device-plugin.yml): ``nodeSelector``, ``affinity`` and ``tolerations``
  copied from values, nothing fixed;
- aws-efa-k8s-device-plugin 0.5.30 (aws/eks-charts stable/aws-efa-k8s-device-plugin/templates/
  daemonset.yaml): a fixed ``CriticalAddonsOnly`` toleration with ``tolerations`` appended, node
  affinity ``<key> In supportedInstanceLabels.values`` per key, and on the last term
  ``eks.amazonaws.com/compute-type NotIn [auto]``;
- neuron-helm-chart 1.9.0 (aws-neuron/neuron-helm-charts templates/device-plugin/
  device-plugin-daemonset.yaml, _helpers.tpl): ``devicePlugin.{nodeSelector,tolerations}``, and
  ``devicePlugin.affinity`` with ``__INSTANCE_TYPE_KEY__`` and ``__NEURON_INSTANCES__`` replaced
  by the instance-type label and ``neuronInstances``.

Helm merges user maps into the chart's and replaces lists.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from components.catalog import EFA_RESOURCE, GPU_RESOURCE, NEURON_RESOURCE
from components.workloads import DAEMONSET_HEADROOM_CPU_MILLIS, DAEMONSET_HEADROOM_MEMORY_MIB
from synth.jobs.karpenter import INSTANCE_TYPE_LABEL, NodePoolShape
from synth.jobs.placement import required_affinity_holds, selector_holds, untolerated
from synth.jobs.view import StackView, quantity

NVIDIA_CHART_DEFAULTS: Final[dict[str, Any]] = {
    "nodeSelector": {},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "feature.node.kubernetes.io/pci-10de.present",
                                "operator": "In",
                                "values": ["true"],
                            }
                        ]
                    },
                    {
                        "matchExpressions": [
                            {
                                "key": "feature.node.kubernetes.io/cpu-model.vendor_id",
                                "operator": "In",
                                "values": ["NVIDIA"],
                            }
                        ]
                    },
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                        ]
                    },
                ]
            }
        }
    },
    "tolerations": [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ],
    "resources": {},
}
"""nvidia-device-plugin 0.20.0 values.yaml: placement and resources."""
EFA_CHART_DEFAULTS: Final[dict[str, Any]] = {
    "nodeSelector": {},
    "tolerations": [],
    "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL]},
    "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
}
"""aws-efa-k8s-device-plugin 0.5.30 values.yaml (its instance list is replaced by the platform)."""
EFA_FIXED_TOLERATION: Final = {"key": "CriticalAddonsOnly", "operator": "Exists"}
NEURON_CHART_DEFAULTS: Final[dict[str, Any]] = {
    "devicePlugin": {
        "enabled": True,
        "nodeSelector": {},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "__INSTANCE_TYPE_KEY__",
                                    "operator": "In",
                                    "values": "__NEURON_INSTANCES__",
                                },
                                {
                                    "key": "eks.amazonaws.com/compute-type",
                                    "operator": "NotIn",
                                    "values": ["fargate", "hybrid", "auto"],
                                },
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "sagemaker.amazonaws.com/node-health-status",
                "operator": "Equal",
                "value": "Unschedulable",
                "effect": "NoSchedule",
            },
        ],
        "resources": {},
    },
}
"""neuron-helm-chart 1.9.0 values.yaml, device plugin part (``neuronInstances`` aside)."""

NODE_DAEMONSET_HEADROOM: Final = {
    "cpu": Decimal(DAEMONSET_HEADROOM_CPU_MILLIS) / 1000,
    "memory": Decimal(DAEMONSET_HEADROOM_MEMORY_MIB * 2**20),
}
"""Requests of the DaemonSets every node runs besides the device plugins: the workloads
module's allowance (:data:`components.workloads.DAEMONSET_HEADROOM_MEMORY_MIB`)."""


@dataclass(frozen=True)
class DevicePlugin:
    """One device plugin DaemonSet (or another node DaemonSet) as the scheduler would place it."""

    release: str
    """The Helm release, or ``DaemonSet <namespace>/<name>`` for one the stack creates itself."""
    resource: str
    """The extended resource it advertises on a node; empty for a DaemonSet that advertises
    none."""
    node_selector: dict[str, Any]
    affinity: dict[str, Any]
    tolerations: list[dict[str, Any]]
    requests: dict[str, Decimal]

    def runs_on(self, pool: NodePoolShape) -> bool:
        """Whether its pods land on the NodePool's nodes (Karpenter counts it there too)."""
        if untolerated(self.tolerations, pool.taints):
            return False
        return any(
            selector_holds(self.node_selector, pool.labels_for(instance))
            and required_affinity_holds(self.affinity, pool.labels_for(instance))
            for instance in pool.instance_types
        )

    def why_not(self, pool: NodePoolShape) -> str:
        """Why its pods do not land on the NodePool, in words."""
        missed = untolerated(self.tolerations, pool.taints)
        if missed:
            keys = ", ".join(str(t.get("key")) for t in missed)
            return f"does not tolerate the taint {keys}"
        return "selects none of its nodes (node selector or required affinity)"


def helm_merge(defaults: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Values as Helm sees them: user maps merged into the chart's, lists and scalars replaced."""
    merged = copy.deepcopy(dict(defaults))
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _requests(resources: Mapping[str, Any]) -> dict[str, Decimal]:
    return {str(k): quantity(v) for k, v in (resources.get("requests") or {}).items()}


def _nvidia(values: Mapping[str, Any]) -> DevicePlugin:
    merged = helm_merge(NVIDIA_CHART_DEFAULTS, values)
    return DevicePlugin(
        "nvidia-device-plugin",
        GPU_RESOURCE,
        dict(merged.get("nodeSelector") or {}),
        dict(merged.get("affinity") or {}),
        list(merged.get("tolerations") or []),
        _requests(merged.get("resources") or {}),
    )


def _efa(values: Mapping[str, Any]) -> DevicePlugin:
    merged = helm_merge(EFA_CHART_DEFAULTS, values)
    labels = merged.get("supportedInstanceLabels") or {}
    terms = [
        {
            "matchExpressions": [
                {"key": key, "operator": "In", "values": list(labels.get("values") or [])}
            ]
        }
        for key in labels.get("keys") or []
    ]
    if terms:
        terms[-1]["matchExpressions"].append(
            {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]}
        )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    return DevicePlugin(
        "aws-efa-k8s-device-plugin",
        EFA_RESOURCE,
        dict(merged.get("nodeSelector") or {}),
        affinity,
        [EFA_FIXED_TOLERATION, *(merged.get("tolerations") or [])],
        _requests(merged.get("resources") or {}),
    )


def _neuron(values: Mapping[str, Any]) -> DevicePlugin | None:
    merged = helm_merge(NEURON_CHART_DEFAULTS, values)
    plugin = merged.get("devicePlugin") or {}
    if not plugin.get("enabled") or (merged.get("draDriver") or {}).get("enabled"):
        return None
    affinity = copy.deepcopy(plugin.get("affinity") or {})
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expression in term.get("matchExpressions") or []:
            if expression.get("key") == "__INSTANCE_TYPE_KEY__":
                expression["key"] = INSTANCE_TYPE_LABEL
            if expression.get("values") == "__NEURON_INSTANCES__":
                expression["values"] = list(merged.get("neuronInstances") or [])
    return DevicePlugin(
        "neuron-helm-chart",
        NEURON_RESOURCE,
        dict(plugin.get("nodeSelector") or {}),
        affinity,
        list(plugin.get("tolerations") or []),
        _requests(plugin.get("resources") or {}),
    )


def dcgm_exporter(
    values: Mapping[str, Any], chart_defaults: Mapping[str, Any] | None = None
) -> DevicePlugin:
    """The DCGM exporter's DaemonSet as the model counts it: where it lands, what it requests.

    A metrics DaemonSet that advertises no resource, counted on the nodes it lands on as the
    stack's own DaemonSets are. The stack's values state its placement and requests
    (components/observability/sources.py, ``dcgm_values``: affinity, tolerations,
    resources); the chart's defaults under them (dcgm-exporter 4.8.2 values.yaml, in the
    reference data, which a synthesis may lack) add nothing at the pinned version, which
    tests/test_metric_sources.py checks by building it both ways.

    Args:
        values: the release's values.
        chart_defaults: the chart's values under them (default: none).
    """
    merged = helm_merge(chart_defaults or {}, values)
    return DevicePlugin(
        "dcgm-exporter",
        "",
        dict(merged.get("nodeSelector") or {}),
        dict(merged.get("affinity") or {}),
        list(merged.get("tolerations") or []),
        _requests(merged.get("resources") or {}),
    )


def device_plugins(view: StackView) -> list[DevicePlugin]:
    """The device plugin DaemonSets the stack installs."""
    builders = {
        "nvidia-device-plugin": _nvidia,
        "aws-efa-k8s-device-plugin": _efa,
        "neuron-helm-chart": _neuron,
        "dcgm-exporter": dcgm_exporter,
    }
    found = []
    for release, build in builders.items():
        values = view.values(release)
        if values is not None and (plugin := build(values)) is not None:
            found.append(plugin)
    return found


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's effective requests, as the scheduler and Karpenter compute them.

    Its containers' sum, or its largest init container's where that is more
    (kubernetes-sigs/karpenter v1.14.1 pkg/utils/resources/resources.go, ``RequestsForSpec``,
    which calls the scheduler's PodRequests); sidecar init containers are not modelled.
    """
    total: dict[str, Decimal] = {}
    for container in pod.get("containers") or []:
        for resource, amount in _requests(container.get("resources") or {}).items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    for container in pod.get("initContainers") or []:
        for resource, amount in _requests(container.get("resources") or {}).items():
            total[resource] = max(total.get(resource, Decimal(0)), amount)
    return total


def stack_daemonsets(view: StackView) -> list[DevicePlugin]:
    """The DaemonSets the stack creates as objects of its own (the acceptance agents).

    They are placed as the device plugins are and advertise no resource (``resource`` is
    empty). Karpenter counts a DaemonSet's requests on a NodePool whose taints it tolerates
    and whose labels its node selector and required affinity admit, as for the charts'
    DaemonSets above.
    """
    found = []
    for manifest in view.of_kind("DaemonSet"):
        pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
        metadata = manifest.get("metadata") or {}
        found.append(
            DevicePlugin(
                f"DaemonSet {metadata.get('namespace')}/{metadata.get('name')}",
                "",
                dict(pod.get("nodeSelector") or {}),
                dict(pod.get("affinity") or {}),
                list(pod.get("tolerations") or []),
                _pod_requests(pod),
            )
        )
    return found


def daemonset_overhead(pool: NodePoolShape, plugins: list[DevicePlugin]) -> dict[str, Decimal]:
    """Requests of the DaemonSets on a NodePool's nodes: its device plugins and the allowance."""
    total = dict(NODE_DAEMONSET_HEADROOM)
    for plugin in plugins:
        if plugin.runs_on(pool):
            for resource, amount in plugin.requests.items():
                total[resource] = total.get(resource, Decimal(0)) + amount
    return total
