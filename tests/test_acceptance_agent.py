"""`python -m acceptance agent` against a fake API: the steps, the deadline, the replacement cap.

The fake keeps objects as the API server returns them (dicts), applies JSON patches with their
``test`` operations, and checks resourceVersions on Lease writes as the API server does, so a
lost race is a conflict. It refuses what the API server refuses: a core/v1 Event about a Node
outside "" and "default" (kubernetes/kubernetes pkg/apis/core/validation/events.go
``legacyValidateEvent``), an ownerReference without a uid. Its reads hand taints back as the
client does, a ``timeAdded`` of "...Z" as "...+00:00" (kubernetes 35.0.0 client, datetime
deserialised then re-serialised by ``sanitize_for_serialization``), while patches are applied
to what is stored, the API server's own spelling. The node, pod and NodeClaim objects are SYNTHETIC, shaped as the API
serves them (a Karpenter node's ownerReference as kubernetes-sigs/karpenter v1.14.1
pkg/utils/nodeclaim/nodeclaim.go UpdateNodeOwnerReferences writes it).
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from acceptance import agent, sweep
from acceptance.kube import Conflict, Invalid, KubernetesApi, Object
from acceptance.settings import POOL_LABEL, parse_settings, settings_from_environment
from components import node_pools
from components.catalog import CATALOG, EFA_RESOURCE, GPU_RESOURCE
from components.health_marks import (
    ACCEPTANCE_TAINT,
    ACCEPTANCE_TAINT_KEY,
    BUSBW_ANNOTATION,
    CHECKED_AT_ANNOTATION,
    DO_NOT_DISRUPT_ANNOTATION,
    REASON_ANNOTATION,
    RESULT_LABEL,
    UNHEALTHY_TAINT_KEY,
    unhealthy_taint,
)

NS = "node-acceptance"
CREATED = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
SOON = CREATED + timedelta(minutes=5)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
SETTINGS = parse_settings({
    "deadlineMinutes": 45,
    "dcgmDiagLevel": 2,
    "checkImage": "acceptance:nvidia-test",
    "pools": {
        "gpu": {
            "replaceFailedNodes": True, "maxReplacementsPerHour": 1, "efa": True,
            "fileSystems": [{"name": "lustre", "claim": "lustre-shared", "mountPath": "/mnt/lustre",
                             "fsType": "lustre"}],
            "floors": [{"instance_type": "p5.48xlarge", "check": "nccl-all-reduce", "nodes": 1,
                        "floor_gbps": 300, "of": "16 GiB, 8 GPUs", "source": "measured: test"}],
        },
        "keep": {"replaceFailedNodes": False, "maxReplacementsPerHour": 2, "efa": False},
    },
})  # fmt: skip


def apply_patch(document: Object, ops: list[Object]) -> Object:
    """RFC 6902 add/replace/remove/test on a copy; a failed test is a Conflict (HTTP 422)."""
    doc = copy.deepcopy(document)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")
        ]
        target = doc
        for part in parents:
            target = target[part]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                raise Conflict(f"test of {op['path']} failed")
        elif op["op"] in {"add", "replace"}:
            if op["op"] == "replace" and last not in target:
                raise AssertionError(f"replace of a missing {op['path']}")
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del target[last]
    return doc


class FakeApi:
    """An in-memory API server for the agent's calls."""

    def __init__(self) -> None:
        self.nodes: dict[str, Object] = {}
        self.pods: dict[str, Object] = {}
        self.events: dict[str, Object] = {}
        self.nodeclaims: dict[str, Object] = {}
        self.leases: dict[str, Object] = {}
        self.version = 0
        self.before_lease_write: Callable[[], None] | None = None
        self.fail_next_patch = False

    def _bump(self, obj: Object) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)

    def list_nodes(self) -> list[Object]:
        return [n for n in (self.get_node(name) for name in self.nodes) if n is not None]

    def get_node(self, name: str) -> Object | None:
        node = copy.deepcopy(self.nodes.get(name))
        for taint in ((node or {}).get("spec") or {}).get("taints") or []:
            if "timeAdded" in taint:  # what the client's round trip makes of it
                taint["timeAdded"] = taint["timeAdded"].replace("Z", "+00:00")
        return node

    def patch_node(self, name: str, patch: list[Object]) -> None:
        if self.fail_next_patch:
            self.fail_next_patch = False
            raise RuntimeError("connection reset")
        patched = apply_patch(self.nodes[name], patch)
        for taint in patched["spec"].get("taints") or []:
            if "timeAdded" in taint:  # the API server parses the time and stores its own form
                taint["timeAdded"] = taint["timeAdded"].replace("+00:00", "Z")
        if patched != self.nodes[name]:
            self._bump(patched)
        self.nodes[name] = patched

    def get_pod(self, namespace: str, name: str) -> Object | None:
        assert namespace == NS
        return copy.deepcopy(self.pods.get(name))

    def create_pod(self, namespace: str, pod: Object) -> None:
        for owner in pod["metadata"].get("ownerReferences") or []:
            if not owner.get("uid") or not owner.get("name"):
                raise Invalid(f"metadata.ownerReferences: uid and name must be set: {owner}")
        if pod["metadata"]["name"] in self.pods:
            raise Conflict("exists")
        self.pods[pod["metadata"]["name"]] = copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.pods.pop(name, None)

    def create_event(self, namespace: str, event: Object) -> None:
        involved = event["involvedObject"].get("namespace", "")
        if not event.get("eventTime") and (
            namespace not in {"", "default"} if not involved else namespace != involved
        ):
            raise Invalid("involvedObject.namespace: does not match event.namespace")
        assert event["metadata"]["namespace"] == namespace
        if event["metadata"]["name"] in self.events:
            raise Conflict("exists")
        self.events[event["metadata"]["name"]] = event

    def list_nodeclaims(self) -> list[Object]:
        return copy.deepcopy(list(self.nodeclaims.values()))

    def delete_nodeclaim(self, name: str) -> None:
        self.nodeclaims.pop(name, None)

    def get_lease(self, namespace: str, name: str) -> Object | None:
        return copy.deepcopy(self.leases.get(name))

    def _before_write(self) -> None:
        hook, self.before_lease_write = self.before_lease_write, None
        if hook is not None:
            hook()

    def create_lease(self, namespace: str, lease: Object) -> None:
        self._before_write()
        if lease["metadata"]["name"] in self.leases:
            raise Conflict("exists")
        lease = copy.deepcopy(lease)
        self._bump(lease)
        self.leases[lease["metadata"]["name"]] = lease

    def replace_lease(self, namespace: str, lease: Object) -> None:
        self._before_write()
        stored = self.leases[lease["metadata"]["name"]]
        if stored["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]:
            raise Conflict("stale resourceVersion")
        lease = copy.deepcopy(lease)
        self._bump(lease)
        self.leases[lease["metadata"]["name"]] = lease

    # --- test helpers ---
    def add_node(self, name: str, pool: str = "gpu", registered: bool = True) -> None:
        instance = CATALOG["p5.48xlarge"]
        self.nodes[name] = {
            "metadata": {
                "name": name, "uid": f"{name}-0000-uid", "creationTimestamp": agent.rfc3339(CREATED),
                "resourceVersion": "1",
                "labels": {POOL_LABEL: pool, "node.kubernetes.io/instance-type": instance.name},
                "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                     "name": f"claim-{name}", "uid": "x"}],
            },
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}",
                     "taints": [dict(ACCEPTANCE_TAINT), GPU_TAINT]},
            "status": {"allocatable": {GPU_RESOURCE: "8", EFA_RESOURCE: "32"} if registered
                       else {"cpu": "191450m"}},
        }  # fmt: skip
        self.nodeclaims[f"claim-{name}"] = {
            "metadata": {"name": f"claim-{name}"},
            "status": {"providerID": f"aws:///us-east-1a/i-{name}"},
        }

    def end_pod(self, node: str, code: int, message: str = "") -> None:
        pod = self.pods[agent.check_pod_name(node)]
        pod["status"] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": "check", "state": {"terminated": {
                "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                "message": message}}}],
        }  # fmt: skip


