"""Training runtimes: gang-scheduled by the scheduler that gangs, sized to their pool's nodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import StackValidationArgs, StackValidationPolicy

from .common import MANDATORY, ReportViolation, ResourceValidationArgs, resource_policy
from .pools import pool_facts, size_problems

RUNTIMES = (
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime",
)
VOLCANO = "volcano"


def runtime_pods(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(replicated job name, pod spec) of every replicated job of a runtime."""
    for job in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        template = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
        yield str(job.get("name")), template.get("spec") or {}


def _check_gang(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in RUNTIMES:
        return
    spec = args.props.get("spec") or {}
    group_policy = spec.get("podGroupPolicy") or {}
    if not group_policy:
        report("no podGroupPolicy: workers start one by one and can deadlock the pool", None)
        return
    if "volcano" not in group_policy:
        # Trainer's coscheduling plugin needs the scheduler-plugins scheduler, which this
        # platform does not run: its PodGroups would be created and never honoured.
        report(
            f"podGroupPolicy {sorted(group_policy)} needs a scheduler this platform does not "
            "run; use volcano",
            None,
        )
    else:
        for job, pod in runtime_pods(spec):
            if pod.get("schedulerName") != VOLCANO:
                scheduler = pod.get("schedulerName") or "the default scheduler"
                report(
                    f"replicated job {job} is scheduled by {scheduler}: Trainer creates a "
                    "Volcano PodGroup but does not set schedulerName, so only "
                    "schedulerName: volcano gangs the pods",
                    None,
                )


def _check_sizes(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    pools = pool_facts(resources)
    for runtime in resources:
        if runtime.resource_type not in RUNTIMES:
            continue
        for job, pod in runtime_pods(runtime.props.get("spec") or {}):
            for problem in size_problems(job, pod, list(pod.get("containers") or []), pools):
                report(problem, runtime.urn)


POLICIES = [
    resource_policy(
        "runtime-gang-scheduled",
        "Training runtimes are gang-scheduled by a scheduler that gangs: with Volcano's pod group "
        "policy, every pod says schedulerName: volcano (Trainer does not set it).",
        _check_gang,
    ),
    StackValidationPolicy(
        name="runtime-requests-match-pool",
        description="A runtime pinned to a pool requests every accelerator and EFA interface of "
        "the pool's nodes, and tolerates the pool's taints: a job that asks for less trains "
        "slower at the same price.",
        validate=_check_sizes,
        enforcement_level=MANDATORY,
    ),
]
