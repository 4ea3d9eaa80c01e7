"""Training runtimes: gang-scheduled by the scheduler that gangs, sized to their pool's nodes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs, StackValidationPolicy

from components.catalog import CATALOG, EFA_RESOURCE

from .common import MANDATORY, ReportViolation, ResourceValidationArgs, as_list, resource_policy

RUNTIMES = (
    "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime",
)
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
POOL_LABEL = "trainingplatform.io/pool"
VOLCANO = "volcano"


def _pods(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
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
    if "volcano" in group_policy:
        for job, pod in _pods(spec):
            if pod.get("schedulerName") != VOLCANO:
                scheduler = pod.get("schedulerName") or "the default scheduler"
                report(
                    f"replicated job {job} is scheduled by {scheduler}: Trainer creates a "
                    "Volcano PodGroup but does not set schedulerName, so only "
                    "schedulerName: volcano gangs the pods",
                    None,
                )


def _pool_facts(resources: list[PolicyResource]) -> dict[str, tuple[list[str], int, list[Any]]]:
    """NodePool name -> (instance types, EFA interfaces attached, taints)."""
    efa_by_class: dict[str, int] = {}
    for node_class in resources:
        if node_class.resource_type == NODE_CLASS:
            interfaces = (node_class.props.get("spec") or {}).get("networkInterfaces") or []
            name = str((node_class.props.get("metadata") or {}).get("name"))
            efa_by_class[name] = sum(1 for i in interfaces if i.get("interfaceType") == "efa-only")
    facts = {}
    for pool in resources:
        if pool.resource_type != NODE_POOL:
            continue
        template = ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        types = [
            str(value)
            for requirement in template.get("requirements") or []
            if requirement.get("key") == "node.kubernetes.io/instance-type"
            for value in as_list(requirement.get("values"))
        ]
        class_name = str((template.get("nodeClassRef") or {}).get("name"))
        name = str((pool.props.get("metadata") or {}).get("name"))
        facts[name] = (types, efa_by_class.get(class_name, 0), list(template.get("taints") or []))
    return facts


def _tolerated(tolerations: list[Any], taint: Mapping[str, Any]) -> bool:
    return any(
        t.get("key") == taint.get("key")
        and t.get("effect") in (None, taint.get("effect"))
        and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
        for t in tolerations
    )


def _check_sizes(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    pools = _pool_facts(resources)
    for runtime in resources:
        if runtime.resource_type not in RUNTIMES:
            continue
        for job, pod in _pods(runtime.props.get("spec") or {}):
            pool_name = (pod.get("nodeSelector") or {}).get(POOL_LABEL)
            if pool_name is None or str(pool_name) not in pools:
                continue
            types, efa_attached, taints = pools[str(pool_name)]
            for taint in taints:
                if not _tolerated(list(pod.get("tolerations") or []), taint):
                    message = f"{job} does not tolerate the pool's taint {taint.get('key')}"
                    report(message, runtime.urn)
            for container in pod.get("containers") or []:
                requests = (container.get("resources") or {}).get("requests") or {}
                for entry in (CATALOG[t] for t in types if t in CATALOG):
                    wanted = int(str(requests.get(entry.accelerator_resource, 0)))
                    if wanted != entry.accelerators:
                        report(
                            f"{job} requests {wanted} {entry.accelerator_resource} on "
                            f"{entry.name}, which has {entry.accelerators}",
                            runtime.urn,
                        )
                    efa = int(str(requests.get(EFA_RESOURCE, 0)))
                    if efa != efa_attached:
                        report(
                            f"{job} requests {efa} EFA interfaces; the pool's nodes have "
                            f"{efa_attached}",
                            runtime.urn,
                        )


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
