"""The acceptance gate's policies on prod's synthesized resources, gate on (issue 44, item 7).

``accelerator-pools-gated``: every accelerator NodePool starts gated where an agent runs, and a
NodePoolPatch may not replace the startup taints without it. ``acceptance-agent-tolerates-pools``:
each vendor's agent selects and tolerates every pool of that vendor, and a gated pool has its
vendor's agent. Each starts from prod as synthesized with the gate on (tests/acceptance_agent.py)
and changes one thing.
"""

from __future__ import annotations

import json
from typing import Any, Final

from components.health_marks import ACCEPTANCE_TAINT_KEY, UNHEALTHY_TAINT_KEY
from components.node_pools import POOL_LABEL
from policies.offline import evaluate, load_policy_config
from policies.rules.acceptance import POLICIES
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests.acceptance_agent import DAEMON_SET, NODE_POOL, agent_name, pool_vendors, with_gate

STACK: Final = "prod"
GATED: Final = {policy.name: policy for policy in POLICIES}["accelerator-pools-gated"]
TOLERATED: Final = {policy.name: policy for policy in POLICIES}["acceptance-agent-tolerates-pools"]
Entry = dict[str, Any]


def _gated_entries(result: StackResult) -> list[Entry]:
    entries: list[Entry] = json.loads(json.dumps([r.to_json() for r in result.records]))
    return with_gate(entries)


def _findings(policy: Any, entries: list[Entry]) -> list[tuple[str, str]]:
    records = [ResourceRecord.from_json(entry) for entry in entries]
    found = evaluate(records, load_policy_config(STACK), policies=[policy])
    return [(f.urn, f.message) for f in found]


def _pools(entries: list[Entry], vendor: str) -> list[Entry]:
    return [e for e in entries if e["type"] == NODE_POOL and vendor in pool_vendors(e["inputs"])]


def _agent(entries: list[Entry], vendor: str) -> Entry:
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
    # With no agent the gate is off, and no pool needs the taint.
    entries = [e for e in entries if e["type"] != DAEMON_SET and e is not patch]
    assert _findings(GATED, entries) == []


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
        agent["inputs"]["spec"]["template"]["spec"] = kept
    # A gated pool whose vendor has no agent waits forever.
    entries = [e for e in entries if e is not _agent(entries, "neuron")]
    found = _findings(TOLERATED, entries)
    assert {urn for urn, _ in found} == {p["urn"] for p in _pools(entries, "neuron")}, found
    assert all("no acceptance-agent-neuron" in message for _, message in found)
