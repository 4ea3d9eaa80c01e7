"""KubeRay: the operator's release, its CRDs, its config section (issue 42, item 1)."""

from __future__ import annotations

import copy
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import pytest

from components import kuberay, software, versions
from components.catalog import GPU_RESOURCE, NEURON_RESOURCE
from components.checkpoints import checkpoint_location
from components.cluster import SYSTEM_NODE_SELECTOR, SYSTEM_TOLERATION
from components.config import PlatformConfig
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.node_pools import POOL_LABEL
from components.platform import lustre_pools, stack_gang_limits, validated_config
from components.scheduling import PRIORITY_CLASSES, RAY_QUEUE_LABEL, STANDARD_PRIORITY_CLASS
from components.storage.layout import team_directories
from components.teams import TEAM_LABEL
from components.tenancy import QUEUE_POLICY
from components.tenant_api import RAY_GANG_POLICY, RAY_PRIORITY_LABEL, ray_gang_policy
from components.tenant_pods import TENANT_PODS_POLICY
from components.trainer import team_nodes, team_runtimes
from synth.jobs.admission import admit
from synth.jobs.rbac import allowed
from synth.jobs.view import StackView
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import STACKS, stack_data
from tests.kubernetes_semantics import quantity
from tests.pod_shapes import make_pod
from tests.reference_paths import chart_dir
from tests.schemas import validation_errors
from tests.test_tenant_pods import admitted_pod_spec

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
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
    policy = _policy(result, RAY_GANG_POLICY)
    teams = stack_data(stack)["teams"]
    allowed_teams = [t["name"] for t in teams if t.get("ray", {}).get("allowClusterSelector")]
    assert policy == ray_gang_policy(
        team_label=TEAM_LABEL, allowed=allowed_teams, priority_classes=list(PRIORITY_CLASSES),
        limits=stack_gang_limits(result.config),
    )  # fmt: skip
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
    policy = ray_gang_policy(
        team_label=TEAM_LABEL, allowed=["ml-research"], priority_classes=["training-standard"]
    )
    selecting = _ray_object("RayJob", "ml-research", "ml-research", **SELECTED)
    namespace = {"metadata": {"name": "ml-research", "labels": {TEAM_LABEL: "ml-research"}}}
    assert admit(policy, selecting, namespace) == (True, None)
    other = {"metadata": {"name": "ml-product", "labels": {TEAM_LABEL: "ml-product"}}}
    assert not admit(policy, {**selecting, "metadata": {"name": "x"}}, other)[0]


# --- item 2: Ray on the platform's pools ----------------------------------------------------

EXAMPLE: Final = re.compile(r"<!-- ray-example: (\w+) -->\n```yaml\n(.*?)```", re.DOTALL)
RAYTRAIN_PAGE: Final = REPOSITORY_ROOT / "docs" / "how-to" / "run-raytrain.md"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
POD_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"


def _examples() -> dict[str, dict[str, Any]]:
    found = {name: load_yaml(body) for name, body in EXAMPLE.findall(RAYTRAIN_PAGE.read_text())}
    assert set(found) == {"gpu", "trainium"}
    return found


def _dev_context() -> tuple[PlatformConfig, Any, Any]:
    config = validated_config(stack_data("dev"))
    team = config.teams[0]
    assert config.storage.lustre is not None
    return config, team, team_directories(config.storage.lustre, team)


