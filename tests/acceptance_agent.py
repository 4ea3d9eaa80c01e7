"""The acceptance agent's DaemonSet in the shape the gate renders it, for tests that need one.

The gate component (issue 44, lane "gate") renders one DaemonSet per accelerator vendor,
``acceptance-agent-<vendor>`` in ``node-acceptance``, pinned to that vendor's pools by node
affinity on ``trainingplatform.io/pool`` and tolerating their taints and the gate's own. The
policy, scan and jobs-model tests build it here until the stacks render it, and keep working
once they do (a stack's own agent is used where present).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from components.catalog import AcceleratorKind
from components.health_marks import ACCEPTANCE_TAINT, ACCEPTANCE_TAINT_KEY, UNHEALTHY_TAINT_KEY
from components.requirements import catalog_types_admitted

NAMESPACE: Final = "node-acceptance"
POOL_LABEL: Final = "trainingplatform.io/pool"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
DAEMON_SET: Final = "kubernetes:apps/v1:DaemonSet"
AGENT_REQUESTS: Final = {"cpu": "100m", "memory": "128Mi"}
"""What the test agent's container requests (the gate sets its own)."""


def agent_name(vendor: str) -> str:
    """The agent DaemonSet's name for ``vendor``."""
    return f"acceptance-agent-{vendor}"


def pool_vendors(pool_inputs: dict[str, Any]) -> set[AcceleratorKind]:
    """The accelerator vendors a NodePool's requirements admit (empty for a CPU pool)."""
    template = pool_inputs["spec"]["template"]["spec"]
    return {
        entry.accelerator for entry in catalog_types_admitted(template.get("requirements") or [])
    }


def agent_daemonset(vendor: str, pools: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The agent DaemonSet of ``vendor`` for ``pools`` (pool name -> its taints).

    Args:
        vendor: ``nvidia`` or ``neuron``.
        pools: the vendor's pools and each one's ``taints`` (what the agent must tolerate).
    """
    tolerations = [
        {"key": ACCEPTANCE_TAINT_KEY, "operator": "Exists", "effect": ACCEPTANCE_TAINT["effect"]},
        {"key": UNHEALTHY_TAINT_KEY, "operator": "Exists"},
    ]
    for taints in pools.values():
        for taint in taints:
            toleration = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
            if toleration not in tolerations:
                tolerations.append(toleration)
    labels = {"app.kubernetes.io/name": agent_name(vendor)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": agent_name(vendor), "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "acceptance-agent",
                    "automountServiceAccountToken": True,
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": POOL_LABEL,
                                                "operator": "In",
                                                "values": sorted(pools),
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": tolerations,
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {
                            "name": "agent",
                            "image": "111122223333.dkr.ecr.us-east-1.amazonaws.com/acceptance"
                            "@sha256:" + "0" * 64,
                            "command": ["python", "-m", "acceptance", "agent"],
                            "resources": {"requests": dict(AGENT_REQUESTS), "limits": {"memory": "256Mi"}},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
    }  # fmt: skip


def vendor_pools(entries: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Vendor -> its accelerator pools' names -> their taints, from a stack's records."""
    by_vendor: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for entry in entries:
        if entry["type"] != NODE_POOL:
            continue
        template = entry["inputs"]["spec"]["template"]["spec"]
        for vendor in pool_vendors(entry["inputs"]):
            by_vendor.setdefault(vendor, {})[entry["inputs"]["metadata"]["name"]] = list(
                template.get("taints") or []
            )
    return by_vendor


def with_gate(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stack's records (JSON entries) with the gate on: every accelerator pool starts with the
    acceptance taint and each vendor's agent is there (the stack's own, or one built here).

    Args:
        entries: the records as ``ResourceRecord.to_json`` gives them; edited in place.
    """
    provider = parent = None
    for entry in entries:
        if entry["type"] != NODE_POOL or not pool_vendors(entry["inputs"]):
            continue
        template = entry["inputs"]["spec"]["template"]["spec"]
        startup = template.setdefault("startupTaints", [])
        if not any(t.get("key") == ACCEPTANCE_TAINT_KEY for t in startup):
            startup.append(dict(ACCEPTANCE_TAINT))
        provider, parent = entry["provider"], entry["parent"]
    present = {e["inputs"]["metadata"]["name"] for e in entries if e["type"] == DAEMON_SET}
    for kind, pools in sorted(vendor_pools(entries).items()):
        if agent_name(kind) in present:
            continue
        manifest = agent_daemonset(kind, pools)
        entries.append(
            {
                "type": DAEMON_SET,
                "name": agent_name(kind),
                "urn": f"{parent}$kubernetes:apps/v1:DaemonSet::{agent_name(kind)}",
                "parent": parent,
                "provider": provider,
                "providers": {},
                "dependencies": [],
                "propertyDependencies": {},
                "protect": False,
                "retainOnDelete": False,
                "deleteBeforeReplace": None,
                "replaceOnChanges": [],
                "ignoreChanges": [],
                "custom": True,
                "inputs": copy.deepcopy(manifest),
            }
        )
    return entries
