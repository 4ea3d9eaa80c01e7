"""Device plugins: the pure value builders, and which plugins a stack installs under mocks.

Expectations come from the charts' default values (reference data, e.g. NVIDIA's at
https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/deployments/helm/nvidia-device-plugin/values.yaml): the NVIDIA
plugin runs where ``nvidia.com/gpu.present=true``, the EFA plugin on an instance-type allow list
and only tolerating what it is told to, the Neuron chart's second scheduler image follows the
cluster's minor version.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from components import versions
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.config import ConfigError, NodePoolConfig, PlatformConfig, parse_platform_config
from components.device_plugins import efa_values, neuron_values, nvidia_values
from components.node_pools import pool_labels
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.mutations import without_notebooks, without_slurm, without_teams
from tests.reference_paths import chart_dir

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NVIDIA = "nvidia-device-plugin"
EFA = "aws-efa-k8s-device-plugin"
NEURON = "neuron-helm-chart"
CHARTS = {
    NVIDIA: versions.NVIDIA_DEVICE_PLUGIN_CHART,
    EFA: versions.EFA_DEVICE_PLUGIN_CHART,
    NEURON: versions.NEURON_CHART,
}
EKS_REGISTRY = re.compile(
    r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?"
)


# -- helpers ---------------------------------------------------------------------------------


def plugin_releases(run: ProgramRun) -> dict[str, ResourceRecord]:
    """The Helm releases of the DevicePlugins component, by release name."""
    component = run.one("trainingplatform:index:DevicePlugins")
    return {r.inputs["name"]: r for r in run.of_type(HELM_RELEASE) if r.parent == component.urn}


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Whether a pod with these tolerations may run on a node with this taint (Kubernetes rules)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint["effect"]:
            continue
        if toleration.get("operator", "Equal") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint["key"]:
                return True
        elif toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _no_schedule(key: str) -> dict[str, str]:
    return {"key": key, "value": "true", "effect": "NoSchedule"}


@cache
def _chart_defaults(reference_root: Path, reference_dir: str) -> dict[str, Any]:
    path = reference_root / "charts" / reference_dir / "values.yaml"
    loaded = load_yaml(path.read_text())
    assert isinstance(loaded, dict), path
    return loaded


def _pool_spec(pool: ResourceRecord) -> dict[str, Any]:
    spec: dict[str, Any] = pool.inputs["spec"]["template"]["spec"]
    return spec


def _pool_instance_types(pool: ResourceRecord) -> set[str]:
    return {
        value
        for requirement in _pool_spec(pool)["requirements"]
        if requirement["key"] == INSTANCE_TYPE_LABEL and requirement["operator"] == "In"
        for value in requirement["values"]
    }


def served_pools(release: ResourceRecord, run: ProgramRun) -> list[ResourceRecord]:
    """The NodePools whose nodes this plugin's DaemonSet is meant to run on."""
    values = release.inputs["values"]
    pools = run.of_type(NODE_POOL)
    name = release.inputs["name"]
    if name == NVIDIA:
        selector = values["nodeSelector"].items()
        return [
            p
            for p in pools
            if selector <= p.inputs["spec"]["template"]["metadata"]["labels"].items()
        ]
    if name == EFA:
        allowed = set(values["supportedInstanceLabels"]["values"])
        return [p for p in pools if _pool_instance_types(p) & allowed]
    assert name == NEURON, name
    return [p for p in pools if _pool_instance_types(p) & set(values["neuronInstances"])]


