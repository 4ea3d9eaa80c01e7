"""The Slurm/Kubernetes health mirror: its loop against a stub slurmrestd and a fake API.

The stub speaks slurmrestd's answers at our pin (SchedMD/slurm slurm-26-05-3-1
src/plugins/data_parser/v0.0.45/parsers.c: OPENAPI_NODES_RESP, NODE, UPDATE_NODE_MSG; paths in
src/slurmrestd/plugins/openapi/slurmctld/api.c) and applies node updates as slurmctld would
(src/slurmctld/node_mgr.c, update_node: DRAIN sets the flag and the reason; UNDRAIN clears only the
flag, RESUME also returns a DOWN node to IDLE; the stub clears the reason with either). The node
and pod shapes are the
Kubernetes API's; the pods are NodeSet pods as Slinky v1.2.1 makes them in StatefulSet mode.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import pytest

from acceptance import mirror
from acceptance.mirror import (
    OPERATOR_REASON_PREFIX,
    REASON_PREFIX,
    Drain,
    KubeHealth,
    SlurmNode,
    SlurmRest,
    Taint,
    Undrain,
    Untaint,
    decide,
    run_once,
)
from components.health_marks import (
    UNHEALTHY_REASON_ANNOTATION,
    UNHEALTHY_TAINT_KEY,
    unhealthy_taint,
)
from synth.engine import ResourceRecord
from synth.run import StackResult
from tests.network_model import Cluster, Pod
from tests.schemas import validation_errors

TOKEN = "header.payload.signature"
META = {
    "plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld",
               "data_parser": "data_parser/v0.0.45", "accounting_storage": ""},
    "client": {"source": "[10.0.3.7]:41234(fd:9)", "user": "slurm", "group": "slurm"},
    "command": [],
    "slurm": {"version": {"major": "26", "micro": "3", "minor": "05"},
              "release": "26.05.3", "cluster": "slurm"},
}  # fmt: skip


def _number(value: int) -> dict[str, Any]:
    """A TIMESTAMP_NO_VAL / UINT32_NO_VAL as v0.0.45 writes it."""
    return {"set": True, "infinite": False, "number": value}


def _slurm_node(name: str, state: list[str], reason: str = "", by: str = "") -> dict[str, Any]:
    return {
        "name": name, "hostname": name, "address": "10.0.8.21", "state": state,
        "reason": reason, "reason_set_by_user": by, "reason_changed_at": _number(0),
        "partitions": ["p5"], "features": ["p5", "p5", "nvidia", "efa"],
        "active_features": ["p5", "p5", "nvidia", "efa"], "gres": "gpu:8",
        "cpus": 192, "real_memory": 2000000, "version": "26.05.3",
        "next_state_after_reboot": ["INVALID"], "comment": "", "extra": "",
    }  # fmt: skip


class StubSlurmrestd:
    """slurmctld's node table behind slurmrestd's v0.0.45 node endpoints."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = {node["name"]: node for node in nodes}
        self.requests: list[tuple[str, str, str | None, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self, body: Any) -> None:
                token = self.headers.get("X-SLURM-USER-TOKEN")
                stub.requests.append((self.command, self.path, token, body))

            def do_GET(self) -> None:
                self._record(None)
                if self.path != "/slurm/v0.0.45/nodes/":
                    self._answer(404, {"errors": [{"error": "Unable to find path"}]})
                    return
                self._answer(200, {
                    "nodes": list(stub.nodes.values()), "last_update": _number(1780000000),
                    "meta": META, "errors": [], "warnings": [],
                })  # fmt: skip

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._record(body)
                name = self.path.removeprefix("/slurm/v0.0.45/node/")
                node = stub.nodes.get(name)
                if node is None:
                    self._answer(500, {"meta": META, "warnings": [], "errors": [
                        {"description": f"Failure to update node {name}",
                         "error_number": 2008, "error": "Invalid node name specified",
                         "source": "slurm_update_node()"}]})  # fmt: skip
                    return
                if "DRAIN" in body["state"]:
                    node["state"] = sorted({*node["state"], "DRAIN"})
                    node["reason"], node["reason_set_by_user"] = body["reason"], "slurm"
                elif "UNDRAIN" in body["state"]:
                    node["state"] = [flag for flag in node["state"] if flag != "DRAIN"]
                    node["reason"], node["reason_set_by_user"] = "", ""
                elif "RESUME" in body["state"]:
                    kept = [f for f in node["state"] if f not in ("DRAIN", "FAIL", "DOWN")]
                    node["state"] = kept if "DOWN" not in node["state"] else ["IDLE", *kept]
                    node["reason"], node["reason_set_by_user"] = "", ""
                self._answer(200, {"meta": META, "errors": [], "warnings": []})

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def admin(self, name: str, drain_reason: str | None) -> None:
        """What ``scontrol update`` by an admin (alice) does."""
        node = self.nodes[name]
        if drain_reason is None:
            node["state"] = [flag for flag in node["state"] if flag != "DRAIN"]
            node["reason"], node["reason_set_by_user"] = "", ""
        else:
            node["state"] = sorted({*node["state"], "DRAIN"})
            node["reason"], node["reason_set_by_user"] = drain_reason, "alice"


class Conflict(Exception):
    """The API's 409: the patch's resourceVersion is not the node's."""


class FakeKube:
    """Nodes, NodeSet pods and NodeClaims; patches applied as the API server would."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: list[dict[str, Any]] = []
        self.deleting: set[str] = set()
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def add(
        self,
        node: str,
        slurm_name: str,
        *,
        taints: list[dict[str, str]] | None = None,
        conditions: list[dict[str, str]] | None = None,
    ) -> None:
        self.nodes[node] = {
            "metadata": {"name": node, "resourceVersion": "1", "annotations": {},
                         "labels": {"trainingplatform.io/pool": "p5"}},
            "spec": {"taints": [dict(t) for t in taints or []]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, *(conditions or [])]},
        }  # fmt: skip
        ordinal = slurm_name.rsplit("-", 1)[1]
        self.pods.append({
            "metadata": {"name": slurm_name, "namespace": "slurm", "labels": {
                "app.kubernetes.io/name": "slurmd",
                "nodeset.slinky.slurm.net/scaling-mode": "StatefulSet",
                "nodeset.slinky.slurm.net/pod-index": ordinal,
                "nodeset.slinky.slurm.net/pod-hostname": slurm_name}},
            "spec": {"hostname": slurm_name, "nodeName": node},
        })  # fmt: skip

    def nodes_list(self) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.nodes.values()))

    def slurmd_pods(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.pods)

    def deleting_claim_nodes(self) -> set[str]:
        return set(self.deleting)

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        self.patches.append((name, patch))
        node = self.nodes[name]
        wanted = patch["metadata"].get("resourceVersion")
        if wanted is not None and wanted != node["metadata"]["resourceVersion"]:
            raise Conflict(name)
        for key, value in patch["metadata"].get("annotations", {}).items():
            if value is None:
                node["metadata"]["annotations"].pop(key, None)
            else:
                node["metadata"]["annotations"][key] = value
        node["spec"]["taints"] = patch["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def taints(self, name: str) -> list[dict[str, str]]:
        return list(self.nodes[name]["spec"]["taints"])


class _Api:
    """FakeKube seen through the :class:`acceptance.mirror.KubeApi` protocol."""

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake

    def nodes(self) -> list[dict[str, Any]]:
        return self.fake.nodes_list()

    def slurmd_pods(self) -> list[dict[str, Any]]:
        return self.fake.slurmd_pods()

    def deleting_claim_nodes(self) -> set[str]:
        return self.fake.deleting_claim_nodes()

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        self.fake.patch_node(name, patch)


@pytest.fixture
def stub() -> Iterator[StubSlurmrestd]:
    server = StubSlurmrestd([
        _slurm_node("p5-0", ["IDLE"]),
        _slurm_node("p5-1", ["IDLE", "DRAIN"], "bad NVLink on GPU 3", "alice"),
        _slurm_node("p5-2", ["ALLOCATED"]),
        # DOWN for its own cause too (slurmd stopped answering): undraining must not return it.
        _slurm_node("p5-3", ["DOWN", "DRAIN"], f"{REASON_PREFIX}StorageReady=False", "slurm"),
        _slurm_node("p5-4", ["MIXED"]),
        _slurm_node("p5-5", ["IDLE"]),
    ])  # fmt: skip
    thread = threading.Thread(target=server.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _drained(stub: StubSlurmrestd) -> dict[str, str]:
    return {name: n["reason"] for name, n in stub.nodes.items() if "DRAIN" in n["state"]}


def test_loop_keeps_one_health_truth_and_undoes_only_its_own(
    stub: StubSlurmrestd, tmp_path: Path
) -> None:
    token = tmp_path / "SLURM_JWT"
    token.write_text(TOKEN + "\n")
    slurm = SlurmRest(stub.url, token)
    fake = FakeKube()
    hardware = {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79"}
    fake.add("ip-a", "p5-0", taints=[unhealthy_taint("acceptance")])
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    fake.add("ip-b", "p5-1", taints=[gpu])
    fake.add("ip-c", "p5-2", conditions=[hardware])
    fake.add("ip-d", "p5-3")
    fake.add("ip-e", "p5-4")
    fake.add("ip-f", "p5-5")
    fake.deleting.add("ip-e")
    api = _Api(fake)

    _, failures = run_once(slurm, api)
    assert failures == []
    assert _drained(stub) == {
        "p5-0": f"{REASON_PREFIX}{UNHEALTHY_TAINT_KEY}=acceptance",
        "p5-1": "bad NVLink on GPU 3",
        "p5-2": f"{REASON_PREFIX}AcceleratedHardwareReady=False (NvidiaXID79)",
        "p5-4": f"{REASON_PREFIX}karpenter: deleting the node",
    }  # p5-3's cause is gone: undrained, and still DOWN for its own cause
    assert stub.nodes["p5-3"]["state"] == ["DOWN"]
    assert fake.taints("ip-b") == [gpu, unhealthy_taint("slurm")]
    assert fake.nodes["ip-b"]["metadata"]["annotations"] == {
        UNHEALTHY_REASON_ANNOTATION: "bad NVLink on GPU 3"
    }
    assert all(not fake.taints(n) for n in ("ip-c", "ip-d", "ip-e", "ip-f"))
    assert {(method, tok) for method, _, tok, _ in stub.requests} == {
        ("GET", TOKEN),
        ("POST", TOKEN),
    }
    assert ("POST", "/slurm/v0.0.45/node/p5-3", TOKEN, {"state": ["UNDRAIN"]}) in stub.requests

    # A second round finds both sides in agreement.
    actions, failures = run_once(slurm, api)
    assert (actions, failures) == ([], [])

    # Back to service: the admin resumes p5-1, acceptance lets ip-a go, the hardware recovers;
    # meanwhile an admin drains p5-5, whose node has since failed acceptance.
    stub.admin("p5-1", None)
    fake.nodes["ip-a"]["spec"]["taints"] = []
    fake.nodes["ip-c"]["status"]["conditions"][1]["status"] = "True"
    fake.nodes["ip-f"]["spec"]["taints"] = [unhealthy_taint("acceptance")]
    stub.admin("p5-5", "swap GPU tray")
    _, failures = run_once(slurm, api)
    assert failures == []
    assert fake.taints("ip-b") == [gpu]
    assert UNHEALTHY_REASON_ANNOTATION not in fake.nodes["ip-b"]["metadata"]["annotations"]
    assert _drained(stub) == {
        "p5-4": f"{REASON_PREFIX}karpenter: deleting the node",
        "p5-5": "swap GPU tray",  # the admin's drain, not replaced by the mirror's
    }
    assert fake.taints("ip-f") == [unhealthy_taint("acceptance")]  # another source's, kept

    # The admin resumes p5-5: acceptance's taint stays; ip-f's unhealthy node is drained again.
    stub.admin("p5-5", None)
    fake.deleting.clear()
    _, failures = run_once(slurm, api)
    assert failures == []
    assert fake.taints("ip-f") == [unhealthy_taint("acceptance")]
    assert _drained(stub) == {"p5-5": f"{REASON_PREFIX}{UNHEALTHY_TAINT_KEY}=acceptance"}


def test_decide_never_undoes_another_sources_mark() -> None:
    admin = SlurmNode("p5-0", drained=True, reason="RMA ticket 42")
    mine = SlurmNode("p5-0", drained=True, reason=f"{REASON_PREFIX}old problem")
    idle = SlurmNode("p5-0")
    placed = {"p5-0": "ip-a"}
    healthy = KubeHealth("ip-a")
    sick = KubeHealth("ip-a", problems=("NetworkingReady=False",))
    by_acceptance = KubeHealth("ip-a", ("trainingplatform.io/unhealthy=acceptance",), "acceptance")
    by_mirror = KubeHealth("ip-a", taint_source="slurm", reason="RMA ticket 42")

    def run(kube: KubeHealth, slurm: SlurmNode) -> list[Any]:
        return decide({"ip-a": kube}, {"p5-0": slurm}, placed)

    # An admin's drain stays whatever Kubernetes says; Kubernetes learns of it once.
    assert run(healthy, admin) == [Taint("ip-a", "RMA ticket 42")]
    assert run(sick, admin) == [Taint("ip-a", "RMA ticket 42")]
    assert run(by_mirror, admin) == []
    assert run(by_acceptance, admin) == []  # one unhealthy taint per node: acceptance's says it
    # The mirror's drain follows Kubernetes: refreshed, resumed.
    assert run(sick, mine) == [Drain("p5-0", f"{REASON_PREFIX}NetworkingReady=False")]
    assert run(healthy, mine) == [Undrain("p5-0")]
    # Its taint goes once Slurm no longer holds the drain; acceptance's taint never does.
    assert run(by_mirror, idle) == [Untaint("ip-a")]
    assert run(by_acceptance, idle) == [
        Drain("p5-0", f"{REASON_PREFIX}trainingplatform.io/unhealthy=acceptance")
    ]
    # A Slurm node whose pod has no Kubernetes node yet is left alone.
    assert decide({"ip-a": sick}, {"p5-0": idle}, {}) == []


def test_slurm_node_names_follow_slinky() -> None:
    def pod(mode: str, **spec: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": "p5-7", "labels": {mirror.SCALING_MODE_LABEL: mode}},
            "spec": {"nodeName": "ip-10-0-8-21.ec2.internal", **spec},
        }

    assert mirror.slurm_node_name(pod("StatefulSet", hostname="p5-7")) == "p5-7"
    assert mirror.slurm_node_name(pod("StatefulSet")) == "p5-7"
    assert (
        mirror.slurm_node_name(pod("StatefulSet", hostNetwork=True, hostname="x"))
        == "ip-10-0-8-21.ec2.internal"
    )
    assert mirror.slurm_node_name(pod("DaemonSet", hostname="ip-10-0-8-21")) == "ip-10-0-8-21"
    terminating = pod("StatefulSet", hostname="p5-7")
    terminating["metadata"]["deletionTimestamp"] = "2026-12-06T13:00:00Z"
    unscheduled = pod("StatefulSet", hostname="p5-8")
    del unscheduled["spec"]["nodeName"]
    assert mirror.placement([pod("StatefulSet", hostname="p5-6"), terminating, unscheduled]) == {
        "p5-6": "ip-10-0-8-21.ec2.internal"
    }


def test_a_changed_node_waits_for_the_next_round(stub: StubSlurmrestd, tmp_path: Path) -> None:
    token = tmp_path / "SLURM_JWT"
    token.write_text(TOKEN)
    fake = FakeKube()
    fake.add("ip-b", "p5-1")
    nodes = fake.nodes_list()
    fake.nodes["ip-b"]["metadata"]["resourceVersion"] = "2"  # changed since it was read
    failures = mirror.execute(
        [Taint("ip-b", "x"), Drain("p9-9", "y")],
        SlurmRest(stub.url, token),
        _Api(fake),
        {n["metadata"]["name"]: n for n in nodes},
    )
    assert fake.taints("ip-b") == []
    assert len(failures) == 2
    assert "Invalid node name specified" in failures[1]


# --------------------------------------------------------------------------- the component

NETWORK_POLICY: Final = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def test_slurm_registers_the_mirror_with_least_rights(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    result = synthesized["dev"]
    config = result.config

    def of_type(resource_type: str) -> list[ResourceRecord]:
        return [r for r in result.records if r.type == resource_type]

    mine = [r for r in result.records if "health-mirror" in r.name]
    version = config.cluster.kubernetes_version
    for record in mine:
        manifest = {k: v for k, v in record.inputs.items() if k != "__meta"}
        assert validation_errors(manifest, version, reference_dir / "crds") == [], record.name
    kinds = {r.type.rsplit(":", 1)[1]: r.inputs for r in mine}
    assert set(kinds) == {
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "Token", "Deployment",
    }  # fmt: skip
    account = {"kind": "ServiceAccount", "name": "slurm-health-mirror", "namespace": "slurm"}
    assert kinds["ServiceAccount"]["metadata"]["name"] == "slurm-health-mirror"
    assert kinds["ServiceAccount"]["metadata"]["namespace"] == "slurm"
    assert sorted(
        (tuple(rule["apiGroups"]), tuple(rule["resources"]), tuple(sorted(rule["verbs"])))
        for rule in kinds["ClusterRole"]["rules"]
    ) == [
        (("",), ("nodes",), ("get", "list", "patch", "watch")),
        (("karpenter.sh",), ("nodeclaims",), ("get", "list", "watch")),
    ]
    assert kinds["Role"]["metadata"]["namespace"] == "slurm"
    assert kinds["Role"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    ]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        assert kinds[binding]["subjects"] == [account]
    # The token: signed by the chart's JWT key for SlurmUser, renewed, in its own Secret.
    token = kinds["Token"]["spec"]
    assert token["jwtKeyRef"] == {"name": "slurm-auth-jwt", "key": "jwt.key"}
    assert (token["username"], token["refresh"]) == ("slurm", True)
    deployment = kinds["Deployment"]["spec"]
    pod = deployment["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}
    assert pod["serviceAccountName"] == "slurm-health-mirror"
    # The GPU pools' image where there is one (dev has both vendors).
    assert config.acceptance.images.nvidia and config.acceptance.images.neuron
    assert container["image"] == config.acceptance.images.nvidia
    assert container["command"] == ["python", "-m", "acceptance", "mirror"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["SLURMRESTD_URL"] == "http://slurm-restapi.slurm:6820"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert set(volumes) == set(mounts) == {"token", "api-token"}
    assert volumes["token"]["secret"]["secretName"] == token["secretRef"]["name"]
    assert env["SLURM_JWT_FILE"] == f"{mounts['token']['mountPath']}/{token['secretRef']['key']}"
    # The API token only by its projected volume: no container a later change adds gets it.
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountToken" in str(volumes["api-token"]["projected"])
    # It waits for the slurm chart (the operator serves Tokens, the chart's key signs them).
    (chart,) = [r.urn for r in of_type("kubernetes:helm.sh/v3:Release") if r.name == "slurm"]
    assert all(chart in r.dependencies for r in mine)
    # slurmrestd admits the mirror's pods (and the operator), not another pod of the namespace.
    cluster = Cluster([r.inputs for r in of_type(NETWORK_POLICY)])
    restd = Pod("slurm", {"app.kubernetes.io/name": "slurmrestd"})
    mirror_pod = Pod("slurm", deployment["template"]["metadata"]["labels"])
    assert cluster.may_reach(mirror_pod, restd, 6820)
    assert not cluster.may_reach(
        mirror_pod, Pod("slurm", {"app.kubernetes.io/name": "slurmctld"}), 6817
    )
    assert not cluster.may_reach(Pod("slurm", {"app.kubernetes.io/name": "login"}), restd, 6820)
    assert not cluster.may_reach(
        Pod("team-a", deployment["template"]["metadata"]["labels"]), restd, 6820
    )


def test_slinky_operators_drains_are_not_an_admins() -> None:
    """slurm-operator v1.2.1 internal/controller/nodeset/nodeset_sync.go drain reasons."""
    pod = "slurm/slurm-worker-p5-0"
    scale_in = f"{OPERATOR_REASON_PREFIX}Pod ({pod}) is pending termination for scale-in"
    cordon = f"{OPERATOR_REASON_PREFIX}Node (ip-a) was cordoned, Pod ({pod}) must be cordoned"
    placed = {"p5-0": "ip-a"}
    healthy = KubeHealth("ip-a")
    by_mirror_for_operator = KubeHealth("ip-a", taint_source="slurm", reason=scale_in)
    by_mirror_for_admin = KubeHealth("ip-a", taint_source="slurm", reason="RMA ticket 42")

    def run(kube: KubeHealth, slurm: SlurmNode | None) -> list[Any]:
        return decide({"ip-a": kube}, {} if slurm is None else {"p5-0": slurm}, placed)

    for reason in (scale_in, cordon, f"{OPERATOR_REASON_PREFIX}Pod ({pod}) was cordoned"):
        assert run(healthy, SlurmNode("p5-0", drained=True, reason=reason)) == []
    # A taint set for the operator's drain (before the mirror knew its reasons) goes, also
    # once the scaled-in Slurm node is gone; an admin's stays after the node is gone.
    operator = SlurmNode("p5-0", drained=True, reason=scale_in)
    assert run(by_mirror_for_operator, operator) == [Untaint("ip-a")]
    assert run(by_mirror_for_operator, None) == [Untaint("ip-a")]
    assert decide({"ip-a": by_mirror_for_operator}, {}, {}) == [Untaint("ip-a")]
    assert run(by_mirror_for_admin, None) == []
    # The operator's scale-in overwrote an admin's reason: the admin's taint stays.
    assert run(by_mirror_for_admin, operator) == []
