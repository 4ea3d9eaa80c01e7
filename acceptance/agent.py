"""``python -m acceptance agent``: gate one node, from its startup taint to its verdict.

Runs in the per-vendor DaemonSet, one pod per accelerator node (NODE_NAME). Each pass re-reads
the node and its check pod and does the next step, so an agent restarted mid-way continues
where it was and a node without the acceptance taint is left alone (but for a failed node still
waiting for its replacement slot):

1. The node's allocatable must show what the catalog says (the device plugins registered: the
   accelerators, and ``vpc.amazonaws.com/efa`` where the pool has EFA); until then it waits.
2. It creates one check pod ``acceptance-check-<node>`` on the node (:func:`check_pod`), which
   holds every accelerator and EFA interface while ``python -m acceptance check`` runs and frees
   them when it ends.
3. It reads the verdict from the pod's exit code and termination message
   (:func:`read_verdict`), or calls the node expired once creationTimestamp + deadlineMinutes
   has passed, whether or not the check pod ever ran.
4. Passed: the acceptance taint goes, the result label and checked-at annotation come.
   Failed or expired: an Event on the Node (in "default"), the result label, reason and
   checked-at annotations, ``karpenter.sh/do-not-disrupt``, the unhealthy taint in place of the
   acceptance taint (:func:`node_patch`), and where the pool says so its NodeClaim deleted, at
   most ``maxReplacementsPerHour`` per pool (:func:`take_slot`, counted in a Lease written at
   its resourceVersion), as long as the node keeps the agent's ``unhealthy=acceptance`` taint.
   Either way the check's measured bus bandwidth goes on the node.

The deadline is also enforced from outside the node, by :mod:`acceptance.sweep`, for nodes whose
agent does not run.

Karpenter (kubernetes-sigs/karpenter v1.14.1) names a Node's NodeClaim in two ways: registration
adds an ownerReference ``karpenter.sh/v1 NodeClaim <name>`` to the Node
(pkg/controllers/nodeclaim/lifecycle/registration.go ``syncNode`` calling
pkg/utils/nodeclaim/nodeclaim.go ``UpdateNodeOwnerReferences``), and Karpenter itself matches
``node.spec.providerID`` to ``nodeclaim.status.providerID`` (pkg/utils/node/node.go
``NodeClaimForNode``); there is no ``karpenter.sh/nodeclaim`` label. The agent reads the owner
reference and falls back to the provider ID. Deleting the NodeClaim makes Karpenter delete its
Node (drained by the termination controller), then terminate the instance
(pkg/controllers/nodeclaim/lifecycle/controller.go ``finalize``); pending pods bring a new one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, TextIO

from acceptance.check import MEASURED_PREFIX
from acceptance.kube import Api, Conflict, Object
from acceptance.settings import (
    INSTANCE_TYPE_LABEL,
    POOL_LABEL,
    Pool,
    Settings,
    settings_from_environment,
)
from components.catalog import CATALOG, EFA_RESOURCE, InstanceType
from components.health_marks import (
    ACCEPTANCE_TAINT_KEY,
    BUSBW_ANNOTATION,
    CHECKED_AT_ANNOTATION,
    DO_NOT_DISRUPT_ANNOTATION,
    REASON_ANNOTATION,
    RESULT_LABEL,
    TAINT_EFFECT,
    UNHEALTHY_REASON_ANNOTATION,
    UNHEALTHY_TAINT_KEY,
    Result,
    unhealthy_taint,
)

CHECK_POD_PREFIX: Final = "acceptance-check-"
EVIDENCE_DIR: Final = "/evidence"
TERMINATION_LOG: Final = "/dev/termination-log"
CHECK_REQUESTS: Final = {"cpu": "500m", "memory": "1Gi"}
"""CPU and memory the check pod requests: small enough for the smallest catalog type (a
g5.xlarge has 4 vCPU and 16 GiB, less the system reserve and the node's DaemonSets). A pod set
on a node by ``nodeName`` skips the scheduler, so one that does not fit is rejected by the
kubelet (OutOfcpu) rather than left pending. No memory limit: the node runs nothing else yet,
and a check killed for memory would fail a healthy node."""
LEASE_PREFIX: Final = "acceptance-replacements-"
REPLACEMENTS_ANNOTATION: Final = "trainingplatform.io/acceptance-replacements"
"""On each pool's Lease: the NodeClaims the pool's agents deleted, JSON ``[{nodeClaim, node,
at}]``, the last hour's kept."""
WINDOW: Final = timedelta(hours=1)
NODECLAIM_API: Final = "karpenter.sh/v1"
DEFAULT_INTERVAL_S: Final = 15.0
"""Seconds between passes while the node is being checked: short beside the deadline (minutes),
light on the API (a GET of the node and of the pod)."""
IDLE_INTERVAL_S: Final = 300.0
"""Seconds between passes once the node is out of acceptance (checked, or waiting for a
replacement slot, which frees within the hour): one GET per node every five minutes."""
LEFT_ALONE: Final = "no acceptance taint; left alone"
HELD_BACK: Final = "replacement held back"
LEASE_TRIES: Final = 5
EVENT_MESSAGE_LIMIT: Final = 1024
"""Characters of an Event message kept (events.k8s.io caps its note at 1 kB)."""
EVENT_NAMESPACE: Final = "default"
"""Where the Events about a Node go. A core/v1 Event without ``eventTime`` about a
cluster-scoped object must be in namespace "" or "default" or the API server refuses it
(kubernetes/kubernetes pkg/apis/core/validation/events.go ``legacyValidateEvent``, "does not
match event.namespace"); kubelet and the node controller write theirs in "default"."""
RETURNED: Final = "returned to service by an admin"


@dataclass(frozen=True)
class Verdict:
    """How acceptance ended for a node, and why (empty when it passed)."""

    result: Result
    reason: str = ""
    measured: str = ""
    """The check's measured bus bandwidth ("nccl all-reduce bus bandwidth: 355.2 GB/s at 16
    GiB"), empty where it measured none."""


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as the API writes it (``2026-12-06T13:32:36Z``), in UTC."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def rfc3339(moment: datetime) -> str:
    """A UTC time as the API writes it, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _taints(node: Object) -> list[Object]:
    return list(node.get("spec", {}).get("taints") or [])


def _labels(node: Object) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})


def has_acceptance_taint(node: Object) -> bool:
    """Whether the node still carries the acceptance startup taint."""
    return any(t.get("key") == ACCEPTANCE_TAINT_KEY for t in _taints(node))


def failed_by_acceptance(node: Object) -> bool:
    """Whether the node carries the unhealthy taint the agent set (value ``acceptance``).

    A node whose failed result label stays but whose taint an admin removed has been returned
    to service: it is no longer replaced.
    """
    wanted = unhealthy_taint("acceptance")
    return any(
        t.get("key") == wanted["key"]
        and t.get("value") == wanted["value"]
        and t.get("effect") == wanted["effect"]
        for t in _taints(node)
    )


def deadline(node: Object, settings: Settings) -> datetime:
    """When acceptance must have ended: the node's creation plus ``deadlineMinutes``."""
    created = parse_time(node["metadata"]["creationTimestamp"])
    return created + timedelta(minutes=settings.deadline_minutes)


def check_efa(instance: InstanceType, pool: Pool) -> bool:
    """Whether the node is checked for EFA: its pool attaches EFA and its type has it."""
    return pool.efa and instance.supports_efa


def allocatable_findings(node: Object, instance: InstanceType, efa: bool) -> list[str]:
    """What the node's allocatable lacks against the catalog ("allocatable X: 0, want 8").

    Empty when the device plugins have registered every accelerator (and EFA interface).

    Args:
        node: the Node.
        instance: its catalog entry.
        efa: whether EFA interfaces are wanted (:func:`check_efa`).
    """
    allocatable = node.get("status", {}).get("allocatable") or {}
    wanted = {instance.accelerator_resource: instance.accelerators}
    if efa:
        wanted[EFA_RESOURCE] = instance.efa_interfaces
    findings = []
    for resource, count in wanted.items():
        seen = str(allocatable.get(resource, "0"))
        if not seen.isdigit() or int(seen) != count:
            findings.append(f"allocatable {resource}: {seen}, want {count}")
    return findings


def check_pod_name(node_name: str) -> str:
    """The check pod's name, ``acceptance-check-<node>`` (cut to the 253-character limit)."""
    return (CHECK_POD_PREFIX + node_name)[:253].rstrip(".-")


def check_command(instance: InstanceType, settings: Settings, pool: Pool) -> list[str]:
    """The check pod's command line (``python -m acceptance check ...``).

    Args:
        instance: the node's catalog entry.
        settings: the agent's settings (DCGM level).
        pool: the node's pool (EFA, file systems, floors).
    """
    command = [
        "python",
        "-m",
        "acceptance",
        "check",
        "--instance-type",
        instance.name,
        "--out",
        EVIDENCE_DIR,
        "--termination-log",
        TERMINATION_LOG,
        "--efa" if check_efa(instance, pool) else "--no-efa",
    ]
    if instance.accelerator == "nvidia":
        command += ["--dcgm-level", str(settings.dcgm_diag_level)]
    for fs in pool.file_systems:
        command += ["--file-system", f"{fs.name}:{fs.mount_path}:{fs.fs_type}"]
    if pool.floors:
        command += ["--baselines-json", json.dumps({"floors": list(pool.floors)})]
    return command


def check_pod(
    node: Object,
    instance: InstanceType,
    settings: Settings,
    *,
    pool: Pool,
    namespace: str,
    now: datetime,
    owner: Object | None = None,
) -> Object:
    """The check pod of a node: pinned to it, holding all its accelerators and EFA interfaces.

    ``nodeName`` skips the scheduler (the node's taints keep every other pod off), its
    tolerations are the node's taints, and ``activeDeadlineSeconds`` ends it at the node's
    deadline. Requests equal limits for extended resources (Kubernetes requires it), so the
    device plugins hand the pod every device; they are free again once it has terminated.
    Its owner is the agent's DaemonSet, so the garbage collector deletes it when the gate is
    turned off (the pod mounts the namespace's file-system claims, whose deletion waits for it;
    the collector deletes a dependent only once every owner is gone, so the Node is not a second
    owner); a pod bound to a Node that is deleted goes with it (the pod garbage collector). The
    Node owns it only where the DaemonSet is not known.

    Args:
        node: the Node.
        instance: its catalog entry.
        settings: the agent's settings (image, DCGM level, deadline).
        pool: the node's pool (EFA, file systems, floors).
        namespace: the agent's namespace (POD_NAMESPACE), where the claims live.
        now: the current time (UTC).
        owner: the agent's DaemonSet as an ownerReference (:func:`daemonset_owner`); default
            none (the Node owns the pod).
    """
    name = node["metadata"]["name"]
    owners: list[Object] = (
        [owner]
        if owner is not None
        else [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}]
    )
    devices = {instance.accelerator_resource: str(instance.accelerators)}
    if check_efa(instance, pool):
        devices[EFA_RESOURCE] = str(instance.efa_interfaces)
    remaining = int((deadline(node, settings) - now).total_seconds())
    mounts: list[Object] = [{"name": "evidence", "mountPath": EVIDENCE_DIR}]
    volumes: list[Object] = [{"name": "evidence", "emptyDir": {}}]
    for position, fs in enumerate(pool.file_systems):
        volume = f"fs-{position}"
        mounts.append({"name": volume, "mountPath": fs.mount_path, "readOnly": True})
        volumes.append(
            {"name": volume, "persistentVolumeClaim": {"claimName": fs.claim, "readOnly": True}}
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": check_pod_name(name),
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "acceptance-check",
                "app.kubernetes.io/part-of": "node-acceptance",
            },
            "ownerReferences": owners,
        },
        "spec": {
            "nodeName": name,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": max(remaining, 60),
            "automountServiceAccountToken": False,
            "tolerations": [
                {"key": t["key"], "operator": "Exists", "effect": t["effect"]}
                for t in _taints(node)
            ],
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "check",
                    "image": settings.check_image,
                    "command": check_command(instance, settings, pool),
                    "resources": {
                        "requests": {**CHECK_REQUESTS, **devices},
                        "limits": devices,
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "terminationMessagePath": TERMINATION_LOG,
                    "terminationMessagePolicy": "File",
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def read_verdict(pod: Object) -> Verdict | str | None:
    """What the check pod says: a :class:`Verdict`, ``None`` while it runs, or why it never ran.

    Exit 0 passed; 1 failed, the termination message its failed findings; 2 the evidence was
    unusable (failed too: the node could not show it works); any other exit (killed, out of
    memory) failed with the code. A pod the kubelet rejected before its container ran (status
    reason such as ``UnexpectedAdmissionError``) returns that reason as a string, so the agent
    deletes it and tries again before the deadline; a pod stopped at its own
    ``activeDeadlineSeconds`` is left to the node's deadline.

    Args:
        pod: the check pod.
    """
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase not in {"Succeeded", "Failed"}:
        return None
    if status.get("reason") == "DeadlineExceeded":
        return None
    terminated = next(
        (
            (s.get("state") or {}).get("terminated")
            for s in status.get("containerStatuses") or []
            if (s.get("state") or {}).get("terminated")
        ),
        None,
    )
    if terminated is None:
        return f"{status.get('reason', 'no reason')}: {status.get('message', '')}".strip(": ")
    code = terminated.get("exitCode")
    lines = (terminated.get("message") or "").strip().splitlines()
    measured = "; ".join(
        line.removeprefix(MEASURED_PREFIX) for line in lines if line.startswith(MEASURED_PREFIX)
    )
    message = "\n".join(line for line in lines if not line.startswith(MEASURED_PREFIX)).strip()
    if code == 0:
        return Verdict("passed", measured=measured)
    if code == 1:
        return Verdict(
            "failed", message or "check failed (exit 1) without a message", measured=measured
        )
    if code == 2:
        return Verdict("failed", f"unusable evidence: {message}".strip(": "), measured=measured)
    why = terminated.get("reason") or "killed"
    return Verdict(
        "failed",
        f"check exited {code} ({why}){': ' + message if message else ''}",
        measured=measured,
    )


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def node_patch(node: Object, verdict: Verdict, now: datetime) -> list[Object]:
    """The JSON patch (RFC 6902) that records a verdict on the node.

    The taints are replaced as a whole behind a ``test`` of the node's resourceVersion as read,
    so a node another controller changed meanwhile fails the patch (the agent re-reads and
    decides again) instead of having its taints overwritten. Passed: the acceptance taint goes
    and a reason left from before goes.
    Failed or expired: the unhealthy taint (source ``acceptance``) takes its place unless the
    node already has an unhealthy taint (taints are unique by key and effect), the reason is
    written to the reason and unhealthy-reason annotations, and ``karpenter.sh/do-not-disrupt``
    keeps Karpenter's consolidation off the node. A measured bus bandwidth goes to its
    annotation either way.

    Args:
        node: the Node as read.
        verdict: the outcome.
        now: when it was decided (UTC).
    """
    taints = _taints(node)
    kept = [t for t in taints if t.get("key") != ACCEPTANCE_TAINT_KEY]
    failed = verdict.result != "passed"
    unhealthy = any(
        t.get("key") == UNHEALTHY_TAINT_KEY and t.get("effect") == TAINT_EFFECT for t in kept
    )
    if failed and not unhealthy:
        kept.append(unhealthy_taint("acceptance"))
    # The test is of the resourceVersion read, not of the taints: the client hands a taint's
    # timeAdded back re-serialised ("...Z" read as "...+00:00", kubernetes 35.0.0 client) and
    # JSON patch compares raw strings, so a test of the taints never holds on a node carrying
    # the node-lifecycle controller's not-ready taint. Any change since the read fails it.
    ops: list[Object] = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": node["metadata"].get("resourceVersion", ""),
        }
    ]
    if "taints" in node.get("spec", {}):
        ops.append({"op": "replace", "path": "/spec/taints", "value": kept})
    else:
        ops.append({"op": "add", "path": "/spec/taints", "value": kept})
    if "labels" in node["metadata"]:
        ops.append(
            {
                "op": "add",
                "path": f"/metadata/labels/{_escape(RESULT_LABEL)}",
                "value": verdict.result,
            }
        )
    else:
        ops.append(
            {"op": "add", "path": "/metadata/labels", "value": {RESULT_LABEL: verdict.result}}
        )
    annotations: dict[str, str] = {CHECKED_AT_ANNOTATION: rfc3339(now)}
    if verdict.measured:
        annotations[BUSBW_ANNOTATION] = verdict.measured
    if failed:
        annotations[REASON_ANNOTATION] = verdict.reason
        annotations[UNHEALTHY_REASON_ANNOTATION] = f"acceptance {verdict.result}: {verdict.reason}"
        # Out of disruption until it is replaced or returned: the failed node is Initialized
        # and empty, so the pool's consolidation would delete it outside the replacement cap.
        annotations[DO_NOT_DISRUPT_ANNOTATION] = "true"
    present = node["metadata"].get("annotations")
    if present is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    else:
        ops += [
            {"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v}
            for k, v in annotations.items()
        ]
        if not failed and REASON_ANNOTATION in present:
            ops.append(
                {"op": "remove", "path": f"/metadata/annotations/{_escape(REASON_ANNOTATION)}"}
            )
    return ops


def node_event(node: Object, verdict: Verdict, now: datetime) -> Object:
    """The Event recording a verdict on the Node (Warning unless it passed), in "default".

    Its name is derived from the node's UID and the result, so an agent that restarts after
    writing it gets a conflict instead of a second Event. It is written in
    :data:`EVENT_NAMESPACE`, the only namespace besides "" the API server admits for an Event
    about a Node.

    Args:
        node: the Node.
        verdict: the outcome.
        now: when it was decided (UTC).
    """
    name = node["metadata"]["name"]
    uid = str(node["metadata"].get("uid", ""))
    reason = {
        "passed": "AcceptancePassed",
        "failed": "AcceptanceFailed",
        "expired": "AcceptanceExpired",
    }[verdict.result]
    message = f"acceptance {verdict.result}" + (f": {verdict.reason}" if verdict.reason else "")
    if verdict.measured:
        message = f"measured {verdict.measured}; {message}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.acceptance-{verdict.result}-{uid[:8]}"[:253],
            "namespace": EVENT_NAMESPACE,
        },
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid},
        "reason": reason,
        "message": message[:EVENT_MESSAGE_LIMIT],
        "type": "Normal" if verdict.result == "passed" else "Warning",
        "source": {"component": "acceptance-agent", "host": name},
        "reportingComponent": "trainingplatform.io/acceptance-agent",
        "reportingInstance": name,
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "count": 1,
    }


