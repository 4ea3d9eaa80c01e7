"""The Katib search example (docs/how-to/run-a-katib-search.md): valid, and its trials are the
team's TrainJobs.

The Experiment is held to Katib's own API definitions, unknown fields refused (its CRDs carry no
schema); its trial template, as Katib's controller makes a trial of it, to Trainer's CRD, to the
team's runtime and quota, and to every admission policy that judges TrainJobs in a team
namespace, evaluated through the policies' CEL as the API server would for Katib's controller.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Final

import pytest

from components import versions
from components.katib import NAMESPACE, katib_config
from components.scheduling import QUEUE_ANNOTATION
from components.tenancy import QUEUE_POLICY
from synth.jobs.admission import admit
from synth.run import StackResult
from tests.docs_pages import marked_examples
from tests.kubernetes_semantics import quantity
from tests.schemas import swagger_errors, validation_errors

MARKER: Final = "<!-- katib-experiment: STACK -->"
POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
TEAM_LABEL: Final = "trainingplatform.io/team"
CONTROLLER: Final = f"system:serviceaccount:{NAMESPACE}:katib-controller"
# Katib's defaults for a TrainJob trial (kubeflow/katib v0.19.0
# pkg/apis/controller/experiments/v1beta1/constants.go): the example writes them out.
TRAINJOB_SUCCESS: Final = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
TRAINJOB_FAILURE: Final = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
TRAINJOB_PRIMARY_POD: Final = {
    "jobset.sigs.k8s.io/replicatedjob-name": "node",
    "batch.kubernetes.io/job-completion-index": "0",
}
PLACEHOLDER: Final = re.compile(r"\$\{trialParameters\.([\w-]+)\}")


def _examples() -> list[tuple[str, dict[str, Any]]]:
    return marked_examples(MARKER)


def _swagger(reference_dir: Path) -> Path:
    return (
        reference_dir / "crds" / "katib" / versions.KATIB_VERSION / "openapi"
        / "pkg_apis_v1beta1_swagger.json"
    )  # fmt: skip


def _trial(experiment: dict[str, Any], name: str = "lr-search-7xk2p9qd") -> dict[str, Any]:
    """The TrainJob Katib's controller makes of the template for one trial: the parameters
    substituted (each at its feasible minimum), named after the trial, in the Experiment's
    namespace (kubeflow/katib v0.19.0 pkg/controller.v1beta1/experiment/manifest/generator.go)."""
    spec = experiment["spec"]
    values = {
        p["name"]: next(s for s in spec["parameters"] if s["name"] == p["reference"])[
            "feasibleSpace"
        ]["min"]
        for p in spec["trialTemplate"]["trialParameters"]
    }
    text = PLACEHOLDER.sub(
        lambda m: values[m.group(1)], json.dumps(spec["trialTemplate"]["trialSpec"])
    )
    trial: dict[str, Any] = json.loads(text)
    trial.setdefault("metadata", {})
    trial["metadata"].update(name=name, namespace=experiment["metadata"]["namespace"])
    return trial


def test_the_page_has_one_example_for_a_stack_with_katib() -> None:
    examples = _examples()
    assert [stack for stack, _ in examples] == ["dev"]
    assert examples[0][1]["kind"] == "Experiment"


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_the_experiment_matches_katibs_api_definitions(
    reference_dir: Path, stack: str, experiment: dict[str, Any]
) -> None:
    swagger = _swagger(reference_dir)
    assert swagger_errors(experiment, swagger, "v1beta1.Experiment") == []
    # the validator can fail: an unknown field, a misspelt one, a wrong type
    for path, value in (
        (("spec", "trialTemplate", "trialSpecs"), {}),
        (("spec", "objective", "objectiveMetric"), "loss"),
        (("spec", "parallelTrialCount"), "2"),
        (("spec", "parameters", 0, "feasibleSpace", "mean"), "0.001"),
    ):
        broken = copy.deepcopy(experiment)
        node: Any = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert swagger_errors(broken, swagger, "v1beta1.Experiment") != [], path


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_the_experiment_uses_what_the_platforms_katib_runs(
    synthesized: dict[str, StackResult], stack: str, experiment: dict[str, Any]
) -> None:
    spec = experiment["spec"]
    config = katib_config(synthesized[stack].config.trainer.legacy_training_operator)
    runtime = config["runtime"]
    assert spec["algorithm"]["algorithmName"] in {
        s["algorithmName"] for s in runtime["suggestions"]
    }
    assert spec["metricsCollectorSpec"]["collector"]["kind"] == "StdOut"
    assert spec["objective"]["type"] in ("minimize", "maximize")
    assert {p["parameterType"] for p in spec["parameters"]} <= {
        "double", "int", "discrete", "categorical",
    }  # fmt: skip
    template = spec["trialTemplate"]
    assert template["trialSpec"]["kind"] == "TrainJob"
    assert template["trialSpec"]["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert template["successCondition"] == TRAINJOB_SUCCESS
    assert template["failureCondition"] == TRAINJOB_FAILURE
    assert template["primaryPodLabels"] == TRAINJOB_PRIMARY_POD
    # every placeholder is a declared trial parameter, each naming a search parameter
    declared = {p["name"] for p in template["trialParameters"]}
    assert set(PLACEHOLDER.findall(json.dumps(template["trialSpec"]))) == declared
    assert {p["reference"] for p in template["trialParameters"]} <= {
        p["name"] for p in spec["parameters"]
    }


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_each_trial_is_a_valid_trainjob_on_the_teams_gpu_runtime(
    synthesized: dict[str, StackResult], reference_dir: Path, stack: str, experiment: dict[str, Any]
) -> None:
    result = synthesized[stack]
    trial = _trial(experiment)
    assert (
        validation_errors(trial, result.config.cluster.kubernetes_version, reference_dir / "crds")
        == []
    )
    namespace = experiment["metadata"]["namespace"]
    team = next(t for t in result.config.teams if t.name == namespace)
    runtimes = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in result.records
        if r.type == RUNTIME and r.inputs["metadata"]["namespace"] == namespace
    }
    runtime = runtimes[trial["spec"]["runtimeRef"]["name"]]
    assert trial["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    # on a GPU pool, and the primary container is the runtime's node container
    pool = result.config.pool(runtime["metadata"]["labels"]["trainingplatform.io/pool"])
    assert pool is not None and pool.instance.accelerator_resource == "nvidia.com/gpu"
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == TRAINJOB_PRIMARY_POD["jobset.sigs.k8s.io/replicatedjob-name"]
    containers = job["template"]["spec"]["template"]["spec"]["containers"]
    assert experiment["spec"]["trialTemplate"]["primaryContainerName"] in [
        c["name"] for c in containers
    ]
    # the queue comes with the runtime: the team's
    annotations = runtime["spec"]["template"]["metadata"]["annotations"]
    assert annotations[QUEUE_ANNOTATION] == team.name
    # the trials that run at once fit the team's GPU quota
    gpus = experiment["spec"]["parallelTrialCount"] * trial["spec"]["trainer"]["numNodes"]
    assert gpus * pool.instance.accelerators <= team.quota.gpus


def _team_namespace(result: StackResult, name: str) -> dict[str, Any]:
    (namespace,) = [
        r.inputs
        for r in result.records
        if r.type == "kubernetes:core/v1:Namespace" and r.inputs["metadata"]["name"] == name
    ]
    assert namespace["metadata"]["labels"][TEAM_LABEL] == name
    return namespace


def _trainjob_policies(result: StackResult) -> dict[str, dict[str, Any]]:
    """Every ValidatingAdmissionPolicy that judges TrainJobs in team namespaces."""
    policies = {}
    for record in result.records:
        if record.type != POLICY:
            continue
        spec = record.inputs["spec"]
        for rule in spec.get("matchConstraints", {}).get("resourceRules", []):
            if "trainer.kubeflow.org" in rule.get("apiGroups", []) and "trainjobs" in rule.get(
                "resources", []
            ):
                policies[record.inputs["metadata"]["name"]] = spec
    return policies


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_katibs_trial_trainjob_passes_the_team_namespaces_admission(
    synthesized: dict[str, StackResult], stack: str, experiment: dict[str, Any]
) -> None:
    result = synthesized[stack]
    namespace = _team_namespace(result, experiment["metadata"]["namespace"])
    policies = _trainjob_policies(result)
    assert QUEUE_POLICY in policies and len(policies) >= 3
    trial = _trial(experiment)
    groups = [
        "system:serviceaccounts",
        f"system:serviceaccounts:{NAMESPACE}",
        "system:authenticated",
    ]
    for name, policy in policies.items():
        assert admit(policy, trial, namespace, user_groups=groups, username=CONTROLLER) == (
            True,
            None,
        ), name
    # and the policies judge Katib's trials too: a template whose patch names another queue
    elsewhere = copy.deepcopy(trial)
    elsewhere["spec"]["runtimePatches"] = [
        {
            "manager": "user",
            "trainingRuntimeSpec": {
                "template": {"metadata": {"annotations": {QUEUE_ANNOTATION: "ml-research"}}}
            },
        }
    ]
    admitted, message = admit(
        policies[QUEUE_POLICY], elsewhere, namespace, user_groups=groups, username=CONTROLLER
    )
    assert not admitted and message is not None and "not ml-research" in message


METRICS_COLLECTOR: Final = "metrics-logger-and-collector"
"""The sidecar Katib's pod webhook adds (kubeflow/katib v0.19.0
pkg/metricscollector/v1beta1/common/const.go, MetricLoggerCollectorContainerName)."""


KATIB_DEFAULT_RESOURCES: Final = {
    "requests": {"cpu": "50m", "memory": "10Mi", "ephemeral-storage": "500Mi"},
    "limits": {"cpu": "500m", "memory": "100Mi", "ephemeral-storage": "5Gi"},
}
"""What Katib gives each resource a config entry leaves unset (kubeflow/katib v0.19.0
pkg/apis/config/v1beta1/defaults.go, setResourceRequirements)."""


def _katib_resources(entry: dict[str, Any]) -> dict[str, Any]:
    """A config entry's resources as Katib fills them."""
    stated = entry.get("resources", {})
    return {
        kind: {**KATIB_DEFAULT_RESOURCES[kind], **stated.get(kind, {})}
        for kind in ("requests", "limits")
    }


