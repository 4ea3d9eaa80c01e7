"""KubeRay: the operator's release, its CRDs, its config section (issue 42, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components import kuberay, versions
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import STACKS, stack_data
from tests.reference_paths import chart_dir

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
