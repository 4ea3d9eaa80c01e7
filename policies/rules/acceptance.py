"""The acceptance gate: every accelerator pool is gated, and its vendor's agent can free it.

A node that starts with the acceptance taint and no agent to remove it never takes work, and
Karpenter keeps counting it as capacity (docs: concepts, node acceptance): a pool left out of
the gate, or an agent that cannot land on a pool's nodes (a taint it does not tolerate, an
affinity that leaves the pool out), is a deadlock or a hole that only shows on a real node.
The gate is on when the stack renders it from config: the ``node-acceptance`` namespace carries
the label ``trainingplatform.io/acceptance-gate: on`` (components/acceptance_gate.py,
GATE_LABEL), whether or not an agent is there; its DaemonSets are ``acceptance-agent-<vendor>``
in that namespace, one per accelerator vendor. The device plugins must run on a gated node too:
the agent accepts a node only once they registered its devices.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from pulumi_policy import (
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.acceptance_gate import GATE_LABEL, SERVICE_ACCOUNT
from components.acceptance_gate import NAMESPACE as AGENT_NAMESPACE
from components.health_marks import ACCEPTANCE_TAINT, ACCEPTANCE_TAINT_KEY, SOURCES, unhealthy_taint
from components.node_pools import POOL_LABEL

from .capacity import accelerated_types
from .common import HELM_TYPES, MANDATORY, as_list, chart_name

NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
NODE_POOL_PATCH: Final = NODE_POOL + "Patch"
DAEMON_SET: Final = "kubernetes:apps/v1:DaemonSet"
AGENT_PREFIX: Final = f"{SERVICE_ACCOUNT}-"
"""Every vendor's agent DaemonSet is named so (components/acceptance_gate.py, agent_name)."""
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
NODE_POOL_LABEL: Final = "karpenter.sh/nodepool"
"""The label Karpenter puts on every node of a NodePool (kubernetes-sigs/karpenter v1.14.1
pkg/apis/v1/labels.go, NodePoolLabelKey)."""
DEVICE_PLUGINS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "nvidia": ("nvidia-device-plugin", ("tolerations",)),
    "neuron": ("neuron-helm-chart", ("devicePlugin", "tolerations")),
}
"""Vendor -> the chart that registers its devices and where its values put the plugin's
tolerations (components/device_plugins.py; NVIDIA/k8s-device-plugin and
aws-neuron/neuron-helm-charts values.yaml)."""
EFA_PLUGIN: Final[tuple[str, tuple[str, ...]]] = ("aws-efa-k8s-device-plugin", ("tolerations",))
"""The EFA plugin's chart and its tolerations, where a pool's types have EFA interfaces."""


def _name(resource: PolicyResource) -> str:
    return str((resource.props.get("metadata") or {}).get("name") or "")


