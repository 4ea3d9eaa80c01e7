"""One health truth across Slurm and Kubernetes: ``python -m acceptance mirror``.

A loop that reads both sides and makes each agree with the other, undoing only what it did itself:

* a Kubernetes node that is unhealthy (the unhealthy taint from any source but Slurm, the EKS
  node monitoring agent's conditions, Karpenter's disruption taint, a deleting NodeClaim) gets
  its Slurm node drained, with a reason that starts with :data:`REASON_PREFIX`;
* a Slurm node an admin drains (DRAIN, a reason that is neither the mirror's nor Slinky's
  operator's) gets the unhealthy taint ``unhealthy_taint("slurm")`` and the unhealthy-reason
  annotation on its Kubernetes node; the operator's own drains (scale-in, a cordon) say nothing
  about the machine and are not mirrored;
* once the cause is gone, the mirror undrains the Slurm nodes it drained and removes the taints
  it set; an admin's drain and another source's taint stay.

:func:`decide` is the pure decision (states in, actions out); :func:`run_once` reads, decides and
carries the actions out through :class:`SlurmRest` (slurmrestd) and a :class:`KubeApi`.
The Kubernetes client is imported only by :class:`ClusterKube`, so the rest runs without it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from components.health_marks import (
    UNHEALTHY_REASON_ANNOTATION,
    UNHEALTHY_TAINT_KEY,
    unhealthy_taint,
)

LOG = logging.getLogger("acceptance.mirror")

OWN_SOURCE: Final = "slurm"
"""The unhealthy taint's value the mirror sets for an admin's drain, and the only one it removes."""
REASON_PREFIX: Final = "health-mirror: "
"""How the mirror's Slurm drains start: a drain whose reason starts with neither this nor
:data:`OPERATOR_REASON_PREFIX` is an admin's."""
OPERATOR_REASON_PREFIX: Final = "slurm-operator: "
"""How every reason Slinky's operator writes starts (slurm-operator v1.2.1
internal/controller/nodeset/slurmcontrol/slurmcontrol.go, nodeReasonPrefix and
FormatNodeReason). Its drains (internal/controller/nodeset/nodeset_sync.go, all through
makePodCordonAndDrain -> MakeNodeDrain) and what the mirror makes of each:

* ``Pod (ns/name) is pending termination for scale-in`` (processCondemned): the NodeSet shrinks;
  nothing is wrong with the machine, no taint.
* ``Node (node) was cordoned, Pod (ns/name) must be cordoned``, or the node's
  ``nodeset.slinky.slurm.net/node-cordon-reason`` annotation, or the node's conditions
  (syncCordon): the operator mirroring a Kubernetes cordon into Slurm; Kubernetes already holds
  the truth (``spec.unschedulable``), no taint.
* ``Pod (ns/name) was cordoned`` (syncCordon, the pod's ``nodeset.slinky.slurm.net/pod-cordon``
  annotation): a cordon of one NodeSet pod, set by the operator for scale-in and rolling updates
  or by hand to take one Slurm node out, not a verdict on the machine; no taint.

Its other reasons are no drain: ``Pod (ns/name) was uncordoned`` goes with UNDRAIN
(MakeNodeUndrain), and the slurmd pod's preStop sets ``state=down reason='slurm-operator: Pod is
terminating'`` (internal/builder/workerbuilder/worker_app.go). A drain with ``overrideReason``
false keeps an existing reason, so an admin's reason stays the admin's."""
API_VERSION: Final = "v0.0.45"
"""The newest slurmrestd data parser Slurm 26.05 serves (SchedMD/slurm slurm-26-05-3-1
src/plugins/data_parser/v0.0.45; paths in src/slurmrestd/plugins/openapi/slurmctld/api.c:
``/slurm/{data_parser}/nodes/`` and ``/slurm/{data_parser}/node/{node_name}``)."""
DEFAULT_URL: Final = "http://slurm-restapi.slurm:6820"
"""slurmrestd's Service: the RestApi of the slurm release (``slurm``) plus ``-restapi``
(slurm-operator v1.2.1 api/v1beta1/restapi_keys.go, Key), on slurmrestd's port."""
DEFAULT_TOKEN_FILE: Final = "/var/run/slurm-jwt/SLURM_JWT"
"""Where the mirror's pod mounts its JWT (the Secret Slinky's Token controller keeps fresh)."""
DEFAULT_INTERVAL_SECONDS: Final = 30.0

