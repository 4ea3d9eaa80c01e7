"""The pods that custom resources stand for, as the controllers that own them would create them.

Scanners read Pods, Deployments and the like; a TrainingRuntime or a Slinky NodeSet hides its
pods inside its spec, so a scan of the manifests as written never sees them. ``synth`` writes
each such pod to ``pods/`` as a plain Pod manifest, built the way its controller builds it,
so that what a scanner (or a reviewer) reads is what would run:

* Trainer runtimes: each replicated job's pod template, in the runtime's namespace (Trainer
  v2.3.0 copies it into the JobSet, and JobSet into the Job's pods, adding only volumes, mounts
  and environment of its plugins);
* Slinky NodeSets: the operator's worker pod (SlinkyProject/slurm-operator v1.2.1
  internal/builder/workerbuilder/worker_app.go, BuildWorkerPodTemplate and slurmdContainer):
  its base (no service account token, no service links, the slurmd container privileged with
  BPF, NET_ADMIN, SYS_ADMIN and SYS_NICE and probed on /livez and /readyz, the logfile
  sidecar) merged with the NodeSet's own template and ``slurmd`` fields as the operator merges
  them (:func:`strategic_merge`). The operator's own volumes (its slurm.conf and auth key) are
  shown by name only; their sources are its own.

Deployments, DaemonSets and StatefulSets the stack writes as manifests are scanned as they are.
What a TrainJob changes in its pods (``trainer.image``, ``runtimePatches``, which may set
security contexts, volumes and service accounts) is the job's, not the platform's, and shows
here only as far as Pod Security ``baseline`` bounds it at admission. Helm releases' pods
(Slurm's controller and login set, the device plugins) are not derived yet.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Final

from components.slurm import SLURM_APP_LABEL, SLURMD_PORT

RUNTIME_KINDS: Final = ("TrainingRuntime", "ClusterTrainingRuntime")
NODE_SET_KIND: Final = "NodeSet"
RUNTIME_NAMESPACE: Final = "kubeflow-system"
"""Where a ClusterTrainingRuntime's pods would be shown (each job's own namespace, in truth)."""

SLURMD_CAPABILITIES: Final = ("BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE")
"""What the operator adds to slurmd besides ``privileged`` (worker_app.go, slurmdContainer)."""
SLURM_ETC_MOUNTS: Final = (
    {"name": "slurm-etc", "mountPath": "/etc/slurm", "readOnly": True},
    {"name": "slurm-logfile", "mountPath": "/var/log/slurm"},
)


def _pod(name: str, namespace: str, template: Mapping[str, Any], source: str) -> dict[str, Any]:
    metadata = copy.deepcopy(dict(template.get("metadata") or {}))
    annotations = {**metadata.get("annotations", {}), "trainingplatform.io/pod-of": source}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**metadata, "name": name, "namespace": namespace, "annotations": annotations},
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def runtime_pods(runtime: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One Pod per replicated job of a (Cluster)TrainingRuntime.

    Args:
        runtime: the runtime's manifest.
    """
    metadata = runtime["metadata"]
    namespace = metadata.get("namespace", RUNTIME_NAMESPACE)
    source = f"{runtime['kind']}/{namespace}/{metadata['name']}"
    jobs = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    for job in jobs.get("replicatedJobs") or []:
        template = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
        yield _pod(f"{metadata['name']}-{job['name']}", namespace, template, source)


MERGE_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
}
"""Lists a strategic merge patch merges by key (the API types' ``patchMergeKey``).

Every other list is replaced."""


def _empty(value: Any) -> bool:
    return value in (None, "", 0, False, [], {})


def _cleaned(patch: Any) -> Any:
    """``patch`` without its empty values, as the operator removes them before merging.

    slurm-operator v1.2.1 internal/utils/structutils/kube.go, removeEmpty: ``privileged:
    false`` in a NodeSet leaves the operator's ``true`` standing.
    """
    if not isinstance(patch, Mapping):
        return patch
    out = {}
    for key, value in patch.items():
        cleaned = _cleaned(value)
        if not _empty(cleaned):
            out[key] = cleaned
    return out


def strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    """``patch`` merged over ``base`` as ``strategicpatch.StrategicMergePatch`` merges them.

    That is how the operator merges its base pod with a NodeSet's: maps recursively, keyed
    lists (:data:`MERGE_KEYS`) by their key, other lists and scalars replaced.

    Args:
        base: the operator's value.
        patch: the NodeSet's value (already :func:`_cleaned`).
        key: the field both sit under, which picks a list's merge key.
    """
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        merged = dict(base)
        for field_name, value in patch.items():
            merged[field_name] = (
                strategic_merge(base[field_name], value, field_name)
                if field_name in base
                else value
            )
        return merged
    merge_key = MERGE_KEYS.get(key)
    if merge_key and isinstance(base, list) and isinstance(patch, list):
        by_key = {entry.get(merge_key): entry for entry in patch}
        merged_list = [
            strategic_merge(entry, by_key.pop(entry.get(merge_key)), key)
            if entry.get(merge_key) in by_key
            else entry
            for entry in base
        ]
        return merged_list + [entry for entry in patch if entry.get(merge_key) in by_key]
    return copy.deepcopy(patch)


def _joined(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Containers as the operator joins them (structutils.MergeList: appended, not merged).

    The API server refuses a pod with two containers of one name, so such a NodeSet is an error.
    """
    joined = [*base, *extra]
    names = [str(c.get("name")) for c in joined]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"the node set's pod would have two containers named {duplicates}")
    return joined


def node_set_pod(node_set: Mapping[str, Any]) -> dict[str, Any]:
    """The worker pod the Slinky operator creates for a NodeSet.

    Args:
        node_set: the NodeSet's manifest.

    Raises:
        ValueError: the NodeSet's containers clash with the operator's.
    """
    metadata = node_set["metadata"]
    spec = node_set.get("spec") or {}
    template = spec.get("template") or {}
    own = _cleaned(copy.deepcopy(dict(template.get("spec") or {})))

    def probe(path: str, **timing: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "slurmd"}, **timing}

    slurmd_base = {
        "name": "slurmd",
        "ports": [{"name": "slurmd", "containerPort": SLURMD_PORT, "protocol": "TCP"}],
        "startupProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "livenessProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "readinessProbe": probe("/readyz"),
        "securityContext": {
            "privileged": True,
            "capabilities": {"add": list(SLURMD_CAPABILITIES)},
        },
        "volumeMounts": [dict(m) for m in SLURM_ETC_MOUNTS],
    }
    slurmd = strategic_merge(slurmd_base, _cleaned(copy.deepcopy(dict(spec.get("slurmd") or {}))))
    logfile = strategic_merge(
        {
            "name": "logfile",
            "restartPolicy": "Always",
            "volumeMounts": [{"name": "slurm-logfile", "mountPath": "/var/log/slurm"}],
        },
        _cleaned(copy.deepcopy(dict(spec.get("logfile") or {}))),
    )
    base_spec = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "volumes": [
            {"name": "slurm-etc", "projected": {"sources": []}},
            {"name": "slurm-logfile", "emptyDir": {}},
        ],
    }
    own_containers = list(own.pop("containers", []))
    own_init = list(own.pop("initContainers", []))
    pod_spec = strategic_merge(base_spec, own)
    pod_spec["containers"] = _joined([slurmd], own_containers)
    pod_spec["initContainers"] = _joined([logfile], own_init)
    labels = {
        **(metadata.get("labels") or {}),
        **((template.get("metadata") or {}).get("labels") or {}),
        SLURM_APP_LABEL: "slurmd",
        "app.kubernetes.io/instance": metadata["name"],
    }
    source = f"NodeSet/{metadata.get('namespace')}/{metadata['name']}"
    return _pod(
        f"{metadata['name']}-0",
        str(metadata.get("namespace")),
        {"metadata": {**(template.get("metadata") or {}), "labels": labels}, "spec": pod_spec},
        source,
    )


def pods_of(manifests: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """File name -> Pod for every pod the stack's custom resources stand for.

    Args:
        manifests: ``manifests/`` contents by file name.
    """
    pods: list[dict[str, Any]] = []
    for manifest in manifests.values():
        if not isinstance(manifest, Mapping):
            continue
        if manifest.get("kind") in RUNTIME_KINDS:
            pods += runtime_pods(manifest)
        elif manifest.get("kind") == NODE_SET_KIND:
            pods.append(node_set_pod(manifest))
    found: dict[str, dict[str, Any]] = {}
    for pod in pods:
        name = f"Pod.{pod['metadata']['namespace']}.{pod['metadata']['name']}.yaml"
        if name in found:
            raise ValueError(f"two pods would be written to {name}")
        found[name] = pod
    return found