def nodeclaim_for(node: Object, nodeclaims: Sequence[Object]) -> Object | None:
    """The node's NodeClaim: the one its owner reference names, else the one of its providerID.

    Args:
        node: the Node.
        nodeclaims: every NodeClaim.
    """
    by_name = {c["metadata"]["name"]: c for c in nodeclaims}
    for owner in node["metadata"].get("ownerReferences") or []:
        if (
            owner.get("apiVersion") == NODECLAIM_API
            and owner.get("kind") == "NodeClaim"
            and owner.get("name") in by_name
        ):
            return by_name[owner["name"]]
    provider_id = node.get("spec", {}).get("providerID")
    if not provider_id:
        return None
    matches = [c for c in nodeclaims if (c.get("status") or {}).get("providerID") == provider_id]
    return matches[0] if len(matches) == 1 else None


def lease_name(pool: str) -> str:
    """The Lease counting a pool's replacements."""
    return LEASE_PREFIX + pool


@dataclass(frozen=True)
class Slot:
    """Whether a replacement may go ahead, and the Lease to write first (``None``: no write)."""

    granted: bool
    lease: Object | None
    recent: int
    """Replacements of the pool in the last hour, before this one."""


def take_slot(
    lease: Object | None,
    *,
    pool: str,
    namespace: str,
    nodeclaim: str,
    node: str,
    cap: int,
    now: datetime,
) -> Slot:
    """Take one of a pool's hourly replacement slots for a NodeClaim, in its Lease.

    The Lease's annotation lists the pool's deletions; those older than an hour are dropped. A
    NodeClaim already listed keeps its slot (an agent that restarted between writing the Lease
    and deleting the NodeClaim deletes it without taking another). The Lease returned carries
    the resourceVersion read, so of two agents racing for the last slot one write fails with a
    conflict and that agent reads again and finds none left.

    Args:
        lease: the pool's Lease as read (``None`` when there is none yet).
        pool: the pool's name.
        namespace: the agent's namespace.
        nodeclaim: the NodeClaim to delete.
        node: its Node (recorded for whoever reads the Lease).
        cap: the pool's ``maxReplacementsPerHour``.
        now: the current time (UTC).
    """
    metadata = (lease or {}).get("metadata") or {}
    records: list[dict[str, str]] = json.loads(
        (metadata.get("annotations") or {}).get(REPLACEMENTS_ANNOTATION, "[]")
    )
    recent = [r for r in records if now - parse_time(r["at"]) < WINDOW]
    if any(r["nodeClaim"] == nodeclaim for r in recent):
        return Slot(True, None, len(recent) - 1)
    if len(recent) >= cap:
        return Slot(False, None, len(recent))
    recent.append({"nodeClaim": nodeclaim, "node": node, "at": rfc3339(now)})
    written: Object = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(pool),
            "namespace": namespace,
            "annotations": {REPLACEMENTS_ANNOTATION: json.dumps(recent)},
        },
        "spec": {"holderIdentity": node},
    }
    if lease is not None:
        written["metadata"]["resourceVersion"] = metadata["resourceVersion"]
    return Slot(True, written, len(recent) - 1)


