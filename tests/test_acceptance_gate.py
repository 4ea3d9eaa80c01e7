"""The acceptance gate on the cluster: its startup taint, who tolerates it, who may not.

Every accelerator NodePool starts its nodes with the acceptance taint (issue 44, item 1); the
DaemonSets a node needs before it can pass tolerate it, or the gate deadlocks; team pods and
slurmd wait for it.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pytest

from acceptance import agent
from components import acceptance_gate, health_marks
from components.acceptance_gate import (
    AGENT_USER,
    MIRROR_USER,
    NAMESPACE,
    NODE_ADDONS,
    NODE_MARKS_POLICY,
    agent_name,
    agent_settings,
    pool_floors,
    vendor_pools,
)
from components.catalog import GPU_RESOURCE
from components.config import ConfigError, NodePoolConfig, parse_platform_config
from components.config.acceptance import AcceptanceConfig
from components.config.pools import TaintConfig
from components.helm import CHART_PLACEMENT
from components.node_pools import FSX_STARTUP_TAINT, POOL_LABEL, node_pool_spec, slurm_taint
from components.observability import efa_exporter, sources
from components.platform import gated, lustre_pools, platform_namespaces
from components.slurm import common as slurm_common
from components.slurm import health_mirror
from components.teams import team_pods_policy
from components.tenant_pods import TENANT_PODS_POLICY
from synth.jobs.admission import admit, enforced
from synth.jobs.daemonsets import device_plugins
from synth.jobs.karpenter import node_pools
from synth.jobs.placement import (
    required_affinity_holds,
    selector_holds,
    tolerates,
    untolerated,
)
from synth.jobs.view import StackView
from synth.pods import pods_of
from synth.run import StackResult
from tests.conftest import stack_data

ADDON: Final = "aws:eks/addon:Addon"


def _accelerator_pools(result: StackResult) -> dict[str, Any]:
    """NodePool name -> shape, for the NodePools of the stack's accelerator pools."""
    names = {pool.name for pool in result.config.node_pools}
    return {
        shape.name: shape
        for shape in node_pools(StackView.from_records(result.records))
        if shape.labels.get(POOL_LABEL, set()) & names
    }


def test_every_accelerator_node_pool_starts_with_the_acceptance_taint(
    synthesized: dict[str, StackResult],
) -> None:
    for stack, result in synthesized.items():
        assert result.config.acceptance.enabled, stack
        shapes = node_pools(StackView.from_records(result.records))
        gated = _accelerator_pools(result)
        wanted = {p.name for p in result.config.node_pools}
        # Slurm's share (<pool>-slurm) is gated too: slurmd waits like any pod.
        assert any(name.endswith("-slurm") for name in gated), stack
        assert {str(next(iter(s.labels[POOL_LABEL]))) for s in gated.values()} == wanted, stack
        for shape in shapes:
            accepted = health_marks.ACCEPTANCE_TAINT in shape.startup_taints
            assert accepted == (shape.name in gated), (stack, shape.name)
            # Only a startup taint: a regular one would keep Karpenter from making the node.
            assert all(t["key"] != health_marks.ACCEPTANCE_TAINT_KEY for t in shape.taints)
        # The FSx startup taint stays where the file system is mounted.
        assert any(FSX_STARTUP_TAINT in s.startup_taints for s in gated.values()), stack


def _gpu_pod(*tolerations: dict[str, Any]) -> dict[str, Any]:
    """A team's GPU pod of Volcano that tolerates the GPU taint and ``tolerations``."""
    gpu = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {GPU_RESOURCE: "8"}, "limits": {GPU_RESOURCE: "8"}},
                }
            ],
            "tolerations": [gpu, *tolerations],
        },
    }