def test_the_examples_are_what_the_builder_makes_for_devs_pools() -> None:
    """Each example is :func:`components.kuberay.ray_job` for a pool of dev, as the page says:
    a change of the builder or of dev's pools fails here until the page is regenerated."""
    config, team, directories = _dev_context()
    kinds = set()
    for example in _examples().values():
        (group,) = example["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        pool = config.pool(group["groupName"])
        assert pool is not None, group["groupName"]
        kinds.add(pool.instance.accelerator_resource)
        image = group["template"]["spec"]["containers"][0]["image"]
        # The image of the pool's accelerator in dev's ray.images (the head's and submitter's too)
        assert image == kuberay.ray_image(config.ray.images, pool), pool.name
        assert pool.name in lustre_pools(config)
        built = kuberay.ray_job(
            example["metadata"]["name"], pool, team=team.name, image=image,
            workers=group["replicas"], entrypoint=example["spec"]["entrypoint"],
            checkpoints=checkpoint_location(config), directories=directories, group_id=team.gid,
        )  # fmt: skip
        assert example == built, example["metadata"]["name"]
    assert kinds == {GPU_RESOURCE, NEURON_RESOURCE}


def test_the_gpu_example_runs_the_ray_cuda_build_at_its_ray_version() -> None:
    gpu = _examples()["gpu"]["spec"]
    assert gpu["rayClusterSpec"]["rayVersion"] == versions.RAY_VERSION
    images = {
        c["image"]
        for template in (
            gpu["submitterPodTemplate"],
            gpu["rayClusterSpec"]["headGroupSpec"]["template"],
            *(g["template"] for g in gpu["rayClusterSpec"]["workerGroupSpecs"]),
        )
        for c in template["spec"]["containers"]
    }
    # the images/ray-cuda build (torch for the TorchTrainer), not Ray's own image (no torch)
    (image,) = images
    tag = software.reference_tag(image)
    assert tag == software.built_tag("ray-cuda", "nvidia")
    assert tag.startswith(f"{versions.RAY_VERSION}-")
    assert image != versions.RAY_IMAGE
    trainium = _examples()["trainium"]["spec"]["rayClusterSpec"]
    assert trainium["rayVersion"] == versions.RAY_VERSION


@pytest.mark.parametrize("name", ["gpu", "trainium"])
def test_the_examples_validate_against_kuberays_crds(reference_dir: Path, name: str) -> None:
    crds = reference_dir / "crds" / "kuberay" / f"v{versions.KUBERAY_VERSION}"
    assert validation_errors(_examples()[name], "1.35", crds) == []
    broken = copy.deepcopy(_examples()[name])
    broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replica"] = 2
    assert validation_errors(broken, "1.35", crds) != []


def _kuberays_pod(job: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """The pod KubeRay makes from a template: the queue label and PodGroup of its RayJob and
    Volcano as scheduler (kuberay v1.7.0 volcano_scheduler.go, AddMetadataToChildResource),
    with the tolerations Kubernetes' admission plugins add."""
    pod = make_pod(admitted_pod_spec(template["spec"]), job["metadata"]["namespace"])
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), **job["metadata"]["labels"]}
    pod["metadata"]["annotations"] = {
        **template.get("metadata", {}).get("annotations", {}),
        POD_GROUP_ANNOTATION: f"ray-{job['metadata']['name']}-pg",
        "volcano.sh/task-spec": "worker",
    }
    pod["spec"]["schedulerName"] = "volcano"
    return pod