def replace(
    api: Api, node: Object, *, pool_name: str, pool: Pool, namespace: str, now: datetime
) -> str:
    """Delete a failed node's NodeClaim if the pool's hourly cap allows; what happened.

    Args:
        api: the API.
        node: the failed Node.
        pool_name: its pool.
        pool: the pool's settings.
        namespace: the agent's namespace (where the Lease lives).
        now: the current time (UTC).
    """
    claim = nodeclaim_for(node, api.list_nodeclaims())
    if claim is None:
        return "no NodeClaim names this node; nothing to replace"
    claim_name = claim["metadata"]["name"]
    if claim["metadata"].get("deletionTimestamp"):
        return f"NodeClaim {claim_name} is being deleted"
    for _ in range(LEASE_TRIES):
        lease = api.get_lease(namespace, lease_name(pool_name))
        slot = take_slot(
            lease,
            pool=pool_name,
            namespace=namespace,
            nodeclaim=claim_name,
            node=node["metadata"]["name"],
            cap=pool.max_replacements_per_hour,
            now=now,
        )
        if not slot.granted:
            return (
                f"{HELD_BACK}: pool {pool_name} had {slot.recent} replacements "
                f"in the last hour (max {pool.max_replacements_per_hour})"
            )
        try:
            if slot.lease is not None and lease is None:
                api.create_lease(namespace, slot.lease)
            elif slot.lease is not None:
                api.replace_lease(namespace, slot.lease)
        except Conflict:
            continue  # another agent wrote the Lease first: read it again and decide again
        api.delete_nodeclaim(claim_name)
        return f"deleted NodeClaim {claim_name}"
    return f"the Lease of pool {pool_name} kept changing; will try again"


