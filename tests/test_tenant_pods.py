"""What a team member's pods may not do: system priorities, nodes held without use, schedulers.

Each rule is proven on the synthesized stack: the quota through a model of the API server's
quota admission, the admission policy through its own CEL (``admit`` of
tests/test_admission_policies.py), each against the attack and the legitimate request.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any, Final

import pytest

from components.cluster import SYSTEM_TOLERATION
from components.config import TeamConfig
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.node_pools import FSX_STARTUP_TAINT
from components.scheduling import PRIORITY_CLASSES, STANDARD_PRIORITY_CLASS
from components.teams import team_pods_policy
from components.tenant_pods import TENANT_PODS_POLICY
from synth.jobs.admission import admit
from synth.pods import RUNTIME_KINDS, runtime_pods
from synth.run import StackResult
from tests.conftest import STACKS
from tests.kubernetes_semantics import quantity
from tests.pod_shapes import make_pod, trainjob, workload_shapes
from tests.test_admission_policies import BINDING, _policy

QUOTA: Final = "kubernetes:core/v1:ResourceQuota"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"
TEAM_LABEL: Final = "trainingplatform.io/team"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
GPU: Final = "nvidia.com/gpu"
NEURON: Final = "aws.amazon.com/neuron"
EFA: Final = "vpc.amazonaws.com/efa"
NEURON_SCHEDULER: Final = "my-scheduler"


def _team_namespaces(result: StackResult) -> list[str]:
    return [
        r.inputs["metadata"]["name"]
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    ]


def _quotas(result: StackResult, namespace: str) -> list[dict[str, Any]]:
    return [
        r.inputs["spec"]
        for r in result.records
        if r.type == QUOTA and r.inputs["metadata"]["namespace"] == namespace
    ]


# --------------------------------------------------------------------------- quota admission


def _scope_matches(expression: dict[str, Any], pod: dict[str, Any]) -> bool:
    """One scopeSelector expression against a pod, as the pod quota evaluator reads it.

    Only the PriorityClass scope is modelled (the others are not used here); it compares the
    pod's ``spec.priorityClassName``, and Exists/DoesNotExist ask whether one is set.
    """
    assert expression["scopeName"] == "PriorityClass", expression
    name = pod["spec"].get("priorityClassName", "")
    operator = expression["operator"]
    if operator == "In":
        return bool(name) and name in expression["values"]
    if operator == "NotIn":
        return not name or name not in expression["values"]
    if operator == "Exists":
        return bool(name)
    assert operator == "DoesNotExist", expression
    return not name


def _pod_usage(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What a pod adds to a namespace's quota usage: one pod and its containers' requests.

    Init containers count as their largest request where that exceeds the sum of the others
    (the effective request); requests the pod states without a limit range's defaults.
    """
    usage: dict[str, Decimal] = {"pods": Decimal(1)}
    spec = pod["spec"]
    for container in spec.get("containers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            usage[f"requests.{name}"] = usage.get(f"requests.{name}", Decimal(0)) + quantity(value)
    for container in spec.get("initContainers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            key = f"requests.{name}"
            usage[key] = max(usage.get(key, Decimal(0)), quantity(value))
    return usage


def quota_admits(quotas: list[dict[str, Any]], pod: dict[str, Any]) -> tuple[bool, str | None]:
    """(admitted, why not) of creating ``pod`` in an empty namespace with ``quotas``.

    Quota admission charges a pod to every quota whose scopes all match it, and refuses it when
    its usage of any resource a matching quota lists would exceed that quota's ``hard``.
    """
    usage = _pod_usage(pod)
    for quota in quotas:
        expressions = quota.get("scopeSelector", {}).get("matchExpressions", [])
        if not all(_scope_matches(e, pod) for e in expressions):
            continue
        for resource, hard in quota["hard"].items():
            if usage.get(resource, Decimal(0)) > quantity(hard):
                return False, f"exceeded quota: {resource} {usage[resource]} > {hard}"
    return True, None


def _priority_pod(priority_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("priority_class", ["system-node-critical", "system-cluster-critical"])
def test_system_priority_pods_are_refused_in_every_team_namespace(
    stack: str, priority_class: str, synthesized: dict[str, StackResult]
) -> None:
    namespaces = _team_namespaces(synthesized[stack])
    assert namespaces
    for namespace in namespaces:
        ok, why = quota_admits(
            _quotas(synthesized[stack], namespace), _priority_pod(priority_class)
        )
        assert not ok, (namespace, priority_class)
        assert why is not None and "pods" in why


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("priority_class", [*PRIORITY_CLASSES, None])
def test_training_priority_pods_are_not_counted_by_the_system_priority_quota(
    stack: str, priority_class: str | None, synthesized: dict[str, StackResult]
) -> None:
    for namespace in _team_namespaces(synthesized[stack]):
        quotas = _quotas(synthesized[stack], namespace)
        assert any("pods" in q["hard"] for q in quotas)
        assert quota_admits(quotas, _priority_pod(priority_class)) == (True, None)


def test_the_quota_model_can_refuse_what_matches_no_scope() -> None:
    # the model is not an always-yes: a scope-less pods:0 quota refuses the training classes too
    assert not quota_admits([{"hard": {"pods": "0"}}], _priority_pod(STANDARD_PRIORITY_CLASS))[0]


# --------------------------------------------------------------------------- the pods policy

GPU_TOLERATION: Final = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
NEURON_TOLERATION: Final = {"key": NEURON, "operator": "Exists", "effect": "NoSchedule"}
SLURM_TOLERATION: Final = {
    "key": "trainingplatform.io/reserved-for",
    "operator": "Equal",
    "value": "slurm",
    "effect": "NoSchedule",
}
NOT_READY_TOLERATION: Final = {  # what DefaultTolerationSeconds adds to every pod
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE_TOLERATION: Final = {**NOT_READY_TOLERATION, "key": "node.kubernetes.io/unreachable"}
EFA_TOLERATION: Final = {"key": EFA, "operator": "Exists", "effect": "NoSchedule"}


def _spec(
    *,
    requests: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    scheduler: str | None = "volcano",
    **extra: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests:
        container["resources"] = {"limits": dict(requests), "requests": dict(requests)}
    spec: dict[str, Any] = {"containers": [container], **extra}
    if tolerations:
        spec["tolerations"] = tolerations
    if scheduler:
        spec["schedulerName"] = scheduler
    return spec


def _team(result: StackResult) -> dict[str, Any]:
    record = next(
        r
        for r in result.records
        if r.type == NAMESPACE and TEAM_LABEL in r.inputs["metadata"].get("labels", {})
    )
    namespace: dict[str, Any] = record.inputs
    return namespace


def _judge(
    stack: str, synthesized: dict[str, StackResult], obj: dict[str, Any], **kwargs: Any
) -> tuple[bool, str | None]:
    result = synthesized[stack]
    return admit(_policy(result, TENANT_PODS_POLICY), obj, _team(result), **kwargs)


ATTACKS: Final = {
    "node-name": _spec(nodeName="ip-10-0-0-1.ec2.internal"),
    "slurm-toleration": _spec(tolerations=[SLURM_TOLERATION]),
    "slurm-toleration-by-gpu-pod": _spec(
        requests={GPU: "1"}, tolerations=[GPU_TOLERATION, SLURM_TOLERATION]
    ),
    "gpu-taint-without-gpus": _spec(requests={"cpu": "4"}, tolerations=[GPU_TOLERATION]),
    "gpu-taint-with-zero-gpus": _spec(requests={GPU: "0"}, tolerations=[GPU_TOLERATION]),
    "neuron-taint-with-gpus": _spec(requests={GPU: "1"}, tolerations=[NEURON_TOLERATION]),
    "keyless-exists": _spec(tolerations=[{"operator": "Exists"}]),
    "keyless-exists-no-schedule": _spec(
        requests={GPU: "1"},
        tolerations=[GPU_TOLERATION, {"key": "", "operator": "Exists", "effect": "NoSchedule"}],
    ),
    # the system node group's taint: team pods beside Volcano, Trainer and the webhooks
    "system-nodes": _spec(
        scheduler=None,
        tolerations=[SYSTEM_TOLERATION],
        nodeSelector={"trainingplatform.io/node-role": "system"},
    ),
    "karpenter-disrupted": _spec(
        tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]
    ),
    "unschedulable": _spec(
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    ),
    "fsx-not-ready": _spec(
        requests={GPU: "1"},
        tolerations=[GPU_TOLERATION, {**FSX_STARTUP_TAINT, "operator": "Exists"}],
    ),
    "efa-taint-without-efa": _spec(
        requests={GPU: "1"}, tolerations=[GPU_TOLERATION, EFA_TOLERATION]
    ),
    # Trainium under the device plugin's other names: no quota and no queue counted them
    "neurondevice": _spec(requests={f"{NEURON}device": "16"}, tolerations=[NEURON_TOLERATION]),
    "neuroncore": _spec(requests={f"{NEURON}core": "2"}, tolerations=[NEURON_TOLERATION]),
    "neurondevice-untolerated": _spec(requests={f"{NEURON}device": "1"}),
    "neurondevice-beside-neuron": _spec(
        requests={NEURON: "1", f"{NEURON}device": "16"}, tolerations=[NEURON_TOLERATION]
    ),
    "system-priority": _spec(priorityClassName="system-node-critical"),
    # a preempting class a chart adds later: not on the quota's list of system classes
    "chart-priority": _spec(priorityClassName="some-chart-critical"),
}
LEGITIMATE: Final = {
    "cpu-pod": _spec(scheduler=None),
    "cpu-pod-not-ready-toleration": _spec(scheduler=None, tolerations=[NOT_READY_TOLERATION]),
    "gpu-pod": _spec(requests={GPU: "1"}, tolerations=[GPU_TOLERATION]),
    "neuron-devices": _spec(requests={NEURON: "16"}, tolerations=[NEURON_TOLERATION]),
    # what the ExtendedResourceToleration admission plugin adds to a pod that requests EFA
    "efa-pod": _spec(
        requests={GPU: "8", EFA: "4"},
        tolerations=[GPU_TOLERATION, EFA_TOLERATION, NOT_READY_TOLERATION, UNREACHABLE_TOLERATION],
    ),
    "training-priority": _spec(
        requests={GPU: "1"}, tolerations=[GPU_TOLERATION], priorityClassName="training-low"
    ),
}
TEMPLATE_KINDS: Final = (
    "Pod",
    "Job",
    "CronJob",
    "JobSet",
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
)
OTHER_SHAPES_PER_STACK: Final = 2


def _shapes() -> list[tuple[str, str]]:
    """(stack, kind) of the shape matrices: the bare Pod in every stack, and the other
    shapes two to a stack in turn, so every shape is judged and every stack as often.

    Where a policy looks for a pod spec in an object is the same CEL in every stack; what a
    stack changes is the data the CEL compares with (its pools' taints), which the Pod cases
    judge in each. Each stack gets as many cases as the others, so a new stack gets as many as
    the one it was copied from (tests/test_new_environment.py).
    """
    others = [kind for kind in TEMPLATE_KINDS if kind != "Pod"]
    pairs: list[tuple[str, str]] = []
    for index, stack in enumerate(STACKS):
        pairs.append((stack, "Pod"))
        pairs += [
            (stack, others[(index * OTHER_SHAPES_PER_STACK + offset) % len(others)])
            for offset in range(OTHER_SHAPES_PER_STACK)
        ]
    return pairs


SHAPES: Final = _shapes()


def test_every_shape_is_judged_and_every_stack_equally() -> None:
    assert {kind for _, kind in SHAPES} == set(TEMPLATE_KINDS)
    per_stack = {stack: sum(1 for s, _ in SHAPES if s == stack) for stack in STACKS}
    assert set(per_stack.values()) == {1 + OTHER_SHAPES_PER_STACK}, per_stack
    assert all((stack, "Pod") in SHAPES for stack in STACKS)


@pytest.mark.parametrize(("stack", "kind"), SHAPES)
@pytest.mark.parametrize("attack", ATTACKS)
def test_each_way_to_hold_nodes_is_refused_in_every_shape(
    stack: str, kind: str, attack: str, synthesized: dict[str, StackResult]
) -> None:
    ok, message = _judge(stack, synthesized, workload_shapes(ATTACKS[attack])[kind])
    assert not ok, (attack, kind)
    assert message is not None
    expected = {
        "node-name": "nodeName",
        "neurondevice-untolerated": "request Trainium as",
        "neurondevice-beside-neuron": "request Trainium as",
        "system-priority": "priorityClassName",
        "chart-priority": "priorityClassName",
    }
    assert expected.get(attack, "toleration not allowed") in message


@pytest.mark.parametrize(("stack", "kind"), SHAPES)
@pytest.mark.parametrize("case", LEGITIMATE)
def test_pods_that_use_what_they_tolerate_are_admitted_in_every_shape(
    stack: str, kind: str, case: str, synthesized: dict[str, StackResult]
) -> None:
    assert _judge(stack, synthesized, workload_shapes(LEGITIMATE[case])[kind]) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize(
    "attack",
    [
        "slurm-toleration",
        "keyless-exists",
        "keyless-exists-no-schedule",
        "system-nodes",
        "karpenter-disrupted",
        "unschedulable",
        "fsx-not-ready",
    ],
)
def test_a_trainjob_cannot_patch_in_what_a_pod_may_not_tolerate(
    stack: str, attack: str, synthesized: dict[str, StackResult]
) -> None:
    ok, message = _judge(stack, synthesized, trainjob(ATTACKS[attack]))
    assert not ok and message is not None and "toleration not allowed" in message


@pytest.mark.parametrize("stack", STACKS)
def test_a_trainjob_patch_of_ordinary_tolerations_is_admitted(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    patch = {"tolerations": [GPU_TOLERATION, NOT_READY_TOLERATION]}
    assert _judge(stack, synthesized, trainjob(patch)) == (True, None)
    plain = trainjob(patch)
    del plain["spec"]["runtimePatches"]
    assert _judge(stack, synthesized, plain) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
def test_tolerations_added_by_a_pod_update_are_judged(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    # a bound pod: the scheduler set its nodeName, which every later update carries
    bound = make_pod(_spec(requests={GPU: "1"}, tolerations=[GPU_TOLERATION], nodeName="n1"))
    widened = copy.deepcopy(bound)
    widened["spec"]["tolerations"].append({"operator": "Exists"})
    ok, message = _judge(stack, synthesized, widened, old=bound)
    assert not ok and message is not None and "toleration not allowed" in message
    narrowed = copy.deepcopy(bound)
    narrowed["spec"]["tolerations"].append(NOT_READY_TOLERATION)
    assert _judge(stack, synthesized, narrowed, old=bound) == (True, None)
    # an ephemeral container (the pods/ephemeralcontainers subresource sends the whole pod)
    debugged = copy.deepcopy(bound)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    assert _judge(stack, synthesized, debugged, old=bound) == (True, None)
    # a label written by a controller is not judged at all
    labelled = copy.deepcopy(widened)
    labelled["metadata"]["labels"] = {"a": "b"}
    assert _judge(stack, synthesized, labelled, old=widened) == (True, None)


@pytest.mark.parametrize(("stack", "kind"), SHAPES)
@pytest.mark.parametrize("attack", [a for a in ATTACKS if a != "node-name"])
def test_an_update_cannot_bring_in_what_a_create_may_not(
    stack: str, kind: str, attack: str, synthesized: dict[str, StackResult]
) -> None:
    old = workload_shapes(LEGITIMATE["gpu-pod"])[kind]
    ok, message = _judge(stack, synthesized, workload_shapes(ATTACKS[attack])[kind], old=old)
    assert not ok and message is not None, (attack, kind)


@pytest.mark.parametrize(("stack", "kind"), SHAPES)
def test_an_update_to_a_legitimate_spec_is_admitted(
    stack: str, kind: str, synthesized: dict[str, StackResult]
) -> None:
    """The other side of the test above: every legitimate spec stays admitted as an update."""
    old = workload_shapes(LEGITIMATE["gpu-pod"])[kind]
    for case in LEGITIMATE:
        new = workload_shapes(LEGITIMATE[case])[kind]
        assert _judge(stack, synthesized, new, old=old) == (True, None), (case, kind)


@pytest.mark.parametrize("stack", STACKS)
def test_a_refused_toleration_is_named_with_the_allowed_keys(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    for kind in TEMPLATE_KINDS:
        ok, message = _judge(stack, synthesized, workload_shapes(ATTACKS["system-nodes"])[kind])
        assert not ok and message is not None
        assert "toleration not allowed in a team namespace: CriticalAddonsOnly;" in message
        for key in (
            "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
            f"{GPU} (with a request of it)", f"{NEURON} (with a request of it)",
            f"{EFA} (with a request of it)",
        ):  # fmt: skip
            assert key in message, (key, message)
    ok, message = _judge(stack, synthesized, trainjob(ATTACKS["keyless-exists"]))
    assert not ok and message is not None and "one with no key" in message


@pytest.mark.parametrize("stack", STACKS)
def test_the_policy_is_bound_to_team_namespaces_with_deny(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    result = synthesized[stack]
    policy = _policy(result, TENANT_PODS_POLICY)
    assert policy["failurePolicy"] == "Fail"
    judged = {
        (group, resource)
        for rule in policy["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if set(rule["operations"]) == {"CREATE", "UPDATE"}
    }
    assert judged >= {
        ("", "pods"), ("", "pods/ephemeralcontainers"), ("batch", "jobs"),
        ("batch", "cronjobs"), ("apps", "deployments"), ("apps", "statefulsets"),
        ("apps", "replicasets"), ("jobset.x-k8s.io", "jobsets"),
        ("trainer.kubeflow.org", "trainjobs"),
    }  # fmt: skip
    (binding,) = [
        r
        for r in result.records
        if r.type == BINDING and r.inputs["metadata"]["name"] == TENANT_PODS_POLICY
    ]
    selector = binding.inputs["spec"]["matchResources"]["namespaceSelector"]
    assert selector == {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
    assert binding.inputs["spec"]["validationActions"] == ["Deny"]


def _runtime_pod_specs(result: StackResult) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for record in result.records:
        if record.type != RUNTIME:
            continue
        for job in record.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            name = f"{record.inputs['metadata']['namespace']}/{record.inputs['metadata']['name']}"
            specs.append((f"{name}/{job['name']}", job["template"]["spec"]["template"]["spec"]))
    return specs


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_own_runtime_pods_are_admitted(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    specs = _runtime_pod_specs(synthesized[stack])
    assert specs
    for name, spec in specs:
        assert spec.get("schedulerName") == "volcano", name
        # the JobSet Trainer creates from the runtime, and the TrainJob a member creates
        jobset = workload_shapes(spec)["JobSet"]
        assert _judge(stack, synthesized, jobset) == (True, None), name
        assert _judge(stack, synthesized, trainjob(spec)) == (True, None), name
        # the pod as validating admission sees it, after the mutating plugins (so the bare
        # template as a Pod is not judged on its own): DefaultTolerationSeconds adds the node
        # conditions, ExtendedResourceToleration a toleration of each extended resource
        pod = make_pod(admitted_pod_spec(spec))
        assert _judge(stack, synthesized, pod) == (True, None), name


def admitted_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the tolerations Kubernetes' admission plugins add to a pod."""
    spec = copy.deepcopy(spec)
    tolerations = spec.setdefault("tolerations", [])
    requested = {
        name
        for container in spec.get("containers", []) + spec.get("initContainers", [])
        for kind in ("requests", "limits")
        for name in container.get("resources", {}).get(kind, {})
        if "/" in name and not name.startswith(("kubernetes.io/", "requests.", "hugepages-"))
    }
    tolerations.extend(
        {"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in sorted(requested)
    )
    tolerations.extend([NOT_READY_TOLERATION, UNREACHABLE_TOLERATION])
    return spec


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_the_stack_would_run_in_a_team_namespace_is_admitted(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    """The pods the stacks' runtimes stand for (synth/pods.py, as Trainer makes them), with what
    the API server's admission plugins add; a ClusterTrainingRuntime's run in team namespaces."""
    result = synthesized[stack]
    namespaces = _team_namespaces(result)
    pods = [
        pod
        for record in result.records
        if record.type.rsplit(":", 1)[-1] in RUNTIME_KINDS
        for pod in runtime_pods({"kind": record.type.rsplit(":", 1)[-1], **record.inputs})
    ]
    assert len(pods) >= len(_runtime_pod_specs(result)) > 0
    for pod in pods:
        if pod["metadata"]["namespace"] not in namespaces:
            pod["metadata"]["namespace"] = namespaces[0]
        pod["spec"] = admitted_pod_spec(pod["spec"])
        assert _judge(stack, synthesized, pod) == (True, None), pod["metadata"]["name"]


# --------------------------------------------------------------------------- Volcano's shares


def _two_containers(
    first: dict[str, str], second: dict[str, str], *, scheduler: str, init: bool = False
) -> dict[str, Any]:
    """A Trainium pod of two containers (the second an init container where ``init``)."""
    spec = _spec(requests=first, tolerations=[NEURON_TOLERATION], scheduler=scheduler)
    other = {"name": "d", "image": "busybox", "resources": {"limits": second, "requests": second}}
    if init:
        spec["initContainers"] = [other]
    else:
        spec["containers"].append(other)
    return spec


SCHEDULER_ATTACKS: Final = {
    "gpu-default-scheduler": _spec(
        requests={GPU: "1"}, tolerations=[GPU_TOLERATION], scheduler=None
    ),
    "gpu-other-scheduler": _spec(requests={GPU: "1"}, tolerations=[GPU_TOLERATION], scheduler="x"),
    "efa-only": _spec(requests={EFA: "1"}, scheduler=None),
    "neuron-default-scheduler": _spec(
        requests={NEURON: "1"}, tolerations=[NEURON_TOLERATION], scheduler=None
    ),
    "gpu-on-neuron-scheduler": _spec(
        requests={GPU: "1"}, tolerations=[GPU_TOLERATION], scheduler=NEURON_SCHEDULER
    ),
    "gpu-and-neuron-on-neuron-scheduler": _spec(
        requests={GPU: "1", NEURON: "1"},
        tolerations=[GPU_TOLERATION, NEURON_TOLERATION],
        scheduler=NEURON_SCHEDULER,
    ),
    # whole Trainium nodes of a multi-node job: Volcano's, not the extension's
    "whole-node-neuron-efa": _spec(
        requests={NEURON: "16", EFA: "16"},
        tolerations=[NEURON_TOLERATION, EFA_TOLERATION],
        scheduler=NEURON_SCHEDULER,
    ),
    "partial-neuron-with-efa": _spec(
        requests={NEURON: "2", EFA: "1"},
        tolerations=[NEURON_TOLERATION, EFA_TOLERATION],
        scheduler=NEURON_SCHEDULER,
    ),
    "whole-node-neuron": _spec(
        requests={NEURON: "16"}, tolerations=[NEURON_TOLERATION], scheduler=NEURON_SCHEDULER
    ),
    "whole-node-in-two-containers": _two_containers(
        {NEURON: "8"}, {NEURON: "8"}, scheduler=NEURON_SCHEDULER
    ),
    "whole-node-with-an-init-container": _two_containers(
        {NEURON: "1"}, {NEURON: "16"}, scheduler=NEURON_SCHEDULER, init=True
    ),
    "neuron-in-another-notation": _spec(
        requests={NEURON: "1e1"}, tolerations=[NEURON_TOLERATION], scheduler=NEURON_SCHEDULER
    ),
}
SCHEDULER_LEGITIMATE: Final = {
    "gpu-volcano": _spec(requests={GPU: "8", EFA: "4"}, tolerations=[GPU_TOLERATION]),
    "partial-trainium": _spec(
        requests={NEURON: "2"}, tolerations=[NEURON_TOLERATION], scheduler=NEURON_SCHEDULER
    ),
    "partial-trainium-15": _spec(
        requests={NEURON: "15"}, tolerations=[NEURON_TOLERATION], scheduler=NEURON_SCHEDULER
    ),
    "partial-trainium-two-containers": _two_containers(
        {NEURON: "4"}, {NEURON: "8"}, scheduler=NEURON_SCHEDULER
    ),
    "cpu-default-scheduler": _spec(requests={"cpu": "2"}, scheduler=None),
}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("attack", SCHEDULER_ATTACKS)
def test_accelerator_pods_outside_volcano_are_refused(
    stack: str, attack: str, synthesized: dict[str, StackResult]
) -> None:
    ok, message = _judge(stack, synthesized, make_pod(SCHEDULER_ATTACKS[attack]))
    assert not ok, attack
    assert message is not None and "must be scheduled by volcano" in message


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("case", SCHEDULER_LEGITIMATE)
def test_volcano_and_partial_trainium_pods_are_admitted(
    stack: str, case: str, synthesized: dict[str, StackResult]
) -> None:
    assert _judge(stack, synthesized, make_pod(SCHEDULER_LEGITIMATE[case])) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", [*TEMPLATE_KINDS, "TrainJob"])
def test_trainium_outside_the_quota_and_queue_is_refused(
    stack: str, kind: str, synthesized: dict[str, StackResult]
) -> None:
    """The review's attack: every Trainium device as neurondevice, through the extension."""
    attack = _spec(
        requests={f"{NEURON}device": "16"},
        tolerations=[NEURON_TOLERATION],
        scheduler=NEURON_SCHEDULER,
        nodeSelector={"karpenter.k8s.aws/instance-family": "trn2"},
    )
    legitimate = _spec(
        requests={NEURON: "4"},
        tolerations=[NEURON_TOLERATION],
        scheduler=NEURON_SCHEDULER,
        nodeSelector={"karpenter.k8s.aws/instance-family": "trn2"},
    )
    if kind == "TrainJob":  # the devices a TrainJob asks for: trainer.resourcesPerNode
        job = trainjob(None)
        for old in (None, trainjob(None)):
            for name, admitted in ((f"{NEURON}device", False), (f"{NEURON}core", False),
                                   (NEURON, True)):  # fmt: skip
                for field in ("limits", "requests"):
                    job["spec"]["trainer"] = {"resourcesPerNode": {field: {name: "16"}}}
                    ok, message = _judge(stack, synthesized, job, old=old)
                    assert ok is admitted, (name, field, message)
                    assert admitted or (message is not None and "request Trainium as" in message)
        return
    deployment = workload_shapes(attack)[kind]
    if kind == "Deployment":
        deployment["spec"]["replicas"] = 16
    for operation_old in (None, workload_shapes(legitimate)[kind]):
        ok, message = _judge(stack, synthesized, deployment, old=operation_old)
        assert not ok and message is not None, kind
        assert _judge(stack, synthesized, workload_shapes(legitimate)[kind], old=operation_old) == (
            True,
            None,
        )
    # the quota refuses the attack's pods too, whoever makes them
    for namespace in _team_namespaces(synthesized[stack]):
        quotas = _quotas(synthesized[stack], namespace)
        assert not quota_admits(quotas, make_pod(attack))[0], namespace


@pytest.mark.parametrize("stack", STACKS)
def test_the_neuron_scheduler_limit_is_the_largest_trainium_node_of_the_pools(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    from components.config import NodePoolConfig  # noqa: PLC0415
    from components.teams import largest_trainium_node  # noqa: PLC0415

    assert largest_trainium_node([]) == 0
    trn1 = NodePoolConfig.model_validate(
        {"name": "t", "instanceTypes": ["trn1.32xlarge"], "maxNodes": 1}
    )
    assert largest_trainium_node([trn1]) == 16
    teams = [TeamConfig.model_validate({"name": "ml-a", "quota": {"gpus": 1}})]
    namespace = {"metadata": {"name": "ml-a", "labels": {TEAM_LABEL: "ml-a"}}}
    one = make_pod(SCHEDULER_LEGITIMATE["partial-trainium"])
    # without a Trainium pool no pod may use the extension; with one, pods below its size may
    assert not admit(team_pods_policy(teams, []), one, namespace)[0]
    assert admit(team_pods_policy(teams, [trn1]), one, namespace) == (True, None)
    # the stack's own pools: 16 devices per node (trn1.32xlarge, trn2.48xlarge)
    policy = _policy(synthesized[stack], TENANT_PODS_POLICY)
    assert admit(policy, one, _team(synthesized[stack])) == (True, None)


@pytest.mark.parametrize("stack", STACKS)
def test_no_service_account_is_unqueued_by_default(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    pod = make_pod(SCHEDULER_ATTACKS["gpu-default-scheduler"])
    for account in ("training-jobs", "default", "inference"):
        pod["spec"]["serviceAccountName"] = account
        assert not _judge(stack, synthesized, pod)[0], account


def test_a_listed_service_account_may_use_another_scheduler() -> None:
    teams = [
        TeamConfig.model_validate(
            {"name": "ml-a", "quota": {"gpus": 1}, "unqueuedServiceAccounts": ["inference"]}
        ),
        TeamConfig.model_validate({"name": "ml-b", "quota": {"gpus": 1}}),
    ]
    policy = team_pods_policy(teams, [])
    pod = make_pod(SCHEDULER_ATTACKS["gpu-default-scheduler"])
    pod["spec"]["serviceAccountName"] = "inference"

    def namespace(team: str) -> dict[str, Any]:
        return {"metadata": {"name": team, "labels": {TEAM_LABEL: team}}}

    assert admit(policy, pod, namespace("ml-a")) == (True, None)
    assert not admit(policy, pod, namespace("ml-b"))[0]  # the list is the team's own
    pod["spec"]["serviceAccountName"] = "training-jobs"
    assert not admit(policy, pod, namespace("ml-a"))[0]


@pytest.mark.parametrize("account", ["default", "Inference", "a b", "x'y"])
def test_unqueued_service_accounts_must_be_names_other_than_default(account: str) -> None:
    with pytest.raises(ValueError, match="ServiceAccount name"):
        TeamConfig.model_validate(
            {"name": "ml-a", "quota": {"gpus": 1}, "unqueuedServiceAccounts": [account]}
        )


@pytest.mark.parametrize("stack", STACKS)
def test_scheduler_rule_judges_only_pod_creation(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    # schedulerName is immutable: an update of a pod made before the policy is not refused for it
    old = make_pod(SCHEDULER_ATTACKS["gpu-default-scheduler"])
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "busybox:2"
    assert _judge(stack, synthesized, new, old=old) == (True, None)
    # templates are not scheduled: a Deployment's pods are judged as pods when they are made
    deployment = workload_shapes(SCHEDULER_ATTACKS["gpu-default-scheduler"])["Deployment"]
    assert _judge(stack, synthesized, deployment) == (True, None)


# --------------------------------------------------------------------------- CPU and memory


@pytest.mark.parametrize("stack", STACKS)
def test_cpu_and_memory_quota_admits_a_job_on_the_whole_accelerator_quota(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    """Each runtime's pods, as many as the team's accelerator quota allows, fit its quota.

    Containers that state no CPU or memory get the LimitRange's default requests first.
    """
    result = synthesized[stack]
    for namespace in _team_namespaces(result):
        quotas = _quotas(result, namespace)
        (limit_range,) = [
            r.inputs["spec"]
            for r in result.records
            if r.type == "kubernetes:core/v1:LimitRange"
            and r.inputs["metadata"]["namespace"] == namespace
        ]
        defaults = limit_range["limits"][0]["defaultRequest"]
        hard = {k: v for q in quotas if "scopeSelector" not in q for k, v in q["hard"].items()}
        assert {"requests.cpu", "requests.memory"} <= set(hard)
        for name, spec in _runtime_pod_specs(result):
            if not name.startswith(f"{namespace}/"):
                continue
            pod = make_pod(copy.deepcopy(spec))
            for container in pod["spec"]["containers"]:
                requests = container.setdefault("resources", {}).setdefault("requests", {})
                for resource, value in defaults.items():
                    requests.setdefault(resource, value)
            usage = _pod_usage(pod)
            accelerator = next(k for k in usage if k in (f"requests.{GPU}", f"requests.{NEURON}"))
            nodes = int(quantity(hard[accelerator]) // usage[accelerator])
            if nodes == 0:
                continue
            for resource in ("requests.cpu", "requests.memory"):
                assert usage[resource] * nodes <= quantity(hard[resource]), (name, resource)
            cpu_pod = _priority_pod(None)
            cpu_pod["spec"]["containers"][0]["resources"] = {
                "requests": {"cpu": str(quantity(hard["requests.cpu"]) + 1)}
            }
            assert not quota_admits(quotas, cpu_pod)[0]


# --------------------------------------------------------------------------- optional fields

_ITERATION_PATH: Final = re.compile(r"(?<![\w.])([pjt](?:\.[A-Za-z]\w*)+)")


def unguarded_fields(expression: str) -> set[str]:
    """The fields of a comprehension's element (``p``, ``j``, ``t``: a TrainJob's runtime patch,
    a replicated job, a Volcano task) that ``expression`` reads without a ``has()`` of them.

    Every field of those objects below the element is optional in its CRD (kubeflow/trainer
    v2.3.0 ReplicatedJobPatch's ``template`` among them). cel-go fails on a missing key ("no
    such key") where cel-python returns false, so evaluating cannot show a missing guard:
    every prefix of every path read must appear inside a ``has()``.
    """
    guarded = set(re.findall(r"has\(([\w.]+)\)", expression))
    missing = set()
    for match in _ITERATION_PATH.finditer(expression):
        parts = match.group(1).split(".")
        if expression[match.end() : match.end() + 1] == "(":
            parts.pop()  # a method (filter, map, ...), not a field
        for end in range(2, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix not in guarded:
                missing.add(prefix)
    return missing


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy_name", [TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY])
def test_every_optional_field_of_a_patch_or_task_is_guarded(
    stack: str, policy_name: str, synthesized: dict[str, StackResult]
) -> None:
    policy = _policy(synthesized[stack], policy_name)
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    for name in ("podSpecs", "patchSpecs"):
        assert unguarded_fields(variables[name]) == set(), name
    # the check can fail: the guard of a replicated job's template taken away
    patches = variables["patchSpecs"]
    assert "filter(j, has(j.template) && " in patches
    unguarded = patches.replace("filter(j, has(j.template) && ", "filter(j, ")
    assert unguarded_fields(unguarded) == {"j.template"}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy_name", [TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY])
def test_a_patch_of_a_replicated_job_without_a_template_is_admitted(
    stack: str, policy_name: str, synthesized: dict[str, StackResult]
) -> None:
    """``template`` is optional in a ReplicatedJobPatch: a patch of a job's name only passes,
    on creation and on update."""
    result = synthesized[stack]
    job = trainjob({"tolerations": []})
    patch_spec = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patch_spec["replicatedJobs"] = [{"name": "node"}]
    policy = _policy(result, policy_name)
    assert admit(policy, job, _team(result)) == (True, None)
    assert admit(policy, job, _team(result), old=trainjob(None)) == (True, None)


def test_a_pools_extra_taint_is_on_the_allow_list_of_that_stack_only() -> None:
    """The runtimes' pods tolerate their pool's extra taints (``pool_workload_placement``)."""
    from components.config import NodePoolConfig  # noqa: PLC0415
    from components.workloads import pool_workload_placement  # noqa: PLC0415

    pool = NodePoolConfig.model_validate(
        {
            "name": "gpu",
            "instanceTypes": ["p5.48xlarge"],
            "maxNodes": 1,
            "taints": [{"key": "example.com/dedicated", "effect": "NoSchedule"}],
        }
    )
    teams = [TeamConfig.model_validate({"name": "ml-a", "quota": {"gpus": 8}})]
    namespace = {"metadata": {"name": "ml-a", "labels": {TEAM_LABEL: "ml-a"}}}
    spec = _spec(requests={GPU: "8"}, tolerations=pool_workload_placement(pool)["tolerations"])
    assert {t["key"] for t in spec["tolerations"]} == {GPU, "example.com/dedicated"}
    for kind, obj in workload_shapes(spec).items():
        if kind in TEMPLATE_KINDS:
            assert admit(team_pods_policy(teams, [pool]), obj, namespace) == (True, None), kind
            ok, message = admit(team_pods_policy(teams, []), obj, namespace)
            assert not ok and message is not None and "example.com/dedicated" in message, kind
