"""The acceptance gate's policies on prod's synthesized resources, gate on (issue 44, item 7).

``accelerator-pools-gated``: every accelerator NodePool starts gated where an agent runs, and a
NodePoolPatch may not replace the startup taints without it. ``acceptance-agent-tolerates-pools``:
each vendor's agent selects and tolerates every pool of that vendor (patched taints included),
and a gated pool has its vendor's agent. ``device-plugins-tolerate-gated-pools``: the plugins
that register a gated pool's devices are installed and tolerate its taints. Each starts from prod
as synthesized (its gate on: the pools' taint, both vendors' agents) and changes one thing.
"""

from __future__ import annotations

import json
from typing import Any, Final

from components.acceptance_gate import GATE_LABEL, agent_name
from components.catalog import AcceleratorKind
from components.health_marks import ACCEPTANCE_TAINT_KEY, UNHEALTHY_TAINT_KEY
from components.node_pools import POOL_LABEL
from components.requirements import catalog_types_admitted
from policies.offline import evaluate, load_policy_config
from policies.rules.acceptance import POLICIES
from synth.engine import ResourceRecord
from synth.run import StackResult

STACK: Final = "prod"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
DAEMON_SET: Final = "kubernetes:apps/v1:DaemonSet"
GATED: Final = {policy.name: policy for policy in POLICIES}["accelerator-pools-gated"]
TOLERATED: Final = {policy.name: policy for policy in POLICIES}["acceptance-agent-tolerates-pools"]
PLUGINS: Final = {policy.name: policy for policy in POLICIES}["device-plugins-tolerate-gated-pools"]
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
Entry = dict[str, Any]


def _gated_entries(result: StackResult) -> list[Entry]:
    """A copy of the stack's records (prod renders the gate: its pools' taint, both agents)."""
    entries: list[Entry] = json.loads(json.dumps([r.to_json() for r in result.records]))
    return entries


def pool_vendors(pool_inputs: dict[str, Any]) -> set[AcceleratorKind]:
    """The accelerator vendors a NodePool's requirements admit (empty for a CPU pool)."""
    template = pool_inputs["spec"]["template"]["spec"]
    return {e.accelerator for e in catalog_types_admitted(template.get("requirements") or [])}


def _findings(policy: Any, entries: list[Entry]) -> list[tuple[str, str]]:
    records = [ResourceRecord.from_json(entry) for entry in entries]
    found = evaluate(records, load_policy_config(STACK), policies=[policy])
    return [(f.urn, f.message) for f in found]


def _pools(entries: list[Entry], vendor: str) -> list[Entry]:
    return [e for e in entries if e["type"] == NODE_POOL and vendor in pool_vendors(e["inputs"])]


def _agent(entries: list[Entry], vendor: AcceleratorKind) -> Entry:
    (agent,) = [
        e
        for e in entries
        if e["type"] == DAEMON_SET
        and (e["inputs"].get("metadata") or {}).get("name") == agent_name(vendor)
    ]
    return agent


def test_every_accelerator_pool_is_gated(synthesized: dict[str, StackResult]) -> None:
    entries = _gated_entries(synthesized[STACK])
    assert _findings(GATED, entries) == []
    pool = _pools(entries, "neuron")[0]
    startup = pool["inputs"]["spec"]["template"]["spec"]["startupTaints"]
    startup[:] = [t for t in startup if t["key"] != ACCEPTANCE_TAINT_KEY]
    assert [urn for urn, _ in _findings(GATED, entries)] == [pool["urn"]]
    # The same fact as a patch: one that replaces the startup taints without the gate's.
    patch = json.loads(
        json.dumps({**pool, "type": NODE_POOL + "Patch", "urn": pool["urn"] + "-patch"})
    )
    startup.append({"key": ACCEPTANCE_TAINT_KEY, "effect": "NoSchedule"})
    patch["inputs"] = {
        "metadata": {"name": "pools-x"},
        "spec": {"template": {"spec": {"startupTaints": []}}},
    }
    entries.append(patch)
    found = _findings(GATED, entries)
    assert [urn for urn, _ in found] == [patch["urn"]], found
    # The gate is on by the stack's config (its namespace's label), not by an agent being there:
    # a stack whose agents were dropped still holds its pools to the taint.
    entries = [e for e in entries if e["type"] != DAEMON_SET and e is not patch]
    startup.pop()
    assert [urn for urn, _ in _findings(GATED, entries)] == [pool["urn"]]
    # Without the label the gate is off, and no pool needs the taint.
    (namespace,) = [e for e in entries if e["type"] == NAMESPACE and GATE_LABEL in _labels(e)]
    del namespace["inputs"]["metadata"]["labels"][GATE_LABEL]
    assert _findings(GATED, entries) == []


def _labels(entry: Entry) -> dict[str, str]:
    return dict((entry["inputs"].get("metadata") or {}).get("labels") or {})