def finish(
    api: Api,
    node: Object,
    verdict: Verdict,
    *,
    pool_name: str,
    pool: Pool,
    namespace: str,
    now: datetime,
) -> str:
    """Record a verdict: Event, node patch, check pod gone, replacement; what happened.

    Args:
        api: the API.
        node: the Node as read.
        verdict: the outcome.
        pool_name: the node's pool.
        pool: its settings.
        namespace: the agent's namespace.
        now: the current time (UTC).
    """
    name = node["metadata"]["name"]
    unrecorded = ""
    try:
        api.create_event(EVENT_NAMESPACE, node_event(node, verdict, now))
    except Conflict:
        pass  # written by this agent before it restarted
    except Exception as error:
        unrecorded = f" (its Event not written: {error})"
    try:
        api.patch_node(name, node_patch(node, verdict, now))
    except Conflict:
        return "the node changed while deciding; will decide again"
    api.delete_pod(namespace, check_pod_name(name))
    done = f"acceptance {verdict.result}" + (f": {verdict.reason}" if verdict.reason else "")
    done += unrecorded
    if verdict.result != "passed" and pool.replace_failed_nodes:
        done += "; " + replace(
            api, node, pool_name=pool_name, pool=pool, namespace=namespace, now=now
        )
    return done


def release(api: Api, node: Object) -> str:
    """Take ``karpenter.sh/do-not-disrupt`` off a failed node an admin returned to service.

    Args:
        api: the API.
        node: the Node as read (failed label, no acceptance-sourced unhealthy taint).
    """
    try:
        api.patch_node(
            node["metadata"]["name"],
            [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": node["metadata"].get("resourceVersion", ""),
                },
                {
                    "op": "remove",
                    "path": f"/metadata/annotations/{_escape(DO_NOT_DISRUPT_ANNOTATION)}",
                },
            ],
        )
    except Conflict:
        return "the node changed while deciding; will decide again"
    return f"{RETURNED}; {DO_NOT_DISRUPT_ANNOTATION} removed"