MONITORED_CONDITIONS: Final = (
    "AcceleratedHardwareReady",
    "NetworkingReady",
    "StorageReady",
    "KernelReady",
    "ContainerRuntimeReady",
)
"""The EKS node monitoring agent's node conditions; ``False`` means unhealthy
(aws/eks-node-monitoring-agent v1.7.0 pkg/conditions/conditions.go)."""
KARPENTER_DISRUPTED_TAINT_KEY: Final = "karpenter.sh/disrupted"
"""Karpenter's taint on a node it is about to drain and delete (kubernetes-sigs/karpenter v1.14.1
pkg/apis/v1/taints.go, DisruptedTaintKey)."""
SLURMD_SELECTOR: Final = "app.kubernetes.io/name=slurmd"
"""The NodeSet pods (slurm-operator v1.2.1 internal/builder/labels/labels.go)."""
SCALING_MODE_LABEL: Final = "nodeset.slinky.slurm.net/scaling-mode"
"""slurm-operator v1.2.1 api/v1beta1/well_known.go, LabelNodeSetScalingMode."""


def slurm_node_name(pod: Mapping[str, Any]) -> str | None:
    """The Slurm node name of a NodeSet pod, as Slinky derives it.

    slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go, GetSlurmNodeName: in
    StatefulSet mode the node's name if the pod uses the host network, else the pod's
    ``spec.hostname``, else its name; in DaemonSet mode its ``spec.hostname``. slurmd registers
    under it (``-Z``, dynamic node; the pod's preStop drains ``nodename=$(hostname)``:
    internal/builder/workerbuilder/worker_app.go).

    Args:
        pod: the pod as the API returns it (camelCase keys).
    """
    spec = pod.get("spec") or {}
    metadata = pod.get("metadata") or {}
    if (metadata.get("labels") or {}).get(SCALING_MODE_LABEL) == "StatefulSet":
        if spec.get("hostNetwork"):
            return spec.get("nodeName") or None
        return spec.get("hostname") or metadata.get("name") or None
    return spec.get("hostname") or None