def _template(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((props.get("spec") or {}).get("template") or {}).get("spec") or {}


def agents(resources: list[PolicyResource]) -> dict[str, PolicyResource]:
    """Vendor (``nvidia``, ``neuron``) -> its acceptance agent DaemonSet."""
    return {
        _name(r).removeprefix(AGENT_PREFIX): r
        for r in resources
        if r.resource_type == DAEMON_SET
        and _name(r).startswith(AGENT_PREFIX)
        and (r.props.get("metadata") or {}).get("namespace") == AGENT_NAMESPACE
    }


def accelerator_pools(resources: list[PolicyResource]) -> Iterator[tuple[PolicyResource, set[str]]]:
    """Every NodePool that may launch an accelerated type, with the vendors it may launch."""
    for pool in resources:
        if pool.resource_type == NODE_POOL:
            vendors: set[str] = {
                entry.accelerator for entry in accelerated_types(pool.props.get("spec") or {})
            }
            if vendors:
                yield pool, vendors


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' toleration match (k8s.io/api core/v1 toleration.go, ToleratesTaint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _gated(taints: Any) -> bool:
    return any(
        t.get("key") == ACCEPTANCE_TAINT_KEY and t.get("effect") == ACCEPTANCE_TAINT["effect"]
        for t in as_list(taints)
        if isinstance(t, Mapping)
    )


def gate_on(resources: list[PolicyResource]) -> bool:
    """Whether the stack renders the gate: its namespace carries :data:`GATE_LABEL` ``on``."""
    return any(
        r.resource_type == NAMESPACE
        and _name(r) == AGENT_NAMESPACE
        and ((r.props.get("metadata") or {}).get("labels") or {}).get(GATE_LABEL) == "on"
        for r in resources
    )


def _check_pools_gated(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    if not gate_on(resources):
        return  # the gate is off: no pool waits for an agent
    for pool, _ in accelerator_pools(resources):
        if not _gated(_template(pool.props).get("startupTaints")):
            report(
                f"accelerator NodePool {_name(pool)!r} has no startup taint "
                f"{ACCEPTANCE_TAINT_KEY}:NoSchedule: its nodes take work unchecked",
                pool.urn,
            )
    for patch in resources:
        startup = (
            _template(patch.props).get("startupTaints")
            if patch.resource_type == NODE_POOL_PATCH
            else None
        )
        if startup is not None and not _gated(startup):
            report(
                f"NodePool patch of {_name(patch)!r} replaces its startup taints without "
                f"{ACCEPTANCE_TAINT_KEY}:NoSchedule",
                patch.urn,
            )  # fmt: skip


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expression.get("key") or "")
    values = [str(v) for v in as_list(expression.get("values"))]
    operator = expression.get("operator")
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            label, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return label > bound if operator == "Gt" else label < bound
    return False


def selects(pod: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a pod's nodeSelector and required node affinity admit a node with ``labels``.

    Kubernetes' rules (k8s.io/component-helpers scheduling/corev1/nodeaffinity/nodeaffinity.go):
    every nodeSelector pair must match; of the nodeSelectorTerms any one, each with all its
    matchExpressions; an empty term matches nothing. A term with ``matchFields`` (a node's
    ``metadata.name``) cannot admit the nodes a pool has yet to launch, so it counts as not
    matching.

    Args:
        pod: the pod spec (camelCase keys).
        labels: the node's labels.
    """
    selector = pod.get("nodeSelector") or {}
    if any(labels.get(str(key)) != str(value) for key, value in selector.items()):
        return False
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [t for t in as_list(required.get("nodeSelectorTerms")) if isinstance(t, Mapping)]
    if not required:
        return True
    return any(
        bool(term.get("matchExpressions"))
        and not term.get("matchFields")
        and all(_expression_matches(e, labels) for e in as_list(term.get("matchExpressions")))
        for term in terms
    )


def pool_node_labels(pool: PolicyResource) -> dict[str, str]:
    """The labels every node of a NodePool carries: its template's and Karpenter's NodePool label.

    Labels Karpenter derives at launch from the requirements (instance type, zone) are not
    known per node here, so a selector on them does not count as selecting the pool.
    """
    metadata = ((pool.props.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    return {**labels, NODE_POOL_LABEL: _name(pool)}


def pool_taints(pool: PolicyResource, resources: list[PolicyResource]) -> list[Mapping[str, Any]]:
    """A NodePool's taints: its template's and those of every NodePoolPatch that names it."""
    taints = list(as_list(_template(pool.props).get("taints")))
    for patch in resources:
        if patch.resource_type == NODE_POOL_PATCH and _name(patch) == _name(pool):
            taints += as_list(_template(patch.props).get("taints"))
    return [t for t in taints if isinstance(t, Mapping)]


def _check_agents_tolerate(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    by_vendor = agents(resources)
    marks = [ACCEPTANCE_TAINT, *(unhealthy_taint(source) for source in SOURCES)]
    for pool, vendors in accelerator_pools(resources):
        template = _template(pool.props)
        # Other startup taints (the FSx driver's) go when their own agents are ready; the
        # acceptance agent may wait for them, and checks mounts only after they are gone.
        taints = pool_taints(pool, resources)
        for vendor in sorted(vendors):
            agent = by_vendor.get(vendor)
            if agent is None:
                if _gated(template.get("startupTaints")):
                    report(
                        f"NodePool {_name(pool)!r} starts {vendor} nodes with the acceptance "
                        f"taint but no {AGENT_PREFIX}{vendor} DaemonSet runs to remove it",
                        pool.urn,
                    )
                continue
            pod = _template(agent.props)
            # Judged on the labels the pool's nodes carry (a pool's Slurm share, NodePool
            # <pool>-slurm, labels its nodes as the pool itself), not the NodePool's name.
            labels = pool_node_labels(pool)
            if not selects(pod, labels):
                report(
                    f"{_name(agent)} does not select NodePool {_name(pool)!r} "
                    f"({POOL_LABEL}={labels.get(POOL_LABEL, '')}): its nodes are never checked",
                    agent.urn,
                )
            tolerations = [t for t in as_list(pod.get("tolerations")) if isinstance(t, Mapping)]
            for taint in [*taints, *marks]:
                if not any(tolerates(t, taint) for t in tolerations):
                    report(
                        f"{_name(agent)} does not tolerate {taint.get('key')}="
                        f"{taint.get('value', '')}:{taint.get('effect')} of NodePool "
                        f"{_name(pool)!r}",
                        agent.urn,
                    )


def _values_at(values: Any, path: tuple[str, ...]) -> list[Mapping[str, Any]]:
    for key in path:
        values = values.get(key) if isinstance(values, Mapping) else None
    return [t for t in as_list(values) if isinstance(t, Mapping)]


def _check_device_plugins_tolerate(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    if not gate_on(resources):
        return
    releases = {
        chart_name(r.props): r for r in resources if r.resource_type in HELM_TYPES
    }  # fmt: skip
    for pool in resources:
        if pool.resource_type != NODE_POOL:
            continue
        entries = accelerated_types(pool.props.get("spec") or {})
        plugins = [DEVICE_PLUGINS[vendor] for vendor in {entry.accelerator for entry in entries}]
        if any(entry.efa_interfaces for entry in entries):
            plugins.append(EFA_PLUGIN)
        taints = [ACCEPTANCE_TAINT, *pool_taints(pool, resources)]
        for chart, path in sorted(plugins):
            release = releases.get(chart)
            if release is None:
                report(
                    f"accelerator NodePool {_name(pool)!r} is gated but no {chart} release "
                    "registers its devices: the agent rejects every node",
                    pool.urn,
                )
                continue
            tolerations = _values_at(release.props.get("values"), path)
            for taint in taints:
                if not any(tolerates(t, taint) for t in tolerations):
                    report(
                        f"{chart} ({'.'.join(path)}) does not tolerate {taint.get('key')}="
                        f"{taint.get('value', '')}:{taint.get('effect')} of NodePool "
                        f"{_name(pool)!r}: no devices register and the gate rejects its nodes",
                        release.urn,
                    )


POLICIES = [
    StackValidationPolicy(
        name="accelerator-pools-gated",
        description="Where the acceptance gate runs, every accelerator NodePool starts its "
        "nodes with the acceptance startup taint, so no work lands on a node before it is "
        "checked (docs: concepts, node acceptance).",
        validate=_check_pools_gated,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="acceptance-agent-tolerates-pools",
        description="Each vendor's acceptance agent DaemonSet selects every NodePool of that "
        "vendor and tolerates all its taints and the gate's own (acceptance, unhealthy), and no "
        "pool starts gated without its vendor's agent: otherwise a new node waits forever.",
        validate=_check_agents_tolerate,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="device-plugins-tolerate-gated-pools",
        description="Where the acceptance gate runs, the device plugins that register an "
        "accelerator pool's devices (NVIDIA or Neuron, and EFA where its types have it) are "
        "installed and their Helm values tolerate the acceptance taint and the pool's taints: "
        "the agent accepts a node only once its devices are allocatable.",
        validate=_check_device_plugins_tolerate,
        enforcement_level=MANDATORY,
    ),
]