def test_team_pods_may_not_tolerate_the_health_taints(
    synthesized: dict[str, StackResult],
) -> None:
    """Through the tenant pods policy's CEL: each health taint, however it is tolerated."""
    result = synthesized["dev"]
    view = StackView.from_records(result.records)
    policy = enforced(view, TENANT_PODS_POLICY)
    assert policy is not None
    namespace = view.named("Namespace", result.config.teams[0].name)
    assert admit(policy, _gpu_pod(), namespace, username="member") == (True, None)
    attacks = [
        {"key": health_marks.ACCEPTANCE_TAINT_KEY, "operator": "Exists"},
        {**health_marks.ACCEPTANCE_TAINT, "operator": "Exists"},
        {**health_marks.unhealthy_taint("acceptance"), "operator": "Equal"},
        {"key": health_marks.UNHEALTHY_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
    ]
    for toleration in attacks:
        ok, message = admit(policy, _gpu_pod(toleration), namespace, username="member")
        assert not ok, toleration
        assert message is not None and f"not allowed in a team namespace: {toleration['key']}" in (
            message
        ), message
    # Not even where a pool names a health taint among its extra taints.
    pool = result.config.node_pools[0].model_copy(
        update={
            "taints": [
                TaintConfig(key=key, effect="NoSchedule") for key in health_marks.AGENT_TAINT_KEYS
            ]
        }
    )
    ruled = team_pods_policy(list(result.config.teams), [pool])
    for toleration in attacks:
        assert not admit(ruled, _gpu_pod(toleration), namespace, username="member")[0]


def _lands_on(spec: dict[str, Any], shape: Any) -> bool:
    """Whether a pod spec's pods land on a NodePool's nodes (startup taints aside)."""
    if untolerated(spec.get("tolerations") or [], shape.taints):
        return False
    return any(
        selector_holds(spec.get("nodeSelector") or {}, shape.labels_for(instance))
        and required_affinity_holds(spec.get("affinity"), shape.labels_for(instance))
        for instance in shape.instance_types
    )


def _tolerates_health(tolerations: list[dict[str, Any]]) -> list[str]:
    """The health taints these tolerations tolerate (by key)."""
    marks = [health_marks.ACCEPTANCE_TAINT, health_marks.unhealthy_taint("acceptance")]
    return [str(m["key"]) for m in marks if any(tolerates(t, m) for t in tolerations)]


def test_every_daemonset_on_an_accelerator_node_tolerates_the_acceptance_taint(
    synthesized: dict[str, StackResult],
) -> None:
    """The device plugins, the agents, every other DaemonSet, the add-ons' DaemonSets.

    Each that can land on an accelerator node tolerates the acceptance taint, or that node
    never passes (the agent checks that the devices registered). Every other pod waits.
    """
    taint = health_marks.ACCEPTANCE_TAINT
    for stack, result in synthesized.items():
        view = StackView.from_records(result.records)
        gated = list(_accelerator_pools(result).values())
        # Every chart that renders a DaemonSet on the accelerator nodes is a device plugin.
        placed = {
            release
            for release, values in view.releases.items()
            if any(
                "DaemonSet of the accelerator nodes" in e.why
                for e in CHART_PLACEMENT[values["chart"]].elsewhere
            )
        }
        plugins = device_plugins(view)
        assert {p.release for p in plugins} == placed, stack
        for plugin in plugins:
            on = [s for s in gated if plugin.runs_on(s)]
            assert on, (stack, plugin.release)
            assert any(tolerates(t, taint) for t in plugin.tolerations), (stack, plugin.release)
        daemonsets = list(view.of_kind("DaemonSet"))
        # The agents, the Neuron monitor where a Trainium pool is and the EFA exporter where
        # a pool attaches EFA (the metrics sources).
        monitors = sources.exporter_pools(result.config.node_pools, sources.NEURON_MONITOR_NAME)
        efa = efa_exporter.efa_pools(result.config.node_pools)
        assert {d["metadata"]["name"] for d in daemonsets} == {
            agent_name(v) for v in vendor_pools(result.config.node_pools)
        } | ({sources.NEURON_MONITOR_NAME} if monitors else set()) | (
            {efa_exporter.NAME} if efa else set()
        ), stack
        for daemonset in daemonsets:
            spec = daemonset["spec"]["template"]["spec"]
            if any(_lands_on(spec, s) for s in gated):
                assert any(tolerates(t, taint) for t in spec["tolerations"]), daemonset
        # The add-ons' node DaemonSets keep their defaults (no configuration replaces them),
        # or every DaemonSet of the add-on is given the entry's tolerations in its configuration.
        addons = [r for r in result.records if r.type == ADDON]
        assert addons, stack
        for addon in addons:
            name = addon.inputs["addonName"]
            assert name in NODE_ADDONS, f"{name}: say how its node DaemonSet is placed"
            entry = NODE_ADDONS[name]
            configured = json.loads(addon.inputs.get("configurationValues") or "{}")
            if entry.configured:
                assert configured, name
                for component in configured.values():
                    assert tuple(component["tolerations"]) == entry.tolerations, name
            else:
                assert "tolerations" not in json.dumps(configured), name
            if entry.daemonset is not None:
                for shape in gated:
                    every = [*shape.taints, *shape.startup_taints]
                    assert untolerated(entry.tolerations, every) == [], (name, shape.name)
        # Nothing else may: slurmd, team runtimes, Ray, login and services wait for acceptance.
        pods = pods_of({str(i): o for i, o in enumerate(view.objects)}, view.releases)
        slurmd = [
            p
            for p in pods.values()
            if any(t.get("key") == slurm_taint()["key"] for t in p["spec"].get("tolerations", []))
        ]
        assert bool(slurmd) == result.config.slurm.enabled, stack
        for name, pod in pods.items():
            tolerated = _tolerates_health(pod["spec"].get("tolerations") or [])
            assert tolerated == [], (stack, name, tolerated)


def _node(**changes: Any) -> dict[str, Any]:
    """A gated p5 node as the API server holds it, with ``changes`` to its metadata and spec."""
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "ip-10-0-0-1.ec2.internal",
            "resourceVersion": "41",
            "labels": {POOL_LABEL: "p5", "node.kubernetes.io/instance-type": "p5.48xlarge"},
            "annotations": {"karpenter.sh/nodepool-hash": "1"},
        },
        "spec": {
            "providerID": "aws:///us-east-1a/i-0123",
            "taints": [
                {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"},
                dict(health_marks.ACCEPTANCE_TAINT),
            ],
        },
    }
    for part in ("metadata", "spec"):
        node[part].update(changes.get(part, {}))
    return node


