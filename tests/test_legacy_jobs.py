"""Legacy v1 jobs start on a cold pool: the admission policy, the documented job, the model.

The Training Operator v1.9.4 creates no pod until Volcano enqueues the job's PodGroup
(kubeflow/trainer v1.9.4 pkg/controller.v1/control/podgroup_control.go), and fills its
minResources with the gang's GPUs and EFA interfaces unless the job sets them
(pkg/controller.v1/common/job.go); under enableHierarchy the root queue knows neither on a
cold pool (volcano v1.15.1 pkg/scheduler/plugins/capacity/capacity.go), so such a job never
starts. The policy makes every v1 job in a team namespace state cpu/memory-only minResources.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest

from components.tenancy import LEGACY_JOBS, LEGACY_MIN_RESOURCES_POLICY
from components.versions import TRAINING_OPERATOR_KUSTOMIZATION
from synth.jobs.admission import admit
from synth.jobs.model import PathReport, evaluate_jobs
from synth.jobs.view import StackView, name_of
from synth.run import StackResult
from tests.conftest import STACKS
from tests.docs_pages import marked_examples
from tests.test_tenancy import _namespace

POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def _records(result: StackResult, resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs for r in result.records if r.type == resource_type
    }


def _documented_job() -> dict[str, Any]:
    (document,) = [
        d for _, d in marked_examples("<!-- runs-on: STACK -->") if d["kind"] == "PyTorchJob"
    ]
    return document


def _job_in(team: str, *, min_resources: Any = ..., kind: str = "PyTorchJob") -> dict[str, Any]:
    job = copy.deepcopy(_documented_job())
    job["kind"] = kind
    job["metadata"]["namespace"] = team
    scheduling = job["spec"]["runPolicy"]["schedulingPolicy"]
    scheduling["queue"] = team
    if min_resources is ...:
        scheduling.pop("minResources", None)
    else:
        scheduling["minResources"] = min_resources
    return job


def _teams(result: StackResult) -> list[str]:
    return sorted(
        ns["metadata"]["name"]
        for ns in (r.inputs for r in result.records if r.type == "kubernetes:core/v1:Namespace")
        if "trainingplatform.io/team" in (ns["metadata"].get("labels") or {})
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_policy_is_bound_to_team_namespaces_and_matches_every_legacy_kind(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    policy = _records(synthesized[stack], POLICY)[LEGACY_MIN_RESOURCES_POLICY]["spec"]
    binding = _records(synthesized[stack], BINDING)[LEGACY_MIN_RESOURCES_POLICY]["spec"]
    assert binding["validationActions"] == ["Deny"]
    assert (
        binding["matchResources"]["namespaceSelector"]
        == policy["matchConstraints"]["namespaceSelector"]
    )
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["kubeflow.org"]
    assert set(rule["resources"]) == set(LEGACY_JOBS)
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "MPIJob"])
@pytest.mark.parametrize(
    ("min_resources", "admitted", "words"),
    [
        ({}, True, None),
        ({"cpu": "8", "memory": "64Gi"}, True, None),
        (..., False, "set spec.runPolicy.schedulingPolicy.minResources: {}"),
        ({"nvidia.com/gpu": "32"}, False, "not nvidia.com/gpu"),
        ({"cpu": "8", "vpc.amazonaws.com/efa": "128"}, False, "not vpc.amazonaws.com/efa"),
    ],
    ids=["empty", "cpu-memory", "unset", "gpus", "efa"],
)
def test_a_legacy_job_states_min_resources_the_root_queue_knows(
    stack: str,
    kind: str,
    min_resources: Any,
    admitted: bool,
    words: str | None,
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized[stack]
    policy = _records(result, POLICY)[LEGACY_MIN_RESOURCES_POLICY]["spec"]
    for team in _teams(result):
        namespace = _namespace(result, team)
        job = _job_in(team, min_resources=min_resources, kind=kind)
        verdict, message = admit(policy, job, namespace)
        assert verdict is admitted, (team, message)
        if words is not None:
            assert message is not None and words in message
            assert message.startswith(f"{kind} llama-pretrain:")
        # An update that keeps (or brings) the shape is judged the same way.
        good = _job_in(team, min_resources={})
        assert admit(policy, job, namespace, old=good)[0] is admitted
        # A status-only update of a job admitted before the policy passes.
        with_status = {**job, "status": {"conditions": []}}
        assert admit(policy, with_status, namespace, old=job) == (True, None)


def test_the_documented_job_states_empty_min_resources() -> None:
    assert _documented_job()["spec"]["runPolicy"]["schedulingPolicy"]["minResources"] == {}


# --------------------------------------------------------------------------- the model


def _view(result: StackResult, *, operator: bool = True) -> StackView:
    view = StackView.from_records(result.records)
    kustomizations = tuple(k for k in view.kustomizations if k != TRAINING_OPERATOR_KUSTOMIZATION)
    if operator:  # as trainer.legacyTrainingOperator: true renders it
        kustomizations += (TRAINING_OPERATOR_KUSTOMIZATION,)
    return StackView(copy.deepcopy(view.objects), copy.deepcopy(view.releases), kustomizations)


def _legacy(reports: list[PathReport]) -> list[PathReport]:
    return [r for r in reports if r.kind == "legacy-job"]


@pytest.mark.parametrize("stack", STACKS)
def test_legacy_jobs_of_the_documented_shape_start_on_a_cold_pool(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    reports = _legacy(evaluate_jobs(_view(synthesized[stack])))
    teams = _teams(synthesized[stack])
    assert {r.team for r in reports} == set(teams)
    for report in reports:
        assert report.runnable and report.max_nodes >= 1, report
        assert any(LEGACY_MIN_RESOURCES_POLICY in reason for reason in report.reasons)


@pytest.mark.parametrize("stack", STACKS)
def test_without_the_policy_a_legacy_job_never_starts_on_a_cold_pool(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    """The operator's computed minResources carry the gang's GPUs: root knows none cold."""
    view = _view(synthesized[stack])
    view.objects[:] = [m for m in view.objects if name_of(m) != LEGACY_MIN_RESOURCES_POLICY]
    reports = _legacy(evaluate_jobs(view))
    assert reports
    for report in reports:
        assert not report.runnable and report.max_nodes == 0, report
        assert any("never starts on a cold pool" in r for r in report.reasons), report.reasons
        assert any("root queue admits none" in r for r in report.reasons), report.reasons


@pytest.mark.parametrize("stack", STACKS)
def test_without_the_operator_there_are_no_legacy_rows(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    assert _legacy(evaluate_jobs(_view(synthesized[stack], operator=False))) == []