def test_each_agent_tolerates_and_selects_its_vendors_pools(
    synthesized: dict[str, StackResult],
) -> None:
    entries = _gated_entries(synthesized[STACK])
    assert _findings(TOLERATED, entries) == []
    for vendor in ("nvidia", "neuron"):
        pools = _pools(entries, vendor)
        assert pools, f"prod has no {vendor} pool"
        agent = _agent(entries, vendor)
        pod = agent["inputs"]["spec"]["template"]["spec"]
        kept = json.loads(json.dumps(pod))
        # A taint one pool adds that the agent does not tolerate.
        template = pools[0]["inputs"]["spec"]["template"]["spec"]
        template.setdefault("taints", []).append(
            {"key": "example.com/dedicated", "value": "x", "effect": "NoSchedule"}
        )
        found = _findings(TOLERATED, entries)
        assert [urn for urn, _ in found] == [agent["urn"]], found
        assert "example.com/dedicated=x:NoSchedule" in found[0][1]
        template["taints"].pop()
        # The agent forgets the unhealthy taint: it could not stay on a node it marked.
        pod["tolerations"] = [t for t in pod["tolerations"] if t.get("key") != UNHEALTHY_TAINT_KEY]
        assert any(UNHEALTHY_TAINT_KEY in m for _, m in _findings(TOLERATED, entries))
        pod["tolerations"] = kept["tolerations"]
        # Its affinity leaves a pool out.
        expression = pod["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchExpressions"][0]
        # Nodes carry their template's pool label: a pool's Slurm share (<pool>-slurm) labels
        # them as the pool itself, so leaving the label out leaves both NodePools out.
        label = pools[0]["inputs"]["spec"]["template"]["metadata"]["labels"][POOL_LABEL]
        expression["values"] = [v for v in expression["values"] if v != label]
        found = _findings(TOLERATED, entries)
        assert {urn for urn, _ in found} == {agent["urn"]}, found
        assert all("does not select" in message for _, message in found), found
        # A selector without the pool label is judged on the pools' template labels: the
        # vendor's accelerator label admits them all, the Slurm share's label only its shares.
        del pod["affinity"]
        pod["nodeSelector"] = {"trainingplatform.io/accelerator": vendor}
        assert _findings(TOLERATED, entries) == []
        pod["nodeSelector"] = {"trainingplatform.io/reserved-for": "slurm"}
        found = _findings(TOLERATED, entries)
        unselected = {p["inputs"]["metadata"]["name"] for p in pools if "-slurm" not in p["name"]}
        assert unselected and all("does not select" in m for _, m in found), found
        assert {m.split("'")[1] for _, m in found} == unselected, found
        agent["inputs"]["spec"]["template"]["spec"] = kept
        # A NodePoolPatch that adds a taint to one of the vendor's pools.
        entries.append(_patch(pools[0], {"template": {"spec": {"taints": [
            {"key": "example.com/patched", "value": "y", "effect": "NoSchedule"}]}}}))  # fmt: skip
        found = _findings(TOLERATED, entries)
        assert [urn for urn, _ in found] == [agent["urn"]], found
        assert "example.com/patched=y:NoSchedule" in found[0][1]
        entries.pop()
    # A gated pool whose vendor has no agent waits forever.
    entries = [e for e in entries if e is not _agent(entries, "neuron")]
    found = _findings(TOLERATED, entries)
    assert {urn for urn, _ in found} == {p["urn"] for p in _pools(entries, "neuron")}, found
    assert all("no acceptance-agent-neuron" in message for _, message in found)


def _patch(pool: Entry, spec: dict[str, Any]) -> Entry:
    """A NodePoolPatch of ``pool`` (same name) with ``spec``."""
    patch: Entry = json.loads(json.dumps(pool))
    patch["type"] = NODE_POOL + "Patch"
    patch["urn"] = pool["urn"] + "-patch"
    patch["inputs"] = {"metadata": {"name": pool["inputs"]["metadata"]["name"]}, "spec": spec}
    return patch


def _release(entries: list[Entry], name: str) -> Entry:
    (release,) = [
        e for e in entries if e["type"] == "kubernetes:helm.sh/v3:Release" and e["name"] == name
    ]
    return release


def test_device_plugins_tolerate_every_gated_pool(synthesized: dict[str, StackResult]) -> None:
    entries = _gated_entries(synthesized[STACK])
    assert _findings(PLUGINS, entries) == []
    nvidia = _release(entries, "nvidia-device-plugin")
    neuron = _release(entries, "neuron-helm-chart")
    # The NVIDIA plugin forgets the acceptance taint: every GPU pool's nodes lack it.
    values = nvidia["inputs"]["values"]
    kept = list(values["tolerations"])
    values["tolerations"] = [t for t in kept if t.get("key") != ACCEPTANCE_TAINT_KEY]
    found = _findings(PLUGINS, entries)
    assert {urn for urn, _ in found} == {nvidia["urn"]}, found
    gpu_pools = {p["inputs"]["metadata"]["name"] for p in _pools(entries, "nvidia")}
    assert {m.split("'")[1] for _, m in found} == gpu_pools, found
    values["tolerations"] = kept
    # The Neuron plugin's tolerations sit under devicePlugin; a pool taint it does not know.
    pool = _pools(entries, "neuron")[0]
    entries.append(_patch(pool, {"template": {"spec": {"taints": [
        {"key": "example.com/patched", "value": "y", "effect": "NoSchedule"}]}}}))  # fmt: skip
    by_urn = dict(_findings(PLUGINS, entries))
    efa = _release(entries, "aws-efa-k8s-device-plugin")
    assert set(by_urn) == {neuron["urn"], efa["urn"]}, by_urn  # trn2 has EFA interfaces too
    assert (
        "(devicePlugin.tolerations) does not tolerate example.com/patched" in by_urn[neuron["urn"]]
    )
    entries.pop()
    # No EFA plugin: every pool of EFA types is reported.
    entries = [e for e in entries if e["name"] != "aws-efa-k8s-device-plugin"]
    found = _findings(PLUGINS, entries)
    assert found and all("no aws-efa-k8s-device-plugin release" in m for _, m in found), found
    assert {urn for urn, _ in found} >= {p["urn"] for p in _pools(entries, "nvidia")}
