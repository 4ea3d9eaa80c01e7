"""Training runtimes and Ray pods: gang-scheduled, pinned, sized to their pool's nodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import StackValidationArgs, StackValidationPolicy

from components.config import FLOATING_TAGS
from components.kuberay import RAY_API, RAY_POD_KINDS, ray_pod_templates

from .common import MANDATORY, ReportViolation, ResourceValidationArgs, resource_policy
from .pools import pool_facts, size_problems

RUNTIMES = (
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime",
)
RAY_OBJECTS = {f"kubernetes:{RAY_API}:{kind}": kind for kind in RAY_POD_KINDS}
"""KubeRay's objects with pod templates, by type token: their pods are held to the rules of
runtimes' pods (pool, tolerations, whole nodes, hardening)."""
VOLCANO = "volcano"


def runtime_pods(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(replicated job name, pod spec) of every replicated job of a runtime."""
    for job in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        template = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
        yield str(job.get("name")), template.get("spec") or {}


def training_pods(
    resource_type: str, props: Mapping[str, Any]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(what to call it, pod spec) of every pod template of a runtime or a Ray object.

    The one walk of the training pods' templates the policies read: a runtime's replicated
    jobs (:func:`runtime_pods`), and a RayCluster's, RayJob's or RayService's head, worker
    groups and submitter (:func:`components.kuberay.ray_pod_templates`). Any other resource has
    none.

    Args:
        resource_type: the resource's type token.
        props: its inputs.
    """
    spec = props.get("spec") or {}
    if resource_type in RUNTIMES:
        for job, pod in runtime_pods(spec):
            yield f"replicated job {job}", pod
    elif resource_type in RAY_OBJECTS:
        for where, template in ray_pod_templates(RAY_OBJECTS[resource_type], spec):
            yield where, template.get("spec") or {}


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


def floating_image(reference: str) -> bool:
    """Whether an image reference moves: no tag and no digest, or a floating tag (``latest``).

    Args:
        reference: the container's ``image``.
    """
    if "@" in reference:
        return False
    name = reference.rsplit("/", 1)[-1]
    return ":" not in name or name.rsplit(":", 1)[-1] in FLOATING_TAGS


def _check_images(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for owner, pod in training_pods(args.resource_type, args.props):
        for key in ("initContainers", "containers"):
            for container in pod.get(key) or []:
                image = str(container.get("image") or "")
                if floating_image(image):
                    report(
                        f"{owner}, container {container.get('name')}: image {image!r} is not "
                        "pinned to a version or digest (a restarted pod would run other code)",
                        None,
                    )


def _check_sizes(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    pools = pool_facts(resources)
    for owner in resources:
        for where, pod in training_pods(owner.resource_type, owner.props):
            # a runtime's pod is named by its replicated job alone, as it always was
            name = where.removeprefix("replicated job ")
            for problem in size_problems(name, pod, list(pod.get("containers") or []), pools):
                report(problem, owner.urn)


POLICIES = [
    resource_policy(
        "runtime-gang-scheduled",
        "Training runtimes are gang-scheduled by a scheduler that gangs: with Volcano's pod group "
        "policy, every pod says schedulerName: volcano (Trainer does not set it).",
        _check_gang,
    ),
    resource_policy(
        "training-images-pinned",
        "Every container of a training runtime, Ray head, worker group and RayJob submitter "
        "runs an image pinned to a version or digest: a floating tag would change what a "
        "job's retry runs.",
        _check_images,
    ),
    StackValidationPolicy(
        name="runtime-requests-match-pool",
        description="A runtime's pod, or a Ray head's, worker group's or submitter's, pinned to "
        "a pool requests every accelerator and EFA interface of the pool's nodes, and tolerates "
        "the pool's taints: a job that asks for less trains slower at the same price.",
        validate=_check_sizes,
        enforcement_level=MANDATORY,
    ),
]