def test_the_health_writers_change_only_the_health_marks_of_a_node(
    synthesized: dict[str, StackResult],
) -> None:
    """Through the node marks policy's CEL, for the agent and the Slurm health mirror."""
    view = StackView.from_records(synthesized["prod"].records)
    policy = enforced(view, NODE_MARKS_POLICY)
    assert policy is not None
    old = _node()
    gpu_taint = old["spec"]["taints"][0]
    labels = old["metadata"]["labels"]
    passed = {**labels, health_marks.RESULT_LABEL: "passed"}
    failed_marks = {
        **old["metadata"]["annotations"],
        health_marks.REASON_ANNOTATION: "gpu count: 7, want 8",
        health_marks.CHECKED_AT_ANNOTATION: "2026-12-06T12:00:00Z",
    }
    allowed = {
        "passed": _node(
            metadata={"labels": passed, "resourceVersion": "42"}, spec={"taints": [gpu_taint]}
        ),
        "failed": _node(
            metadata={
                "labels": {**labels, health_marks.RESULT_LABEL: "failed"},
                "annotations": failed_marks,
            },
            spec={"taints": [gpu_taint, health_marks.unhealthy_taint("acceptance")]},
        ),
        "drained in slurm": _node(
            spec={"taints": [gpu_taint, health_marks.unhealthy_taint("slurm")]}
        ),
    }
    refused = {
        "removes another taint": _node(spec={"taints": [dict(health_marks.ACCEPTANCE_TAINT)]}),
        "adds another taint": _node(
            spec={"taints": [*old["spec"]["taints"], {"key": "x", "effect": "NoSchedule"}]}
        ),
        "adds another label": _node(metadata={"labels": {**labels, "team": "a"}}),
        "changes another label": _node(metadata={"labels": {**labels, POOL_LABEL: "p5en"}}),
        "removes another annotation": _node(metadata={"annotations": {}}),
        "cordons": _node(spec={"unschedulable": True}),
        "changes the provider id": _node(spec={"providerID": "aws:///us-east-1a/i-9"}),
        "adds a finalizer": _node(metadata={"finalizers": ["example.com/hold"]}),
    }
    # The mirror's user is the account its Deployment runs as.
    assert f"system:serviceaccount:{slurm_common.NAMESPACE}:{health_mirror.NAME}" == MIRROR_USER
    for user in (AGENT_USER, MIRROR_USER):
        for case, new in allowed.items():
            assert admit(policy, new, old=old, username=user) == (True, None), (user, case)
        for case, new in refused.items():
            ok, message = admit(policy, new, old=old, username=user)
            assert not ok and message, (user, case)
    # Anyone else is not held by it (RBAC decides): an admin cordons.
    assert admit(policy, refused["cordons"], old=old, username="admin")[0]