def step(api: FakeApi, node: str, now: datetime = SOON) -> str:
    return agent.reconcile(api, SETTINGS, node, NS, now)


def taint_keys(api: FakeApi, node: str) -> list[tuple[str, Any]]:
    return [(t["key"], t.get("value")) for t in api.nodes[node]["spec"]["taints"]]


def test_a_healthy_node_is_checked_once_and_released() -> None:
    api = FakeApi()
    api.add_node("n1", registered=False)
    assert step(api, "n1") == (
        "waiting for the device plugins: allocatable nvidia.com/gpu: 0, want 8; "
        "allocatable vpc.amazonaws.com/efa: 0, want 32"
    )
    assert not api.pods
    api.nodes["n1"]["status"]["allocatable"] = {GPU_RESOURCE: "8", EFA_RESOURCE: "32"}
    assert step(api, "n1") == "created check pod acceptance-check-n1"
    pod = api.pods["acceptance-check-n1"]
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert (spec["nodeName"], spec["restartPolicy"], container["image"]) == (
        "n1",
        "Never",
        SETTINGS.check_image,
    )
    wanted = {GPU_RESOURCE: "8", EFA_RESOURCE: "32"}
    assert container["resources"] == {
        "limits": wanted,
        "requests": {**agent.CHECK_REQUESTS, **wanted},
    }
    assert {t["key"] for t in spec["tolerations"]} == {ACCEPTANCE_TAINT_KEY, "nvidia.com/gpu"}
    assert spec["activeDeadlineSeconds"] == 40 * 60  # created + 45 min, now = created + 5
    command = container["command"]
    assert command[:4] == ["python", "-m", "acceptance", "check"]
    assert "--efa" in command and command[command.index("--dcgm-level") + 1] == "2"
    assert command[command.index("--file-system") + 1] == "lustre:/mnt/lustre:lustre"
    assert json.loads(command[command.index("--baselines-json") + 1])["floors"][0][
        "floor_gbps"] == 300  # fmt: skip
    claim = next(v for v in spec["volumes"] if "persistentVolumeClaim" in v)
    assert claim["persistentVolumeClaim"] == {"claimName": "lustre-shared", "readOnly": True}
    assert {"name": claim["name"], "mountPath": "/mnt/lustre", "readOnly": True} in container[
        "volumeMounts"]  # fmt: skip

    assert step(api, "n1") == "waiting for the check pod"
    api.end_pod("n1", 0)
    assert step(api, "n1") == "acceptance passed"
    node = api.nodes["n1"]
    assert taint_keys(api, "n1") == [("nvidia.com/gpu", "true")]
    assert node["metadata"]["labels"][RESULT_LABEL] == "passed"
    assert node["metadata"]["annotations"] == {CHECKED_AT_ANNOTATION: "2026-12-06T12:05:00Z"}
    assert not api.pods, "the check pod is deleted once its verdict is recorded"
    assert [e["type"] for e in api.events.values()] == ["Normal"]
    assert step(api, "n1") == "no acceptance taint; left alone"
    assert "claim-n1" in api.nodeclaims


