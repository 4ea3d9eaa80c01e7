"""Where a job's checkpoints live, and the environment that tells the job.

One location per stack: ``storage.lustre.checkpointPath`` on the shared file system, a directory
per team below it, and the S3 prefix its export-only association copies it to. Every way a team
runs a job gets the same two variables, :data:`CHECKPOINT_VARIABLE` (the job's own directory)
and :data:`CHECKPOINT_S3_VARIABLE` (where the export puts it): Trainer runtimes through their
pods' environment (:func:`checkpoint_environment`), Slurm through its TaskProlog
(:func:`components.slurm.conf.task_prolog`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from components.config import PlatformConfig, association_bucket_name
from components.config.storage import SHARED_MOUNT
from components.storage.lustre import data_repository_path

CHECKPOINT_VARIABLE: Final = "CHECKPOINT_DIR"
CHECKPOINT_S3_VARIABLE: Final = "CHECKPOINT_S3_URI"
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
"""The label JobSet puts on every pod of a JobSet (kubernetes-sigs/jobset v0.12.0
api/jobset/v1alpha2/jobset_types.go, JobSetNameKey); Trainer names the JobSet after the TrainJob
(pkg/runtime/framework/plugins/jobset/jobset.go, Build: client.ObjectKeyFromObject(trainJob))."""
JOB_NAME_VARIABLE: Final = "TRAINJOB_NAME"


@dataclasses.dataclass(frozen=True)
class CheckpointLocation:
    """Where a stack's jobs checkpoint: the file system path and the S3 prefix behind it.

    Attributes:
        path: ``storage.lustre.checkpointPath``, normalised (``/checkpoints``).
        s3_uri: ``s3://bucket/prefix/`` of its association; None on a file system without one.
    """

    path: str
    s3_uri: str | None


def checkpoint_location(config: PlatformConfig) -> CheckpointLocation | None:
    """Where the stack's jobs checkpoint, Trainer runtimes and Slurm alike.

    Args:
        config: the validated platform (None comes back without a file system).
    """
    lustre = config.storage.lustre
    if lustre is None:
        return None
    return CheckpointLocation(lustre.checkpoint_root, checkpoint_s3_uri(config))


def checkpoint_directory(checkpoint_path: str, team: str) -> str:
    """The team's checkpoint directory as pods see it: ``/fsx/checkpoints/<team>``."""
    return f"{SHARED_MOUNT}{checkpoint_path.rstrip('/')}/{team}"


def checkpoint_environment(
    checkpoint_path: str, team: str, s3_uri: str | None = None, *, job: str | None = None
) -> list[dict[str, Any]]:
    """The job's name (from its pods' JobSet label), its checkpoint directory and S3 copy.

    ``CHECKPOINT_DIR`` is ``/fsx/<checkpoint path>/<team>/<TrainJob name>``: every restart of a
    job finds its own checkpoints there, and two jobs never share one. ``CHECKPOINT_S3_URI`` is
    where the export puts it, which ``fsx-checkpoint commit`` compares against. Kubernetes
    expands ``$(TRAINJOB_NAME)`` from the variable before it; a TrainJob's ``trainer.env``
    replaces any of them by name (kubeflow/trainer v2.3.0
    pkg/runtime/framework/plugins/jobset/jobset.go, apply.UpsertEnvVars).

    Args:
        checkpoint_path: ``storage.lustre.checkpointPath``, normalised.
        team: the team whose runtime it is.
        s3_uri: ``s3://bucket/prefix/`` of the checkpoint path's association; None without one.
            Default None.
        job: the job's name where the builder knows it (a RayJob's or standing RayCluster's:
            :func:`components.kuberay.ray_environment`); then no ``TRAINJOB_NAME`` is set.
            Default None: the TrainJob's, read from the pod's JobSet label.
    """
    environment: list[dict[str, Any]] = []
    if job is None:
        job = f"$({JOB_NAME_VARIABLE})"
        environment.append(
            {
                "name": JOB_NAME_VARIABLE,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_NAME_LABEL}']"}},
            }
        )
    environment.append(
        {
            "name": CHECKPOINT_VARIABLE,
            "value": f"{checkpoint_directory(checkpoint_path, team)}/{job}",
        }
    )
    if s3_uri is not None:
        environment.append({"name": CHECKPOINT_S3_VARIABLE, "value": f"{s3_uri}{team}/{job}"})
    return environment


def checkpoint_s3_uri(config: PlatformConfig) -> str | None:
    """``s3://bucket/prefix/`` that holds the checkpoint path, or None (no association)."""
    lustre = config.storage.lustre
    association = lustre.checkpoint_association() if lustre else None
    s3_name = association_bucket_name(config, association) if association else None
    return data_repository_path(s3_name, association) if association and s3_name else None