def test_the_agents_run_on_their_vendors_pools_with_settings_and_no_devices(
    synthesized: dict[str, StackResult],
) -> None:
    """One DaemonSet per vendor: where, as whom, with what, and its settings file."""
    result = synthesized["prod"]
    view = StackView.from_records(result.records)
    shapes = _accelerator_pools(result)
    vendors = vendor_pools(result.config.node_pools)
    assert set(vendors) == {"nvidia", "neuron"}
    for vendor, pools in vendors.items():
        daemonset = view.named("DaemonSet", agent_name(vendor), NAMESPACE)
        assert daemonset is not None, vendor
        spec = daemonset["spec"]["template"]["spec"]
        names = {pool.name for pool in pools}
        for shape in shapes.values():
            mine = bool(shape.labels[POOL_LABEL] & names)
            assert _lands_on(spec, shape) == mine, (vendor, shape.name)
            if mine:  # every taint its nodes carry, startup ones too
                assert untolerated(spec["tolerations"], shape.taints + shape.startup_taints) == []
        assert spec["priorityClassName"] == "system-node-critical"
        assert spec["serviceAccountName"] == "acceptance-agent"
        (container,) = spec["containers"]
        image = getattr(result.config.acceptance.images, vendor)
        assert container["image"] == image
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert spec["securityContext"]["runAsNonRoot"] is True
        asked = {**container["resources"]["requests"], **container["resources"]["limits"]}
        assert set(asked) == {"cpu", "memory"}, asked  # no device-plugin resource
        env = {e["name"]: e for e in container["env"]}
        assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
        # The settings file, as the issue's contract has it.
        config_map = view.named("ConfigMap", f"acceptance-settings-{vendor}", NAMESPACE)
        assert config_map is not None
        settings = json.loads(config_map["data"]["settings.json"])
        mount = next(m for m in container["volumeMounts"] if m["name"] == "settings")
        assert f"{mount['mountPath']}/settings.json" == env["ACCEPTANCE_SETTINGS"]["value"]
        assert settings["checkImage"] == image
        assert settings["deadlineMinutes"] == result.config.acceptance.deadline_minutes
        assert settings["dcgmDiagLevel"] == result.config.acceptance.dcgm_diag_level
        assert set(settings["pools"]) == names
        for pool in pools:
            entry = settings["pools"][pool.name]
            assert entry["efa"] == pool.uses_efa
            assert {f["instance_type"] for f in entry["floors"]} == set(pool.instance_types)
            claims = {f["claim"] for f in entry["fileSystems"]}
            for claim in claims:  # a claim the agent can mount, in its namespace
                assert view.named("PersistentVolumeClaim", claim, NAMESPACE) is not None
            assert bool(claims) == (pool.name in lustre_pools(result.config)), pool.name


def test_one_sweep_on_the_general_pool_holds_every_gated_pool_to_its_deadline(
    synthesized: dict[str, StackResult],
) -> None:
    """The deadline is enforced from outside the nodes too: one sweep, all pools, one account."""
    result = synthesized["prod"]
    view = StackView.from_records(result.records)
    deployment = view.named("Deployment", acceptance_gate.SWEEP_NAME, NAMESPACE)
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 1
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {POOL_LABEL: "general"}
    assert spec["serviceAccountName"] == "acceptance-agent"  # the node-marks policy's user
    (container,) = spec["containers"]
    assert container["command"] == ["python", "-m", "acceptance", "sweep"]
    assert container["image"] == result.config.acceptance.images.nvidia
    config_map = view.named("ConfigMap", acceptance_gate.SWEEP_NAME, NAMESPACE)
    assert config_map is not None
    settings = json.loads(config_map["data"]["settings.json"])
    gated = {p.name for pools in vendor_pools(result.config.node_pools).values() for p in pools}
    assert set(settings["pools"]) == gated
    for vendor in ("nvidia", "neuron"):  # the same pool settings as the agents read
        agents = view.named("ConfigMap", f"acceptance-settings-{vendor}", NAMESPACE)
        assert agents is not None
        for name, entry in json.loads(agents["data"]["settings.json"])["pools"].items():
            assert settings["pools"][name] == entry, name


