"""KubeRay: the operator's release, its CRDs, its config section (issue 42, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from components import kuberay, versions
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.scheduling import RAY_QUEUE_LABEL
from components.teams import TEAM_LABEL
from components.tenancy import QUEUE_POLICY
from components.tenant_api import RAY_CLUSTER_SELECTOR_POLICY, ray_cluster_selector_policy
from synth.jobs.rbac import allowed
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import STACKS, stack_data
from tests.reference_paths import chart_dir
from tests.test_admission_policies import admit

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


def _operator(result: StackResult) -> list[Any]:
    return [
        r
        for r in result.records
        if r.type == HELM_RELEASE and r.inputs["chart"] == versions.KUBERAY_OPERATOR_CHART.chart
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_the_operator_is_installed_where_ray_is_on_and_only_there(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    releases = _operator(result)
    assert len(releases) == (1 if result.config.ray.enabled else 0)
    crds = [r for r in result.records if r.type == CONFIG_FILE and r.name.startswith("kuberay-")]
    assert len(crds) == (len(versions.KUBERAY_CRD_KINDS) if result.config.ray.enabled else 0)


def test_dev_and_staging_run_ray_and_prod_says_it_does_not() -> None:
    assert stack_data("dev")["ray"]["enabled"] is True
    assert stack_data("staging")["ray"]["enabled"] is True
    # prod says what it wants, rather than taking the default
    assert stack_data("prod")["ray"] == {"enabled": False}


def test_volcano_is_the_batch_scheduler_by_a_key_the_chart_reads(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """``batchScheduler.name`` becomes ``--batch-scheduler=volcano`` (kuberay v1.7.0
    helm-chart/kuberay-operator/templates/deployment.yaml); ``enabled`` must stay false, or the
    operator refuses to start with both flags (config_utils.go)."""
    defaults = load_yaml(
        (
            reference_dir / "charts" / chart_dir(versions.KUBERAY_OPERATOR_CHART) / "values.yaml"
        ).read_text()
    )
    assert set(defaults["batchScheduler"]) == {"enabled", "name"}
    (release,) = _operator(synthesized["dev"])
    values = release.inputs["values"]
    assert values["batchScheduler"] == {"enabled": False, "name": "volcano"}


def test_the_operator_runs_on_the_system_nodes(synthesized: dict[str, StackResult]) -> None:
    (release,) = _operator(synthesized["dev"])
    values = release.inputs["values"]
    assert values["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert SYSTEM_TOLERATION in values["tolerations"]
    assert release.inputs["namespace"] == kuberay.NAMESPACE
    assert release.inputs["atomic"] is True


def test_the_crds_are_the_stacks_own_and_upgrade_with_the_pin(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    (release,) = _operator(result)
    # Helm never upgrades crds/: the release skips them, the stack applies them first
    assert release.inputs["skipCrds"] is True
    applied = {
        r.inputs["file"]: r
        for r in result.records
        if r.type == CONFIG_FILE and r.name.startswith("kuberay-crds-")
    }
    assert sorted(applied) == sorted(versions.KUBERAY_CRDS_URLS)
    for url, record in applied.items():
        assert f"/v{versions.KUBERAY_VERSION}/helm-chart/kuberay-operator/crds/" in url
        assert record.urn in release.dependencies


def test_the_crds_the_tests_validate_against_are_the_pinned_release(reference_dir: Path) -> None:
    crds = reference_dir / "crds" / "kuberay" / f"v{versions.KUBERAY_VERSION}"
    for kind in ("rayclusters", "rayjobs"):
        assert (crds / f"ray.io_{kind}.yaml").is_file()
        assert any(url.endswith(f"ray.io_{kind}.yaml") for url in versions.KUBERAY_CRDS_URLS)


def test_an_unknown_ray_key_is_refused_with_its_path() -> None:
    data = stack_data("dev")
    data["ray"] = {"enabled": True, "enable": True}
    assert_reported(data, "platform.ray.enable", True, "enabled")


def test_a_ray_switch_that_is_not_a_boolean_is_refused() -> None:
    data = stack_data("dev")
    data["teams"][0]["ray"] = {"allowClusterSelector": "yes"}
    assert_reported(data, "platform.teams[0].ray.allowClusterSelector", "yes", "true or false")


# --- item 1, per team: RBAC and admission --------------------------------------------------

RAY_STACKS: Final = [stack for stack in STACKS if stack_data(stack).get("ray", {}).get("enabled")]
POLICY: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
NAMESPACE: Final = "kubernetes:core/v1:Namespace"


def test_ray_is_on_somewhere() -> None:
    assert RAY_STACKS == ["dev", "staging"]


def _policy(result: StackResult, name: str) -> dict[str, Any]:
    (record,) = [
        r for r in result.records if r.type == POLICY and r.inputs["metadata"]["name"] == name
    ]
    spec: dict[str, Any] = record.inputs["spec"]
    return spec


def _team_namespace(result: StackResult, team: str) -> dict[str, Any]:
    (namespace,) = [
        r.inputs
        for r in result.records
        if r.type == NAMESPACE and r.inputs["metadata"]["name"] == team
    ]
    assert namespace["metadata"]["labels"][TEAM_LABEL] == team
    return dict(namespace)


def _ray_object(kind: str, team: str, queue: str | None, **spec: Any) -> dict[str, Any]:
    labels = {} if queue is None else {RAY_QUEUE_LABEL: queue}
    return {
        "apiVersion": "ray.io/v1",
        "kind": kind,
        "metadata": {"name": "train", "namespace": team, "labels": labels},
        "spec": spec or {"rayVersion": "2.52.0"},
    }


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_members_run_ray_objects_in_their_namespace_only(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    view = StackView.from_records(synthesized[stack].records)
    teams = stack_data(stack)["teams"]
    for team in teams:
        for group in team.get("memberGroups", []):
            member = ("Group", group)
            for resource in ("rayjobs", "rayclusters", "rayservices"):
                for verb in ("create", "update", "patch", "delete", "get", "list", "watch"):
                    assert allowed(
                        view, member, verb, "ray.io", resource, namespace=team["name"]
                    ), (team["name"], verb, resource)
                others = [t["name"] for t in teams if t["name"] != team["name"]]
                for namespace in [*others, "kube-system", kuberay.NAMESPACE]:
                    assert not allowed(
                        view, member, "create", "ray.io", resource, namespace=namespace
                    )
                # status is KubeRay's to write
                assert not allowed(
                    view, member, "update", "ray.io", f"{resource}/status", namespace=team["name"]
                )


@pytest.mark.parametrize("stack", RAY_STACKS)
@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_a_ray_object_goes_to_its_teams_queue_on_create_and_update(
    synthesized: dict[str, StackResult], stack: str, kind: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, QUEUE_POLICY)
    teams = [t["name"] for t in stack_data(stack)["teams"]]
    for team in teams:
        namespace = _team_namespace(result, team)
        own = _ray_object(kind, team, team)
        assert admit(policy, own, namespace) == (True, None)
        assert admit(policy, own, namespace, old=own)[0]
        # no label: KubeRay's PodGroup would land in Volcano's default queue
        unlabelled = _ray_object(kind, team, None)
        ok, message = admit(policy, unlabelled, namespace)
        assert not ok and message and RAY_QUEUE_LABEL in message and team in message
        for other in ["default", *(t for t in teams if t != team)]:
            foreign = _ray_object(kind, team, other)
            ok, message = admit(policy, foreign, namespace)
            assert not ok and message and f"not {other}" in message
            # an update that moves only the label (the spec unchanged) is judged too
            assert not admit(policy, foreign, namespace, old=own)[0]
            assert not admit(policy, unlabelled, namespace, old=own)[0]
        # KubeRay's own status writes change neither spec nor labels: not judged again
        written = {**own, "status": {"state": "ready"}}
        assert admit(policy, written, namespace, old=own) == (True, None)


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_the_cluster_a_rayjob_makes_passes_where_the_rayjob_did(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """KubeRay copies the RayJob's labels onto its RayCluster (kuberay v1.7.0
    rayjob_controller.go, constructRayClusterForRayJob) and adds its own."""
    result = synthesized[stack]
    policy = _policy(result, QUEUE_POLICY)
    team = stack_data(stack)["teams"][0]["name"]
    job = _ray_object("RayJob", team, team, rayClusterSpec={"rayVersion": "2.52.0"})
    cluster = _ray_object("RayCluster", team, None, rayVersion="2.52.0")
    cluster["metadata"]["labels"] = {
        **job["metadata"]["labels"],
        "ray.io/originated-from-cr-name": "train",
        "ray.io/originated-from-crd": "RayJob",
    }
    namespace = _team_namespace(result, team)
    assert admit(policy, job, namespace) == (True, None)
    assert admit(policy, cluster, namespace) == (True, None)


SELECTED: Final = {"clusterSelector": {"ray.io/cluster": "shared"}, "entrypoint": "python x.py"}


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_a_rayjob_on_an_existing_cluster_is_refused_unless_its_team_allows_it(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    policy = _policy(result, RAY_CLUSTER_SELECTOR_POLICY)
    teams = stack_data(stack)["teams"]
    allowed_teams = [t["name"] for t in teams if t.get("ray", {}).get("allowClusterSelector")]
    assert policy == ray_cluster_selector_policy(team_label=TEAM_LABEL, allowed=allowed_teams)
    for team in (t["name"] for t in teams):
        namespace = _team_namespace(result, team)
        own = _ray_object(
            "RayJob", team, team, rayClusterSpec={"rayVersion": "2.52.0"}, entrypoint="python x.py"
        )
        selecting = _ray_object("RayJob", team, team, **SELECTED)
        assert admit(policy, own, namespace) == (True, None)
        assert admit(policy, own, namespace, old=own) == (True, None)
        for old in (None, own):
            ok, message = admit(policy, selecting, namespace, old=old)
            assert ok is (team in allowed_teams)
            if not ok:
                assert message and "allowClusterSelector" in message
        # an empty selector selects nothing: KubeRay makes the job its own cluster
        assert admit(policy, _ray_object("RayJob", team, team, clusterSelector={}), namespace)[0]


def test_a_team_that_allows_cluster_selectors_gets_them() -> None:
    policy = ray_cluster_selector_policy(team_label=TEAM_LABEL, allowed=["ml-research"])
    selecting = _ray_object("RayJob", "ml-research", "ml-research", **SELECTED)
    namespace = {"metadata": {"name": "ml-research", "labels": {TEAM_LABEL: "ml-research"}}}
    assert admit(policy, selecting, namespace) == (True, None)
    other = {"metadata": {"name": "ml-product", "labels": {TEAM_LABEL: "ml-product"}}}
    assert not admit(policy, {**selecting, "metadata": {"name": "x"}}, other)[0]
