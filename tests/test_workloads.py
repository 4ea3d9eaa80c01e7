"""A pod on a pool: what a node offers as Karpenter computes it, and what the jobs model knows of
the charts it reads (checked against the reference copies of the charts)."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import pytest

from components import versions
from components.catalog import CATALOG
from components.config import NodePoolConfig
from components.first_step import FIRST_STEP_EXPORTER_MEMORY_MIB
from components.workloads import (
    DAEMONSET_HEADROOM_MEMORY_MIB,
    DEVICE_PLUGIN_MEMORY_MIB,
    NODE_AGENT_MEMORY_MIB,
    eni_limited_pods,
    kube_reserved_cpu_millis,
    node_allocatable,
    node_exporters_memory_mib,
    node_resources,
    pool_node_allocatable,
    pool_workload_placement,
    processes_per_node,
    shared_memory_volume,
    whole_node_memory_mib,
)
from synth.jobs.daemonsets import EFA_CHART_DEFAULTS, NEURON_CHART_DEFAULTS, NVIDIA_CHART_DEFAULTS
from synth.jobs.model import Stack
from synth.jobs.rbac import TRAINER_CHART_MANAGER_RULES, trainer_manager
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests.conftest import STACKS
from tests.reference_paths import chart_dir

# Karpenter v1.14.1's generated instance-type reference (website/content/en/docs/reference/
# instance-types.md, hack/docs/instancetypes_gen): cpu, memory and pods a node offers, for
# nodes without explicit network interfaces.
KARPENTER_TABLE: Final = [
    ("p5.48xlarge", 191450, 1938410, 100),
    ("trn2.48xlarge", 191450, 1938410, 100),
    ("trn1.32xlarge", 127610, 481894, 247),
    ("p4d.24xlarge", 95690, 1082712, 737),
    ("g5.xlarge", 3920, 14162, 58),
    ("p5en.48xlarge", 191450, 1937332, 198),
]


@pytest.mark.parametrize(("name", "cpu_millis", "memory_mib", "pods"), KARPENTER_TABLE)
def test_allocatable_is_what_karpenter_publishes(
    name: str, cpu_millis: int, memory_mib: int, pods: int
) -> None:
    node = node_allocatable(
        CATALOG[name], efa_interfaces=0, hugepages_gib=0, as_scheduled_by_karpenter=True
    )
    assert (node.cpu_millis, node.memory_mib, node.pods) == (cpu_millis, memory_mib, pods)


def test_an_efa_only_interface_on_card_0_costs_pods_but_not_the_nodes_reservation() -> None:
    """Karpenter drops the EFA-only interface from card 0's pod count and kube-reserved memory;
    nodeadm counts every card 0 interface, so the node reserves 49 x 11 MiB more on p5."""
    p5 = CATALOG["p5.48xlarge"]
    assert eni_limited_pods(p5, efa_only_on_card0=1) == 51
    simulated = node_allocatable(
        p5, efa_interfaces=32, hugepages_gib=0, as_scheduled_by_karpenter=True
    )
    real = node_allocatable(p5, efa_interfaces=32, hugepages_gib=0, as_scheduled_by_karpenter=False)
    assert simulated.pods == real.pods == 51
    assert simulated.memory_mib - real.memory_mib == 49 * 11
    assert simulated.extended["vpc.amazonaws.com/efa"] == 32


def test_huge_pages_come_out_of_memory_and_appear_as_a_resource() -> None:
    trn1 = CATALOG["trn1.32xlarge"]
    plain = node_allocatable(
        trn1, efa_interfaces=8, hugepages_gib=0, as_scheduled_by_karpenter=True
    )
    paged = node_allocatable(
        trn1, efa_interfaces=8, hugepages_gib=5, as_scheduled_by_karpenter=True
    )
    assert plain.memory_mib - paged.memory_mib == 5 * 1024
    assert paged.extended["hugepages-2Mi"] == 5 * 1024
    assert "hugepages-2Mi" not in plain.extended


@pytest.mark.parametrize(("vcpu", "millis"), [(1, 60), (2, 70), (4, 80), (8, 90), (192, 550)])
def test_kube_reserved_cpu_tiers(vcpu: int, millis: int) -> None:
    assert kube_reserved_cpu_millis(vcpu) == millis


def _pool(**raw: Any) -> NodePoolConfig:
    return NodePoolConfig.model_validate({"name": "x", "maxNodes": 2, **raw})


def test_whole_node_requests_of_a_gpu_and_a_trainium_pool() -> None:
    p5 = node_resources(_pool(instanceTypes=["p5.48xlarge"]))
    assert p5["requests"] == p5["limits"]
    # The node's memory, not a quarter of it: 2048 GiB = 2097152 MiB, less 7.5% for the
    # hypervisor (157287), the kubelet's kube-reserved for 100 pods (11 x 100 + 255 = 1355),
    # eviction (100) and 5 GiB of huge pages (5120) = 1933290 as the node computes it; less
    # 2048 MiB for the add-on DaemonSets, 64 for the device plugins, 128 for the acceptance
    # agent, 128 for the DCGM exporter, 48 for the EFA exporter and 32 for the pod's own
    # first-step exporter.
    assert p5["requests"] == {
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "hugepages-2Mi": "5Gi",
        "memory": "1930842Mi",
    }
    trn1 = node_resources(_pool(instanceTypes=["trn1.32xlarge"], hugepagesGiB=2))
    assert trn1["requests"]["cpu"] == "32" and trn1["limits"]["cpu"] == "128"
    assert trn1["requests"]["hugepages-2Mi"] == "2Gi"
    small = node_resources(_pool(instanceTypes=["g5.xlarge"]))
    assert (
        "hugepages-2Mi" not in small["requests"]
        and "vpc.amazonaws.com/efa" not in small["requests"]
    )
    assert processes_per_node(_pool(instanceTypes=["trn2.48xlarge"])) == 64


def test_slurm_placement_adds_the_reservation() -> None:
    pool = _pool(instanceTypes=["p5.48xlarge"])
    plain = pool_workload_placement(pool)
    slurm = pool_workload_placement(pool, slurm=True)
    assert plain["nodeSelector"] == {"trainingplatform.io/pool": "x"}
    assert slurm["nodeSelector"] == {
        "trainingplatform.io/pool": "x",
        "trainingplatform.io/reserved-for": "slurm",
    }
    assert {
        "key": "trainingplatform.io/reserved-for",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in slurm["tolerations"]
    assert len(slurm["tolerations"]) == len(plain["tolerations"]) + 1


# --------------------------------------------------------------------------- the charts the model reads


def _chart_values(reference_dir: Path, chart: versions.HelmChart) -> dict[str, Any]:
    path = reference_dir / "charts" / chart_dir(chart) / "values.yaml"
    values: dict[str, Any] = load_yaml(path.read_text())
    return values


def test_the_model_knows_the_nvidia_charts_placement(reference_dir: Path) -> None:
    values = _chart_values(reference_dir, versions.NVIDIA_DEVICE_PLUGIN_CHART)
    for key in ("nodeSelector", "affinity", "tolerations", "resources"):
        assert NVIDIA_CHART_DEFAULTS[key] == values[key], key


def test_the_model_knows_the_efa_charts_placement(reference_dir: Path) -> None:
    values = _chart_values(reference_dir, versions.EFA_DEVICE_PLUGIN_CHART)
    for key in ("nodeSelector", "tolerations", "resources"):
        assert EFA_CHART_DEFAULTS[key] == values[key], key
    assert (
        values["supportedInstanceLabels"]["keys"]
        == EFA_CHART_DEFAULTS["supportedInstanceLabels"]["keys"]
    )


def test_the_model_knows_the_neuron_charts_placement(reference_dir: Path) -> None:
    plugin = _chart_values(reference_dir, versions.NEURON_CHART)["devicePlugin"]
    for key in ("enabled", "nodeSelector", "affinity", "tolerations", "resources"):
        assert NEURON_CHART_DEFAULTS["devicePlugin"][key] == plugin[key], key


def test_the_model_knows_trainers_manager_role(reference_dir: Path) -> None:
    """The manager ClusterRole of the pinned chart (a Helm template: its rules are plain YAML)."""
    base = reference_dir / "charts" / "kubeflow-trainer" / versions.TRAINER_VERSION
    template = (base / "templates-rbac" / "clusterrole.yaml").read_text()
    rules_text = template[template.index("rules:") :]
    assert "{{" not in rules_text
    assert load_yaml(rules_text)["rules"] == TRAINER_CHART_MANAGER_RULES
    assert "priorityclasses" not in rules_text, "the chart now grants it: drop the platform's role"
    binding = (base / "templates-rbac" / "clusterrole_binding.yaml").read_text()
    assert 'name: {{ include "trainer.manager.serviceAccount.name" . }}' in binding
    helpers = (base / "templates-rbac" / "_helpers.tpl").read_text()
    account = re.search(
        r'define "trainer.manager.serviceAccount.name" -}}\s*\{\{ include "([^"]+)"', helpers
    )
    assert account and account.group(1) == "trainer.manager.name"
    release: dict[str, Any] = {
        "release": "kubeflow-trainer",
        "namespace": "kubeflow-system",
        "values": {},
    }
    view = StackView([], {"kubeflow-trainer": release})
    assert trainer_manager(view) == (
        "ServiceAccount",
        "kubeflow-system",
        "kubeflow-trainer-controller-manager",
    )
    release["values"] = {"fullnameOverride": "trainer"}
    assert trainer_manager(view)[2] == "trainer-controller-manager"


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "trn1.32xlarge", "g5.xlarge"])
def test_whole_node_memory_fits_both_views_and_uses_nearly_all_of_it(instance_type: str) -> None:
    pool = _pool(instanceTypes=[instance_type])
    memory = whole_node_memory_mib(pool)
    views = [pool_node_allocatable(pool, as_scheduled_by_karpenter=v).memory_mib
             for v in (True, False)]  # fmt: skip
    left = (
        DAEMONSET_HEADROOM_MEMORY_MIB
        + DEVICE_PLUGIN_MEMORY_MIB
        + NODE_AGENT_MEMORY_MIB
        + FIRST_STEP_EXPORTER_MEMORY_MIB
    )
    # and the pool's metrics DaemonSets (DCGM exporter or Neuron monitor, 128 MiB either way;
    # the EFA exporter on EFA pools)
    assert node_exporters_memory_mib(pool) >= 128
    assert memory + left + node_exporters_memory_mib(pool) == min(views)
    assert memory > 0.85 * pool.instance.memory_gib * 1024 - 3 * 1024


def test_shared_memory_is_sized_to_half_the_pod() -> None:
    pool = _pool(instanceTypes=["p5.48xlarge"])
    volume = shared_memory_volume(pool)
    assert volume["emptyDir"]["medium"] == "Memory"
    size = int(volume["emptyDir"]["sizeLimit"].removesuffix("Mi"))
    assert size % 1024 == 0 and whole_node_memory_mib(pool) / 2 - 1024 < size <= (
        whole_node_memory_mib(pool) / 2
    )


@pytest.mark.parametrize("stack", STACKS)
def test_device_plugins_fit_in_what_whole_node_pods_leave_them(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """A whole-node pod leaves DEVICE_PLUGIN_MEMORY_MIB for the device plugins on its node and
    NODE_AGENT_MEMORY_MIB for the platform's own DaemonSets (the acceptance agent), plus what
    the pool's metrics DaemonSets request (node_exporters_memory_mib: the DCGM exporter or
    neuron-monitor, and the EFA exporter where the pool attaches EFA)."""
    view = StackView.from_records(synthesized[stack].records)
    stack_model = Stack(view)
    configs = {p.name: p for p in synthesized[stack].config.node_pools}
    for pool in stack_model.pools:
        config = configs.get(pool.name.removesuffix("-slurm"))
        exporters = node_exporters_memory_mib(config) if config is not None else 0
        on_node = [p for p in stack_model.plugins if p.runs_on(pool)]
        plugins = sum(p.requests.get("memory", Decimal(0)) for p in on_node if p.resource)
        own = sum(p.requests.get("memory", Decimal(0)) for p in on_node if not p.resource)
        assert plugins <= DEVICE_PLUGIN_MEMORY_MIB * 2**20, (pool.name, plugins)
        assert own <= (NODE_AGENT_MEMORY_MIB + exporters) * 2**20, (pool.name, own)


def test_every_whole_node_pod_sizes_its_shared_memory(synthesized: dict[str, StackResult]) -> None:
    view = StackView.from_records(synthesized["prod"].records)
    pods = [
        job["template"]["spec"]["template"]["spec"]
        for runtime in view.of_kind("TrainingRuntime")
        for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
    ] + [node_set["spec"]["template"]["spec"] for node_set in view.of_kind("NodeSet")]
    assert len(pods) > 10
    for pod in pods:
        (dshm,) = [v for v in pod["volumes"] if v["name"] == "dshm"]
        assert dshm["emptyDir"]["sizeLimit"].endswith("Mi"), dshm