def test_a_failed_node_is_marked_tainted_and_its_nodeclaim_deleted() -> None:
    api = FakeApi()
    api.add_node("n1")
    step(api, "n1")
    api.end_pod("n1", 1, "gpu count: 7, want 8\nefa interfaces: 31, want 32")
    assert step(api, "n1") == (
        "acceptance failed: gpu count: 7, want 8\nefa interfaces: 31, want 32; "
        "deleted NodeClaim claim-n1"
    )
    node = api.nodes["n1"]
    assert taint_keys(api, "n1") == [
        ("nvidia.com/gpu", "true"),
        (UNHEALTHY_TAINT_KEY, "acceptance"),
    ]
    assert node["metadata"]["labels"][RESULT_LABEL] == "failed"
    assert node["metadata"]["annotations"][REASON_ANNOTATION] == (
        "gpu count: 7, want 8\nefa interfaces: 31, want 32"
    )
    (event,) = api.events.values()
    assert (event["type"], event["reason"], event["involvedObject"]["name"]) == (
        "Warning",
        "AcceptanceFailed",
        "n1",
    )
    assert "gpu count: 7, want 8" in event["message"]
    assert "claim-n1" not in api.nodeclaims
    lease = api.leases["acceptance-replacements-gpu"]
    records = json.loads(lease["metadata"]["annotations"][agent.REPLACEMENTS_ANNOTATION])
    assert [(r["nodeClaim"], r["node"]) for r in records] == [("claim-n1", "n1")]


