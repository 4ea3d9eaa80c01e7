"""Every Helm release of every stack against its chart's published defaults (reference data).

A value the chart does not define is silently ignored by Helm, so a misspelt or invented key is a
setting that never takes effect. Each release's chart must be one of the bill of materials, at the
version whose default ``values.yaml`` is in the reference data, and every key path it sets must
exist in those defaults wherever the chart defines the structure.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from components import versions
from components.versions import HelmChart
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.reference_paths import chart_dir

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

KNOWN_CHARTS: dict[str, HelmChart] = {
    chart.chart: chart for chart in vars(versions).values() if isinstance(chart, HelmChart)
}
"""Every chart of the bill of materials, by the reference a release passes as ``chart``."""

FREE_FORM_KEYS = frozenset({"nodeSelector", "labels", "annotations", "matchLabels", "configMap"})
"""Kubernetes string maps (label selectors, labels, annotations) and the slurm chart's maps of
Slurm options (a partition's ``configMap``): their keys are label names or Slurm parameters, not
chart structure, so a non-empty default there (karpenter's ``nodeSelector: {kubernetes.io/os:
linux}``) is an example that Helm merges ours into, not a list of allowed keys."""

TRAITLETS_CONFIG_PATHS = frozenset({"hub.config"})
"""The jupyterhub chart's ``hub.config``: JupyterHub's traitlets config, class -> trait
(jupyterhub/zero-to-jupyterhub-k8s 4.4.0 jupyterhub/values.schema.yaml, ``hub.config``: any
keys), of which the defaults show one class only."""

KUBERNETES_TYPED_PATHS = ("podSpec", "service.spec")
"""Key paths (suffixes) whose value the chart documents as a Kubernetes type (the slurm chart's
``podSpec`` is a ``corev1.PodSpec``, ``service.spec`` a ``corev1.ServiceSpec``): any field of
that type is allowed, so they are checked against the Kubernetes schema (``test_slurm``), not
against the example fields in the defaults."""


KUBERNETES_CONTAINER_PATHS = re.compile(
    r"loginsets\.[^.]+\.(login|initconf)|controller\.(slurmctld|reconfigure|logfile)"
    r"|restapi\.slurmrestd|accounting\.slurmdbd"
)
"""The slurm chart's containers: ``slurm.format-container`` writes every field but ``image``
into the LoginSet, Controller, RestApi or Accounting as a ``corev1.Container``
(templates/_helpers.tpl, templates/{loginset,controller,restapi,accounting}/*-cr.yaml), so any
container field is allowed there (the written pods are checked against the Pod schema)."""


def _kubernetes_typed(path: str) -> bool:
    if KUBERNETES_CONTAINER_PATHS.fullmatch(path):
        return True
    return any(path == typed or path.endswith("." + typed) for typed in KUBERNETES_TYPED_PATHS)


MERGED_DEFAULTS: dict[str, dict[str, str]] = {
    "slurm": {"loginsets": "loginsetDefaults", "nodesets": "nodesetDefaults"}
}
"""Maps whose entries the chart merges over a defaults block: each entry may only use the keys
of that block."""


def unknown_value_paths(values: Any, defaults: Any, path: str = "") -> list[str]:
    """Key paths of ``values`` that the chart's ``defaults`` do not define.

    Where the default is a non-empty mapping, every key set under it must exist there (and be a
    mapping where the default is one); where it is an empty mapping, null, a list or a scalar, or
    a Kubernetes string map (:data:`FREE_FORM_KEYS`), anything under it is allowed.

    Args:
        values: what the release sets.
        defaults: the chart's default values at the same path.
        path: dotted path of ``values`` (for the report).
    """
    if not isinstance(defaults, dict) or not defaults:
        return []
    if not isinstance(values, dict):
        return [f"{path} (a mapping in the chart)"]
    problems: list[str] = []
    for key, value in values.items():
        here = f"{path}.{key}" if path else str(key)
        if key not in defaults:
            problems.append(here)
        elif (
            key not in FREE_FORM_KEYS
            and here not in TRAITLETS_CONFIG_PATHS
            and not _kubernetes_typed(here)
        ):
            problems.extend(unknown_value_paths(value, defaults[key], here))
    return problems


def merged_entry_paths(chart_name: str, values: Any, defaults: Any) -> list[str]:
    """Unknown key paths inside the entries of maps merged over a defaults block (``loginsets``
    over ``loginsetDefaults``), which :func:`unknown_value_paths` cannot see (empty defaults)."""
    problems: list[str] = []
    for map_key, defaults_key in MERGED_DEFAULTS.get(chart_name, {}).items():
        for entry_name, entry in (values.get(map_key) or {}).items():
            problems.extend(
                unknown_value_paths(entry, defaults[defaults_key], f"{map_key}.{entry_name}")
            )
    return problems


# -- the walker itself -----------------------------------------------------------------------

DEFAULTS: dict[str, Any] = {
    "replicas": 2,
    "settings": {"clusterName": "", "featureGates": {"reservedCapacity": True}},
    "resources": {},
    "tolerations": [],
    "migStrategy": None,
    "nodeSelector": {"kubernetes.io/os": "linux"},
}


def test_walker_accepts_keys_the_chart_defines() -> None:
    values = {"replicas": 3, "settings": {"clusterName": "x", "featureGates": {}}}
    assert unknown_value_paths(values, DEFAULTS) == []


def test_walker_reports_a_key_missing_from_the_defaults() -> None:
    assert unknown_value_paths({"replica": 3}, DEFAULTS) == ["replica"]


def test_walker_reports_nested_keys_with_their_full_path() -> None:
    values = {"settings": {"clusterName": "x", "interruptionQueue": "q", "featureGates": {"x": 1}}}
    assert unknown_value_paths(values, DEFAULTS) == [
        "settings.interruptionQueue",
        "settings.featureGates.x",
    ]


@pytest.mark.parametrize(
    "values",
    [
        {"resources": {"requests": {"cpu": "1"}}},  # empty-map default
        {"migStrategy": {"anything": True}},  # null default
        {"tolerations": [{"key": "k", "operator": "Exists"}]},  # list default
        {"replicas": {"odd": "but the chart's default is a scalar"}},  # scalar default
        {"nodeSelector": {"example.com/role": "system"}},  # Kubernetes label map
    ],
)
def test_walker_allows_anything_under_free_form_defaults(values: dict[str, Any]) -> None:
    assert unknown_value_paths(values, DEFAULTS) == []


def test_walker_reports_a_scalar_where_the_chart_has_structure() -> None:
    assert unknown_value_paths({"settings": "cluster"}, DEFAULTS) == [
        "settings (a mapping in the chart)"
    ]


def test_walker_allows_anything_when_the_chart_has_no_defaults() -> None:
    assert unknown_value_paths({"anything": {"at": "all"}}, None) == []
    assert unknown_value_paths({"anything": 1}, {}) == []


# -- the releases ----------------------------------------------------------------------------


def test_the_bill_of_materials_charts_are_all_known() -> None:
    for chart in (
        versions.KARPENTER_CRD_CHART,
        versions.KARPENTER_CHART,
        versions.NVIDIA_DEVICE_PLUGIN_CHART,
        versions.EFA_DEVICE_PLUGIN_CHART,
        versions.NEURON_CHART,
        versions.JOBSET_CHART,
    ):
        assert KNOWN_CHARTS[chart.chart] is chart


def _releases(result: StackResult) -> list[ResourceRecord]:
    releases = [r for r in result.records if r.type == HELM_RELEASE]
    assert releases, f"{result.stack} installs no Helm release"
    return releases


def _chart_of(release: ResourceRecord) -> HelmChart:
    reference = release.inputs["chart"]
    if reference not in KNOWN_CHARTS:
        pytest.fail(
            f"Helm release {release.name!r} installs chart {reference!r}, which has no reference "
            f"directory in components.versions (known: {sorted(KNOWN_CHARTS)})"
        )
    return KNOWN_CHARTS[reference]


def _chart_dir(reference_dir: Path, chart: HelmChart) -> Path:
    directory = reference_dir / "charts" / chart_dir(chart)
    assert directory.is_dir(), f"no reference data for {chart.chart} at {directory}"
    return directory


@cache
def _yaml(path: Path) -> Any:
    return load_yaml(path.read_text())


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_chart_has_a_reference_directory(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    for release in _releases(synthesized[stack]):
        chart = _chart_of(release)
        directory = _chart_dir(reference_dir, chart)
        assert (directory / "values.yaml").is_file(), directory
        assert release.inputs["chart"].rsplit("/", 1)[-1] == directory.parent.name
        assert _yaml(directory / "Chart.yaml")["name"] == directory.parent.name


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_version_is_the_reference_version(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    for release in _releases(synthesized[stack]):
        chart = _chart_of(release)
        directory = _chart_dir(reference_dir, chart)
        version = release.inputs["version"]
        assert version == chart.version, release.name
        if version != directory.name:
            # Only the chart's own spelling may differ from the directory name: the EFA chart's
            # Chart.yaml says "v0.5.30" (charts/SOURCES.md) and Helm matches that literally.
            chart_yaml_version = str(_yaml(directory / "Chart.yaml")["version"])
            assert version == chart_yaml_version, (
                f"{release.name}: version {version!r} is neither the reference directory "
                f"{directory.name!r} nor the chart's own {chart_yaml_version!r}"
            )
            assert version.removeprefix("v") == directory.name.removeprefix("v")


UNVERIFIED_SUBCHART_KEYS: dict[str, tuple[str, frozenset[str]]] = {
    "kube-prometheus-stack/grafana": (
        "grafana-community/helm-charts grafana-12.11.1 charts/grafana/values.yaml",
        frozenset({
            "envFromSecret", "grafana.ini", "nodeSelector", "tolerations", "resources",
            "serviceAccount.name", "sidecar.dashboards.folderAnnotation",
            # Grafana's organisations (components/observability/grafana_orgs.py).
            "sidecar.dashboards.SCProvider", "extraContainers", "extraContainerVolumes",
            "extraEmptyDirMounts", "podAnnotations",
            # The API token in the sidecars only, and the sidecars bounded (metrics_stack.py).
            "automountServiceAccountToken", "sidecar.dashboards.extraMounts",
            "sidecar.datasources.extraMounts", "sidecar.resources",
            # What the pod runs, ours rather than the subchart's (metrics_stack.py, each with
            # its values.yaml line; synth/chart_pods.py reads them).
            "image", "securityContext", "containerSecurityContext", "podPortName",
            "gossipPortName", "service.targetPort", "readinessProbe", "livenessProbe",
            "persistence", "sidecar.image", "sidecar.imagePullPolicy", "sidecar.securityContext",
            "sidecar.dashboards.folder",
        }),
    ),
    "kube-prometheus-stack/kube-state-metrics": (
        "prometheus-community/helm-charts kube-state-metrics-8.4.0 "
        "charts/kube-state-metrics/values.yaml",
        frozenset({
            "nodeSelector", "tolerations", "resources",
            # The cold-start ledger's (components/observability/ledger.py).
            "customResourceState", "rbac", "metricAnnotationsAllowList", "metricLabelsAllowlist",
            # The API token mounted explicitly, and what the pod runs, ours (metrics_stack.py).
            "automountServiceAccountToken", "volumes", "volumeMounts", "image", "securityContext",
            "containerSecurityContext", "livenessProbe", "readinessProbe",
        }),
    ),
}  # fmt: skip
"""Keys set under a subchart whose default values are not in the reference data (no
``charts/<subchart>/<version>``) and that the parent's own block of defaults does not list:
nothing here can check them, so each was read by hand in the file named (at the version the
parent's ``Chart.yaml`` pins) and is listed, and every run says so. A key not listed fails."""


def _subchart_versions(directory: Path) -> dict[str, str]:
    """Subchart key (alias or name) -> ``<name>/<version>`` of the chart's dependencies."""
    found = _yaml(directory / "Chart.yaml").get("dependencies") or []
    return {d.get("alias") or d["name"]: f"{d['name']}/{d['version']}" for d in found}


def subchart_value_paths(
    chart_name: str, values: Any, defaults: Any, reference_dir: Path, directory: Path
) -> tuple[list[str], list[str]]:
    """(unknown, unverified) key paths under a chart's subcharts.

    A subchart whose defaults are in the reference data is checked against them; otherwise
    (and its parent's block) are checked against them; otherwise
    the keys its parent's block does not define are unverified: allowed only where
    :data:`UNVERIFIED_SUBCHART_KEYS` lists them (read by hand), unknown everywhere else.

    Args:
        chart_name: the parent chart's name.
        values: the release's values.
        defaults: the parent's default values.
        reference_dir: the reference data.
        directory: the parent's reference directory (its ``Chart.yaml``).
    """
    unknown: list[str] = []
    unverified: list[str] = []
    for key, reference in _subchart_versions(directory).items():
        if not isinstance(values, dict) or key not in values:
            continue
        own = reference_dir / "charts" / reference / "values.yaml"
        if own.is_file():
            # The parent's block may add keys its templates read (Trainer's jobset.install).
            known = _helm_merged(_yaml(own), defaults.get(key) or {})
            unknown.extend(f"{key}.{p}" for p in unknown_value_paths(values[key], known))
            continue
        _, listed = UNVERIFIED_SUBCHART_KEYS.get(f"{chart_name}/{key}", ("", frozenset()))
        for path in unknown_value_paths(values[key], defaults.get(key) or {}):
            (unverified if path in listed else unknown).append(f"{key}.{path}")
    return unknown, unverified


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_value_exists_in_the_chart_defaults(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    problems: list[str] = []
    unverified: list[str] = []
    for release in _releases(synthesized[stack]):
        chart = _chart_of(release)
        directory = _chart_dir(reference_dir, chart)
        defaults = _yaml(directory / "values.yaml")
        values = release.inputs.get("values", {})
        chart_name = chart.chart.rsplit("/", 1)[-1]
        subcharts = _subchart_versions(directory)
        unknown, not_checked = subchart_value_paths(
            chart_name, values, defaults, reference_dir, directory
        )
        own = {k: v for k, v in values.items() if k not in subcharts}
        problems.extend(
            f"{release.name} ({chart_dir(chart)}): {path}"
            for path in [
                *unknown_value_paths(own, defaults),
                *merged_entry_paths(chart_name, values, defaults),
                *unknown,
            ]
        )
        unverified.extend(f"{release.name} ({chart_dir(chart)}): {p}" for p in not_checked)
    if unverified:
        warnings.warn(
            "UNVERIFIED subchart values (no reference defaults; read by hand, "
            "tests/test_helm_values.py UNVERIFIED_SUBCHART_KEYS):\n" + "\n".join(unverified),
            stacklevel=1,
        )
    assert not problems, "values the chart does not define:\n" + "\n".join(problems)


def test_a_subchart_key_nobody_read_is_refused(reference_dir: Path) -> None:
    """Grafana's block of kube-prometheus-stack lists a few of the grafana chart's keys: one it
    does not list is unverified where read by hand, unknown otherwise, never silently passed."""
    chart = versions.PROMETHEUS_STACK_CHART
    directory = _chart_dir(reference_dir, chart)
    defaults = _yaml(directory / "values.yaml")
    values = {"grafana": {"enabled": True, "envFromSecret": "s", "envFromSecretz": "s"},
              "kube-state-metrics": {"releaseLabel": True}}  # fmt: skip
    unknown, unverified = subchart_value_paths(
        chart.name, values, defaults, reference_dir, directory
    )
    assert unverified == ["grafana.envFromSecret"]
    assert unknown == ["grafana.envFromSecretz"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_value_matches_the_chart_schema(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """Where a chart ships ``values.schema.json``, Helm validates the merged values against it
    and refuses the install; the same check, offline (charts without a schema: none to run)."""
    checked: list[str] = []
    problems: list[str] = []
    for release in _releases(synthesized[stack]):
        chart = _chart_of(release)
        directory = _chart_dir(reference_dir, chart)
        paths = [p for p in (directory / "values.schema.json", directory / "values.schema.yaml")
                 if p.is_file()]  # fmt: skip
        if not paths:
            continue
        # The jupyterhub chart keeps its schema as YAML (its packaging writes the JSON file).
        schema = (json.loads(paths[0].read_text()) if paths[0].suffix == ".json"
                  else _yaml(paths[0]))  # fmt: skip
        merged = _helm_merged(_yaml(_chart_dir(reference_dir, chart) / "values.yaml"),
                              release.inputs.get("values", {}))  # fmt: skip
        validator = jsonschema.validators.validator_for(schema)(schema)
        problems.extend(f"{release.name}: {e.message}" for e in validator.iter_errors(merged))
        checked.append(release.name)
    assert problems == []
    if stack_has_slurm(synthesized[stack]):
        assert "cert-manager" in checked
    if stack in ("dev", "staging"):
        assert "jupyterhub" in checked


def stack_has_slurm(result: StackResult) -> bool:
    return any(r.type == HELM_RELEASE and r.name == "slurm" for r in result.records)


def _helm_merged(defaults: Any, values: Any) -> Any:
    """Values over defaults as Helm merges them: maps key by key, everything else replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        merged = dict(defaults)
        for key, value in values.items():
            merged[key] = _helm_merged(defaults.get(key), value)
        return merged
    return values


def test_the_jobset_release_sets_only_keys_of_its_chart(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    """JobSet, once Trainer's subchart, is its own release: its values are checked against
    kubernetes-sigs/jobset v0.12.0 charts/jobset/values.yaml like every other release's."""
    (release,) = [r for r in _releases(synthesized["dev"]) if r.name == "jobset"]
    assert _chart_of(release) is versions.JOBSET_CHART
    defaults = _yaml(_chart_dir(reference_dir, versions.JOBSET_CHART) / "values.yaml")
    values = release.inputs["values"]
    assert values and unknown_value_paths(values, defaults) == []
    assert unknown_value_paths({"controller": {"nodeSelectors": {}}}, defaults) == [
        "controller.nodeSelectors"
    ]