def reconcile(
    api: Api,
    settings: Settings,
    node_name: str,
    namespace: str,
    now: datetime,
    *,
    owner: Object | None = None,
) -> str:
    """One pass over the agent's node: do the next step; returns what it did, for the log.

    Args:
        api: the API.
        settings: the agent's settings.
        node_name: its node (NODE_NAME).
        namespace: its namespace (POD_NAMESPACE).
        now: the current time (UTC).
        owner: the agent's DaemonSet as the check pod's second owner (default: none).
    """
    node = api.get_node(node_name)
    if node is None:
        return f"node {node_name} not found"
    labels = _labels(node)
    pool_name = labels.get(POOL_LABEL, "")
    pool = settings.pool(pool_name)
    if not has_acceptance_taint(node):
        if labels.get(RESULT_LABEL) not in {"failed", "expired"}:
            return LEFT_ALONE
        if failed_by_acceptance(node):
            if pool.replace_failed_nodes:
                return replace(
                    api, node, pool_name=pool_name, pool=pool, namespace=namespace, now=now
                )
            return LEFT_ALONE
        annotations = node["metadata"].get("annotations") or {}
        if annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true":
            return release(api, node)
        return LEFT_ALONE
    type_name = labels.get(INSTANCE_TYPE_LABEL, "")
    instance = CATALOG.get(type_name)
    if instance is None:
        verdict = Verdict("failed", f"instance type {type_name!r} is not in the catalog")
        return finish(
            api, node, verdict, pool_name=pool_name, pool=pool, namespace=namespace, now=now
        )
    pod_name = check_pod_name(node_name)
    pod = api.get_pod(namespace, pod_name)
    state = read_verdict(pod) if pod is not None else None
    due = deadline(node, settings)
    if isinstance(state, Verdict):
        return finish(
            api, node, state, pool_name=pool_name, pool=pool, namespace=namespace, now=now
        )
    missing = allocatable_findings(node, instance, check_efa(instance, pool))
    if now >= due:
        if pod is None:
            why = "before the check pod ran" + (f": {'; '.join(missing)}" if missing else "")
        elif isinstance(state, str):
            why = f"before the check ran: the kubelet rejected the check pod ({state})"
        else:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            why = f"before the check finished (pod {phase})"
        verdict = Verdict("expired", f"deadline {rfc3339(due)} passed {why}")
        return finish(
            api, node, verdict, pool_name=pool_name, pool=pool, namespace=namespace, now=now
        )
    if isinstance(state, str):
        api.delete_pod(namespace, pod_name)
        return f"check pod did not run ({state}); deleted, to be created again"
    if pod is not None:
        return "waiting for the check pod"
    if missing:
        return f"waiting for the device plugins: {'; '.join(missing)}"
    try:
        pod = check_pod(
            node, instance, settings, pool=pool, namespace=namespace, now=now, owner=owner
        )
        api.create_pod(namespace, pod)
    except Conflict:
        return "the check pod exists already"
    return f"created check pod {pod_name}"