@pytest.mark.parametrize("name", ["gpu", "trainium"])
def test_every_pod_of_the_examples_is_admitted_in_the_team_namespace(
    synthesized: dict[str, StackResult], name: str
) -> None:
    result = synthesized["dev"]
    job = _examples()[name]
    namespace = _team_namespace(result, job["metadata"]["namespace"])
    assert admit(_policy(result, QUEUE_POLICY), job, namespace) == (True, None)
    assert admit(_policy(result, RAY_GANG_POLICY), job, namespace) == (True, None)
    cluster = job["spec"]["rayClusterSpec"]
    templates = [
        job["spec"]["submitterPodTemplate"],
        cluster["headGroupSpec"]["template"],
        *(group["template"] for group in cluster["workerGroupSpecs"]),
    ]
    for policy in (TENANT_PODS_POLICY, QUEUE_POLICY, LUSTRE_BOUNDARY_POLICY):
        for template in templates:
            pod = _kuberays_pod(job, template)
            assert admit(_policy(result, policy), pod, namespace) == (True, None), policy
    # and the policies see what a member could change: a worker on the system nodes is refused
    worker = _kuberays_pod(job, cluster["workerGroupSpecs"][0]["template"])
    worker["spec"]["tolerations"].append(SYSTEM_TOLERATION)
    assert not admit(_policy(result, TENANT_PODS_POLICY), worker, namespace)[0]


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_a_worker_is_the_pod_a_trainer_runtime_runs_on_its_pool(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Resources, placement, tolerations, shared memory, claims and security context of each
    team's Ray worker equal those of the team's synthesized Trainer runtime on that pool."""
    result = synthesized[stack]
    config = result.config
    compared = 0
    for record in result.records:
        if record.type != RUNTIME or record.inputs["metadata"]["name"].split("-")[0] != "torch":
            continue
        team = next(t for t in config.teams if t.name == record.inputs["metadata"]["namespace"])
        pool = config.pool(record.inputs["metadata"]["labels"][POOL_LABEL])
        assert pool is not None
        (job,) = record.inputs["spec"]["template"]["spec"]["replicatedJobs"]
        runtime_pod = job["template"]["spec"]["template"]["spec"]
        mounted = any(
            v.get("persistentVolumeClaim", {}).get("claimName", "").startswith("lustre-")
            for v in runtime_pod["volumes"]
        )
        assert config.storage.lustre is not None
        group = kuberay.worker_group_spec(
            pool, team=team.name, job="j", image=versions.RAY_IMAGE, replicas=1,
            checkpoints=checkpoint_location(config) if mounted else None,
            directories=team_directories(config.storage.lustre, team) if mounted else None,
            group_id=team.gid, models=config.model_store.enabled,
            publishes_models=team.name in config.model_store.publishers,
        )  # fmt: skip
        worker = group["template"]["spec"]
        for key in ("nodeSelector", "tolerations", "volumes", "securityContext",
                    "schedulerName", "priorityClassName", "serviceAccountName"):  # fmt: skip
            assert worker[key] == runtime_pod[key], (record.name, key)
        (ray, node) = (worker["containers"][0], runtime_pod["containers"][0])
        assert ray["resources"] == node["resources"]
        assert ray["volumeMounts"] == node["volumeMounts"]
        assert ray["securityContext"] == node["securityContext"]
        # The runtime's variables, its job's name (TRAINJOB_NAME, from the JobSet label) read
        # as the RayJob's: CHECKPOINT_DIR and CHECKPOINT_S3_URI of the same job directory.
        ray_env = {e["name"]: e.get("value") for e in ray["env"]}
        runtime_env = {
            e["name"]: (e.get("value") or "").replace("$(TRAINJOB_NAME)", "j")
            for e in node["env"]
            if e["name"] != "TRAINJOB_NAME"
        }
        assert {k: runtime_env.get(k) for k in ray_env} == ray_env, record.name
        checkpoint = {"CHECKPOINT_DIR", "CHECKPOINT_S3_URI"} & runtime_env.keys()
        assert checkpoint <= ray_env.keys(), record.name
        if mounted:
            assert ray_env["CHECKPOINT_DIR"] == f"/fsx/checkpoints/{team.name}/j"
        compared += 1
    assert compared


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_trainium_workers_request_devices_and_declare_their_neuron_cores(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    config = synthesized[stack].config
    neuron_pools = [
        p for p in config.node_pools if p.instance.accelerator_resource == NEURON_RESOURCE
    ]
    assert neuron_pools
    for pool in neuron_pools:
        group = kuberay.worker_group_spec(
            pool, team="t", job="j", image="x/y:1", replicas=1, checkpoints=None
        )
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits[NEURON_RESOURCE] == str(pool.instance.accelerators)
        assert "aws.amazon.com/neuroncore" not in limits
        declared = group["rayStartParams"]["resources"]
        # KubeRay passes it to `ray start --resources` as written: JSON in single quotes
        assert declared.startswith("'") and declared.endswith("'")
        assert json.loads(declared[1:-1]) == {"neuron_cores": pool.instance.neuron_cores}
    gpu_pools = [p for p in config.node_pools if p.instance.accelerator_resource == GPU_RESOURCE]
    for pool in gpu_pools:
        group = kuberay.worker_group_spec(
            pool, team="t", job="j", image="x/y:1", replicas=1, checkpoints=None
        )
        assert group["rayStartParams"] == {}  # KubeRay counts GPUs from the limits itself


def test_the_head_runs_on_a_general_pool_and_takes_no_work() -> None:
    config, team, directories = _dev_context()
    location = checkpoint_location(config)
    mounted = kuberay.head_group_spec(
        team=team.name, job="j", image=versions.RAY_IMAGE, checkpoints=location,
        directories=directories, group_id=team.gid,
    )  # fmt: skip
    plain = kuberay.head_group_spec(
        team=team.name, job="j", image=versions.RAY_IMAGE, checkpoints=None
    )
    assert mounted["template"]["spec"]["nodeSelector"] == {POOL_LABEL: GENERAL_LUSTRE_POOL}
    assert plain["template"]["spec"]["nodeSelector"] == {POOL_LABEL: GENERAL_POOL}
    for head in (mounted, plain):
        assert head["rayStartParams"] == {"num-cpus": "0"}
        assert "tolerations" not in head["template"]["spec"]
        limits = head["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert set(limits) == {"cpu", "memory"}


@pytest.mark.parametrize("stack", RAY_STACKS)
def test_a_rayjob_of_every_team_on_every_pool_it_can_hold_is_admitted(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    config = result.config
    assert config.storage.lustre is not None
    judged = 0
    for team in config.teams:
        namespace = _team_namespace(result, team.name)
        for pool, framework in team_runtimes(team, config.node_pools):
            if framework != "torch":
                continue
            mounted = team.shared_file_system and pool.name in lustre_pools(config)
            job = kuberay.ray_job(
                f"rj-{pool.name}", pool, team=team.name, image=versions.RAY_IMAGE,
                workers=team_nodes(team, pool), entrypoint="python train.py",
                checkpoints=checkpoint_location(config) if mounted else None,
                directories=team_directories(config.storage.lustre, team) if mounted else None,
                group_id=team.gid,
            )  # fmt: skip
            cluster = job["spec"]["rayClusterSpec"]
            templates = [
                job["spec"]["submitterPodTemplate"],
                cluster["headGroupSpec"]["template"],
                *(group["template"] for group in cluster["workerGroupSpecs"]),
            ]
            assert admit(_policy(result, QUEUE_POLICY), job, namespace) == (True, None)
            for policy in (TENANT_PODS_POLICY, QUEUE_POLICY, LUSTRE_BOUNDARY_POLICY):
                for template in templates:
                    pod = _kuberays_pod(job, template)
                    verdict = admit(_policy(result, policy), pod, namespace)
                    assert verdict == (True, None), (team.name, pool.name, policy, verdict)
            judged += 1
    assert judged >= 2


def _min_resources(job: dict[str, Any]) -> dict[str, Decimal]:
    """The PodGroup's minResources as KubeRay 1.7.0 sums them for a RayJob that does not
    autoscale: the head, every worker, and the submitter (volcano_scheduler.go, handleRayJob;
    utils.CalculateDesiredResources). Requests, or limits where a container sets no request."""
    cluster = job["spec"]["rayClusterSpec"]
    pods = [(1, job["spec"]["submitterPodTemplate"]), (1, cluster["headGroupSpec"]["template"])]
    pods += [(group["replicas"], group["template"]) for group in cluster["workerGroupSpecs"]]
    total: dict[str, Decimal] = {}
    for count, template in pods:
        for container in template["spec"]["containers"]:
            amounts = {**container["resources"]["limits"], **container["resources"]["requests"]}
            for name, value in amounts.items():
                total[name] = total.get(name, Decimal(0)) + count * quantity(value)
    return total


@pytest.mark.parametrize("name", ["gpu", "trainium"])
def test_the_examples_gang_fits_the_dev_teams_quota_and_queue(name: str) -> None:
    """Volcano enqueues the PodGroup only if the queue's capability holds minResources, and the
    namespace's quota must admit every pod: the examples' gangs fit both."""
    _, team, _ = _dev_context()
    job = _examples()[name]
    needed = _min_resources(job)
    members = 1 + sum(g["replicas"] for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"])
    assert members >= 2  # minMember: head plus workers; the submitter is not counted
    accelerators = {k: v for k, v in needed.items() if k in (GPU_RESOURCE, NEURON_RESOURCE)}
    assert len(accelerators) == 1
    for resource, amount in accelerators.items():
        assert amount <= team.capability.resources()[resource], (resource, amount)
        assert amount <= team.quota.resources()[resource], (resource, amount)
    if "vpc.amazonaws.com/efa" in needed:
        assert team.quota.efa_interfaces is not None
        assert needed["vpc.amazonaws.com/efa"] <= team.quota.efa_interfaces


@pytest.mark.parametrize("stack", RAY_STACKS)
@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_a_ray_gangs_priority_is_a_training_priority_class(
    synthesized: dict[str, StackResult], stack: str, kind: str
) -> None:
    """KubeRay gives the PodGroup the label's priority class (volcano_scheduler.go,
    createPodGroup): the label may name only what a team pod may."""
    result = synthesized[stack]
    policy = _policy(result, RAY_GANG_POLICY)
    team = stack_data(stack)["teams"][0]["name"]
    namespace = _team_namespace(result, team)
    plain = _ray_object(kind, team, team)
    for name in PRIORITY_CLASSES:
        ranked = copy.deepcopy(plain)
        ranked["metadata"]["labels"][RAY_PRIORITY_LABEL] = name
        assert admit(policy, ranked, namespace) == (True, None)
        assert admit(policy, ranked, namespace, old=plain) == (True, None)
    for name in ("system-node-critical", "system-cluster-critical", "made-up"):
        ranked = copy.deepcopy(plain)
        ranked["metadata"]["labels"][RAY_PRIORITY_LABEL] = name
        for old in (None, plain):  # a label-only update is judged too
            ok, message = admit(policy, ranked, namespace, old=old)
            assert not ok and message and name in message and RAY_PRIORITY_LABEL in message


# --- review of issue 42: the gang's priority, disruption, clean-up, upgrades -----------------


def _built(kind: str) -> dict[str, Any]:
    """dev's GPU RayJob or standing RayCluster, as the builders make them."""
    config, team, directories = _dev_context()
    pool = config.pool("gpu-small")
    assert pool is not None
    common: dict[str, Any] = {
        "team": team.name,
        "image": kuberay.ray_image(config.ray.images, pool),
        "workers": 1,
        "checkpoints": checkpoint_location(config),
        "directories": directories,
        "group_id": team.gid,
    }
    if kind == "RayJob":
        return kuberay.ray_job("train", pool, entrypoint="python train.py", **common)
    return kuberay.ray_cluster("interactive", pool, **common)


