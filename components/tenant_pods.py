"""What a team member's pods may not do, as a ValidatingAdmissionPolicy of pure builders.

A member holds ``edit`` in the team namespace: it creates pods and every workload that makes
them. Without this policy such a pod could hold nodes it does not use, outside any queue:

* ``spec.nodeName`` binds a pod to a node without the scheduler, past every NoSchedule taint;
* a toleration of the Slurm reservation taint puts it on the nodes a pool keeps for Slurm;
* a toleration of an accelerator taint without a request for that accelerator lets a CPU pod
  fill an accelerator node that a gang then waits for;
* a toleration with no key and ``operator: Exists`` tolerates every taint at once, and one of
  the system nodes' ``CriticalAddonsOnly`` puts it beside the platform's controllers: tolerations
  are an allow-list;
* a pod that requests accelerators or EFA interfaces but is not scheduled by Volcano takes
  them past its queue's deserved share and reclaim, and one that requests Trainium under another
  name of the Neuron device plugin (``neurondevice``, ``neuroncore``) past its quota too;
* a priority class other than the training classes may preempt a gang's worker.

Pods are judged whoever creates them (a Job's, Deployment's or JobSet's controller creates
them in the team namespace too); the workloads that carry a pod template are judged as well, so
their author sees the refusal at once rather than in a controller's events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from components.tenancy import (
    PATCH_SPECS,
    POD_SPECS,
    RAY_TEMPLATE_RESOURCES,
    every_pod_spec,
    pod_spec_variables,
    team_spec_policy,
    writes,
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


def _amount(container: str, resource: str, *, unknown: int) -> str:
    """CEL: how many of ``resource`` container ``container`` requests.

    Its limit where it states no request (the API server defaults an extended resource's request
    to its limit), 0 where it states neither, ``unknown`` where the quantity is not written as a
    plain whole number.
    """

    def amount(value: str) -> str:
        return f"(string({value}).matches('^[0-9]+$') ? int(string({value})) : {unknown})"

    requests = f"{container}.resources.requests"
    limits = f"{container}.resources.limits"
    return (
        f"(!has({container}.resources) ? 0 : "
        f"has({requests}) && '{resource}' in {requests} ? {amount(f'{requests}[{resource!r}]')} : "
        f"has({limits}) && '{resource}' in {limits} ? {amount(f'{limits}[{resource!r}]')} : 0)"
    )


def _toleration_keys(
    spec: str,
    *,
    allowed_keys: Sequence[str],
    resource_taints: Mapping[str, Sequence[str]],
    judge_requests: bool,
) -> str:
    """CEL: ``{'allowed': [...], 'tolerated': [...]}`` of pod spec ``spec``.

    ``allowed``: the taint keys the spec may tolerate; ``tolerated``: the keys it tolerates
    (``''`` for a toleration without one). Both are built once per spec, so judging them costs
    the sum of their sizes rather than tolerations times containers.

    Args:
        spec: CEL of the pod spec.
        allowed_keys: keys any team pod may tolerate.
        resource_taints: taint key -> the resources one of which a container must request for
            the pod to tolerate it.
        judge_requests: whether the spec states its resources (not a TrainJob's patch, where
            every key of ``resource_taints`` is allowed).
    """
    allowed = "[" + ", ".join(f"'{k}'" for k in allowed_keys) + "]"
    for taint, resources in sorted(resource_taints.items()):
        if judge_requests:
            allowed += f" + ({_requests_any(spec, resources)} ? ['{taint}'] : [])"
        else:
            allowed += f" + ['{taint}']"
    tolerated = f"{_tolerations(spec)}.map(t, has(t.key) ? t.key : '')"
    return f"{{'allowed': {allowed}, 'tolerated': {tolerated}}}"


_DENIED: Final = ".map(x, x.tolerated.filter(k, !(k in x.allowed))).filter(l, size(l) > 0)"
"""CEL suffix: of a list of :func:`_toleration_keys`, the lists of keys not allowed (none empty)."""


def _partial_node(amounts: str, node_devices: int) -> str:
    """CEL: the amounts (a list of ints) add up to fewer than ``node_devices``.

    CEL has no sum: the list is added term by term, as many terms as it may have (every
    amount is at least 1, so fewer than ``node_devices`` of them).
    """
    if node_devices <= 0:
        return "false"
    terms = " + ".join(f"(size({amounts}) > {i} ? {amounts}[{i}] : 0)" for i in range(node_devices))
    return f"(size({amounts}) < {node_devices} && {terms} < {node_devices})"


def tenant_pods_policy(
    *,
    team_label: str,
    allowed_toleration_keys: Sequence[str],
    resource_taints: Mapping[str, Sequence[str]],
    scheduler_name: str,
    scheduled_resources: Sequence[str],
    scheduled_prefix: str,
    neuron_scheduler_name: str,
    neuron_resource: str,
    neuron_node_devices: int,
    other_neuron_resources: Sequence[str],
    whole_node_resources: Sequence[str],
    training_priority_classes: Sequence[str],
    unqueued_service_accounts: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: a team's pods hold no node they do not use, outside queues.

    Judged, in namespaces with ``team_label``: pods (CREATE; UPDATE and the ephemeral containers
    subresource, where tolerations can be added), and the pod templates of batch Jobs and
    CronJobs, JobSets (``replicatedJobs[].template.spec.template.spec``), Deployments,
    StatefulSets and ReplicaSets (``spec.template.spec``), RayClusters, RayJobs and RayServices
    (head, worker groups, submitter: :func:`components.tenancy.pod_spec_variables`), and the
    tolerations a TrainJob's
    ``runtimePatches`` give its pods (kubeflow/trainer v2.3.0 API: ``runtimePatches[]
    .trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec``, whose
    pod spec has no nodeName nor resources: the JobSet Trainer makes from it is judged as a
    JobSet, its pods as pods). An update is judged only when the spec changes, so a
    controller's write of labels or finalizers never is.

    Refused: a pod created with ``spec.nodeName`` (a template with one: every pod it makes);
    a toleration whose key is not on the allow-list (``allowed_toleration_keys``, or a key of
    ``resource_taints`` where a container requests one of its resources; a TrainJob's patch
    states no resources, so there any key of ``resource_taints`` passes): no key at all, the
    Slurm reservation taint, the system nodes' ``CriticalAddonsOnly``, Karpenter's
    disruption taints and every taint added later are refused; a request of
    ``other_neuron_resources`` (Trainium is requested as ``neuron_resource`` only, the one name
    the quota and the queue count); a ``priorityClassName`` other than
    ``training_priority_classes``; and a pod created with a request of an accelerator or EFA
    that Volcano (``scheduler_name``) does not schedule, unless its service account is on its
    team's list, or it is a partial-node Trainium pod of the Neuron scheduler extension (fewer
    than ``neuron_node_devices`` devices in all, counting init containers too, and none of
    ``whole_node_resources``), which only the ResourceQuota bounds.

    Args:
        team_label: the namespace label of team namespaces.
        allowed_toleration_keys: taint keys any team pod may tolerate (the node conditions
            Kubernetes itself tolerates for a while, the pools' extra taints).
        resource_taints: taint key -> resources a pod that tolerates it must request (one of
            them): the accelerator taints, and the taints the ExtendedResourceToleration
            admission plugin tolerates for a requested extended resource.
        scheduler_name: Volcano's scheduler name.
        scheduled_resources: resources whose pods Volcano must schedule (GPUs, EFA).
        scheduled_prefix: prefix of more such resources (``aws.amazon.com/neuron``: devices,
            cores).
        neuron_scheduler_name: the Neuron scheduler extension's scheduler.
        neuron_resource: the Neuron devices a pod of that scheduler must request.
        neuron_node_devices: Neuron devices of the largest Trainium node of the stack's pools; a
            pod of the Neuron scheduler must request fewer (0: no pod may use that scheduler).
        other_neuron_resources: the Neuron device plugin's other names of the same devices,
            which no pod may request.
        whole_node_resources: resources a pod of the Neuron scheduler may not request (GPUs,
            EFA: a multi-node job's).
        training_priority_classes: the priority classes a team pod may name.
        unqueued_service_accounts: team (namespace) -> service accounts whose pods may use
            another scheduler.
    """

    def keys(spec: str, *, judge_requests: bool) -> str:
        return _toleration_keys(
            spec,
            allowed_keys=allowed_toleration_keys,
            resource_taints=resource_taints,
            judge_requests=judge_requests,
        )

    denied_tolerations = (
        f"variables.{POD_SPECS}.map(ps, {keys('ps', judge_requests=True)}){_DENIED}"
    )
    denied_patch_tolerations = (
        f"variables.{PATCH_SPECS}.map(pl, pl.map(ps, {keys('ps', judge_requests=False)})"
        f"{_DENIED}).filter(l, size(l) > 0)"
    )
    # A TrainJob's patches carry no resources; its trainer.resourcesPerNode goes to the node
    # container of every node (kubeflow/trainer v2.3.0 API, Trainer.ResourcesPerNode).
    per_node = "object.spec.trainer.resourcesPerNode"
    other_names = ", ".join(f"'{r}'" for r in other_neuron_resources)
    trainer_other_neuron = " || ".join(
        f"(has({per_node}.{kind}) && {per_node}.{kind}.exists(r, r in [{other_names}] && "
        f"{_quantity_nonzero(f'{per_node}.{kind}[r]')}))"
        for kind in ("requests", "limits")
    )
    no_other_neuron = (
        every_pod_spec(
            lambda spec: f"!{_requests_any(spec, other_neuron_resources)}",
            patch=lambda spec: "true",
        )
        + f" && (object.kind != 'TrainJob' || !has(object.spec.trainer) || "
        f"!has({per_node}) || !({trainer_other_neuron}))"
    )
    classes = ", ".join(f"'{name}'" for name in training_priority_classes)
    priority_rule = every_pod_spec(
        lambda spec: (
            f"(!has({spec}.priorityClassName) || {spec}.priorityClassName in ['', {classes}])"
        )
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
    neuron_amounts = " + ".join(
        f"(has(object.spec.{field}) ? object.spec.{field}.map(c, "
        f"{_amount('c', neuron_resource, unknown=neuron_node_devices)}) : [])"
        for field in ("containers", "initContainers")
    )
    neuron_scheduled = (
        f"{scheduler} == '{neuron_scheduler_name}' && "
        f"{_requests_any('object.spec', [neuron_resource])} && "
        f"!{_requests_any('object.spec', whole_node_resources)} && "
        f"{_partial_node('variables.neuronDevices', neuron_node_devices)}"
    )
    scheduler_rule = (
        f"object.kind != 'Pod' || request.operation != 'CREATE' || !{scheduled} || "
        f"{scheduler} == '{scheduler_name}' || ({neuron_scheduled}) || "
        f"{service_account} in variables.unqueued"
    )
    allowed_list = ", ".join(
        [*allowed_toleration_keys, *(f"{key} (with a request of it)" for key in resource_taints)]
    )
    # Legacy and Volcano jobs' templates are not judged here (their operators fill in pod
    # fields such as the scheduler); their pods are, when created.
    rules = [
        writes("", "pods", "pods/ephemeralcontainers", versions=("v1",)),
        writes("batch", "jobs", "cronjobs"),
        writes("apps", "deployments", "statefulsets", "replicasets"),
        writes("jobset.x-k8s.io", "jobsets"),
        writes("trainer.kubeflow.org", "trainjobs"),
        writes("ray.io", *RAY_TEMPLATE_RESOURCES),
    ]
    return {
        **team_spec_policy(team_label, rules),
        "variables": [
            *pod_spec_variables(),
            {
                "name": "unqueued",
                "expression": f"namespaceObject.metadata.name in {{{exempt}}} ? "
                f"{{{exempt}}}[namespaceObject.metadata.name] : []"
                if exempt
                else "[]",
            },
            {"name": "deniedTolerations", "expression": denied_tolerations},
            {"name": "deniedPatchTolerations", "expression": denied_patch_tolerations},
            {
                "name": "deniedToleration",
                "expression": "size(variables.deniedTolerations) > 0 ? "
                "variables.deniedTolerations[0][0] : size(variables.deniedPatchTolerations) > 0 "
                "? variables.deniedPatchTolerations[0][0][0] : ''",
            },
            {
                "name": "neuronDevices",
                "expression": f"object.kind == 'Pod' ? ({neuron_amounts}).filter(n, n > 0) : []",
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
                "expression": "size(variables.deniedTolerations) == 0 && "
                "size(variables.deniedPatchTolerations) == 0",
                "messageExpression": "'toleration not allowed in a team namespace: ' + "
                "(variables.deniedToleration == '' ? 'one with no key (it tolerates every "
                "taint)' : variables.deniedToleration) + '; a team pod may tolerate only "
                f"{allowed_list}'",
                "reason": "Forbidden",
            },
            {
                "expression": no_other_neuron,
                "message": f"request Trainium as {neuron_resource} (devices): "
                + ", ".join(other_neuron_resources)
                + " name the same devices, which neither the team's quota nor its queue counts "
                "under those names",
                "reason": "Forbidden",
            },
            {
                "expression": priority_rule,
                "message": "priorityClassName in a team namespace is empty or one of the "
                f"platform's training classes ({', '.join(training_priority_classes)}): "
                "another class may outrank them and preempt a gang's worker",
                "reason": "Forbidden",
            },
            {
                "expression": scheduler_rule,
                "messageExpression": "'a pod that requests accelerators or EFA must be scheduled "
                f"by {scheduler_name} (spec.schedulerName: {scheduler_name}), so its team queue "
                f"applies; not ' + ({scheduler} == '' ? 'the default scheduler' : "
                f"{scheduler}) + ' (service account ' + {service_account} + '); only a "
                f"partial-node Trainium pod (fewer than {neuron_node_devices} {neuron_resource} "
                f"in all, no EFA, no GPU) may use {neuron_scheduler_name}'",
                "reason": "Forbidden",
            },
        ],
    }