def test_a_pools_measured_baseline_replaces_the_shipped_floor() -> None:
    shipped = {(f["instance_type"], f["check"], f["nodes"]): f for f in pool_floors(_p5())}
    assert shipped[("p5.48xlarge", "nccl-all-reduce", 1)]["floor_gbps"] == 0
    measured = _p5(
        acceptance={
            "baselines": [
                {
                    "instanceType": "p5.48xlarge",
                    "check": "nccl-all-reduce",
                    "nodes": 1,
                    "floorGbps": 380.5,
                    "of": "16 GiB, 8 GPUs",
                    "source": "measured: job x",
                }
            ]
        }
    )
    floors = {(f["instance_type"], f["check"], f["nodes"]): f for f in pool_floors(measured)}
    assert set(floors) == set(shipped)  # replaced, not added
    assert floors[("p5.48xlarge", "nccl-all-reduce", 1)]["floor_gbps"] == 380.5
    assert floors[("p5.48xlarge", "nccl-all-reduce", 1)]["source"] == "measured: job x"
    assert (
        floors[("p5.48xlarge", "nccl-all-reduce", 2)]
        == shipped[("p5.48xlarge", "nccl-all-reduce", 2)]
    )
    # The pool's replacement settings override the platform's.
    gate = AcceptanceConfig.model_validate({"replaceFailedNodes": True})
    pool = _p5(acceptance={"replaceFailedNodes": False, "maxReplacementsPerHour": 0})
    entry = agent_settings(gate, [pool], image="i", mounts={})["pools"]["p5"]
    assert (entry["replaceFailedNodes"], entry["maxReplacementsPerHour"]) == (False, 0)
    entry = agent_settings(gate, [_p5()], image="i", mounts={})["pools"]["p5"]
    assert (entry["replaceFailedNodes"], entry["maxReplacementsPerHour"]) == (True, 2)


def _p5(**fields: Any) -> NodePoolConfig:
    return NodePoolConfig.model_validate(
        {"name": "p5", "instanceTypes": ["p5.48xlarge"], "maxNodes": 2, **fields}
    )


def test_the_agent_may_do_what_it_must_and_no_more(synthesized: dict[str, StackResult]) -> None:
    view = StackView.from_records(synthesized["prod"].records)

    def rights(kind: str, name: str, namespace: str | None = None) -> set[tuple[str, str, str]]:
        role = view.named(kind, name, namespace)
        assert role is not None, name
        return {
            (group, resource, verb)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }

    cluster = rights("ClusterRole", "trainingplatform:acceptance-agent")
    assert cluster == {
        *(("", "nodes", v) for v in ("get", "list", "watch", "patch")),
        *(("karpenter.sh", "nodeclaims", v) for v in ("get", "list", "delete")),
    }
    local = rights("Role", "acceptance-agent", NAMESPACE)
    assert local == {
        *(("", "pods", v) for v in ("create", "get", "list", "watch", "delete")),
        *(("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")),
    }
    # Events about Nodes go to "default" (the API server refuses them in node-acceptance), and
    # that is the one namespace the agent may write them in.
    assert rights("Role", "acceptance-agent", agent.EVENT_NAMESPACE) == {("", "events", "create")}
    binding = view.named("RoleBinding", "acceptance-agent", agent.EVENT_NAMESPACE)
    assert binding is not None
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "acceptance-agent", "namespace": NAMESPACE}
    ]
    daemonset = view.named("DaemonSet", "acceptance-agent-nvidia", NAMESPACE)
    assert daemonset is not None
    env = {e["name"]: e for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    namespace = view.named("Namespace", NAMESPACE)
    assert namespace is not None
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_an_enabled_gate_needs_each_present_vendors_image() -> None:
    data = stack_data("prod")
    data["acceptance"] = {"images": {"neuron": data["acceptance"]["images"]["neuron"]}}
    with pytest.raises(ConfigError) as raised:
        parse_platform_config(data)
    (problem,) = [p for p in raised.value.problems if "acceptance" in p.path]
    assert problem.path == "platform.acceptance.images.nvidia"
    assert "p5, p5en" in problem.allowed
    data["acceptance"]["enabled"] = False
    parse_platform_config(data)  # off: no image needed
    data["acceptance"] = {"images": {}}
    data["nodePools"] = [p for p in data["nodePools"] if p["name"] == "trn2"]
    with pytest.raises(ConfigError) as raised:
        parse_platform_config(data)
    assert [p.path for p in raised.value.problems if "acceptance" in p.path] == [
        "platform.acceptance.images.neuron"
    ]


def test_without_the_gate_nodes_start_untainted_and_no_agent_runs() -> None:
    data = stack_data("prod")
    data["acceptance"] = {"enabled": False}
    config = parse_platform_config(data)
    assert not gated(config)
    assert acceptance_gate.NAMESPACE not in platform_namespaces(config)
    pool = config.node_pools[0]
    for acceptance in (False, True):
        spec = node_pool_spec(pool, zones=["a"], nodes=2, acceptance=acceptance, for_slurm=True)
        startup = spec["template"]["spec"].get("startupTaints", [])
        assert (health_marks.ACCEPTANCE_TAINT in startup) is acceptance