def effective_tolerations(
    release: ResourceRecord, defaults: dict[str, Any]
) -> list[dict[str, Any]]:
    """The plugin pods' tolerations: ours where we set them (Helm replaces lists), else the chart's."""
    values = release.inputs["values"]
    name = release.inputs["name"]
    if name == NEURON:
        ours = values.get("devicePlugin", {}).get("tolerations")
        tolerations = defaults["devicePlugin"]["tolerations"] if ours is None else ours
    else:
        tolerations = values.get("tolerations", defaults["tolerations"])
    if name == EFA:
        # The chart's DaemonSet template always adds this one (charts/SOURCES.md).
        tolerations = [*tolerations, {"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert isinstance(tolerations, list)
    return tolerations


def _config(stack: str) -> PlatformConfig:
    return parse_platform_config(stack_data(stack))


# -- the pure builders -----------------------------------------------------------------------


def _pools(*instance_types: str) -> list[NodePoolConfig]:
    """One pool per instance type (a config object, as the builders receive it)."""
    return [
        NodePoolConfig.model_validate({"name": f"pool-{i}", "instanceTypes": [t], "maxNodes": 1})
        for i, t in enumerate(instance_types)
    ]


def test_extra_pool_taints_are_tolerated_without_losing_chart_defaults() -> None:
    pool = NodePoolConfig.model_validate(
        {
            "name": "p5",
            "instanceTypes": ["p5.48xlarge"],
            "maxNodes": 1,
            "taints": [{"key": "example.com/team", "value": "vision", "effect": "NoExecute"}],
        }
    )
    taint = {"key": "example.com/team", "value": "vision", "effect": "NoExecute"}
    nvidia = nvidia_values([pool])["tolerations"]
    neuron = neuron_values([pool], "1.34")["devicePlugin"]["tolerations"]
    for tolerations in (nvidia, efa_values([pool], "us-east-1")["tolerations"], neuron):
        assert tolerates(tolerations, taint)
    # Setting tolerations replaces the chart's list: its defaults must still be there (the EFA
    # chart adds its CriticalAddonsOnly toleration in the template itself).
    for tolerations in (nvidia, neuron):
        assert tolerates(tolerations, {"key": "CriticalAddonsOnly", "effect": "NoSchedule"})


def test_nvidia_values_select_exactly_the_gpu_pools() -> None:
    data = stack_data("staging")  # a GPU pool (p5) and a Trainium pool (trn1)
    pools = parse_platform_config(data).node_pools
    gpu_pools = [p for p in pools if p.instance.accelerator_resource == GPU_RESOURCE]
    selector = nvidia_values(gpu_pools)["nodeSelector"].items()
    assert selector, "without NFD the plugin must be pinned to GPU nodes by label"
    for pool in pools:
        selected = selector <= pool_labels(pool).items()
        assert selected is (pool.instance.accelerator_resource == GPU_RESOURCE), pool.name


@pytest.mark.parametrize("region", ["us-west-2", "eu-central-1", "ap-northeast-1"])
def test_efa_values_list_the_given_types_in_the_regional_registry(region: str) -> None:
    types = ["p5.48xlarge", "trn2.48xlarge"]
    values = efa_values(_pools(*types), region)
    assert values["supportedInstanceLabels"] == {"keys": [INSTANCE_TYPE_LABEL], "values": types}
    repository = values["image"]["repository"]
    registry, _, path = repository.partition("/")
    match = EKS_REGISTRY.fullmatch(registry)
    assert match and match["region"] == region, repository
    assert path == "eks/aws-efa-k8s-device-plugin"


def test_efa_values_tolerate_both_accelerator_taints() -> None:
    tolerations = efa_values(_pools("trn1.32xlarge"), "us-east-1")["tolerations"]
    for resource in (GPU_RESOURCE, NEURON_RESOURCE):
        assert tolerates(tolerations, _no_schedule(resource)), resource
    assert not tolerates(tolerations, _no_schedule("example.com/unrelated"))


@pytest.mark.parametrize(
    ("region", "registry"),
    [
        # AWS, "View Amazon container image registries for Amazon EKS add-ons" (EKS user guide):
        # the EKS registry account differs in opt-in and China regions, which config accepts.
        ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com"),
        ("af-south-1", "877085696533.dkr.ecr.af-south-1.amazonaws.com"),
        ("ap-east-1", "800184023465.dkr.ecr.ap-east-1.amazonaws.com"),
    ],
)
def test_efa_image_comes_from_the_eks_registry_serving_the_region(
    region: str, registry: str
) -> None:
    data = stack_data("dev")
    data["region"] = region
    data["network"]["availabilityZones"] = [f"{region}a", f"{region}b"]
    data["network"]["trainingZone"] = f"{region}b"
    del data["network"]["subnetCidrs"]  # dev's pins name its own region's zones
    for pool in data["nodePools"]:
        if "zone" in pool:
            pool["zone"] = f"{region}b"
    assert parse_platform_config(data).region == region, "config accepts the region"
    repository = efa_values(_pools("trn1.32xlarge"), region)["image"]["repository"]
    assert repository == f"{registry}/eks/aws-efa-k8s-device-plugin"


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1", "me-central-1"])
def test_regions_without_a_known_registry_are_config_errors(region: str) -> None:
    # China and GovCloud use other ARN partitions and registries; an unknown registry would
    # ship an image no node can pull. Config says so before anything is planned.
    data = stack_data("dev")
    data["region"] = region
    data["network"]["availabilityZones"] = [f"{region}a", f"{region}b"]
    data["network"]["trainingZone"] = f"{region}b"
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(data)
    assert any(p.path == "platform.region" for p in caught.value.problems)


@pytest.mark.parametrize("minor", versions.SUPPORTED_KUBERNETES_VERSIONS)
def test_neuron_values_enable_plugin_and_scheduler_for_each_minor(minor: str) -> None:
    types = ["trn1.32xlarge", "trn2.48xlarge"]
    values = neuron_values(_pools(*types), minor)
    assert values["neuronInstances"] == types
    assert values["devicePlugin"]["enabled"] is True
    assert values["scheduler"]["enabled"] is True
    assert values["scheduler"]["customScheduler"]["enabled"] is True
    assert values["npd"]["enabled"] is False
    image = values["scheduler"]["customScheduler"]["image"]
    assert f"{image['repository']}:{image['tag']}" == versions.NEURON_CUSTOM_SCHEDULER_IMAGES[minor]
    # A patch of the control plane's minor; the tag field carries the digest once the bot
    # pinned one (the chart renders repository:tag).
    release = rf"v{re.escape(minor)}\.\d+(-[^@]+)?(@sha256:[0-9a-f]{{64}})?"
    assert re.fullmatch(release, image["tag"]), image["tag"]


# -- under mocks: which plugins a stack gets -------------------------------------------------


def _expected_plugins(config: PlatformConfig) -> set[str]:
    expected = set()
    if any(p.instance.accelerator == "nvidia" for p in config.node_pools):
        expected.add(NVIDIA)
    if any(p.uses_efa for p in config.node_pools):
        expected.add(EFA)
    if any(p.instance.accelerator == "neuron" for p in config.node_pools):
        expected.add(NEURON)
    return expected


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_gets_the_plugins_its_pools_need(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    releases = plugin_releases(ProgramRun(synthesized[stack].records))
    expected = _expected_plugins(_config(stack))
    assert expected, f"{stack} has accelerated pools"
    assert set(releases) == expected


def test_no_pools_no_plugins(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["nodePools"] = []
    without_teams(data)  # queues may not promise accelerators the pools cannot provide
    without_slurm(data)  # node sets name the pools removed here
    assert plugin_releases(run_component(parts.device_plugins, data, "dev")) == {}


def test_trainium_pool_only_gets_efa_and_neuron(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["nodePools"] = [p for p in data["nodePools"] if p["instanceTypes"] == ["trn1.32xlarge"]]
    without_teams(data)
    without_slurm(data)
    assert len(data["nodePools"]) == 1
    assert set(plugin_releases(run_component(parts.device_plugins, data, "dev"))) == {EFA, NEURON}


def test_small_gpu_pool_only_gets_nvidia(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["nodePools"] = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    without_teams(data)
    without_slurm(data)
    assert len(data["nodePools"]) == 1
    assert set(plugin_releases(run_component(parts.device_plugins, data, "dev"))) == {NVIDIA}


def test_efa_gpu_pool_gets_nvidia_and_efa(run_component: RunComponent) -> None:
    data = stack_data("staging")
    data["nodePools"] = [p for p in data["nodePools"] if p["name"] == "p5"]
    without_teams(data)
    without_slurm(data)
    assert len(data["nodePools"]) == 1
    assert set(plugin_releases(run_component(parts.device_plugins, data, "staging"))) == {
        NVIDIA,
        EFA,
    }


def test_efa_opt_out_drops_the_efa_plugin(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["nodePools"] = [p for p in data["nodePools"] if p["instanceTypes"] == ["trn1.32xlarge"]]
    without_teams(data)
    without_slurm(data)
    data["nodePools"][0]["efa"] = False
    without_notebooks(data)  # a Trainium pool without EFA gets notebooks, whose image dev has not
    assert set(plugin_releases(run_component(parts.device_plugins, data, "dev"))) == {NEURON}


# -- under mocks: the releases' values -------------------------------------------------------


@pytest.fixture(scope="module", params=STACKS)
def stack_plugins(
    request: pytest.FixtureRequest, synthesized: dict[str, StackResult]
) -> tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]]:
    run = ProgramRun(synthesized[request.param].records)
    return _config(request.param), run, plugin_releases(run)


def test_releases_pin_the_bill_of_materials(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
) -> None:
    _, run, releases = stack_plugins
    assert releases
    for name, release in releases.items():
        chart = CHARTS[name]
        assert release.inputs["chart"] == chart.chart, name
        assert release.inputs["version"] == chart.version, name
        assert release.inputs.get("repositoryOpts", {}).get("repo") == chart.repository, name
        assert run.by_urn(release.provider or "").type == "pulumi:providers:kubernetes", name


def test_efa_plugin_allows_exactly_the_efa_pools_types(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
) -> None:
    config, _, releases = stack_plugins
    labels = releases[EFA].inputs["values"]["supportedInstanceLabels"]
    assert labels["keys"] == [INSTANCE_TYPE_LABEL]
    expected = {t for pool in config.node_pools if pool.uses_efa for t in pool.instance_types}
    assert sorted(labels["values"]) == sorted(expected)
    assert len(labels["values"]) == len(set(labels["values"]))


def test_efa_types_are_ones_the_chart_knows_as_efa_capable(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
    reference_dir: Path,
) -> None:
    _, _, releases = stack_plugins
    defaults = _chart_defaults(reference_dir, chart_dir(versions.EFA_DEVICE_PLUGIN_CHART))
    upstream = set(defaults["supportedInstanceLabels"]["values"])
    ours = set(releases[EFA].inputs["values"]["supportedInstanceLabels"]["values"])
    assert ours <= upstream, ours - upstream


def test_efa_plugin_tolerates_the_accelerator_taints(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
) -> None:
    _, _, releases = stack_plugins
    tolerations = releases[EFA].inputs["values"]["tolerations"]
    for resource in (GPU_RESOURCE, NEURON_RESOURCE):
        assert tolerates(tolerations, _no_schedule(resource)), resource


def test_efa_image_is_in_the_stack_region(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
) -> None:
    config, _, releases = stack_plugins
    repository = releases[EFA].inputs["values"]["image"]["repository"]
    registry = EKS_REGISTRY.fullmatch(repository.partition("/")[0])
    assert registry and registry["region"] == config.region, repository


def test_neuron_release_values(
    stack_plugins: tuple[PlatformConfig, ProgramRun, dict[str, ResourceRecord]],
) -> None:
    config, _, releases = stack_plugins
    values = releases[NEURON].inputs["values"]
    assert values["devicePlugin"]["enabled"] is True
    assert values["scheduler"]["enabled"] is True
    assert values["scheduler"]["customScheduler"]["enabled"] is True
    assert values["npd"]["enabled"] is False
    minor = config.cluster.kubernetes_version
    image = values["scheduler"]["customScheduler"]["image"]
    assert f"{image['repository']}:{image['tag']}" == versions.NEURON_CUSTOM_SCHEDULER_IMAGES[minor]
    assert image["tag"].startswith(f"v{minor}."), image["tag"]
    trainium = {
        t for p in config.node_pools if p.instance.accelerator == "neuron" for t in p.instance_types
    }
    assert sorted(values["neuronInstances"]) == sorted(trainium)


@pytest.mark.parametrize("minor", ["1.33", "1.35"])
def test_neuron_scheduler_follows_the_cluster_version(
    run_component: RunComponent, minor: str
) -> None:
    data = stack_data("dev")
    data["cluster"]["kubernetesVersion"] = minor
    values = plugin_releases(run_component(parts.device_plugins, data, "dev"))[NEURON].inputs[
        "values"
    ]
    image = values["scheduler"]["customScheduler"]["image"]
    assert f"{image['repository']}:{image['tag']}" == versions.NEURON_CUSTOM_SCHEDULER_IMAGES[minor]
    assert image["tag"].startswith(f"v{minor}.")


# -- under mocks: the plugins reach their nodes ----------------------------------------------


def _assert_plugins_tolerate_their_pools(run: ProgramRun, reference_dir: Path) -> None:
    releases = plugin_releases(run)
    assert releases
    problems = []
    for name, release in releases.items():
        pools = served_pools(release, run)
        assert pools, f"{name} serves no NodePool"
        defaults = _chart_defaults(reference_dir, chart_dir(CHARTS[name]))
        tolerations = effective_tolerations(release, defaults)
        for pool in pools:
            for taint in _pool_spec(pool).get("taints", []):
                if taint["effect"] != "PreferNoSchedule" and not tolerates(tolerations, taint):
                    problems.append(f"{name} does not tolerate {taint} of NodePool {pool.name}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", STACKS)
def test_plugins_tolerate_the_taints_of_the_pools_they_serve(
    stack: str, synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    _assert_plugins_tolerate_their_pools(ProgramRun(synthesized[stack].records), reference_dir)


def test_plugins_tolerate_extra_pool_taints(
    run_platform: Callable[..., ProgramRun], reference_dir: Path
) -> None:
    # nodePools[].taints is a documented option ("Extra taints"); a plugin that cannot run on the
    # pool's nodes leaves its GPUs, Neuron devices and EFA interfaces unadvertised.
    data = stack_data("staging")
    for pool in data["nodePools"]:
        pool["taints"] = [{"key": "example.com/team", "value": "vision", "effect": "NoSchedule"}]
    _assert_plugins_tolerate_their_pools(run_platform(data, "staging"), reference_dir)