def test_a_pool_that_keeps_failed_nodes_keeps_the_nodeclaim_and_unusable_evidence_fails() -> None:
    api = FakeApi()
    api.add_node("n1", pool="keep")
    step(api, "n1")
    assert "--no-efa" in api.pods["acceptance-check-n1"]["spec"]["containers"][0]["command"]
    api.end_pod("n1", 2, "nvidia-smi.csv line 1: 'x' is not 'index, name, memory.total'")
    assert step(api, "n1").startswith("acceptance failed: unusable evidence: nvidia-smi.csv")
    assert "claim-n1" in api.nodeclaims and not api.leases
    assert step(api, "n1") == "no acceptance taint; left alone"


def test_the_deadline_expires_a_node_whose_check_never_ran() -> None:
    api = FakeApi()
    api.add_node("n1", registered=False)
    late = CREATED + timedelta(minutes=45)
    assert step(api, "n1", late).startswith(
        "acceptance expired: deadline 2026-12-06T12:45:00Z passed before the check pod ran: "
        "allocatable nvidia.com/gpu: 0, want 8"
    )
    assert api.nodes["n1"]["metadata"]["labels"][RESULT_LABEL] == "expired"
    assert (UNHEALTHY_TAINT_KEY, "acceptance") in taint_keys(api, "n1")
    assert not api.pods and "claim-n1" not in api.nodeclaims
    # A check pod still running at the deadline is deleted (its devices freed) and the node expired.
    api.add_node("n2")
    step(api, "n2")
    assert "before the check finished" in step(api, "n2", late)
    assert not api.pods


def test_the_hourly_cap_holds_a_replacement_back_until_the_hour_has_passed() -> None:
    api = FakeApi()
    for name in ("n1", "n2"):
        api.add_node(name)
        step(api, name)
        api.end_pod(name, 1, "gpu count: 7, want 8")
    assert step(api, "n1").endswith("deleted NodeClaim claim-n1")
    assert step(api, "n2").endswith(
        "replacement held back: pool gpu had 1 replacements in the last hour (max 1)"
    )
    assert "claim-n2" in api.nodeclaims
    # n2 keeps its failed label and unhealthy taint; its agent takes the slot once it frees.
    assert step(api, "n2", SOON + timedelta(minutes=30)).startswith("replacement held back")
    assert step(api, "n2", SOON + timedelta(minutes=61)) == "deleted NodeClaim claim-n2"
    assert "claim-n2" not in api.nodeclaims


def test_two_agents_racing_for_the_last_slot_delete_one_nodeclaim() -> None:
    api = FakeApi()
    for name in ("n1", "n2"):
        api.add_node(name)
        step(api, name)
        api.end_pod(name, 1, "gpu count: 7, want 8")
    # n1's agent reads the empty count; before its write lands, n2's agent takes the slot.
    outcomes: list[str] = []
    api.before_lease_write = lambda: outcomes.append(step(api, "n2"))
    outcomes.append(step(api, "n1"))
    assert outcomes[0].endswith("deleted NodeClaim claim-n2")
    assert outcomes[1].endswith("replacement held back: pool gpu had 1 replacements in the last "
                                "hour (max 1)")  # fmt: skip
    assert sorted(api.nodeclaims) == ["claim-n1"]