@pytest.mark.parametrize("kind", ["RayJob", "RayCluster"])
def test_a_ray_gang_gives_its_podgroup_the_priority_class_of_its_pods(kind: str) -> None:
    """KubeRay takes the PodGroup's priorityClassName from the label only (volcano_scheduler.go,
    createPodGroup): the builders set it to the class of every pod."""
    built = _built(kind)
    classes = {
        template["spec"]["priorityClassName"]
        for _, template in kuberay.ray_pod_templates(kind, built["spec"])
    }
    assert classes == {built["metadata"]["labels"][RAY_PRIORITY_LABEL]}
    assert classes == {STANDARD_PRIORITY_CLASS}


@pytest.mark.parametrize("kind", ["RayJob", "RayCluster"])
def test_pods_of_a_class_the_gang_label_does_not_name_are_refused(
    synthesized: dict[str, StackResult], kind: str
) -> None:
    result = synthesized["dev"]
    policy = _policy(result, RAY_GANG_POLICY)
    built = _built(kind)
    namespace = _team_namespace(result, built["metadata"]["namespace"])
    assert admit(policy, built, namespace) == (True, None)
    unlabelled = copy.deepcopy(built)
    del unlabelled["metadata"]["labels"][RAY_PRIORITY_LABEL]
    ok, message = admit(policy, unlabelled, namespace)
    assert not ok and message and "unset" in message and RAY_PRIORITY_LABEL in message
    # every template counts: the head's, each worker group's, a RayJob's submitter's
    for where, _ in kuberay.ray_pod_templates(kind, built["spec"]):
        other = copy.deepcopy(built)
        for found, template in kuberay.ray_pod_templates(kind, other["spec"]):
            if found == where:
                template["spec"]["priorityClassName"] = "training-critical"
        ok, message = admit(policy, other, namespace)
        assert not ok and message and "training-critical" in message, where
        # and the label names it, the template names it: admitted once all agree
        for _, template in kuberay.ray_pod_templates(kind, other["spec"]):
            template["spec"]["priorityClassName"] = "training-critical"
        other["metadata"]["labels"][RAY_PRIORITY_LABEL] = "training-critical"
        assert admit(policy, other, namespace) == (True, None), where
    # templates that name no class need no label
    bare = copy.deepcopy(unlabelled)
    for _, template in kuberay.ray_pod_templates(kind, bare["spec"]):
        del template["spec"]["priorityClassName"]
    assert admit(policy, bare, namespace) == (True, None)


