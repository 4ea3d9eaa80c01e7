"""Ray's config: its images per accelerator, their Ray release (issue 42, items 2 and 5)."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components import image_builds, kuberay, software, versions
from components.checkpoints import checkpoint_location
from components.config import parse_platform_config
from components.config.ray import RayImagesConfig
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.node_pools import POOL_LABEL
from components.platform import validated_config
from components.scheduling import RAY_QUEUE_LABEL, STANDARD_PRIORITY_CLASS
from components.storage.layout import team_directories
from components.storage.model_store import MODELS_MOUNT, SHARED_CLAIM, TEAM_CLAIM
from components.tenancy import QUEUE_POLICY
from components.tenant_api import RAY_PRIORITY_LABEL
from components.tenant_pods import TENANT_PODS_POLICY
from components.workloads import node_resources
from synth.jobs.admission import admit
from synth.run import StackResult
from tests.config_problems import MISSING, assert_reported
from tests.conftest import stack_data
from tests.schemas import validation_errors
from tests.test_images import run_scripts
from tests.test_kuberay import _kuberays_pod, _policy, _team_namespace

DIGEST = "@sha256:" + "0123456789abcdef" * 4
REGISTRY = "111122223333.dkr.ecr.us-west-2.amazonaws.com"


def _dev_with_ray_images(**images: Any) -> dict[str, Any]:
    data = stack_data("dev")
    data["ray"]["images"] = images
    return data


# -- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.51.0-py312-gpu",  # another release
        "rayproject/ray:2.52.01-py312-gpu",  # a release that only starts like it
        f"{REGISTRY}/ray-efa{DIGEST}",  # a digest alone says no release
        f"{REGISTRY}/ray-efa:py312-gpu-2.52.0",  # the release, but not first
    ],
)
def test_a_ray_image_whose_tag_is_not_the_ray_release_is_refused(image: str) -> None:
    data = _dev_with_ray_images(gpu=image, neuron=f"{REGISTRY}/ray-neuron:2.52.0-sdk2.31.1")
    assert_reported(
        data, "platform.ray.images.gpu", image, f"the Ray release {versions.RAY_VERSION}"
    )


def test_a_ray_image_pinned_by_tag_and_digest_is_accepted() -> None:
    image = f"{REGISTRY}/ray-neuron:{software.built_tag('ray-neuron', 'neuron')}{DIGEST}"
    assert RayImagesConfig.model_validate({"neuron": image}).neuron == image
    assert RayImagesConfig().gpu == versions.RAY_IMAGE


def test_a_trainium_pool_needs_the_built_ray_neuron_image() -> None:
    data = stack_data("dev")
    del data["ray"]["images"]["neuron"]
    assert_reported(data, "platform.ray.images.neuron", MISSING, "images/ray-neuron tagged")
    # ...only while Ray is on
    data["ray"]["enabled"] = False
    del data["teams"][0]["ray"]
    assert parse_platform_config(data).ray.images.neuron is None


def test_the_trainer_image_is_no_ray_image() -> None:
    image = f"{REGISTRY}/training-neuron:sdk2.31.1"
    data = _dev_with_ray_images(neuron=image)
    assert_reported(data, "platform.ray.images.neuron", image, "the Ray release 2.52.0")


def test_rays_own_gpu_image_is_refused_on_an_efa_pool() -> None:
    data = stack_data("staging")
    del data["ray"]["images"]["gpu"]
    assert_reported(data, "platform.ray.images.gpu", versions.RAY_IMAGE, "TCP sockets")


def test_an_unknown_image_of_the_right_release_is_refused_on_an_accelerator_pool() -> None:
    image = f"{REGISTRY}/my-ray:2.52.0-custom"
    data = stack_data("staging")
    data["ray"]["images"]["gpu"] = image
    assert_reported(data, "platform.ray.images.gpu", image, "images/ray-cuda tagged")


def test_the_ray_builds_start_with_the_ray_release_and_reuse_the_training_pins() -> None:
    by_key = {build.config_key: build for build in image_builds.builds()}
    cuda, neuron = by_key["ray.images.gpu"], by_key["ray.images.neuron"]
    for build in (cuda, neuron):
        assert build.tag.startswith(f"{versions.RAY_VERSION}-"), build.tag
        assert build.arguments["RAY_VERSION"] == versions.RAY_VERSION
    # images/ray-cuda declares no versions of its own: it is built on the torch key's
    # training-cuda build (torch, NCCL, EFA), made first in the same job, not on Ray's image
    assert software.recipe_pins("ray-cuda") == {}
    assert cuda.base_build == by_key["trainer.images.torch"]
    assert cuda.bases == {} and not cuda.floating_bases
    entry = cuda.matrix_entry()
    assert f"--build-arg BASE_IMAGE={entry['base_tag']}" in str(entry["build_args"])
    assert entry["base_context"] == "images/training-cuda"
    assert entry["base_build_contexts"] == image_builds.CHECKPOINT_CONTEXT
    assert cuda.tag == f"{versions.RAY_VERSION}-torch{by_key['trainer.images.torch'].tag}"
    torch = software.training_cuda("torch")
    assert software.ray_cuda().nccl == torch.nccl and torch.nccl
    assert software.ray_cuda().efa_installer == torch.efa_installer
    assert software.ray_cuda().aws_ofi_nccl == torch.aws_ofi_nccl
    # images/ray-neuron is built on the training-neuron build, made first in the same job
    assert neuron.base_build == by_key["trainer.images.neuron"]
    entry = neuron.matrix_entry()
    assert f"--build-arg BASE_IMAGE={entry['base_tag']}" in str(entry["build_args"])
    assert entry["base_context"] == "images/training-neuron"
    assert software.ray_neuron().neuron_runtime == software.training_neuron().neuron_runtime


# -- standing team clusters ----------------------------------------------------------------------

CLUSTERS = "platform.teams[0].ray.clusters"


def _dev_with_clusters(*clusters: dict[str, Any]) -> dict[str, Any]:
    data = stack_data("dev")
    data["teams"][0]["ray"] = {"clusters": list(clusters)}
    return data


def test_dev_keeps_one_small_standing_cluster() -> None:
    (team,) = parse_platform_config(stack_data("dev")).teams
    assert [(c.name, c.pool, c.workers) for c in team.ray.clusters] == [
        ("interactive", "gpu-small", 1)
    ]


def test_a_cluster_on_an_unknown_pool_is_refused() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-big", "workers": 1})
    assert_reported(data, f"{CLUSTERS}[0].pool", "gpu-big", "gpu-small, trn1")


def test_a_cluster_on_a_general_pool_is_refused() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "general-lustre", "workers": 1})
    assert_reported(data, f"{CLUSTERS}[0].pool", "general-lustre", "an accelerator pool")


def test_a_cluster_on_a_pool_the_team_gets_no_node_of_is_refused() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-small", "workers": 1})
    data["teams"][0]["quota"]["gpus"] = 0
    data["teams"][0]["queue"]["deserved"]["gpus"] = 0
    assert_reported(data, f"{CLUSTERS}[0].pool", "gpu-small", "allow a whole node")


def test_workers_beyond_the_pool_less_slurms_nodes_are_refused() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-small", "workers": 1})
    (pool,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    data["teams"][0]["quota"]["gpus"] = 8  # the pool, not the quota, is what binds
    most = pool["maxNodes"] - 1  # dev's Slurm node set holds one node of gpu-small
    data["teams"][0]["ray"]["clusters"][0]["workers"] = most + 1
    assert_reported(
        data, f"{CLUSTERS}[0].workers", most + 1,
        f"at most {most}: pool gpu-small's maxNodes ({pool['maxNodes']})",
    )  # fmt: skip
    data["teams"][0]["ray"]["clusters"][0]["workers"] = most
    parse_platform_config(data)


def test_a_queue_that_cannot_hold_the_gang_is_refused() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-small", "workers": 2})
    data["teams"][0]["queue"]["capability"] = {"gpus": 1, "neuronDevices": 16}
    data["teams"][0]["queue"]["deserved"]["gpus"] = 1
    assert_reported(data, f"{CLUSTERS}[0].workers", 2, "queue capability gpus 1 holds 1")


def test_a_quota_without_the_efa_interfaces_of_the_gang_is_refused() -> None:
    # trn1.32xlarge: 16 Neuron devices and 8 EFA interfaces a node
    data = _dev_with_clusters({"name": "c", "pool": "trn1", "workers": 1})
    parse_platform_config(data)
    data["teams"][0]["quota"]["efaInterfaces"] = 4
    assert_reported(data, f"{CLUSTERS}[0].workers", 1, "quota.efaInterfaces 4 holds 0")


def test_duplicate_cluster_names_are_refused() -> None:
    cluster = {"name": "c", "pool": "gpu-small", "workers": 1}
    data = _dev_with_clusters(cluster, cluster)
    assert_reported(data, CLUSTERS, ["c", "c"], "unique cluster names")


def test_clusters_are_refused_while_ray_is_off() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-small", "workers": 1})
    data["ray"]["enabled"] = False
    assert_reported(data, CLUSTERS, ["c"], "unless ray.enabled")


@pytest.mark.parametrize("name", ["Interactive", "1st", "a" * 54])
def test_a_cluster_name_kuberay_refuses_is_refused(name: str) -> None:
    data = _dev_with_clusters({"name": name, "pool": "gpu-small", "workers": 1})
    assert_reported(data, f"{CLUSTERS}[0].name", name, "DNS-1035 label")


def test_a_cluster_needs_a_worker() -> None:
    data = _dev_with_clusters({"name": "c", "pool": "gpu-small", "workers": 0})
    assert_reported(data, f"{CLUSTERS}[0].workers", 0, "1")


RAY_CLUSTER_TYPE = "kubernetes:ray.io/v1:RayCluster"


def _standing(result: StackResult) -> list[Any]:
    return [r for r in result.records if r.type == RAY_CLUSTER_TYPE]


def test_devs_standing_cluster_is_synthesized_in_the_team_namespace_and_queue(
    synthesized: dict[str, StackResult], reference_dir: Path
) -> None:
    result = synthesized["dev"]
    config = result.config
    (record,) = _standing(result)
    cluster = {k: record.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    assert cluster["metadata"] == {
        "name": "interactive", "namespace": "ml-dev",
        "labels": {RAY_QUEUE_LABEL: "ml-dev", RAY_PRIORITY_LABEL: STANDARD_PRIORITY_CLASS},
    }  # fmt: skip
    crds = reference_dir / "crds" / "kuberay" / f"v{versions.KUBERAY_VERSION}"
    assert validation_errors(cluster, "1.35", crds) == []
    # It is what the builder makes for the team on its pool, with the team's claim
    (team,) = config.teams
    pool = config.pool("gpu-small")
    assert pool is not None and config.storage.lustre is not None
    assert cluster == kuberay.ray_cluster(
        "interactive", pool, team="ml-dev", image=kuberay.ray_image(config.ray.images, pool),
        workers=1, checkpoints=checkpoint_location(config),
        directories=team_directories(config.storage.lustre, team), group_id=team.gid,
        models=config.model_store.enabled, publishes_models=True,  # dev's ml-dev publishes
    )  # fmt: skip
    assert config.model_store.enabled  # dev mounts the model store: the Ray pods must too
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert group["minReplicas"] == group["replicas"] == group["maxReplicas"] == 1
    assert "enableInTreeAutoscaling" not in cluster["spec"]
    worker = group["template"]["spec"]
    # The whole node: every accelerator and the memory the node can give
    assert worker["containers"][0]["resources"] == node_resources(pool)
    assert worker["nodeSelector"] == {POOL_LABEL: "gpu-small"}
    for template in (cluster["spec"]["headGroupSpec"]["template"], group["template"]):
        claims = {v["persistentVolumeClaim"]["claimName"] for v in template["spec"]["volumes"]
                  if "persistentVolumeClaim" in v}  # fmt: skip
        lustre_claims = {d.claim_name for d in team_directories(config.storage.lustre, team)}
        assert claims == lustre_claims | {TEAM_CLAIM, SHARED_CLAIM}
        mounts = {m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
        assert {MODELS_MOUNT, f"{MODELS_MOUNT}/shared"} <= mounts
        assert team.gid in template["spec"]["securityContext"]["supplementalGroups"]
    # after the CRDs and the operator, and the team's namespace
    kinds = {r.urn: r for r in result.records}
    after = {kinds[urn].type for urn in record.dependencies if urn in kinds}
    assert {"kubernetes:yaml/v2:ConfigFile", "kubernetes:helm.sh/v3:Release"} <= after
    assert "kubernetes:core/v1:Namespace" in after


def test_devs_standing_cluster_is_admitted_in_the_team_namespace(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    (record,) = _standing(result)
    cluster = {k: record.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    namespace = _team_namespace(result, "ml-dev")
    assert admit(_policy(result, QUEUE_POLICY), cluster, namespace) == (True, None)
    spec = cluster["spec"]
    for template in (spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]):
        pod = _kuberays_pod(cluster, template)
        for policy in (TENANT_PODS_POLICY, QUEUE_POLICY, LUSTRE_BOUNDARY_POLICY):
            assert admit(_policy(result, policy), pod, namespace) == (True, None), policy
    # another team's queue is refused
    stolen = copy.deepcopy(cluster)
    stolen["metadata"]["labels"][RAY_QUEUE_LABEL] = "someone-else"
    assert not admit(_policy(result, QUEUE_POLICY), stolen, namespace)[0]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_stacks_without_clusters_synthesize_none(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    assert not any(t.ray.clusters for t in synthesized[stack].config.teams)
    assert _standing(synthesized[stack]) == []


def _dev_with_two_teams(*other_clusters: dict[str, Any]) -> dict[str, Any]:
    data = stack_data("dev")
    other: dict[str, Any] = {
        "name": "ml-other", "gid": 5998, "adminGroups": ["other-leads"],
        "memberGroups": ["other-engineers"], "quota": {"gpus": 3},
        "queue": {"deserved": {"gpus": 0}}, "ray": {"clusters": list(other_clusters)},
    }  # fmt: skip
    data["teams"].append(other)
    return data


def test_a_teams_clusters_are_summed_against_its_quota_and_the_pool() -> None:
    """Each cluster fits alone; together they hold more than the team's GPUs, or the pool's
    free nodes, and the one past the limit is refused, naming those before it."""
    data = stack_data("dev")
    (pool,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    clusters = data["teams"][0]["ray"]["clusters"]
    held = sum(c["workers"] for c in clusters)
    free_nodes = pool["maxNodes"] - 1 - held  # Slurm's node set holds one node
    gpus = data["teams"][0]["quota"]["gpus"]
    assert free_nodes >= 1 and gpus - held >= 1
    pool["maxNodes"] += gpus  # room in the pool: the team's share binds
    clusters.append({"name": "second", "pool": "gpu-small", "workers": gpus - held})
    validated_config(data)  # the team's whole share, in two clusters
    clusters.append({"name": "third", "pool": "gpu-small", "workers": 1})
    where = f"{CLUSTERS}[{len(clusters) - 1}].workers"
    assert_reported(data, where, 1, "the team's clusters before it hold")
    # across teams: another team's cluster finds the pool's nodes taken
    clusters = stack_data("dev")["teams"][0]["ray"]["clusters"]
    data = _dev_with_two_teams({"name": "theirs", "pool": "gpu-small", "workers": free_nodes + 1})
    assert_reported(
        data, "platform.teams[1].ray.clusters[0].workers", free_nodes + 1,
        f"of standing clusters ml-dev/{clusters[0]['name']}",
    )  # fmt: skip
    data["teams"][1]["ray"]["clusters"][0]["workers"] = free_nodes
    validated_config(data)


@pytest.mark.parametrize(
    ("pool", "key", "value", "allowed"),
    [
        ("gpu-small", "cpu", 2, "at least 4: the standing Ray clusters c request"),
        ("trn1", "cpu", 20, "each Trainium worker a CPU per NeuronCore"),
        ("trn1", "memoryGiB", 100, "each worker its node's memory"),
    ],
)
def test_a_stated_cpu_or_memory_quota_must_hold_the_standing_clusters(
    pool: str, key: str, value: int, allowed: str
) -> None:
    data = _dev_with_clusters({"name": "c", "pool": pool, "workers": 1})
    data["teams"][0]["quota"][key] = value
    assert_reported(data, f"platform.teams[0].quota.{key}", value, allowed)
    del data["teams"][0]["quota"][key]
    validated_config(data)  # the default quota: the nodes the accelerator quota fills


# -- what KubeRay needs in a Ray image --------------------------------------------------------

_STUB = """#!/bin/bash
echo "${0##*/} $*" >> "$STUBS/calls.log"
case "$*" in
  *"show torch"*) echo "Version: 2.13.0" ;;
  *"print(ray.__version__)"*) echo 2.52.0 ;;
  install*wget*) if [ -n "${GIVE_WGET:-}" ]; then printf '#!/bin/sh\\n' > "$STUBS/wget"; \