def test_a_restarted_or_interrupted_agent_continues_without_doing_anything_twice() -> None:
    api = FakeApi()
    api.add_node("n1")
    step(api, "n1")
    assert step(api, "n1") == "waiting for the check pod"  # a restart does not make a second pod
    api.end_pod("n1", 1, "gpu count: 7, want 8")
    api.fail_next_patch = True  # the agent dies after writing the Event, before the patch
    out = io.StringIO()
    agent.run(api, SETTINGS, "n1", NS, passes=2, clock=lambda: SOON, sleep=lambda _: None, out=out)
    assert "error: RuntimeError: connection reset" in out.getvalue()
    assert "acceptance failed: gpu count: 7, want 8; deleted NodeClaim" in out.getvalue()
    assert len(api.events) == 1
    assert taint_keys(api, "n1").count((UNHEALTHY_TAINT_KEY, "acceptance")) == 1
    # A taint changed by someone else between read and patch: the patch's test fails, no write.
    api.add_node("n2")
    step(api, "n2")
    api.end_pod("n2", 0)
    node = api.get_node("n2")
    assert node is not None
    api.nodes["n2"]["spec"]["taints"].append(
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
    )
    api._bump(api.nodes["n2"])
    assert agent.finish(api, node, agent.Verdict("passed"), pool_name="gpu",
                        pool=SETTINGS.pool("gpu"), namespace=NS, now=SOON) == (
        "the node changed while deciding; will decide again")  # fmt: skip
    assert ACCEPTANCE_TAINT_KEY in [k for k, _ in taint_keys(api, "n2")]
    assert step(api, "n2") == "acceptance passed"
    assert [k for k, _ in taint_keys(api, "n2")] == ["nvidia.com/gpu", "karpenter.sh/disrupted"]


def test_a_pod_the_kubelet_rejected_is_created_again() -> None:
    api = FakeApi()
    api.add_node("n1")
    step(api, "n1")
    api.pods["acceptance-check-n1"]["status"] = {
        "phase": "Failed", "reason": "UnexpectedAdmissionError",
        "message": "Allocate failed due to no healthy devices present",
    }  # fmt: skip
    assert step(api, "n1") == (
        "check pod did not run (UnexpectedAdmissionError: Allocate failed due to no healthy "
        "devices present); deleted, to be created again"
    )
    assert step(api, "n1") == "created check pod acceptance-check-n1"
    api.pods["acceptance-check-n1"]["status"] = {"phase": "Failed", "reason": "OutOfcpu"}
    assert step(api, "n1", CREATED + timedelta(hours=1)).startswith(
        "acceptance expired: deadline 2026-12-06T12:45:00Z passed before the check ran: the "
        "kubelet rejected the check pod (OutOfcpu)"
    )


def test_a_node_without_the_acceptance_taint_is_left_alone() -> None:
    api = FakeApi()
    api.add_node("n1")
    api.nodes["n1"]["spec"]["taints"] = [unhealthy_taint("slurm")]
    before = copy.deepcopy(api.nodes["n1"])
    assert step(api, "n1", CREATED + timedelta(days=1)) == "no acceptance taint; left alone"
    assert api.nodes["n1"] == before and not api.pods and not api.events


def test_the_nodeclaim_is_found_by_owner_reference_or_provider_id() -> None:
    api = FakeApi()
    api.add_node("n1")
    node = api.nodes["n1"]
    claims = api.list_nodeclaims()
    assert agent.nodeclaim_for(node, claims) == api.nodeclaims["claim-n1"]
    del node["metadata"]["ownerReferences"]
    assert agent.nodeclaim_for(node, claims) == api.nodeclaims["claim-n1"]
    node["spec"]["providerID"] = "aws:///us-east-1a/i-other"
    assert agent.nodeclaim_for(node, claims) is None


def test_settings_errors_name_the_key_and_the_pool_label_is_the_platforms() -> None:
    assert POOL_LABEL == node_pools.POOL_LABEL
    with pytest.raises(ValueError, match=r"pools.gpu: maxReplacementsPerHour '2' must be a int"):
        parse_settings({"deadlineMinutes": 45, "dcgmDiagLevel": 2, "checkImage": "i",
                        "pools": {"gpu": {"replaceFailedNodes": True,
                                          "maxReplacementsPerHour": "2"}}})  # fmt: skip


def test_the_agent_command_reads_its_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:  # fmt: skip
    out = io.StringIO()
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert agent.main(["--once"], out, FakeApi()) == 2
    assert "NODE_NAME" in out.getvalue()
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"deadlineMinutes": 45, "dcgmDiagLevel": 0,
                                    "checkImage": "i", "pools": {}}))  # fmt: skip
    monkeypatch.setenv("ACCEPTANCE_SETTINGS", str(settings))
    monkeypatch.setenv("NODE_NAME", "n1")
    monkeypatch.setenv("POD_NAMESPACE", NS)
    api = FakeApi()
    api.add_node("n1", pool="unlisted")
    api.nodes["n1"]["metadata"]["creationTimestamp"] = agent.rfc3339(datetime.now(UTC))
    out = io.StringIO()
    assert agent.main(["--once"], out, api) == 0
    assert out.getvalue().endswith("n1: created check pod acceptance-check-n1\n")