def _primary_pod(
    runtime: dict[str, Any],
    trial: dict[str, Any],
    collector: dict[str, Any],
    *,
    inject_security_context: bool,
) -> dict[str, Any]:
    """A trial's primary pod as it reaches validating admission: the runtime's pod template with
    the pod group Trainer's volcano plugin names (kubeflow/trainer v2.3.0
    pkg/runtime/framework/plugins/volcano/volcano.go: the TrainJob's name), then what Katib's
    pod webhook adds for a StdOut collector (kubeflow/katib v0.19.0
    pkg/webhook/v1beta1/pod/inject_webhook.go and utils.go): a shared process namespace, the
    collector container with the default resources of pkg/apis/config/v1beta1/defaults.go (and,
    with ``injectSecurityContext``, a copy of the first container's security context), and an
    emptyDir for the log in both containers."""
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    spec = copy.deepcopy(job["template"]["spec"]["template"]["spec"])
    mount = {"name": "metrics-volume", "mountPath": "/var/log/katib"}
    spec["shareProcessNamespace"] = True
    spec["volumes"] = [*spec.get("volumes", []), {"name": "metrics-volume", "emptyDir": {}}]
    spec["containers"][0]["volumeMounts"] = [*spec["containers"][0].get("volumeMounts", []), mount]
    spec["containers"].append(
        {
            "name": METRICS_COLLECTOR,
            "image": collector["image"],
            "args": ["-t", trial["metadata"]["name"], "-m", "loss;accuracy", "-o-type", "minimize",
                     "-s-db", f"katib-db-manager.{NAMESPACE}:6789",
                     "-path", "/var/log/katib/metrics.log", "-format", "TEXT"],
            "resources": _katib_resources(collector),
            "volumeMounts": [mount],
        }
    )  # fmt: skip
    if inject_security_context and "securityContext" in spec["containers"][0]:
        spec["containers"][-1]["securityContext"] = copy.deepcopy(
            spec["containers"][0]["securityContext"]
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{trial['metadata']['name']}-node-0-0-abcde",
            "namespace": trial["metadata"]["namespace"],
            "labels": dict(TRAINJOB_PRIMARY_POD),
            "annotations": {"scheduling.k8s.io/group-name": trial["metadata"]["name"]},
        },
        "spec": spec,
    }


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_the_primary_pod_with_its_metrics_collector_passes_the_pod_policies(
    synthesized: dict[str, StackResult], stack: str, experiment: dict[str, Any]
) -> None:
    result = synthesized[stack]
    trial = _trial(experiment)
    namespace = _team_namespace(result, trial["metadata"]["namespace"])
    (runtime,) = [
        r.inputs
        for r in result.records
        if r.type == RUNTIME
        and r.inputs["metadata"]["namespace"] == trial["metadata"]["namespace"]
        and r.inputs["metadata"]["name"] == trial["spec"]["runtimeRef"]["name"]
    ]
    config = katib_config(result.config.trainer.legacy_training_operator)
    collector = next(
        c
        for c in config["runtime"]["metricsCollectors"]
        if c["kind"] == experiment["spec"]["metricsCollectorSpec"]["collector"]["kind"]
    )
    inject = bool(config["init"]["controller"].get("injectSecurityContext"))
    pod = _primary_pod(runtime, trial, collector, inject_security_context=inject)
    assert validation_errors(pod, result.config.cluster.kubernetes_version, None) == []
    policies = {
        record.inputs["metadata"]["name"]: record.inputs["spec"]
        for record in result.records
        if record.type == POLICY
        and any(
            "" in rule.get("apiGroups", []) and "pods" in rule.get("resources", [])
            for rule in record.inputs["spec"].get("matchConstraints", {}).get("resourceRules", [])
        )
    }
    assert QUEUE_POLICY in policies and len(policies) >= 2
    job_controller = "system:serviceaccount:kube-system:job-controller"
    for name, policy in policies.items():
        verdict = admit(policy, pod, namespace, user_groups=["system:serviceaccounts"],
                        username=job_controller)  # fmt: skip
        assert verdict == (True, None), name
    _assert_within_limit_range(result, pod)
    # without the injected security context the sidecar keeps NET_BIND_SERVICE: refused
    bare = _primary_pod(runtime, trial, collector, inject_security_context=False)
    admitted, _ = admit(policies["trainingplatform-lustre-boundary"], bare, namespace,
                        username=job_controller)  # fmt: skip
    assert not admitted
    # the same pod outside its gang (no pod group) would be refused by the queue policy
    loose = copy.deepcopy(pod)
    del loose["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    admitted, _ = admit(policies[QUEUE_POLICY], loose, namespace, username=job_controller)
    assert not admitted


LIMIT_RANGE: Final = "kubernetes:core/v1:LimitRange"


def _assert_within_limit_range(result: StackResult, pod: dict[str, Any]) -> None:
    """Every container requests at least the team LimitRange's minimum (the LimitRanger
    admission plugin refuses the pod otherwise)."""
    namespace = pod["metadata"]["namespace"]
    (limits,) = [
        r.inputs["spec"]["limits"]
        for r in result.records
        if r.type == LIMIT_RANGE and r.inputs["metadata"]["namespace"] == namespace
    ]
    minimum = next(limit["min"] for limit in limits if limit["type"] == "Container")
    for container in pod["spec"]["containers"]:
        requests = container.get("resources", {}).get("requests", {})
        for resource, least in minimum.items():
            if resource in requests:  # else the LimitRange's default request applies
                assert quantity(requests[resource]) >= quantity(least), (
                    container["name"],
                    resource,
                )


def _suggestion_deployment(
    experiment: dict[str, Any], suggestion: dict[str, Any]
) -> dict[str, Any]:
    """The Deployment Katib's controller makes for an experiment's suggestion, in its namespace:
    the config entry as the container, named ``suggestion``, with the API port (kubeflow/katib
    v0.19.0 pkg/controller.v1beta1/suggestion/composer/composer.go, DesiredDeployment)."""
    container = {
        key: value
        for key, value in suggestion.items()
        if key not in ("algorithmName", "serviceAccountName", "volumeMountPath")
    }
    container.update(
        name="suggestion",
        resources=_katib_resources(suggestion),
        ports=[{"name": "katib-api", "containerPort": 6789}],
    )
    name = f"{experiment['metadata']['name']}-{suggestion['algorithmName']}"
    labels = {"katib.kubeflow.org/experiment": experiment["metadata"]["name"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": experiment["metadata"]["namespace"]},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.mark.parametrize(("stack", "experiment"), _examples())
def test_the_suggestion_katib_runs_in_the_team_namespace_is_admitted(
    synthesized: dict[str, StackResult], stack: str, experiment: dict[str, Any]
) -> None:
    result = synthesized[stack]
    namespace = _team_namespace(result, experiment["metadata"]["namespace"])
    config = katib_config(result.config.trainer.legacy_training_operator)
    suggestion = next(
        s
        for s in config["runtime"]["suggestions"]
        if s["algorithmName"] == experiment["spec"]["algorithm"]["algorithmName"]
    )
    deployment = _suggestion_deployment(experiment, suggestion)
    assert validation_errors(deployment, result.config.cluster.kubernetes_version, None) == []
    policies = {
        record.inputs["metadata"]["name"]: record.inputs["spec"]
        for record in result.records
        if record.type == POLICY
        and any(
            "apps" in rule.get("apiGroups", []) and "deployments" in rule.get("resources", [])
            for rule in record.inputs["spec"].get("matchConstraints", {}).get("resourceRules", [])
        )
    }
    assert "trainingplatform-lustre-boundary" in policies
    groups = ["system:serviceaccounts"]
    for name, policy in policies.items():
        verdict = admit(policy, deployment, namespace, user_groups=groups, username=CONTROLLER)
        assert verdict == (True, None), name
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "suggestion-pod", "namespace": namespace["metadata"]["name"]},
        "spec": deployment["spec"]["template"]["spec"],
    }
    _assert_within_limit_range(result, pod)
    # as the release's config has it (no security context), the boundary refuses it
    bare = copy.deepcopy(deployment)
    del bare["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    admitted, _ = admit(
        policies["trainingplatform-lustre-boundary"], bare, namespace, username=CONTROLLER
    )
    assert not admitted
