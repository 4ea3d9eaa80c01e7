"""Every policy of the pack, grouped by concern; ``ALL_POLICIES`` is what the pack enforces."""

from __future__ import annotations

from pulumi_policy import Policy

from . import (
    acceptance,
    capacity,
    cluster,
    governance,
    iam,
    lifecycle,
    model_store,
    nodes,
    notebooks,
    scheduling,
    slurm,
    slurm_sharing,
    storage,
    tenancy,
    trainer,
)

PACK_NAME = "training-platform"

ALL_POLICIES: list[Policy] = [
    *cluster.POLICIES,
    *nodes.POLICIES,
    *iam.POLICIES,
    *governance.POLICIES,
    *lifecycle.POLICIES,
    *capacity.POLICIES,
    *acceptance.POLICIES,
    *storage.POLICIES,
    *model_store.POLICIES,
    *notebooks.POLICIES,
    *scheduling.POLICIES,
    *trainer.POLICIES,
    *slurm.POLICIES,
    *slurm_sharing.POLICIES,
    *tenancy.POLICIES,
]