def test_the_live_adapter_maps_the_api_servers_answers() -> None:
    def fails(status: int) -> Callable[..., Any]:
        def call(*_: object) -> None:
            raise ApiException(status=status, reason="stub")

        return call

    def test_failed(*_: object) -> None:
        # kubernetes/apiserver pkg/endpoints/handlers/patch.go: the json-patch error as a 422.
        error = ApiException(status=422, reason="Unprocessable Entity")
        error.body = json.dumps({"kind": "Status", "status": "Failure", "code": 422,
                                 "message": "testing value /metadata/resourceVersion failed: "
                                            "test failed"})  # fmt: skip
        raise error

    live = object.__new__(KubernetesApi)
    live._client = client.ApiClient()
    live._core = type("Core", (), {
        "read_node": staticmethod(lambda name: client.V1Node(
            metadata=client.V1ObjectMeta(name=name, creation_timestamp=CREATED))),
        "list_node": staticmethod(lambda: client.V1NodeList(items=[client.V1Node(
            metadata=client.V1ObjectMeta(name="n1", creation_timestamp=CREATED))])),
        "read_namespaced_pod": staticmethod(fails(404)),
        "patch_node": staticmethod(test_failed),  # a JSON-patch test that did not hold
        "create_namespaced_pod": staticmethod(fails(409)),
        "delete_namespaced_pod": staticmethod(fails(404)),
        "create_namespaced_event": staticmethod(fails(500)),
        "create_namespaced_lease": staticmethod(fails(422)),  # invalid: not "exists already"
    })()  # fmt: skip
    live._coordination = live._core
    node = live.get_node("n1")
    assert node == {"metadata": {"name": "n1", "creationTimestamp": "2026-12-06T12:00:00+00:00"}}
    assert agent.parse_time(node["metadata"]["creationTimestamp"]) == CREATED
    assert live.get_pod(NS, "p") is None
    assert live.list_nodes() == [node]
    with pytest.raises(Conflict):
        live.patch_node("n1", [])
    with pytest.raises(Conflict):
        live.create_pod(NS, {})
    live.delete_pod(NS, "p")  # gone already: nothing to do
    with pytest.raises(ApiException):
        live.create_event(NS, {})
    with pytest.raises(Invalid):
        live.create_lease(NS, {})


def test_the_agent_polls_slowly_once_its_node_is_out_of_acceptance() -> None:
    api = FakeApi()
    api.add_node("n1")
    slept: list[float] = []
    quiet = io.StringIO()
    agent.run(api, SETTINGS, "n1", NS, passes=2, clock=lambda: SOON, sleep=slept.append, out=quiet)
    assert slept == [agent.DEFAULT_INTERVAL_S]  # created the pod, then waits for it
    api.end_pod("n1", 0)
    slept.clear()
    agent.run(api, SETTINGS, "n1", NS, passes=3, clock=lambda: SOON, sleep=slept.append, out=quiet)
    assert slept == [agent.DEFAULT_INTERVAL_S, agent.IDLE_INTERVAL_S]
    # A check pod left by an agent that stopped between the verdict and the pod's deletion goes
    # when the agent starts again.
    api.pods["acceptance-check-n1"] = {"metadata": {"name": "acceptance-check-n1"}}
    agent.run(api, SETTINGS, "n1", NS, passes=1, clock=lambda: SOON, sleep=slept.append, out=quiet)
    assert not api.pods


