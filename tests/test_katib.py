"""Katib standalone (issue 42 item 3): its release manifests, its config, database and UI."""

from __future__ import annotations

import copy
from typing import Any, Final

import pulumi
import pytest
import yaml

from components import versions
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.katib import (
    COMPONENTS,
    CONFIG_KEY,
    CONFIG_MAP,
    INIT_CONFIG_ANNOTATION,
    LEGACY_TRIALS,
    METRICS_COLLECTOR_INJECTION,
    MYSQL,
    NAMESPACE,
    STORAGE_CLASS,
    TRAINJOB_TRIAL,
    UI_ACCESS_SERVICE,
    init_config_digest,
    katib_config,
    katib_object,
    katib_transform,
    ui_access_service,
)
from components.platform import validated_config
from components.teams import CONTAINER_MIN_CPU, CONTAINER_MIN_MEMORY, KATIB_RULES
from synth.run import StackResult
from tests.config_problems import assert_reported
from tests.conftest import STACKS, ProgramRun, stack_data
from tests.kubernetes_semantics import quantity
from tests.schemas import validation_errors

KUSTOMIZE: Final = "kubernetes:kustomize/v2:Directory"
DEPLOYMENT: Final = "kubernetes:apps/v1:Deployment"
KATIB_TYPE: Final = "trainingplatform:index:Katib"


def _enabled(stack: str) -> bool:
    return bool(stack_data(stack).get("katib", {}).get("enabled", False))


def _katib(result: StackResult) -> list[Any]:
    (root,) = [r for r in result.records if r.type == KATIB_TYPE]
    return [r for r in result.records if r.parent == root.urn]


def _named(records: list[Any], resource_type: str, name: str) -> Any:
    (found,) = [
        r for r in records if r.type == resource_type and r.inputs["metadata"]["name"] == name
    ]
    return found


def _config_map(result: StackResult) -> dict[str, Any]:
    record = _named(_katib(result), "kubernetes:core/v1:ConfigMap", CONFIG_MAP)
    assert record.inputs["metadata"]["namespace"] == NAMESPACE
    loaded: dict[str, Any] = yaml.safe_load(record.inputs["data"][CONFIG_KEY])
    return loaded


# --------------------------------------------------------------------------- config


def test_katib_is_off_by_default_and_where_the_stacks_say() -> None:
    data = stack_data("dev")
    data.pop("katib", None)
    assert validated_config(data).katib.enabled is False
    assert _enabled("dev") and _enabled("staging")
    prod = stack_data("prod")
    # prod says so itself, with its reason beside it
    assert prod["katib"] == {"enabled": False}


def test_katib_without_trainer_is_refused() -> None:
    data = stack_data("dev")
    data["trainer"] = {"enabled": False}
    data["slurm"] = {"enabled": False}
    assert_reported(data, "platform.katib.enabled", True, "trainer.enabled is false")


@pytest.mark.parametrize(
    ("katib", "path", "value", "allowed"),
    [
        ({"enabled": True, "databaseStorageGiB": 5}, "platform.katib.databaseStorageGiB", 5, "10"),
        ({"enabled": "yes please"}, "platform.katib.enabled", "yes please", "true or false"),
        ({"enabled": True, "version": "v0.18.0"}, "platform.katib.version", "v0.18.0", "enabled"),
    ],
)
def test_bad_katib_input_names_key_value_and_what_is_allowed(
    katib: dict[str, Any], path: str, value: Any, allowed: str
) -> None:
    data = stack_data("dev")
    data["katib"] = katib
    assert_reported(data, path, value, allowed)


# --------------------------------------------------------------------------- what synthesis sees


