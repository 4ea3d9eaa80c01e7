"""Which synthesized runtimes, queues and namespaces are a team's, and which the platform's own.

Teams are not the only users of Trainer and Volcano: the fabric test
(components/fabric_test.py) puts a ``TrainingRuntime`` per EFA pool in its own namespace and
its gang in the platform's own queue, and the acceptance gate runs in its own namespace
(components/acceptance_gate.py). Tests of a team rule (the team's account, group, storage,
queue) take their objects from here, so every one of them draws the line in the same place,
and tests of the platform's objects take the rest from here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from components import acceptance_gate, fabric_test
from components.scheduling import PLATFORM_QUEUE
from components.slurm import common as slurm_common

RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
QUEUE: Final = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
PLATFORM_NAMESPACES: Final = frozenset(
    {fabric_test.NAMESPACE, acceptance_gate.NAMESPACE, slurm_common.NAMESPACE}
)
"""Namespaces the platform makes for its own components (the fabric test, the acceptance gate,
Slurm and its health mirror), whether or not the stack has teams; no team may take their
names (components/config/teams.py RESERVED_NAMESPACES)."""


def _namespace(record: Any) -> str | None:
    namespace: str | None = record.inputs.get("metadata", {}).get("namespace")
    return namespace


def is_fabric_runtime(record: Any) -> bool:
    """A fabric test's runtime: in the fabric namespace, labelled with the test's purpose."""
    labels = record.inputs["metadata"].get("labels", {})
    in_namespace = _namespace(record) == fabric_test.NAMESPACE
    labelled = labels.get(fabric_test.PURPOSE_LABEL) == fabric_test.PURPOSE
    # the namespace and the label go together, or one of them is a mistake
    assert in_namespace == labelled, record.name
    return in_namespace


def runtimes(records: Iterable[Any]) -> list[Any]:
    """Every namespaced TrainingRuntime record, the teams' and the platform's."""
    return [r for r in records if r.type == RUNTIME]


def team_runtimes(records: Iterable[Any]) -> list[Any]:
    """The TrainingRuntimes teams run their jobs with (in their own namespaces)."""
    return [r for r in runtimes(records) if not is_fabric_runtime(r)]


def fabric_runtimes(records: Iterable[Any]) -> list[Any]:
    """The fabric test's TrainingRuntimes, one per tested EFA pool."""
    return [r for r in runtimes(records) if is_fabric_runtime(r)]


def is_platform_queue(record: Any) -> bool:
    """The platform's own Volcano queue (the fabric test's)."""
    name: str = record.inputs["metadata"]["name"]
    return name == PLATFORM_QUEUE


def team_queues(records: Iterable[Any]) -> list[Any]:
    """The teams' Volcano queues: every Queue but the platform's."""
    return [r for r in records if r.type == QUEUE and not is_platform_queue(r)]


def in_platform_namespace(record: Any) -> bool:
    """Whether a namespaced object lives in a namespace the platform makes for itself."""
    return _namespace(record) in PLATFORM_NAMESPACES


def is_platform_object(record: Any) -> bool:
    """In a namespace the platform makes for itself, or the acceptance agent's right to write
    Node Events, which the API server admits only in ``default``
    (components/acceptance_gate.py ``EVENTS_NAMESPACE``)."""
    if in_platform_namespace(record):
        return True
    metadata = record.inputs.get("metadata") or {}
    return (
        metadata.get("namespace") == acceptance_gate.EVENTS_NAMESPACE
        and metadata.get("name") == acceptance_gate.SERVICE_ACCOUNT
    )