/bin/chmod +x "$STUBS/wget"; fi ;;
esac
"""


def _build_ray_recipe(recipe: str, stubs: Path, *, wget: bool) -> tuple[int, str, str]:
    """Run the recipe's RUN script with every command it calls stubbed (calls logged)."""
    (script,) = run_scripts(recipe)
    script = script.replace("/opt/venv/bin/", "")  # the Neuron base's venv, stubbed on PATH
    for name in ("apt-get", "python3", "python", "pip", "fsx-checkpoint"):
        (stubs / name).write_text(_STUB)
        (stubs / name).chmod(0o755)
    for name in ("rm", "sed"):
        (stubs / name).symlink_to(shutil.which(name) or f"/bin/{name}")
    env = {"PATH": str(stubs), "STUBS": str(stubs), "RAY_VERSION": "2.52.0",
           "NEURON_PIP_INDEX": "https://index.invalid/", "BASE_IMAGE": "base"}  # fmt: skip
    if wget:
        env["GIVE_WGET"] = "1"
    done = subprocess.run(["/bin/bash", "-o", "pipefail", "-euc", script], env=env,
                          capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    calls = (stubs / "calls.log").read_text() if (stubs / "calls.log").exists() else ""
    return done.returncode, done.stderr, calls


@pytest.mark.parametrize("recipe", ["ray-cuda", "ray-neuron"])
def test_ray_images_carry_the_dashboard_jobs_api_and_wget_kuberay_probes_with(
    recipe: str, tmp_path: Path
) -> None:
    """Below Ray 2.53.0 KubeRay 1.7.0 probes with wget against the dashboard agent's and the
    dashboard's health endpoints (common/pod.go, supportsUnifiedHealthCheck; utils/constant.go,
    BaseWgetHealthCommand): the dashboard, agent and Jobs API are ray[default]'s."""
    assert software.RAY_RECIPES["nvidia" if recipe == "ray-cuda" else "neuron"] == recipe
    assert versions.RAY_VERSION < "2.53.0"  # else the probes differ: revisit this recipe
    rc, stderr, calls = _build_ray_recipe(recipe, tmp_path, wget=True)
    assert rc == 0, stderr
    installs = [c for c in calls.splitlines() if " install " in f" {c} " and "ray[" in c]
    assert installs and all("ray[default,train]==2.52.0" in c for c in installs), calls
    assert "apt-get install -y --no-install-recommends wget" in calls
    assert "ray.dashboard.modules.job.job_head" in calls
    assert "ray.dashboard.modules.job.job_agent" in calls
    # a base whose package manager leaves no wget fails the build, not the first probe
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    rc, stderr, _ = _build_ray_recipe(recipe, fresh, wget=False)
    assert rc != 0 and "wget" in stderr
