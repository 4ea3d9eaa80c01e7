"""What a team member's pods may not do, as a ValidatingAdmissionPolicy of pure builders.

A member holds ``edit`` in the team namespace: it creates pods and every workload that makes
them. Without this policy such a pod could hold nodes it does not use, outside any queue:

* ``spec.nodeName`` binds a pod to a node without the scheduler, past every NoSchedule taint;
* a toleration of the Slurm reservation taint puts it on the nodes a pool keeps for Slurm;
* a toleration of an accelerator taint without a request for that accelerator lets a CPU pod
  fill an accelerator node that a gang then waits for;
* a toleration with no key and ``operator: Exists`` tolerates every taint at once;
* a pod that requests accelerators or EFA interfaces but is not scheduled by Volcano takes
  them past its queue's deserved share and reclaim.

Pods are judged whoever creates them (a Job's, Deployment's or JobSet's controller creates
them in the team namespace too); the workloads that carry a pod template are judged as well, so
their author sees the refusal at once rather than in a controller's events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from components.tenancy import (
    CREATED_OR_SPEC_CHANGED,
    every_pod_spec,
    pod_spec_variables,
    team_namespaces,
)

TENANT_PODS_POLICY: Final = "trainingplatform-tenant-pods"

_NO_TOLERATIONS: Final = "[]"


def _tolerations(spec: str) -> str:
    return f"(has({spec}.tolerations) ? {spec}.tolerations : {_NO_TOLERATIONS})"


def _quantity_nonzero(value: str) -> str:
    # Extended resources are whole numbers; a zero written any way a quantity allows ('0',
    # '00', '0.0', '0k', '0e3') requests nothing and must not count as a request.
    return f"!string({value}).matches('^[+]?0*[.]?0*([eE][+-]?[0-9]+|[a-zA-Z]+)?$')"


def _requests_any(spec: str, resources: Sequence[str], *, prefix: str | None = None) -> str:
    """CEL: some container of pod spec ``spec`` requests (or limits) one of ``resources``.

    A limit alone sets the request of an extended resource, so both are read. ``prefix``
    also matches every resource whose name starts with it.
    """
    names = ", ".join(f"'{r}'" for r in resources)
    matches = f"r in [{names}]" + (f" || r.startsWith('{prefix}')" if prefix else "")

    def stated(container: str, kind: str) -> str:
        amounts = f"{container}.resources.{kind}"
        return (
            f"(has({container}.resources) && has({amounts}) && "
            f"{amounts}.exists(r, ({matches}) && {_quantity_nonzero(f'{amounts}[r]')}))"
        )

    parts = []
    for field in ("containers", "initContainers"):
        parts.append(
            f"(has({spec}.{field}) && {spec}.{field}.exists(c, "
            f"{stated('c', 'requests')} || {stated('c', 'limits')}))"
        )
    return "(" + " || ".join(parts) + ")"


def _toleration_rules(
    spec: str, *, slurm_taint_key: str, accelerator_taints: Mapping[str, Sequence[str]] | None
) -> str:
    """CEL: pod spec ``spec``'s tolerations are a team's to have.

    Args:
        spec: CEL expression of the pod spec.
        slurm_taint_key: the key of the Slurm reservation taint.
        accelerator_taints: accelerator taint key -> the resources that justify tolerating it;
            None where the spec's resources are not known (a TrainJob's patches).
    """
    tolerations = _tolerations(spec)
    rules = [
        f"{tolerations}.all(t, has(t.key) && t.key != '')",
        f"{tolerations}.all(t, t.key != '{slurm_taint_key}')",
    ]
    for key, resources in sorted((accelerator_taints or {}).items()):
        rules.append(
            f"(!{tolerations}.exists(t, has(t.key) && t.key == '{key}') || "
            f"{_requests_any(spec, resources)})"
        )
    return " && ".join(rules)


def tenant_pods_policy(
    *,
    team_label: str,
    slurm_taint_key: str,
    accelerator_taints: Mapping[str, Sequence[str]],
    scheduler_name: str,
    scheduled_resources: Sequence[str],
    scheduled_prefix: str,
    neuron_scheduler_name: str,
    neuron_prefix: str,
    gpu_resources: Sequence[str],
    unqueued_service_accounts: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: a team's pods hold no node they do not use, outside queues.

    Judged, in namespaces with ``team_label``: pods (CREATE; UPDATE and the ephemeral containers
    subresource, where tolerations can be added), and the pod templates of batch Jobs and
    CronJobs, JobSets (``replicatedJobs[].template.spec.template.spec``), Deployments,
    StatefulSets and ReplicaSets (``spec.template.spec``), and the tolerations a TrainJob's
    ``runtimePatches`` give its pods (kubeflow/trainer v2.3.0 API: ``runtimePatches[]
    .trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec``, whose
    pod spec has no nodeName nor resources: the JobSet Trainer makes from it is judged as a
    JobSet, its pods as pods). An update is judged only when the spec changes, so a
    controller's write of labels or finalizers never is.

    Refused: a pod created with ``spec.nodeName`` (a template with one: every pod it makes);
    a toleration without a key (it tolerates every taint); a toleration of
    ``slurm_taint_key``; a toleration of an accelerator taint by a pod or template that
    requests none of that accelerator's resources; and a pod created with a request of an
    accelerator or EFA that Volcano (``scheduler_name``) does not schedule, unless its service
    account is on its team's list, or it is a Neuron pod (no GPU) of the Neuron scheduler
    extension, which only the ResourceQuota bounds.

    Args:
        team_label: the namespace label of team namespaces.
        slurm_taint_key: the key of the taint of nodes a pool keeps for Slurm.
        accelerator_taints: accelerator taint key -> resources a pod that tolerates it must
            request (one of them).
        scheduler_name: Volcano's scheduler name.
        scheduled_resources: resources whose pods Volcano must schedule (GPUs, EFA).
        scheduled_prefix: prefix of more such resources (``aws.amazon.com/neuron``: devices,
            cores).
        neuron_scheduler_name: the Neuron scheduler extension's scheduler.
        neuron_prefix: prefix of the Neuron resources a pod of that scheduler must request.
        gpu_resources: resources a pod of the Neuron scheduler may not request.
        unqueued_service_accounts: team (namespace) -> service accounts whose pods may use
            another scheduler.
    """
    tolerations_rule = every_pod_spec(
        lambda spec: _toleration_rules(
            spec, slurm_taint_key=slurm_taint_key, accelerator_taints=accelerator_taints
        ),
        # A TrainJob's patches carry no resources: only the rules that need none apply.
        patch=lambda spec: _toleration_rules(
            spec, slurm_taint_key=slurm_taint_key, accelerator_taints=None
        ),
    )
    # A bound pod has a nodeName on every later update: only its creation may not set one.
    node_name_rule = every_pod_spec(
        lambda spec: f"(!has({spec}.nodeName) || {spec}.nodeName == '')",
        pod=lambda spec: (
            f"(request.operation != 'CREATE' || !has({spec}.nodeName) || {spec}.nodeName == '')"
        ),
    )
    exempt = ", ".join(
        f"'{team}': [" + ", ".join(f"'{account}'" for account in accounts) + "]"
        for team, accounts in sorted(unqueued_service_accounts.items())
        if accounts
    )
    scheduler = "(has(object.spec.schedulerName) ? object.spec.schedulerName : '')"
    service_account = (
        "(has(object.spec.serviceAccountName) ? object.spec.serviceAccountName : 'default')"
    )
    scheduled = _requests_any("object.spec", scheduled_resources, prefix=scheduled_prefix)
    neuron_scheduled = (
        f"{scheduler} == '{neuron_scheduler_name}' && "
        f"{_requests_any('object.spec', [], prefix=neuron_prefix)} && "
        f"!{_requests_any('object.spec', gpu_resources)}"
    )
    scheduler_rule = (
        f"object.kind != 'Pod' || request.operation != 'CREATE' || !{scheduled} || "
        f"{scheduler} == '{scheduler_name}' || ({neuron_scheduled}) || "
        f"{service_account} in variables.unqueued"
    )
    template_rule = {"operations": ["CREATE", "UPDATE"], "apiVersions": ["*"]}
    return {
        "failurePolicy": "Fail",
        "matchConditions": [dict(CREATED_OR_SPEC_CHANGED)],
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiVersions": ["v1"],
                    "apiGroups": [""],
                    "resources": ["pods", "pods/ephemeralcontainers"],
                },
                {**template_rule, "apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
                {
                    **template_rule,
                    "apiGroups": ["apps"],
                    "resources": ["deployments", "statefulsets", "replicasets"],
                },
                {**template_rule, "apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]},
                {
                    **template_rule,
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                },
            ],
        },
        "variables": [
            *pod_spec_variables(),
            {
                "name": "unqueued",
                "expression": f"namespaceObject.metadata.name in {{{exempt}}} ? "
                f"{{{exempt}}}[namespaceObject.metadata.name] : []"
                if exempt
                else "[]",
            },
        ],
        "validations": [
            {
                "expression": node_name_rule,
                "message": "spec.nodeName is not allowed in a team namespace: it skips the "
                "scheduler and every taint; select nodes with nodeSelector or affinity",
                "reason": "Forbidden",
            },
            {
                "expression": tolerations_rule,
                "message": "tolerations not allowed in a team namespace: every toleration names "
                f"a key (one without tolerates every taint), none tolerates the Slurm "
                f"reservation taint {slurm_taint_key}, and an accelerator taint ("
                + ", ".join(sorted(accelerator_taints))
                + ") only where a container requests that accelerator",
                "reason": "Forbidden",
            },
            {
                "expression": scheduler_rule,
                "messageExpression": "'a pod that requests accelerators or EFA must be scheduled "
                f"by {scheduler_name} (spec.schedulerName: {scheduler_name}), so its team queue "
                f"applies; not ' + ({scheduler} == '' ? 'the default scheduler' : "
                f"{scheduler}) + ' (service account ' + {service_account} + ')'",
                "reason": "Forbidden",
            },
        ],
    }
