"""The marks by which the platform records a node's health on the node itself.

One vocabulary for everything that reads or writes it: the NodePools (the startup taint), the
acceptance agent (it removes the startup taint, or replaces it with the unhealthy taint and
says why), the tenant-boundary admission (team pods tolerate neither), the Slurm health mirror
(the unhealthy taint is Kubernetes' side of a Slurm drain) and the admission policy that keeps
the agent's node patches to these keys. Standard library only: the node-side acceptance program
imports it (pyproject.toml, the ``acceptance`` import contract).
"""

from __future__ import annotations

from typing import Final, Literal

ACCEPTANCE_TAINT_KEY: Final = "trainingplatform.io/acceptance"
"""Startup taint of every accelerator node until the acceptance agent has checked it."""
UNHEALTHY_TAINT_KEY: Final = "trainingplatform.io/unhealthy"
"""Regular taint of a node that failed acceptance, missed its deadline, or is drained in Slurm;
its value is the :data:`Source` that set it."""
TAINT_EFFECT: Final = "NoSchedule"
"""Both taints keep new pods off; neither evicts what already runs (a drain does that)."""

ACCEPTANCE_TAINT: Final = {"key": ACCEPTANCE_TAINT_KEY, "effect": TAINT_EFFECT}
"""The startup taint as a NodePool writes it (``spec.template.spec.startupTaints``)."""

Source = Literal["acceptance", "slurm", "monitoring", "karpenter"]
"""Who declared a node unhealthy: the acceptance agent, a Slurm admin's drain, the EKS node
monitoring agent's conditions, or Karpenter's repair."""
SOURCES: Final[tuple[Source, ...]] = ("acceptance", "slurm", "monitoring", "karpenter")


def unhealthy_taint(source: Source) -> dict[str, str]:
    """The unhealthy taint, its value naming who set it.

    Args:
        source: who declared the node unhealthy (:data:`SOURCES`).
    """
    return {"key": UNHEALTHY_TAINT_KEY, "value": source, "effect": TAINT_EFFECT}


Result = Literal["passed", "failed", "expired"]
"""Outcome of acceptance: every check passed, a check failed, or the deadline passed first."""
RESULTS: Final[tuple[Result, ...]] = ("passed", "failed", "expired")

RESULT_LABEL: Final = "trainingplatform.io/acceptance-result"
"""Node label: the :data:`Result` (selectable: ``kubectl get nodes -l ...=failed``)."""
REASON_ANNOTATION: Final = "trainingplatform.io/acceptance-reason"
"""Node annotation: the failed findings, one per line ("gpu count: 7, want 8")."""
CHECKED_AT_ANNOTATION: Final = "trainingplatform.io/acceptance-checked-at"
"""Node annotation: when the decision was made, RFC 3339 UTC."""
UNHEALTHY_REASON_ANNOTATION: Final = "trainingplatform.io/unhealthy-reason"
"""Node annotation: why the unhealthy taint is set (a Slurm drain's reason, a condition)."""

BUSBW_ANNOTATION: Final = "trainingplatform.io/acceptance-busbw"
"""Node annotation: the check's measured bus bandwidth at its largest size ("nccl all-reduce
bus bandwidth: 355.2 GB/s at 16 GiB"), what a pool's one-node floor is measured from."""
DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"
"""Karpenter's node annotation that keeps a node out of disruption (consolidation, drift):
``"true"`` makes kubernetes-sigs/karpenter v1.14.1 pkg/controllers/state/statenode.go
``ValidateNodeDisruptable`` refuse it (key in pkg/apis/v1/labels.go). The agent sets it on a
failed node it does not replace (yet), so the pool's WhenEmpty consolidation does not delete it
outside the replacement cap; it does not stop a NodeClaim deletion."""

AGENT_LABELS: Final = (RESULT_LABEL,)
"""Every node label the acceptance agent may set or remove."""
AGENT_ANNOTATIONS: Final = (
    REASON_ANNOTATION,
    CHECKED_AT_ANNOTATION,
    UNHEALTHY_REASON_ANNOTATION,
    BUSBW_ANNOTATION,
    DO_NOT_DISRUPT_ANNOTATION,
)
"""Every node annotation the acceptance agent and the health mirror may set or remove."""
AGENT_TAINT_KEYS: Final = (ACCEPTANCE_TAINT_KEY, UNHEALTHY_TAINT_KEY)
"""Every taint key the acceptance agent and the health mirror may add or remove."""

MIRROR_NAMESPACE: Final = "slurm"
MIRROR_ACCOUNT: Final = "slurm-health-mirror"
"""The Slurm health mirror's service account (components/slurm/health_mirror.py), the other
writer of these marks besides the acceptance agent: the node-marks admission policy names it."""
