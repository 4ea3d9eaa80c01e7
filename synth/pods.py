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
  sidecar) merged with the NodeSet's own template and ``slurmd`` fields. The operator's own
  volumes (its slurm.conf and auth key) are shown by name only; their sources are its own.

Deployments, DaemonSets and StatefulSets the stack writes as manifests are scanned as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Final

RUNTIME_KINDS: Final = ("TrainingRuntime", "ClusterTrainingRuntime")
NODE_SET_KIND: Final = "NodeSet"
RUNTIME_NAMESPACE: Final = "kubeflow-system"
"""Where a ClusterTrainingRuntime's pods would be shown (each job's own namespace, in truth)."""

SLURMD_PORT: Final = 6818
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


def _merged_by_name(
    base: list[dict[str, Any]], merge: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``base`` with ``merge``'s entries replacing those of the same name, the others appended.

    As the operator merges lists (structutils.MergeList).
    """
    names = {entry.get("name") for entry in merge}
    return [entry for entry in base if entry.get("name") not in names] + merge


def node_set_pod(node_set: Mapping[str, Any]) -> dict[str, Any]:
    """The worker pod the Slinky operator creates for a NodeSet.

    Args:
        node_set: the NodeSet's manifest.
    """
    metadata = node_set["metadata"]
    spec = node_set.get("spec") or {}
    template = spec.get("template") or {}
    own = copy.deepcopy(dict(template.get("spec") or {}))
    slurmd_fields = copy.deepcopy(dict(spec.get("slurmd") or {}))

    def probe(path: str, **timing: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "slurmd"}, **timing}

    slurmd = {
        "name": "slurmd",
        "ports": [{"name": "slurmd", "containerPort": SLURMD_PORT, "protocol": "TCP"}],
        "startupProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "livenessProbe": probe("/livez", failureThreshold=6, periodSeconds=10),
        "readinessProbe": probe("/readyz"),
        "securityContext": {
            "privileged": True,
            "capabilities": {"add": list(SLURMD_CAPABILITIES)},
        },
        **{k: v for k, v in slurmd_fields.items() if k != "volumeMounts"},
        "volumeMounts": _merged_by_name(
            [dict(m) for m in SLURM_ETC_MOUNTS], list(slurmd_fields.get("volumeMounts") or [])
        ),
    }
    logfile = {
        "name": "logfile",
        "restartPolicy": "Always",
        **copy.deepcopy(dict(spec.get("logfile") or {})),
        "volumeMounts": [{"name": "slurm-logfile", "mountPath": "/var/log/slurm"}],
    }
    pod_spec = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        **own,
        "containers": _merged_by_name([slurmd], list(own.get("containers") or [])),
        "initContainers": _merged_by_name([logfile], list(own.get("initContainers") or [])),
        "volumes": _merged_by_name(
            [
                {"name": "slurm-etc", "projected": {"sources": []}},
                {"name": "slurm-logfile", "emptyDir": {}},
            ],
            list(own.get("volumes") or []),
        ),
    }
    source = f"NodeSet/{metadata.get('namespace')}/{metadata['name']}"
    return _pod(
        f"{metadata['name']}-0",
        str(metadata.get("namespace")),
        {"metadata": template.get("metadata") or {}, "spec": pod_spec},
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