@pytest.mark.parametrize("stack", STACKS)
def test_katib_only_where_enabled(synthesized: dict[str, StackResult], stack: str) -> None:
    roots = [r for r in synthesized[stack].records if r.type == KATIB_TYPE]
    assert len(roots) == (1 if _enabled(stack) else 0)


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_release_manifests_are_the_pinned_components(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    directories = [r for r in _katib(synthesized[stack]) if r.type == KUSTOMIZE]
    assert sorted(d.inputs["directory"] for d in directories) == sorted(
        f"https://github.com/kubeflow/katib.git/manifests/v1beta1/components/{c}"
        f"?ref={versions.KATIB_VERSION}"
        for c in COMPONENTS
    )
    # Neither the release's namespace nor its MySQL: the stack makes both itself.
    assert not {"namespace", "mysql"} & set(COMPONENTS)
    # The controller starts after Trainer (it watches only the trial kinds whose CRDs exist)
    run = ProgramRun(synthesized[stack].records)
    trainer = run.one("kubernetes:helm.sh/v3:Release", "kubeflow-trainer")
    controller = next(d for d in directories if "/controller?" in d.inputs["directory"])
    assert trainer.urn in controller.dependencies


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_trials_are_trainjobs_plus_legacy_kinds_only_with_the_legacy_operator(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    config = _config_map(synthesized[stack])
    legacy = bool(stack_data(stack).get("trainer", {}).get("legacyTrainingOperator"))
    resources = config["init"]["controller"]["trialResources"]
    assert resources[0] == TRAINJOB_TRIAL
    assert resources == [TRAINJOB_TRIAL, *(LEGACY_TRIALS if legacy else ())]
    assert "Job.v1.batch" not in resources
    assert config["kind"] == "KatibConfig"
    assert any(c["kind"] == "StdOut" for c in config["runtime"]["metricsCollectors"])


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_every_katib_image_is_pinned_to_the_release(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    config = _config_map(synthesized[stack])
    runtime = config["runtime"]
    images = [
        entry["image"]
        for section in ("metricsCollectors", "suggestions", "earlyStoppings")
        for entry in runtime.get(section, [])
    ]
    assert images
    for image in images:
        assert image.startswith("ghcr.io/kubeflow/katib/"), image
        assert image.endswith(f":{versions.KATIB_VERSION}"), image
    database = _named(_katib(synthesized[stack]), DEPLOYMENT, MYSQL)
    (container,) = database.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == versions.KATIB_MYSQL_IMAGE
    assert ":" in container["image"].rsplit("/", 1)[-1]
    assert not container["image"].endswith(":latest")


KATIB_DEFAULT_REQUESTS: Final = {"cpu": "50m", "memory": "10Mi"}
"""What Katib requests for a container its config gives no request (kubeflow/katib v0.19.0
pkg/apis/config/v1beta1/defaults.go, DefaultCPURequest and DefaultMemRequest)."""


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_katibs_containers_in_team_namespaces_meet_the_limit_range_and_the_boundary(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Katib fills unset requests with 10Mi of memory, below the team LimitRange's minimum:
    each metrics collector and suggestion states its own; suggestions drop every capability
    (the Lustre boundary); no early stopping, whose container cannot."""
    runtime = _config_map(synthesized[stack])["runtime"]
    assert quantity(KATIB_DEFAULT_REQUESTS["memory"]) < quantity(CONTAINER_MIN_MEMORY)
    entries = [*runtime["metricsCollectors"], *runtime["suggestions"]]
    for entry in entries:
        requests = {**KATIB_DEFAULT_REQUESTS, **entry.get("resources", {}).get("requests", {})}
        assert quantity(requests["memory"]) >= quantity(CONTAINER_MIN_MEMORY), entry
        assert quantity(requests["cpu"]) >= quantity(CONTAINER_MIN_CPU), entry
    for suggestion in runtime["suggestions"]:
        assert suggestion["securityContext"]["capabilities"]["drop"] == ["ALL"], suggestion
        assert suggestion["securityContext"]["allowPrivilegeEscalation"] is False
    assert runtime.get("earlyStoppings", []) == []


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_database_is_on_an_encrypted_volume_retained_in_every_stack(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Issue 42: the DB on a retained, encrypted volume, also where state is unprotected."""
    records = _katib(synthesized[stack])
    protect = synthesized[stack].config.protect_stateful_resources
    assert not protect, f"{stack} runs Katib unprotected: the case this test is about"
    volume_class = _named(records, "kubernetes:storage.k8s.io/v1:StorageClass", STORAGE_CLASS)
    assert volume_class.inputs["parameters"]["encrypted"] == "true"
    assert volume_class.inputs["parameters"]["type"] == "gp3"
    assert volume_class.inputs["reclaimPolicy"] == "Retain"
    claim = _named(records, "kubernetes:core/v1:PersistentVolumeClaim", MYSQL)
    assert claim.inputs["spec"]["storageClassName"] == STORAGE_CLASS
    namespace = _named(records, "kubernetes:core/v1:Namespace", NAMESPACE)
    secret = _named(records, "kubernetes:core/v1:Secret", "katib-mysql-secrets")
    # the objects follow protectStatefulResources (policy retained-resources-protected)
    for kept in (claim, namespace, secret):
        assert (kept.protect, kept.retain_on_delete) == (protect, protect), kept.name
    database = _named(records, DEPLOYMENT, MYSQL)
    (volume,) = database.inputs["spec"]["template"]["spec"]["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == MYSQL
    assert database.inputs["spec"]["strategy"] == {"type": "Recreate"}


def test_a_protected_stack_retains_the_database(run_platform: Any) -> None:
    data = stack_data("dev")
    data["protectStatefulResources"] = True
    records = ProgramRun(run_platform(data).records).records
    (root,) = [r for r in records if r.type == KATIB_TYPE]
    mine = [r for r in records if r.parent == root.urn]
    claim = _named(mine, "kubernetes:core/v1:PersistentVolumeClaim", MYSQL)
    assert claim.protect and claim.retain_on_delete
    volume_class = _named(mine, "kubernetes:storage.k8s.io/v1:StorageClass", STORAGE_CLASS)
    assert volume_class.inputs["reclaimPolicy"] == "Retain"


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_database_runs_on_the_system_nodes_and_validates(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    database = _named(_katib(synthesized[stack]), DEPLOYMENT, MYSQL)
    pod = database.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert SYSTEM_TOLERATION in pod["tolerations"]
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", **database.inputs}
    version = synthesized[stack].config.cluster.kubernetes_version
    assert validation_errors(manifest, version, None) == []


@pytest.mark.parametrize("stack", STACKS)
def test_team_namespaces_get_the_metrics_collector_only_with_katib(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    teams = [
        r.inputs["metadata"]
        for r in synthesized[stack].records
        if r.type == "kubernetes:core/v1:Namespace"
        and "trainingplatform.io/team" in (r.inputs["metadata"].get("labels") or {})
    ]
    assert teams
    for metadata in teams:
        labelled = METRICS_COLLECTOR_INJECTION.items() <= metadata["labels"].items()
        assert labelled == _enabled(stack), metadata["name"]


def test_members_write_experiments_and_read_what_katib_makes() -> None:
    writes = [r for r in KATIB_RULES if "experiments" in r["resources"]]
    assert writes and "create" in writes[0]["verbs"] and writes[0]["apiGroups"] == ["kubeflow.org"]
    reads = [r for r in KATIB_RULES if "trials" in r["resources"]]
    assert reads and set(reads[0]["verbs"]) == {"get", "list", "watch"}


# --------------------------------------------------------------------------- the UI


@pytest.mark.parametrize("stack", [s for s in STACKS if _enabled(s)])
def test_ui_service_follows_the_exposure_setting(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    service = _named(_katib(synthesized[stack]), "kubernetes:core/v1:Service", UI_ACCESS_SERVICE)
    exposure = synthesized[stack].config.cluster.ui_exposure
    assert service.inputs["spec"] == ui_access_service(exposure)["spec"]
    assert service.inputs["spec"]["type"] == (
        "ClusterIP" if exposure.mode == "portForward" else "LoadBalancer"
    )
    data = stack_data(stack)
    data["cluster"]["uiExposure"] = {
        "mode": "internalLoadBalancer",
        "clientCidrs": ["192.168.0.0/24"],
    }
    if "oidc" in data:  # Grafana logs in through it, behind the balancer at its address
        data.setdefault("observability", {}).setdefault("grafana", {})["url"] = (
            "https://grafana.example.com"
        )
    balanced = ui_access_service(validated_config(data).cluster.ui_exposure)
    assert balanced["spec"]["type"] == "LoadBalancer"
    assert balanced["spec"]["loadBalancerSourceRanges"] == ["192.168.0.0/24"]
    assert balanced["spec"]["selector"] == {"katib.kubeflow.org/component": "ui"}


# --------------------------------------------------------------------------- the transform


def _webhooks() -> dict[str, Any]:
    """The release's pod webhook (kubeflow/katib v0.19.0 manifests/v1beta1/components/webhook/
    webhooks.yaml), as the kustomization renders it."""
    return {
        "metadata": {"name": "katib.kubeflow.org"},
        "webhooks": [
            {
                "name": "mutator.pod.katib.kubeflow.org",
                "clientConfig": {
                    "service": {
                        "name": "katib-controller",
                        "namespace": "kubeflow",
                        "path": "/mutate-pod",
                    }
                },
                "matchConditions": [
                    {
                        "name": "exclude-katib-controller",
                        "expression": 'request.userInfo.username != "system:serviceaccount:kubeflow:katib-controller"',
                    }
                ],
            }
        ],
    }


def test_release_objects_move_to_katibs_namespace_with_every_reference() -> None:
    hooks = katib_object(
        "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", _webhooks()
    )
    assert hooks is not None
    (hook,) = hooks["webhooks"]
    assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    assert (
        f"system:serviceaccount:{NAMESPACE}:katib-controller"
        in hook["matchConditions"][0]["expression"]
    )
    assert "kubeflow:" not in hook["matchConditions"][0]["expression"]
    # a Katib outage must not stop every pod of a searching team's namespace
    assert "failurePolicy" not in _webhooks()["webhooks"][0], "the release sets none: Fail"
    assert hook["failurePolicy"] == "Ignore"
    experiments = {
        "metadata": {"name": "katib.kubeflow.org"},
        "webhooks": [
            {
                "name": "validator.experiment.katib.kubeflow.org",
                "clientConfig": {"service": {"name": "katib-controller", "namespace": "kubeflow"}},
            }
        ],
    }
    validator = katib_object(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", experiments
    )
    assert validator is not None and "failurePolicy" not in validator["webhooks"][0]
    binding = {
        "metadata": {"name": "katib-controller"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "katib-controller", "namespace": "kubeflow"}
        ],
    }
    moved = katib_object("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", binding)
    assert moved is not None and moved["subjects"][0]["namespace"] == NAMESPACE
    account = {"metadata": {"name": "katib-ui", "namespace": "kubeflow"}}
    moved = katib_object("kubernetes:core/v1:ServiceAccount", account)
    assert moved is not None and moved["metadata"]["namespace"] == NAMESPACE
    assert account["metadata"]["namespace"] == "kubeflow", "the input is not changed"
    # a cluster-scoped object without a reference stays as it is
    assert (
        katib_object(
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            {"metadata": {"name": "katib-ui"}},
        )
        is None
    )


@pytest.mark.parametrize("component", ["katib-controller", "katib-db-manager", "katib-ui"])
def test_release_deployments_run_pinned_on_the_system_nodes(component: str) -> None:
    deployment = {
        "metadata": {"name": component, "namespace": "kubeflow"},
        "spec": {
            "template": {
                "spec": {
                    "tolerations": [copy.deepcopy(SYSTEM_TOLERATION)],
                    "containers": [
                        {"name": component, "image": f"ghcr.io/kubeflow/katib/{component}"}
                    ],
                }
            }
        },
    }
    placed = katib_object(DEPLOYMENT, deployment)
    assert placed is not None
    pod = placed["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert pod["tolerations"] == [SYSTEM_TOLERATION], "the toleration once"
    assert (
        pod["containers"][0]["image"]
        == f"ghcr.io/kubeflow/katib/{component}:{versions.KATIB_VERSION}"
    )
    assert placed["metadata"]["namespace"] == NAMESPACE


def _controller() -> dict[str, Any]:
    """The release's controller Deployment, as far as the rewrite reads it."""
    return {
        "metadata": {"name": "katib-controller", "namespace": "kubeflow"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"prometheus.io/scrape": "true"}},
                "spec": {
                    "containers": [
                        {
                            "name": "katib-controller",
                            "image": "ghcr.io/kubeflow/katib/katib-controller",
                        }
                    ]
                },
            }
        },
    }


def _annotations(init_digest: str, name: str = "katib-controller") -> dict[str, str]:
    deployment = _controller()
    deployment["metadata"]["name"] = name
    placed = katib_object(DEPLOYMENT, deployment, init_digest=init_digest)
    assert placed is not None
    annotations: dict[str, str] = placed["spec"]["template"]["metadata"].get("annotations", {})
    return annotations


def test_the_controller_restarts_when_trial_resources_change() -> None:
    """The controller reads katib-config's init section only at start (kubeflow/katib v0.19.0
    cmd/katib-controller/v1beta1/main.go): its pod template carries the section's digest, so
    switching the legacy operator's trial kinds on rolls it; a runtime-only change does not."""
    without, with_legacy = katib_config(False), katib_config(True)
    assert without["init"] != with_legacy["init"]
    before = _annotations(init_digest_of := init_config_digest(without))
    after = _annotations(init_config_digest(with_legacy))
    assert before[INIT_CONFIG_ANNOTATION] == init_digest_of
    assert before[INIT_CONFIG_ANNOTATION] != after[INIT_CONFIG_ANNOTATION]
    assert before["prometheus.io/scrape"] == "true", "the release's annotations stay"
    runtime_only = copy.deepcopy(without)
    runtime_only["runtime"]["suggestions"] = []
    assert init_config_digest(runtime_only) == init_digest_of
    # only the controller restarts
    assert INIT_CONFIG_ANNOTATION not in _annotations(init_digest_of, "katib-ui")


def test_the_transform_annotates_the_controller_as_the_stack_applies_it() -> None:
    digest = init_config_digest(katib_config(True))
    args = pulumi.ResourceTransformArgs(
        custom=True,
        type_=DEPLOYMENT,
        name="katib-controller",
        props=_controller(),
        opts=pulumi.ResourceOptions(),
    )
    result = katib_transform(digest)(args)
    assert result is not None
    props: dict[str, Any] = dict(result.props)
    template = props["spec"]["template"]
    assert template["metadata"]["annotations"][INIT_CONFIG_ANNOTATION] == digest


def test_katib_waits_for_the_legacy_operator_where_it_runs(
    synthesized: dict[str, StackResult],
) -> None:
    """Its CRDs must exist when the controller starts: it watches only the kinds it finds."""
    result = synthesized["staging"]
    assert result.config.trainer.legacy_training_operator
    (operator,) = [
        r for r in result.records if r.type == KUSTOMIZE and r.name == "training-operator"
    ]
    controller = _named_directory(_katib(result), "katib-controller")
    assert operator.urn in controller.dependencies


def _named_directory(records: list[Any], name: str) -> Any:
    (found,) = [r for r in records if r.type == KUSTOMIZE and r.name == name]
    return found