def test_a_finished_rayjob_gives_its_cluster_back_at_once() -> None:
    """With shutdownAfterJobFinishes and no TTL KubeRay deletes the RayCluster as the job ends
    and keeps the submitter Job with the driver's log (rayjob_controller.go,
    handleShutdownAfterJobFinishes): no deletionStrategy, which takes another path."""
    for spec in (_built("RayJob")["spec"], *(e["spec"] for e in _examples().values())):
        assert spec["shutdownAfterJobFinishes"] is True
        assert spec["ttlSecondsAfterFinished"] == 0
        assert "deletionStrategy" not in spec


def test_the_head_and_submitter_are_not_disrupted_by_karpenter_and_workers_may_be() -> None:
    """The general pools consolidate WhenEmptyOrUnderutilized: only do-not-disrupt keeps
    Karpenter from evicting the head (and with it the driver and the cluster state)."""
    for kind in ("RayJob", "RayCluster"):
        built = _built(kind)
        pinned = {
            where
            for where, template in kuberay.ray_pod_templates(kind, built["spec"])
            if template.get("metadata", {}).get("annotations", {}).get(DO_NOT_DISRUPT) == "true"
        }
        expected = (
            {"rayClusterSpec.headGroupSpec", "submitterPodTemplate"}
            if kind == "RayJob"
            else {"headGroupSpec"}
        )
        assert pinned == expected, kind


def test_a_standing_cluster_recreates_its_pods_when_its_spec_changes(reference_dir: Path) -> None:
    """Without upgradeStrategy Recreate KubeRay never replaces a running cluster's pods
    (raycluster_controller.go, shouldRecreatePodsForUpgrade); a RayJob's cluster may not set it
    (utils/validation.go, ValidateRayClusterUpgradeOptions)."""
    cluster = _built("RayCluster")
    assert cluster["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    crds = reference_dir / "crds" / "kuberay" / f"v{versions.KUBERAY_VERSION}"
    assert validation_errors(cluster, "1.35", crds) == []
    unknown = copy.deepcopy(cluster)
    unknown["spec"]["upgradeStrategy"]["type"] = "Rolling"
    assert validation_errors(unknown, "1.35", crds) != []
    assert "upgradeStrategy" not in _built("RayJob")["spec"]["rayClusterSpec"]