def placement(pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Slurm node name -> the Kubernetes node its pod runs on (``spec.nodeName``).

    A pod not yet scheduled, or terminating, maps to nothing: its Slurm node has no machine the
    mirror could judge.

    Args:
        pods: the NodeSet pods (:data:`SLURMD_SELECTOR`).
    """
    mapping: dict[str, str] = {}
    for pod in pods:
        name = slurm_node_name(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if name and node and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            mapping[name] = node
    return mapping


@dataclass(frozen=True)
class KubeHealth:
    """What the mirror needs of a Kubernetes node.

    Attributes:
        name: the node's name.
        problems: why it is unhealthy, from every source but the mirror's own taint (empty:
            healthy).
        taint_source: the unhealthy taint's value (who set it), None without one.
        reason: the unhealthy-reason annotation, None without one.
    """

    name: str
    problems: tuple[str, ...] = ()
    taint_source: str | None = None
    reason: str | None = None


def kube_health(node: Mapping[str, Any], deleting_claims: Iterable[str] = ()) -> KubeHealth:
    """Read a node's health from its taints, conditions and NodeClaim.

    Args:
        node: the node as the API returns it (camelCase keys).
        deleting_claims: names of the nodes whose NodeClaim is being deleted (Karpenter's repair,
            the acceptance gate's replacement, consolidation): the first sign, before Karpenter
            taints and drains the node (kubernetes-sigs/karpenter v1.14.1
            pkg/controllers/node/termination/controller.go). Default: none.
    """
    metadata = node.get("metadata") or {}
    name = str(metadata.get("name", ""))
    problems: list[str] = []
    taint_source: str | None = None
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == UNHEALTHY_TAINT_KEY:
            taint_source = str(taint.get("value") or "")
            if taint_source != OWN_SOURCE:
                problems.append(f"{UNHEALTHY_TAINT_KEY}={taint_source}")
        elif taint.get("key") == KARPENTER_DISRUPTED_TAINT_KEY:
            problems.append("karpenter: disrupting the node")
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") in MONITORED_CONDITIONS and condition.get("status") == "False":
            why = condition.get("reason") or condition.get("message") or ""
            problems.append(f"{condition['type']}=False" + (f" ({why})" if why else ""))
    if name in set(deleting_claims) or metadata.get("deletionTimestamp"):
        problems.append("karpenter: deleting the node")
    reason = (metadata.get("annotations") or {}).get(UNHEALTHY_REASON_ANNOTATION)
    return KubeHealth(name, tuple(problems), taint_source, reason)


@dataclass(frozen=True)
class SlurmNode:
    """What the mirror needs of a Slurm node.

    Attributes:
        name: the Slurm node name.
        drained: whether its state has the DRAIN flag (draining or drained).
        reason: its reason, empty without one.
    """

    name: str
    drained: bool = False
    reason: str = ""

    @property
    def drained_by_mirror(self) -> bool:
        """A drain the mirror set (its reason starts with :data:`REASON_PREFIX`)."""
        return self.drained and self.reason.startswith(REASON_PREFIX)

    @property
    def drained_by_operator(self) -> bool:
        """A drain Slinky's operator set (:data:`OPERATOR_REASON_PREFIX`): scale-in, a cordon."""
        return self.drained and self.reason.startswith(OPERATOR_REASON_PREFIX)

    @property
    def drained_by_admin(self) -> bool:
        """A drain an admin set (``scontrol update state=DRAIN``), not the mirror's or Slinky's."""
        mine_or_operators = self.reason.startswith((REASON_PREFIX, OPERATOR_REASON_PREFIX))
        return self.drained and not mine_or_operators


def slurm_node(node: Mapping[str, Any]) -> SlurmNode:
    """A node of slurmrestd's ``GET /slurm/v0.0.45/nodes/`` answer.

    ``state`` is a list of flags (``["IDLE", "DRAIN"]``) and ``reason`` a string
    (SchedMD/slurm slurm-26-05-3-1 src/plugins/data_parser/v0.0.45/parsers.c, NODE and
    NODE_STATES).

    Args:
        node: one entry of the answer's ``nodes``.
    """
    return SlurmNode(
        name=str(node["name"]),
        drained="DRAIN" in (node.get("state") or []),
        reason=str(node.get("reason") or ""),
    )


@dataclass(frozen=True)
class Drain:
    """Drain a Slurm node (``scontrol update state=DRAIN reason=...``)."""

    slurm_node: str
    reason: str


@dataclass(frozen=True)
class Undrain:
    """Return a Slurm node the mirror drained (``scontrol update state=UNDRAIN``).

    UNDRAIN clears only the DRAIN flag, as Slinky's MakeNodeUndrain does (slurm-operator v1.2.1
    internal/controller/nodeset/slurmcontrol/slurmcontrol.go); RESUME would also return a node
    that is DOWN or FAILed for another reason to IDLE (SchedMD/slurm slurm-26-05-3-1
    src/slurmctld/node_mgr.c, update_node: NODE_RESUME vs NODE_STATE_UNDRAIN). slurmrestd
    v0.0.45 parses ``UNDRAIN`` as a node state flag (src/plugins/data_parser/v0.0.45/parsers.c,
    NODE_STATES).
    """

    slurm_node: str


@dataclass(frozen=True)
class Taint:
    """Give a Kubernetes node ``unhealthy_taint("slurm")`` and the unhealthy-reason annotation."""

    kube_node: str
    reason: str


@dataclass(frozen=True)
class Untaint:
    """Remove the mirror's unhealthy taint and its annotation from a Kubernetes node."""

    kube_node: str


Action = Drain | Undrain | Taint | Untaint

REASON_LIMIT: Final = 200
"""Characters of a drain reason the mirror writes (Slurm keeps any length; people read it in
``sinfo -R``)."""


def drain_reason(problems: Sequence[str]) -> str:
    """The mirror's drain reason for a node's Kubernetes problems.

    Args:
        problems: :attr:`KubeHealth.problems`, at least one.
    """
    return (REASON_PREFIX + "; ".join(problems))[:REASON_LIMIT]


def decide(
    kube: Mapping[str, KubeHealth],
    slurm: Mapping[str, SlurmNode],
    placed: Mapping[str, str],
) -> list[Action]:
    """What makes both sides agree: pure, the same states always give the same actions.

    For each Slurm node on a known Kubernetes node:

    * Kubernetes unhealthy, Slurm not drained: :class:`Drain`; Kubernetes healthy, Slurm drained
      by the mirror: :class:`Undrain`. The mirror's drain is re-drained with a fresh reason when
      the problems change.
    * Slurm drained by an admin, Kubernetes node without an unhealthy taint: :class:`Taint`
      (another source's taint already says it, and one key holds one taint per effect); the
      mirror's taint with a stale reason is re-tainted. Slurm no longer drained by an admin,
      Kubernetes tainted by the mirror: :class:`Untaint`, except while the operator's scale-in
      drain has overwritten an admin's reason (``overrideReason``): the admin's judgement of the
      machine still holds.
    * Slurm drained by Slinky's operator (:data:`OPERATOR_REASON_PREFIX`): no taint.

    A Kubernetes node the mirror tainted whose Slurm node is gone (its pod moved or was deleted)
    keeps the taint if the reason was an admin's: nothing says the admin's judgement of that
    machine no longer holds. If the reason was the operator's (a taint from before the mirror
    knew its reasons), the taint goes.

    Args:
        kube: Kubernetes nodes by name (:func:`kube_health`).
        slurm: Slurm nodes by name (:func:`slurm_node`).
        placed: Slurm node name -> Kubernetes node name (:func:`placement`).
    """
    actions: list[Action] = []
    for name in sorted(slurm):
        node = slurm[name]
        health = kube.get(placed.get(name, ""))
        if health is None:
            continue
        if health.problems:
            reason = drain_reason(health.problems)
            if not node.drained or (node.drained_by_mirror and node.reason != reason):
                actions.append(Drain(name, reason))
        elif node.drained_by_mirror:
            actions.append(Undrain(name))
        if node.drained_by_admin:
            mine = health.taint_source == OWN_SOURCE
            if health.taint_source is None or (mine and health.reason != node.reason):
                actions.append(Taint(health.name, node.reason))
        elif health.taint_source == OWN_SOURCE and not (
            node.drained_by_operator and not _operators(health.reason)
        ):
            actions.append(Untaint(health.name))
    held = {placed[name] for name in slurm if name in placed}
    for health in sorted(kube.values(), key=lambda h: h.name):
        mine = health.taint_source == OWN_SOURCE
        if health.name not in held and mine and _operators(health.reason):
            actions.append(Untaint(health.name))
    return actions


def _operators(reason: str | None) -> bool:
    """Whether a taint's recorded reason was a drain by Slinky's operator."""
    return (reason or "").startswith(OPERATOR_REASON_PREFIX)


class KubeApi(Protocol):
    """The Kubernetes reads and writes the mirror makes (:class:`ClusterKube` in a cluster)."""

    def nodes(self) -> list[dict[str, Any]]:
        """Every node, as the API returns it (camelCase keys)."""
        ...

    def slurmd_pods(self) -> list[dict[str, Any]]:
        """The NodeSet pods in the slurm namespace (:data:`SLURMD_SELECTOR`)."""
        ...

    def deleting_claim_nodes(self) -> set[str]:
        """Names of the nodes whose Karpenter NodeClaim has a deletion timestamp."""
        ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        """Patch a node (strategic merge); a ``metadata.resourceVersion`` makes it conditional."""
        ...


class SlurmRest:
    """slurmrestd through ``urllib``: list nodes, update one.

    Args:
        url: slurmrestd's base URL (:data:`DEFAULT_URL`).
        token_file: the JWT's file, read for every request so a rotated token is used at once.
        timeout: seconds per request (default 10).
    """

    def __init__(self, url: str, token_file: Path, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.token_file = token_file
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/slurm/{API_VERSION}{path}",
            data=data,
            method=method,
            headers={
                # auth/jwt: slurmrestd passes the token on to slurmctld, which checks the user
                # named in it (SchedMD/slurm slurm-26-05-3-1 src/plugins/auth/jwt/auth_jwt.c).
                "X-SLURM-USER-TOKEN": self.token_file.read_text().strip(),
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise SlurmError(f"{method} {path}: HTTP {error.code}: {detail[:500]}") from error
        errors = answer.get("errors") or []
        if errors:
            raise SlurmError(f"{method} {path}: {errors}")
        return answer

    def nodes(self) -> list[SlurmNode]:
        """Every Slurm node (``GET /slurm/v0.0.45/nodes/``)."""
        return [slurm_node(node) for node in self._request("GET", "/nodes/")["nodes"]]

    def update(self, name: str, body: Mapping[str, Any]) -> None:
        """``POST /slurm/v0.0.45/node/{name}`` (UPDATE_NODE_MSG: ``state``, ``reason``...).

        Args:
            name: the Slurm node.
            body: the fields to change.
        """
        self._request("POST", f"/node/{name}", body)


class SlurmError(RuntimeError):
    """slurmrestd refused a request or answered with errors."""


def _taint_patch(
    node: Mapping[str, Any], taint: Mapping[str, str] | None, reason: str | None
) -> dict[str, Any]:
    """A conditional patch setting (or, with None, removing) the mirror's taint and the reason.

    Strategic merge: ``spec.taints`` has no merge key, so the list sent replaces the node's (every
    other taint kept as read); a null annotation removes it; ``metadata.resourceVersion`` makes
    the API refuse the patch (409) if the node changed since it was read.
    """
    metadata = node.get("metadata") or {}
    own = unhealthy_taint(OWN_SOURCE)
    taints = [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if (t.get("key"), t.get("value")) != (own["key"], own["value"])
    ]
    if taint is not None:
        taints.append(dict(taint))
    return {
        "metadata": {
            "resourceVersion": metadata.get("resourceVersion"),
            "annotations": {UNHEALTHY_REASON_ANNOTATION: reason},
        },
        "spec": {"taints": taints},
    }


def execute(
    actions: Sequence[Action],
    slurm: SlurmRest,
    kube: KubeApi,
    nodes: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """Carry the actions out; one failure does not stop the rest. Returns the failures.

    Args:
        actions: :func:`decide`'s answer.
        slurm: slurmrestd.
        kube: the Kubernetes API.
        nodes: the Kubernetes nodes as read for this decision, by name: a patch is conditional
            on their resourceVersion, so a node that changed since is left for the next round.
    """
    failures: list[str] = []
    for action in actions:
        try:
            match action:
                case Drain(name, reason):
                    slurm.update(name, {"state": ["DRAIN"], "reason": reason})
                case Undrain(name):
                    slurm.update(name, {"state": ["UNDRAIN"]})
                case Taint(name, reason):
                    kube.patch_node(
                        name, _taint_patch(nodes[name], unhealthy_taint(OWN_SOURCE), reason)
                    )
                case Untaint(name):
                    kube.patch_node(name, _taint_patch(nodes[name], None, None))
            LOG.info("done: %s", action)
        except Exception as error:  # one node's failure must not stop the others
            failures.append(f"{action}: {error}")
            LOG.warning("failed: %s: %s", action, error)
    return failures


def run_once(slurm: SlurmRest, kube: KubeApi) -> tuple[list[Action], list[str]]:
    """Read both sides, decide, act. Returns the actions and the failures.

    Args:
        slurm: slurmrestd.
        kube: the Kubernetes API.
    """
    nodes = {str(node["metadata"]["name"]): node for node in kube.nodes()}
    deleting = kube.deleting_claim_nodes()
    health = {name: kube_health(node, deleting) for name, node in nodes.items()}
    slurm_nodes = {node.name: node for node in slurm.nodes()}
    actions = decide(health, slurm_nodes, placement(kube.slurmd_pods()))
    return actions, execute(actions, slurm, kube, nodes)


class ClusterKube:
    """:class:`KubeApi` through the ``kubernetes`` client, in the pod's service account.

    Args:
        namespace: where the NodeSet pods run (default ``slurm``).
    """

    def __init__(self, namespace: str = "slurm") -> None:
        from kubernetes import client, config  # noqa: PLC0415 - only in the cluster

        config.load_incluster_config()
        self.namespace = namespace
        self._client = client.ApiClient()
        self._core = client.CoreV1Api(self._client)
        self._custom = client.CustomObjectsApi(self._client)

    def _plain(self, objects: Any) -> list[dict[str, Any]]:
        return list(self._client.sanitize_for_serialization(objects)["items"])

    def nodes(self) -> list[dict[str, Any]]:
        """Every node."""
        return self._plain(self._core.list_node())

    def slurmd_pods(self) -> list[dict[str, Any]]:
        """The NodeSet pods."""
        return self._plain(
            self._core.list_namespaced_pod(self.namespace, label_selector=SLURMD_SELECTOR)
        )

    def deleting_claim_nodes(self) -> set[str]:
        """Nodes whose NodeClaim (karpenter.sh/v1) is being deleted (``status.nodeName``)."""
        claims = self._custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")
        return {
            claim["status"]["nodeName"]
            for claim in claims.get("items", [])
            if claim["metadata"].get("deletionTimestamp")
            and (claim.get("status") or {}).get("nodeName")
        }

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        """Patch a node (strategic merge: the taints list is replaced, annotations merged)."""
        self._core.patch_node(name, patch)


def main(argv: Sequence[str], kube: KubeApi | None = None) -> int:
    """``python -m acceptance mirror``: run the loop until SIGTERM (or once, ``--once``).

    Args:
        argv: the arguments after ``mirror``.
        kube: the Kubernetes API (default: :class:`ClusterKube`, in the cluster).
    """
    parser = argparse.ArgumentParser(prog="python -m acceptance mirror")
    parser.add_argument("--url", default=os.environ.get("SLURMRESTD_URL", DEFAULT_URL))
    parser.add_argument(
        "--token-file",
        type=Path,
        default=Path(os.environ.get("SLURM_JWT_FILE", DEFAULT_TOKEN_FILE)),
    )
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_SECONDS,
                        help="seconds between rounds (default 30)")  # fmt: skip
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    slurm = SlurmRest(args.url, args.token_file)
    api = kube if kube is not None else ClusterKube()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        try:
            _, failures = run_once(slurm, api)
        except Exception as error:  # a round that cannot read waits for the next
            LOG.warning("round failed: %s", error)
            failures = [str(error)]
        if args.once:
            return 1 if failures else 0
        if stop.wait(args.interval):
            return 0