def test_a_verdict_lands_on_a_node_with_timestamped_taints_and_its_event_in_default() -> None:
    api = FakeApi()
    api.add_node("n1")
    # The node-lifecycle controller's taint carries timeAdded, which the client hands back
    # re-spelled: a patch that tested the taints as read would never hold.
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute",
                 "timeAdded": "2026-12-06T12:00:10Z"}  # fmt: skip
    api.nodes["n1"]["spec"]["taints"].append(not_ready)
    step(api, "n1")
    api.end_pod("n1", 1, "gpu count: 7, want 8")
    assert step(api, "n1").startswith("acceptance failed: gpu count: 7, want 8")
    assert not_ready in api.nodes["n1"]["spec"]["taints"]
    assert (UNHEALTHY_TAINT_KEY, "acceptance") in taint_keys(api, "n1")
    (event,) = api.events.values()
    assert event["metadata"]["namespace"] == agent.EVENT_NAMESPACE == "default"
    # A node changed after it was read (its resourceVersion moved) still fails the patch.
    node = api.get_node("n1")
    assert node is not None
    api._bump(api.nodes["n1"])
    with pytest.raises(Conflict):
        api.patch_node("n1", agent.node_patch(node, agent.Verdict("passed"), SOON))


def test_failed_nodes_not_replaced_stay_out_of_consolidation_until_replaced_or_returned() -> None:
    api = FakeApi()
    api.add_node("k1", pool="keep")
    step(api, "k1")
    api.end_pod("k1", 1, "gpu count: 7, want 8")
    step(api, "k1")
    assert api.nodes["k1"]["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
    for name in ("n1", "n2"):
        api.add_node(name)
        step(api, name)
        api.end_pod(name, 1, "gpu count: 7, want 8")
    assert step(api, "n1").endswith("deleted NodeClaim claim-n1")
    assert step(api, "n2").endswith("replacement held back: pool gpu had 1 replacements in the "
                                    "last hour (max 1)")  # fmt: skip
    assert api.nodes["n2"]["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
    # An admin returns n2 to service: the unhealthy taint goes, the failed label stays. Once
    # the slot frees, n2 is not replaced, and Karpenter may consolidate it again.
    api.nodes["n2"]["spec"]["taints"] = [GPU_TAINT]
    api._bump(api.nodes["n2"])
    later = SOON + timedelta(minutes=61)
    assert step(api, "n2", later) == (
        "returned to service by an admin; karpenter.sh/do-not-disrupt removed"
    )
    assert "claim-n2" in api.nodeclaims
    assert DO_NOT_DISRUPT_ANNOTATION not in api.nodes["n2"]["metadata"]["annotations"]
    assert step(api, "n2", later) == agent.LEFT_ALONE


def test_check_pods_are_owned_by_the_agents_daemonset_else_their_node() -> None:
    """The garbage collector deletes a dependent only once every owner is gone: the DaemonSet
    alone owns the pod, so turning the gate off deletes it (and frees the claims it mounts)."""
    api = FakeApi()
    api.add_node("n1")
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "acceptance-agent-nvidia",
                 "uid": "ds-uid", "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    api.pods["acceptance-agent-nvidia-x7k2p"] = {
        "metadata": {"name": "acceptance-agent-nvidia-x7k2p", "ownerReferences": [daemonset]}
    }
    quiet = io.StringIO()
    agent.run(api, SETTINGS, "n1", NS, pod_name="acceptance-agent-nvidia-x7k2p", passes=1,
              clock=lambda: SOON, sleep=lambda _: None, out=quiet)  # fmt: skip
    assert api.pods["acceptance-check-n1"]["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "acceptance-agent-nvidia",
         "uid": "ds-uid"},
    ]  # fmt: skip
    # An agent that cannot tell its DaemonSet leaves the pod to its Node.
    api.add_node("n2")
    agent.run(api, SETTINGS, "n2", NS, pod_name=None, passes=1, clock=lambda: SOON,
              sleep=lambda _: None, out=quiet)  # fmt: skip
    assert api.pods["acceptance-check-n2"]["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n2", "uid": "n2-0000-uid"}
    ]


def test_the_measured_bus_bandwidth_goes_on_the_node_and_in_its_event() -> None:
    api = FakeApi()
    api.add_node("n1")
    step(api, "n1")
    measured = "nccl all-reduce bus bandwidth: 355.2 GB/s at 16 GiB"
    api.end_pod("n1", 1, f"measured: {measured}\ngpu count: 7, want 8")
    assert step(api, "n1").startswith("acceptance failed: gpu count: 7, want 8;")
    annotations = api.nodes["n1"]["metadata"]["annotations"]
    assert (annotations[BUSBW_ANNOTATION], annotations[REASON_ANNOTATION]) == (
        measured, "gpu count: 7, want 8")  # fmt: skip
    (event,) = api.events.values()
    assert event["message"] == f"measured {measured}; acceptance failed: gpu count: 7, want 8"
    api.add_node("n2")
    step(api, "n2")
    api.end_pod("n2", 0, f"measured: {measured}")
    assert step(api, "n2") == "acceptance passed"
    assert api.nodes["n2"]["metadata"]["annotations"][BUSBW_ANNOTATION] == measured


