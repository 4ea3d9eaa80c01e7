"""One pod spec in every shape a policy judges: a Pod, each workload's pod template, a TrainJob's
runtime patch. Shared by the admission tests of the policies that judge pod specs wherever they
are (tests/test_lustre_boundary.py, tests/test_tenant_pods.py)."""

from __future__ import annotations

from typing import Any


def _metadata(name: str, namespace: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def make_pod(spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """A Pod with ``spec`` (in ``namespace`` where given)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata("probe", namespace),
        "spec": spec,
    }


def workload_shapes(
    spec: dict[str, Any], namespace: str | None = None
) -> dict[str, dict[str, Any]]:
    """``spec`` as a Pod and as the pod template of every kind that makes pods from one.

    Keys: Pod, Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob, JobSet,
    PyTorchJob (a legacy Training Operator job) and VolcanoJob (``batch.volcano.sh`` Job).
    """
    metadata = _metadata("probe", namespace)
    template = {"metadata": {"labels": {"app": "probe"}}, "spec": spec}
    job_spec = {"template": template}
    shapes: dict[str, dict[str, Any]] = {"Pod": make_pod(spec, namespace)}
    for kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
        shapes[kind] = {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": metadata,
            "spec": {"selector": {"matchLabels": {"app": "probe"}}, "template": template},
        }
    shapes["Job"] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": job_spec,
    }
    shapes["CronJob"] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": job_spec}},
    }
    shapes["JobSet"] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": job_spec}}]},
    }
    shapes["PyTorchJob"] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": template}}},
    }
    shapes["VolcanoJob"] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "queue": namespace or "default",
            "tasks": [{"name": "w", "replicas": 2, "template": template}],
        },
    }
    return shapes


def trainjob(patch_spec: dict[str, Any] | None, namespace: str | None = None) -> dict[str, Any]:
    """A TrainJob of the ``torch-gpu-small`` runtime whose one runtime patch gives its pods
    ``patch_spec`` (``None``: no patches)."""
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-gpu-small", "kind": "TrainingRuntime"}}
    if patch_spec is not None:
        replicated_job = {"name": "node", "template": {"spec": {"template": {"spec": patch_spec}}}}
        spec["runtimePatches"] = [
            {
                "manager": "example.com/tool",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated_job]}}},
            }
        ]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": _metadata("job", namespace),
        "spec": spec,
    }