def tidy(api: Api, node_name: str, namespace: str) -> None:
    """Delete a check pod left behind by an agent that stopped after recording its verdict.

    Run once when the agent starts: the verdict on the node comes before the pod's deletion, so
    a restart in between leaves a terminated pod (holding no devices) that no later pass looks
    at, since the node no longer carries the acceptance taint.

    Args:
        api: the API.
        node_name: the agent's node.
        namespace: its namespace.
    """
    node = api.get_node(node_name)
    if node is not None and not has_acceptance_taint(node):
        api.delete_pod(namespace, check_pod_name(node_name))


def daemonset_owner(api: Api, namespace: str, pod_name: str) -> Object | None:
    """The agent's DaemonSet as an ownerReference, read from the agent's own pod.

    ``None`` where the pod or its DaemonSet owner is not found (the check pods are then owned
    by their Node alone).

    Args:
        api: the API.
        namespace: the agent's namespace.
        pod_name: the agent's pod (POD_NAME).
    """
    pod = api.get_pod(namespace, pod_name)
    for reference in ((pod or {}).get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("kind") == "DaemonSet" and reference.get("uid"):
            return {
                "apiVersion": reference.get("apiVersion", "apps/v1"),
                "kind": "DaemonSet",
                "name": reference["name"],
                "uid": reference["uid"],
            }
    return None


def run(
    api: Api,
    settings: Settings,
    node_name: str,
    namespace: str,
    *,
    pod_name: str | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    passes: int | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    out: TextIO = sys.stdout,
) -> None:
    """Reconcile the node every ``interval_s`` seconds, logging each pass that did something new.

    Args:
        api: the API.
        settings: the agent's settings.
        node_name: its node.
        namespace: its namespace.
        pod_name: the agent's own pod (POD_NAME), whose DaemonSet also owns the check pods;
            default none.
        interval_s: seconds between passes while the node is checked (default 15); once it is
            out of acceptance, at least :data:`IDLE_INTERVAL_S`.
        passes: stop after this many (default: never; the DaemonSet's pod runs for good).
        clock: the current time (UTC).
        sleep: waits between passes.
        out: the log.
    """
    last = ""
    done = 0
    tidy(api, node_name, namespace)
    owner = daemonset_owner(api, namespace, pod_name) if pod_name else None
    while passes is None or done < passes:
        try:
            what = reconcile(api, settings, node_name, namespace, clock(), owner=owner)
        except Exception as error:  # an API hiccup must not end the agent
            what = f"error: {type(error).__name__}: {error}"
        if what != last:
            print(f"{rfc3339(clock())} {node_name}: {what}", file=out, flush=True)
            last = what
        done += 1
        if passes is None or done < passes:
            idle = what == LEFT_ALONE or what.startswith(HELD_BACK)
            sleep(max(interval_s, IDLE_INTERVAL_S) if idle else interval_s)


def main(argv: Sequence[str], out: TextIO = sys.stdout, api: Api | None = None) -> int:
    """``python -m acceptance agent [--once] [--interval SECONDS]``; env gives the rest.

    Env: ``ACCEPTANCE_SETTINGS`` (the settings file), ``NODE_NAME``, ``POD_NAMESPACE``, and
    optionally ``POD_NAME`` (the agent's pod, whose DaemonSet also owns the check pods).

    Args:
        argv: the arguments after ``agent``.
        out: the log.
        api: the API (default: in-cluster credentials).
    """
    parser = argparse.ArgumentParser(prog="python -m acceptance agent")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        help="seconds between passes (default 15)",
    )
    args = parser.parse_args(argv)
    settings = settings_from_environment(
        "agent", ("ACCEPTANCE_SETTINGS", "NODE_NAME", "POD_NAMESPACE"), out
    )
    if settings is None:
        return 2
    if api is None:  # pragma: no cover - in the cluster
        from acceptance.kube import KubernetesApi  # noqa: PLC0415

        api = KubernetesApi()
    run(
        api,
        settings,
        os.environ["NODE_NAME"],
        os.environ["POD_NAMESPACE"],
        pod_name=os.environ.get("POD_NAME") or None,
        interval_s=args.interval,
        passes=1 if args.once else None,
        out=out,
    )
    return 0
