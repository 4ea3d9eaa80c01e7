"""The platform's ValidatingAdmissionPolicies, evaluated with a CEL library (cel-python) against
objects the API server would admit or refuse, the way the API server runs them: match
conditions first, then variables, then each validation (an error or false refuses): the
evaluator is synth/jobs/admission.py's, which `synth jobs` judges Ray objects with too."""

from __future__ import annotations

from typing import Any, Final

import pytest
from celpy.celparser import CELParser

from synth.jobs.admission import admit  # the suite's CEL evaluator
from synth.run import StackResult
from tests.conftest import STACKS

POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NEURON_POLICY: Final = "trainingplatform-neuron-processes"


def _policy(result: StackResult, name: str) -> dict[str, Any]:
    (record,) = [
        r for r in result.records if r.type == POLICY and r.inputs["metadata"]["name"] == name
    ]
    spec: dict[str, Any] = record.inputs["spec"]
    return spec


def _trainjob(runtime: str, **trainer: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "ml-dev"},
        "spec": spec,
    }


@pytest.mark.parametrize("stack", STACKS)
def test_the_neuron_process_policy_is_bound_and_matches_trainjobs(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    policy = _policy(synthesized[stack], NEURON_POLICY)
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["trainer.kubeflow.org"] and rule["resources"] == ["trainjobs"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert policy["failurePolicy"] == "Fail"
    (binding,) = [
        r
        for r in synthesized[stack].records
        if r.type == BINDING and r.inputs["metadata"]["name"] == NEURON_POLICY
    ]
    assert binding.inputs["spec"] == {"policyName": NEURON_POLICY, "validationActions": ["Deny"]}


@pytest.mark.parametrize(
    ("trainer", "admitted"),
    [
        ({}, True),  # the runtime's CPU request gives one process per NeuronCore
        ({"numNodes": 2}, True),
        ({"resourcesPerNode": {"limits": {"cpu": "128"}}}, False),
        ({"resourcesPerNode": {"limits": {"aws.amazon.com/neuron": "16"}}}, False),
        ({"resourcesPerNode": {"limits": {"cpu": "128"}}, "numProcPerNode": 32}, True),
    ],
    ids=["no-trainer", "nodes-only", "cpu", "devices", "explicit-processes"],
)
def test_trainium_jobs_that_size_their_node_must_say_their_processes(
    synthesized: dict[str, StackResult], trainer: dict[str, Any], admitted: bool
) -> None:
    policy = _policy(synthesized["dev"], NEURON_POLICY)
    ok, message = admit(
        policy, _trainjob("torch-trn1", **trainer) if trainer else _trainjob("torch-trn1")
    )
    assert ok is admitted, message
    if not ok:
        assert message is not None
        assert "32 NeuronCores per node" in message and "torch-trn1" in message


def test_the_policy_leaves_gpu_jobs_alone(synthesized: dict[str, StackResult]) -> None:
    policy = _policy(synthesized["dev"], NEURON_POLICY)
    job = _trainjob("torch-gpu-small", resourcesPerNode={"limits": {"nvidia.com/gpu": "1"}})
    assert admit(policy, job) == (True, None)


def test_each_trainium_runtime_states_its_own_core_count(
    synthesized: dict[str, StackResult],
) -> None:
    policy = _policy(synthesized["prod"], NEURON_POLICY)
    ok, message = admit(policy, _trainjob("torch-trn2", resourcesPerNode={"limits": {"cpu": "8"}}))
    assert not ok and message is not None and "64 NeuronCores per node" in message


# --------------------------------------------------------------------------- Lustre access times

ACCESS_TIME_POLICY: Final = "trainingplatform-lustre-access-times"


def _pod(*, volume_read_only: bool = False, mount_read_only: bool = False) -> dict[str, Any]:
    claim: dict[str, Any] = {"claimName": "lustre-datasets"}
    if volume_read_only:
        claim["readOnly"] = True
    mount: dict[str, Any] = {"name": "data", "mountPath": "/fsx/datasets/ml-research"}
    if mount_read_only:
        mount["readOnly"] = True
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reader", "namespace": "ml-research"},
        "spec": {
            "containers": [{"name": "main", "image": "x", "volumeMounts": [mount]}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": claim},
                {"name": "scratch", "emptyDir": {}},
            ],
        },
    }


@pytest.mark.parametrize("stack", STACKS)
def test_no_pod_mounts_a_lustre_claim_read_only(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A read-only mount records no access times, so release would free what jobs read."""
    result = synthesized[stack]
    policy = _policy(result, ACCESS_TIME_POLICY)
    (binding,) = [
        r for r in result.records
        if r.type == BINDING and r.inputs["metadata"]["name"] == ACCESS_TIME_POLICY
    ]  # fmt: skip
    assert binding.inputs["spec"] == {
        "policyName": ACCESS_TIME_POLICY,
        "validationActions": ["Deny"],
    }
    # it sees every pod of the cluster and guards speed only: one it cannot evaluate passes
    assert policy["failurePolicy"] == "Ignore"
    team = {"metadata": {"name": "ml-research", "labels": {"trainingplatform.io/team": "x"}}}
    assert admit(policy, _pod(), team) == (True, None)
    admitted, message = admit(policy, _pod(volume_read_only=True), team)
    assert not admitted and message and "volume data" in message and "access times" in message
    admitted, message = admit(policy, _pod(mount_read_only=True), team)
    assert not admitted and message and "in container main" in message
    # an administrative namespace with the whole file system, likewise
    shared = {"metadata": {"name": "ops", "labels": {"trainingplatform.io/shared-lustre": "true"}}}
    whole = _pod(mount_read_only=True)
    whole["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "shared-lustre"
    assert not admit(policy, whole, shared)[0]
    # other namespaces, other claims and other volumes are not its business
    elsewhere = {"metadata": {"name": "tools", "labels": {}}}
    assert admit(policy, _pod(mount_read_only=True), elsewhere) == (True, None)
    other_claim = _pod(volume_read_only=True)
    other_claim["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "results"
    assert admit(policy, other_claim, team) == (True, None)
    # every runtime pod the stack ships passes
    for record in result.records:
        if record.inputs.get("kind") != "TrainingRuntime":
            continue
        namespace = {"metadata": {"name": "x", "labels": {"trainingplatform.io/team": "x"}}}
        for job in record.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = {"spec": job["template"]["spec"]["template"]["spec"]}
            assert admit(policy, pod, namespace) == (True, None), record.name


CEL_GO_CODE_POINT_LIMIT: Final = 100_000
"""cel-go's default ``ExpressionSizeCodePointLimit`` (parser/options.go, parser.go defaults),
which the API server's CEL environments keep: a longer expression does not parse, and the
policy's every request fails (``failurePolicy: Fail``)."""
CEL_GO_RECURSION_LIMIT: Final = 250
"""cel-go's default ``MaxRecursionDepth``: its parser's recursion listener counts how deep each
grammar rule nests in itself (``a + b + c`` nests ``calc`` three deep)."""


def _same_rule_depth(tree: Any) -> int:
    """How deep any grammar rule nests in itself, as cel-go's recursion listener counts it,
    measured on cel-python's parse tree (whose rules nest as cel-go's grammar's do)."""
    deepest = 0
    pending: list[tuple[Any, dict[str, int]]] = [(tree, {})]
    while pending:
        node, counts = pending.pop()
        if not hasattr(node, "data"):
            continue
        seen = {**counts, node.data: counts.get(node.data, 0) + 1}
        deepest = max(deepest, seen[node.data])
        pending.extend((child, seen) for child in node.children)
    return deepest


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_expression_parses_within_cel_gos_limits(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """The policies write synthesis-time facts into their CEL as literals, so an expression
    grows with pools and teams: each must stay within what the API server's parser takes, with
    room to grow (a quarter of each limit), or every request it judges would fail."""
    parser = CELParser()
    policies = [r.inputs for r in synthesized[stack].records if r.type == POLICY]
    assert policies
    for policy in policies:
        spec = policy["spec"]
        expressions = [
            *(v["expression"] for v in spec.get("variables", [])),
            *(v["expression"] for v in spec.get("matchConditions", [])),
            *(v["expression"] for v in spec["validations"]),
            *(v["messageExpression"] for v in spec["validations"] if "messageExpression" in v),
        ]
        name = policy["metadata"]["name"]
        for expression in expressions:
            assert len(expression) < CEL_GO_CODE_POINT_LIMIT * 3 // 4, (name, len(expression))
            depth = _same_rule_depth(parser.parse(expression))
            assert depth < CEL_GO_RECURSION_LIMIT * 3 // 4, (name, depth)