def test_the_sweep_expires_nodes_whose_agent_never_decided_under_the_same_cap() -> None:
    api = FakeApi()
    for name in ("n1", "n2"):
        api.add_node(name)  # no agent runs on either: no check pod, the taint stays
    api.add_node("ok")
    step(api, "ok")
    api.end_pod("ok", 0)
    step(api, "ok")
    due = CREATED + timedelta(minutes=45)
    assert sweep.sweep_once(api, SETTINGS, NS, due + timedelta(minutes=9)) == []
    lines = sweep.sweep_once(api, SETTINGS, NS, due + sweep.DEFAULT_GRACE)
    assert lines == [
        "n1: acceptance expired: deadline 2026-12-06T12:45:00Z passed 10 minutes ago without a "
        "verdict from the node's agent (marked by the sweep); deleted NodeClaim claim-n1",
        "n2: acceptance expired: deadline 2026-12-06T12:45:00Z passed 10 minutes ago without a "
        "verdict from the node's agent (marked by the sweep); replacement held back: pool gpu "
        "had 1 replacements in the last hour (max 1)",
    ]
    for name in ("n1", "n2"):
        assert api.nodes[name]["metadata"]["labels"][RESULT_LABEL] == "expired"
        assert (UNHEALTHY_TAINT_KEY, "acceptance") in taint_keys(api, name)
        assert ACCEPTANCE_TAINT_KEY not in [k for k, _ in taint_keys(api, name)]
    assert api.nodes["n2"]["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
    assert {e["metadata"]["namespace"] for e in api.events.values()} == {"default"}
    assert sorted(api.nodeclaims) == ["claim-n2", "claim-ok"]
    # The held-back node is replaced once the slot frees, though no agent runs on it.
    out = io.StringIO()
    sweep.run(api, SETTINGS, NS, passes=1, clock=lambda: due + timedelta(hours=2),
              sleep=lambda _: None, out=out)  # fmt: skip
    assert out.getvalue().endswith("n2: deleted NodeClaim claim-n2\n")
    assert sorted(api.nodeclaims) == ["claim-ok"]


def test_agent_and_sweep_say_which_setting_is_missing_or_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.setenv("ACCEPTANCE_SETTINGS", str(tmp_path / "absent.json"))
    monkeypatch.setenv("POD_NAMESPACE", "node-acceptance")
    assert settings_from_environment("agent", ("ACCEPTANCE_SETTINGS", "NODE_NAME"), out) is None
    assert out.getvalue() == "agent: environment variable(s) NODE_NAME not set\n"
    out = io.StringIO()
    assert settings_from_environment("sweep", ("ACCEPTANCE_SETTINGS", "POD_NAMESPACE"), out) is None
    assert out.getvalue().startswith("sweep: settings: ") and "absent.json" in out.getvalue()


def test_a_refused_event_does_not_stop_the_verdict_nor_one_node_the_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi()
    for name in ("n1", "n2"):
        api.add_node(name)

    def refused(namespace: str, event: Object) -> None:
        raise Invalid("events is forbidden")

    monkeypatch.setattr(api, "create_event", refused)
    api.fail_next_patch = True  # n1's patch fails; the sweep goes on to n2
    due = CREATED + timedelta(minutes=45)
    lines = sweep.sweep_once(api, SETTINGS, NS, due + sweep.DEFAULT_GRACE)
    assert lines[0] == "n1: error: connection reset", lines
    assert lines[1].startswith("n2: acceptance expired: ") and (
        "(its Event not written: events is forbidden)" in lines[1]
    ), lines
    assert api.nodes["n2"]["metadata"]["labels"][RESULT_LABEL] == "expired"
