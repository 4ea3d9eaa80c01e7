"""The data path (issue 22): every bucket reachable, one direction per path, team-scoped roles.

What a job reads and writes: the buckets linked to the file system by data repository
associations (each naming its own bucket), and each team's job role, given to its job service
account by EKS Pod Identity, reaching only the team's prefixes.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from typing import Any, Final

import botocore.session
import pytest
from botocore.validate import validate_parameters

from components.checkpoints import CheckpointLocation
from components.config import (
    DataRepositoryAssociationConfig,
    LustreConfig,
    PlatformConfig,
    parse_platform_config,
)
from components.storage import (
    current_version_rules,
    data_key_policy,
    team_data_policy,
    team_prefixes,
    team_role_name,
)
from components.storage.capacity import with_release_schedules
from components.storage.iam import data_key_principals
from components.teams import JOB_SERVICE_ACCOUNT
from components.trainer import runtime_spec
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from tests.config_problems import assert_reported, problems_of
from tests.conftest import STACKS, stack_data
from tests.kubernetes_semantics import container_environment
from tests.mutations import without_teams
from tests.team_objects import team_runtimes

ASSOCIATION: Final = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
ROLE: Final = "aws:iam/role:Role"
ROLE_POLICY: Final = "aws:iam/rolePolicy:RolePolicy"
POD_IDENTITY: Final = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
LUSTRE: Final = "platform.storage.lustre"


def _lustre_of(stack: str) -> tuple[PlatformConfig, LustreConfig]:
    """A stack's parsed config and its file system (every shipped stack has one)."""
    config = parse_platform_config(stack_data(stack))
    assert config.storage.lustre is not None, stack
    return config, config.storage.lustre


def _records(result: StackResult, resource_type: str) -> list[Any]:
    return [r for r in result.records if r.type == resource_type]


def _association_index(data: dict[str, Any], path: str) -> int:
    paths = [a["fileSystemPath"] for a in data["storage"]["lustre"]["associations"]]
    return paths.index(path)


# --------------------------------------------------------------------------- one bucket each


def test_prod_links_its_datasets_bucket_to_the_file_system(
    synthesized: dict[str, StackResult],
) -> None:
    """The review's finding: prod's datasets bucket was created and never readable from /fsx."""
    config = parse_platform_config(stack_data("prod"))
    datasets = next(b for b in config.storage.buckets if b.name == "datasets")
    s3_name = datasets.bucket_name or f"{config.name}-datasets-{config.account_id}"
    paths = {
        r.inputs["fileSystemPath"]: r.inputs["dataRepositoryPath"]
        for r in _records(synthesized["prod"], ASSOCIATION)
    }
    assert paths["/datasets"] == f"s3://{s3_name}/"
    assert paths["/checkpoints"].startswith(f"s3://{config.name}-checkpoints-")


def test_an_association_names_a_known_bucket() -> None:
    data = stack_data("prod")
    index = _association_index(data, "/datasets")
    data["storage"]["lustre"]["associations"][index]["bucket"] = "nosuch"
    assert_reported(data, f"{LUSTRE}.associations[{index}].bucket", "nosuch", "the key of a bucket")


def test_an_association_without_a_bucket_needs_the_default() -> None:
    data = stack_data("prod")
    assert "bucket" not in data["storage"]["lustre"]
    index = _association_index(data, "/checkpoints")
    del data["storage"]["lustre"]["associations"][index]["bucket"]
    assert_reported(
        data, f"{LUSTRE}.associations[{index}].bucket", None, "or set storage.lustre.bucket"
    )


def test_one_prefix_may_serve_two_buckets_but_not_two_paths_of_one() -> None:
    data = stack_data("prod")
    associations = data["storage"]["lustre"]["associations"]
    associations.append({"fileSystemPath": "/raw", "bucket": "datasets", "s3Prefix": "raw/"})
    with pytest.raises(Exception, match="neither contains nor is inside ''"):
        parse_platform_config(data)  # '' (all of datasets) contains raw/ of the same bucket
    associations[-1]["bucket"] = "checkpoints"
    associations[-1]["s3Prefix"] = "raw/"
    assert parse_platform_config(data).storage.lustre is not None


# --------------------------------------------------------------------------- reachability


def test_a_bucket_nothing_reaches_is_refused() -> None:
    """Prod as it was: every association in checkpoints, datasets reachable by nobody."""
    data = stack_data("prod")
    associations = data["storage"]["lustre"]["associations"]
    associations.pop(_association_index(data, "/datasets"))
    index = [b["name"] for b in data["storage"]["buckets"]].index("datasets")
    assert_reported(data, f"platform.storage.buckets[{index}]", "datasets", "set teamAccess: true")
    data["storage"]["buckets"][index]["teamAccess"] = True
    assert parse_platform_config(data).storage.buckets[index].team_access


def test_team_access_needs_teams_to_reach_anything() -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["associations"].pop(_association_index(data, "/datasets"))
    index = [b["name"] for b in data["storage"]["buckets"]].index("datasets")
    data["storage"]["buckets"][index]["teamAccess"] = True
    without_teams(data)
    data["slurm"]["enabled"] = False
    problems = [p for p in problems_of(data) if p.path == f"platform.storage.buckets[{index}]"]
    assert problems and "(with teams)" in problems[0].allowed


# --------------------------------------------------------------------------- one direction


def test_a_path_that_exports_imports_nothing_by_default() -> None:
    exporting = DataRepositoryAssociationConfig.model_validate(
        {"fileSystemPath": "/out", "exportEvents": ["NEW"]}
    )
    importing = DataRepositoryAssociationConfig.model_validate({"fileSystemPath": "/in"})
    assert exporting.imports == []
    assert importing.imports == ["NEW", "CHANGED", "DELETED"]


def test_importing_what_a_path_exports_is_refused() -> None:
    data = stack_data("dev")
    index = _association_index(data, "/checkpoints")
    data["storage"]["lustre"]["associations"][index]["importEvents"] = ["NEW"]
    assert_reported(
        data, f"{LUSTRE}.associations[{index}].importEvents", ["NEW"], "data flows one way"
    )


def test_exporting_deletes_from_the_checkpoint_path_is_refused() -> None:
    """The old stacks: an ``rm -rf`` on /fsx/checkpoints deleted the S3 copy too."""
    data = stack_data("staging")
    index = _association_index(data, "/checkpoints")
    data["storage"]["lustre"]["associations"][index]["exportEvents"] = ["NEW", "CHANGED", "DELETED"]
    assert_reported(
        data,
        f"{LUSTRE}.associations[{index}].exportEvents",
        ["NEW", "CHANGED", "DELETED"],
        "never deletes the S3 copy",
    )


def test_a_checkpoint_path_that_does_not_export_everything_written_is_refused() -> None:
    data = stack_data("dev")
    index = _association_index(data, "/checkpoints")
    data["storage"]["lustre"]["associations"][index]["exportEvents"] = ["NEW"]
    assert_reported(data, f"{LUSTRE}.associations[{index}].exportEvents", ["NEW"], "[NEW, CHANGED]")


def test_the_checkpoint_path_is_an_association() -> None:
    data = stack_data("dev")
    data["storage"]["lustre"]["checkpointPath"] = "/scratch"
    assert_reported(data, f"{LUSTRE}.checkpointPath", "/scratch", "the fileSystemPath of an")
    data["storage"]["lustre"]["checkpointPath"] = "/checkpoints/"
    assert parse_platform_config(data).storage.lustre is not None


def test_noatime_is_refused_since_release_reads_access_times() -> None:
    data = stack_data("dev")
    data["storage"]["lustre"]["mountOptions"] = ["noatime", "flock"]
    assert_reported(data, f"{LUSTRE}.mountOptions", ["noatime", "flock"], "relatime")
    # nor ro: a read-only mount records no access times either
    data["storage"]["lustre"]["mountOptions"] = ["relatime", "flock", "ro"]
    assert_reported(data, f"{LUSTRE}.mountOptions", ["relatime", "flock", "ro"], "read-write")


# --------------------------------------------------------------------------- team roles


def _team_policy(result: StackResult, team: str) -> dict[str, Any]:
    (policy,) = [p for p in _records(result, ROLE_POLICY) if p.name == f"storage-{team}-jobs"]
    document: dict[str, Any] = json.loads(policy.inputs["policy"])
    return document


def _reaches(policy: dict[str, Any], action: str, bucket: str, key: str) -> bool:
    """Whether an Allow of ``policy`` covers ``action`` on object ``key`` of ``bucket``.

    S3 resource ARNs match with ``*`` across ``/`` (IAM user guide, "IAM JSON policy elements:
    Resource"), which is what fnmatch's ``*`` does; the names here hold no ``?`` or ``[``.
    """
    for statement in policy["Statement"]:
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        if (
            statement["Effect"] == "Allow"
            and action in actions
            and fnmatch.fnmatchcase(f"arn:aws:s3:::{bucket}/{key}", statement["Resource"])
        ):
            return True
    return False


def _lists(policy: dict[str, Any], bucket: str, prefix: str, action: str = "s3:ListBucket") -> bool:
    for statement in policy["Statement"]:
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        if action in actions and statement["Resource"] == f"arn:aws:s3:::{bucket}":
            allowed = statement["Condition"]["StringLike"]["s3:prefix"]
            if any(fnmatch.fnmatchcase(prefix, pattern) for pattern in allowed):
                return True
    return False


TEAM_STACKS: Final = [s for s in STACKS if stack_data(s).get("teams")]


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_each_team_reaches_its_own_prefixes_and_no_other_teams(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    config = parse_platform_config(stack_data(stack))
    teams = [team.name for team in config.teams]
    for team in teams:
        policy = _team_policy(synthesized[stack], team)
        for part in team_prefixes(config, team):
            assert _reaches(policy, "s3:GetObject", part.bucket, f"{part.prefix}shard-0")
            assert _reaches(policy, "s3:PutObject", part.bucket, f"{part.prefix}x") is (
                part.writable
            )
            assert _lists(policy, part.bucket, part.prefix)
            # its own old versions, to restore what was overwritten or deleted
            assert _lists(policy, part.bucket, part.prefix, "s3:ListBucketVersions")
            assert _reaches(policy, "s3:GetObjectVersion", part.bucket, f"{part.prefix}x")
            for other in teams:
                if other == team:
                    continue
                elsewhere = part.prefix.removesuffix(f"{team}/") + f"{other}/ckpt"
                for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
                    assert not _reaches(policy, action, part.bucket, elsewhere), (team, other)
                assert not _lists(policy, part.bucket, elsewhere)
                assert not _lists(policy, part.bucket, elsewhere, "s3:ListBucketVersions")
            assert not _lists(policy, part.bucket, "")


def test_import_only_datasets_and_checkpoint_copies_are_read_only() -> None:
    """Import-only paths take no team uploads (their POSIX metadata would set modes on /fsx);
    export-only copies belong to FSx."""
    config = parse_platform_config(stack_data("prod"))
    parts = {(p.bucket.split("-")[3], p.prefix): p.writable for p in team_prefixes(config, "a")}
    assert parts == {
        ("datasets", "a/"): False,
        ("checkpoints", "checkpoints/a/"): False,
        ("checkpoints", "artifacts/a/"): False,
    }


def test_team_access_gives_the_team_prefix_of_an_unlinked_bucket() -> None:
    data = stack_data("dev")
    data["storage"]["buckets"].append({"name": "streams", "teamAccess": True})
    config = parse_platform_config(data)
    (streams,) = [p for p in team_prefixes(config, "ml-dev") if "streams" in p.bucket]
    assert (streams.prefix, streams.writable) == ("ml-dev/", True)
    policy = team_data_policy([streams])
    assert _reaches(policy, "s3:DeleteObject", streams.bucket, "ml-dev/part-0")
    assert not _reaches(policy, "s3:GetObject", streams.bucket, "other/part-0")


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_the_job_service_account_of_each_team_has_its_role(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Job pods had no S3 identity (no Pod Identity, IMDS hop limit 1): now each team's has."""
    result = synthesized[stack]
    roles = {r.urn: r for r in _records(result, ROLE)}
    by_namespace = {
        (a.inputs["namespace"], a.inputs["serviceAccount"]): a
        for a in _records(result, POD_IDENTITY)
    }
    for team in parse_platform_config(stack_data(stack)).teams:
        association = by_namespace[(team.name, JOB_SERVICE_ACCOUNT)]
        (role_urn,) = association.property_dependencies["roleArn"]
        trust = json.loads(roles[role_urn].inputs["assumeRolePolicy"])
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        (policy,) = [
            p for p in _records(result, ROLE_POLICY) if p.name == f"storage-{team.name}-jobs"
        ]
        assert policy.property_dependencies["role"] == [role_urn]


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_runtime_pods_run_as_the_account_with_the_role(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    identities = {
        (a.inputs["namespace"], a.inputs["serviceAccount"]) for a in _records(result, POD_IDENTITY)
    }
    runtimes = team_runtimes(result.records)
    assert runtimes
    for runtime in runtimes:
        namespace = runtime.inputs["metadata"]["namespace"]
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            assert (namespace, pod["serviceAccountName"]) in identities


def test_no_team_role_without_anything_to_reach() -> None:
    data = copy.deepcopy(stack_data("dev"))
    data["storage"] = {}
    data["slurm"]["enabled"] = False
    assert team_prefixes(parse_platform_config(data), "ml-dev") == []


def test_team_role_names_fit_iam_and_stay_distinct() -> None:
    cluster = "c" * 29
    first, second = ("team-" + "x" * 57 + suffix for suffix in "ab")
    names = {team_role_name(cluster, team) for team in (first, second)}
    assert len(names) == 2 and all(len(name) <= 64 for name in names)
    assert team_role_name("ml-training-prod", "ml-research") == "ml-training-prod-ml-research-jobs"


# --------------------------------------------------------------------------- jobs resume

JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"  # jobset v0.12.0 JobSetNameKey
SHARED_MOUNT: Final = "/fsx"


def _runtimes(result: StackResult) -> list[Any]:
    return team_runtimes(result.records)


def _pods(runtime: Any) -> list[dict[str, Any]]:
    jobs = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]
    return [job["template"]["spec"]["template"]["spec"] for job in jobs]


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_every_job_gets_its_own_checkpoint_directory_in_its_teams_exported_space(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    _, lustre = _lustre_of(stack)
    exported = {
        a.inputs["fileSystemPath"]
        for a in _records(result, ASSOCIATION)
        if a.inputs.get("s3", {}).get("autoExportPolicy", {}).get("events") == ["NEW", "CHANGED"]
    }
    assert lustre.checkpoint_root in exported
    (checkpoint_prefix,) = [
        a.inputs["dataRepositoryPath"]
        for a in _records(result, ASSOCIATION)
        if a.inputs["fileSystemPath"] == lustre.checkpoint_root
    ]
    runtimes = _runtimes(result)
    assert runtimes
    for runtime in runtimes:
        team = runtime.inputs["metadata"]["namespace"]
        for pod in _pods(runtime):
            (container,) = [c for c in pod["containers"] if c["name"] == "node"]
            environment = container_environment(container, {JOBSET_NAME_LABEL: "llama-pretrain"})
            expected = f"{SHARED_MOUNT}{lustre.checkpoint_root}/{team}/llama-pretrain"
            assert environment["CHECKPOINT_DIR"] == expected, runtime.name
            # the same directory's S3 side, which fsx-checkpoint commit compares against
            s3_key = f"{checkpoint_prefix}{team}/llama-pretrain"
            assert environment["CHECKPOINT_S3_URI"] == s3_key, runtime.name
            # inside the team's checkpoint directory, which its own claim mounts writable
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            team_directory = f"{SHARED_MOUNT}{lustre.checkpoint_root}/{team}"
            assert environment["CHECKPOINT_DIR"].startswith(team_directory + "/")
            mount = mounts[team_directory]
            assert not mount.get("readOnly", False)
            claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
            assert claim == "lustre-" + lustre.checkpoint_root.strip("/")


def test_a_team_without_the_shared_file_system_gets_no_checkpoint_directory(
    synthesized: dict[str, StackResult],
) -> None:
    data = stack_data("dev")
    config = parse_platform_config(data)
    (pool,) = [p for p in config.node_pools if p.name == "gpu-small"]
    spec = runtime_spec("torch", pool, trainer=config.trainer, queue="ml-dev", checkpoints=None)
    (pod,) = [job["template"]["spec"]["template"]["spec"] for job in
              spec["template"]["spec"]["replicatedJobs"]]  # fmt: skip
    names = {variable["name"] for variable in pod["containers"][0]["env"]}
    assert "CHECKPOINT_DIR" not in names and "TRAINJOB_NAME" not in names


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_a_failed_pod_restarts_the_whole_gang_a_bounded_number_of_times(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """One lost node must restart the job from its checkpoint, not fail it (or hang it)."""
    restarts = parse_platform_config(stack_data(stack)).trainer.max_restarts
    for runtime in _runtimes(synthesized[stack]):
        jobset = runtime.inputs["spec"]["template"]["spec"]
        assert jobset["failurePolicy"] == {
            "maxRestarts": restarts,
            "restartStrategy": "BlockingRecreate",
            # a node taken away (drain, spot interruption) restarts without counting
            "rules": [{
                "name": "disruptionsDoNotCount",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }],
        }  # fmt: skip
        for job in jobset["replicatedJobs"]:
            spec = job["template"]["spec"]
            # Kubernetes' default (6) would replace the one pod while its peers hang.
            assert spec["backoffLimit"] == 0, (runtime.name, job["name"])
            assert spec["template"]["spec"]["restartPolicy"] == "Never"
            assert spec["podFailurePolicy"] == {"rules": [{
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }]}  # fmt: skip


def test_max_restarts_comes_from_config() -> None:
    data = stack_data("dev")
    data.setdefault("trainer", {})["maxRestarts"] = 0
    config = parse_platform_config(data)
    pool = config.node_pools[0]
    checkpoints = CheckpointLocation("/checkpoints", None)
    spec = runtime_spec(
        "torch", pool, trainer=config.trainer, queue="ml-dev", checkpoints=checkpoints
    )
    assert spec["template"]["spec"]["failurePolicy"]["maxRestarts"] == 0
    data["trainer"]["maxRestarts"] = -1
    assert_reported(data, "platform.trainer.maxRestarts", -1, "a number from 0 to 100")


# --------------------------------------------------------------------------- Lustre's zone

NODE_CLASS: Final = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL: Final = "kubernetes:karpenter.sh/v1:NodePool"
STARTUP_TAINT: Final = {"key": "fsx.csi.aws.com/agent-not-ready", "effect": "NoExecute"}


def _object(result: StackResult, resource_type: str, name: str) -> Any:
    (found,) = [r for r in _records(result, resource_type) if r.inputs["metadata"]["name"] == name]
    return found


def _carries_client_group(result: StackResult, node_class: Any) -> bool:
    (clients,) = [
        r for r in _records(result, "aws:ec2/securityGroup:SecurityGroup")
        if r.name == "storage-lustre-clients"
    ]  # fmt: skip
    return clients.urn in node_class.property_dependencies.get("spec", [])


def _zones(pool: Any) -> list[str]:
    (zones,) = [r["values"] for r in pool.inputs["spec"]["template"]["spec"]["requirements"]
                if r["key"] == "topology.kubernetes.io/zone"]  # fmt: skip
    return list(zones)


@pytest.mark.parametrize("stack", STACKS)
def test_only_pools_in_the_file_systems_zone_are_its_clients(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Every NodePool whose nodes carry the client group and the startup taint is in its zone."""
    result = synthesized[stack]
    config = parse_platform_config(stack_data(stack))
    training = config.network.training_zone
    classes = {r.inputs["metadata"]["name"]: r for r in _records(result, NODE_CLASS)}
    clients = 0
    for pool in _records(result, NODE_POOL):
        template = pool.inputs["spec"]["template"]["spec"]
        node_class = classes[template["nodeClassRef"]["name"]]
        tainted = STARTUP_TAINT in template.get("startupTaints", [])
        if _carries_client_group(result, node_class):
            clients += 1
            assert _zones(pool) == [training], pool.name
            assert tainted, pool.name
        else:
            assert not tainted, pool.name  # nothing would remove it
    assert clients > 0


def test_a_pool_across_zones_does_not_mount_lustre(
    run_platform: Any,
) -> None:
    """dev's GPU pool without its zone: no client group, no taint, runtimes without the claim."""
    data = stack_data("dev")
    (gpu,) = [p for p in data["nodePools"] if p["name"] == "gpu-small"]
    del gpu["zone"]
    data["slurm"]["nodeSets"] = [n for n in data["slurm"]["nodeSets"] if n["pool"] != "gpu-small"]
    run = run_platform(data, "dev")
    (node_class,) = [
        r for r in run.of_type(NODE_CLASS) if r.inputs["metadata"]["name"] == "gpu-small"
    ]
    (clients,) = [r for r in run.records if r.name == "storage-lustre-clients"]
    assert clients.urn not in node_class.property_dependencies.get("spec", [])
    (pool,) = [r for r in run.of_type(NODE_POOL) if r.inputs["metadata"]["name"] == "gpu-small"]
    spec = pool.inputs["spec"]["template"]["spec"]
    assert STARTUP_TAINT not in spec.get("startupTaints", [])
    assert len(_zones(pool)) == 2
    runtimes = [r for r in run.records if r.type.endswith(":TrainingRuntime")]
    on_gpu = [r for r in runtimes if r.inputs["metadata"]["name"].endswith("-gpu-small")]
    assert on_gpu

    def lustre_claims(pod: dict[str, Any]) -> list[dict[str, Any]]:
        # The EFS model store's claims mount from any zone: only Lustre's tie a pod to one.
        return [
            v
            for v in pod["volumes"]
            if v.get("persistentVolumeClaim", {}).get("claimName", "").startswith("lustre-")
        ]

    for runtime in on_gpu:
        for pod in _pods(runtime):
            assert not lustre_claims(pod), runtime.name
    on_trn = [r for r in runtimes if r.inputs["metadata"]["name"].endswith("-trn1")]
    assert on_trn and all(lustre_claims(pod) for r in on_trn for pod in _pods(r))


def test_a_slurm_node_set_on_a_pool_across_zones_is_refused() -> None:
    data = stack_data("dev")
    index = [p["name"] for p in data["nodePools"]].index("gpu-small")
    del data["nodePools"][index]["zone"]
    assert_reported(data, f"platform.nodePools[{index}].zone", None, "the training zone us-west-2b")


@pytest.mark.parametrize(
    "stack", [s for s in STACKS if stack_data(s).get("slurm", {}).get("enabled")]
)
def test_slurm_login_pods_run_on_the_cpu_pool_in_the_file_systems_zone(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    releases = [r for r in result.records if r.type == "kubernetes:helm.sh/v3:Release"
                and r.inputs.get("name") == "slurm"]  # fmt: skip
    (release,) = releases
    login = next(iter(release.inputs["values"]["loginsets"].values()))
    selector = login["podSpec"]["nodeSelector"]
    (pool,) = [p for p in _records(result, NODE_POOL)
               if p.inputs["spec"]["template"]["metadata"]["labels"].items() >= selector.items()]  # fmt: skip
    assert pool.inputs["metadata"]["name"] == "general-lustre"
    assert _zones(pool) == [parse_platform_config(stack_data(stack)).network.training_zone]


@pytest.mark.parametrize("stack", STACKS)
def test_cpu_pods_that_ask_for_no_pool_prefer_the_general_pool(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    general = _object(result, NODE_POOL, "general")
    clients = _object(result, NODE_POOL, "general-lustre")
    assert general.inputs["spec"].get("weight", 0) > clients.inputs["spec"].get("weight", 0)
    limits = clients.inputs["spec"]["limits"]
    config = parse_platform_config(stack_data(stack))
    assert limits == {
        "cpu": config.general_pool.lustre_max_cpu,
        "memory": f"{config.general_pool.lustre_max_memory_gib}Gi",
    }


# --------------------------------------------------------------------------- capacity

SCHEDULE: Final = "aws:scheduler/schedule:Schedule"
ALARM: Final = "aws:cloudwatch/metricAlarm:MetricAlarm"
LIFECYCLE: Final = "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"


def _botocore_shape(service: str, operation: str) -> Any:
    model = botocore.session.get_session().get_service_model(service)
    return model.operation_model(operation).input_shape


@pytest.mark.parametrize("stack", STACKS)
def test_every_exported_path_is_released_by_a_valid_daily_task(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Auto-export never frees Lustre space; only a RELEASE task does (ReleaseConfiguration,
    https://github.com/boto/botocore/blob/1.44.8/botocore/data/fsx/2018-03-01/service-2.json).
    """
    result = synthesized[stack]
    _, lustre = _lustre_of(stack)
    schedules = {
        json.loads(s.inputs["target"]["input"])["Paths"][0]: s for s in _records(result, SCHEDULE)
    }
    request_shape = _botocore_shape("fsx", "CreateDataRepositoryTask")
    name_shape = _botocore_shape("scheduler", "CreateSchedule").members["Name"]
    hours = []
    for association in lustre.associations:
        path = association.file_system_path.strip("/")
        if association.export_events:
            assert association.release_after_days is not None, (stack, path)
        if association.release_after_days is None:
            assert path not in schedules
            continue
        schedule = schedules[path]
        request = json.loads(schedule.inputs["target"]["input"])
        validate_parameters(request, request_shape)  # raises on what FSx's API would refuse
        assert request["Type"] == "RELEASE_DATA_FROM_FILESYSTEM"
        assert request["ReleaseConfiguration"]["DurationSinceLastAccess"] == {
            "Unit": "DAYS",
            "Value": association.release_after_days,
        }
        assert schedule.inputs["target"]["arn"] == (
            "arn:aws:scheduler:::aws-sdk:fsx:createDataRepositoryTask"
        )
        name = schedule.inputs["name"]
        assert len(name) <= name_shape.metadata["max"]
        assert re.fullmatch(name_shape.metadata["pattern"], name)
        hour = schedule.inputs["scheduleExpression"].split()[1]
        hours.append(int(hour))
    # FSx refuses a task while another runs: one path an hour
    assert len(hours) == len(set(hours)) and hours


@pytest.mark.parametrize("stack", STACKS)
def test_the_release_role_starts_tasks_on_this_file_system_only(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    config = parse_platform_config(stack_data(stack))
    (role,) = [r for r in _records(result, ROLE) if r.name == "storage-lustre-release"]
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": config.account_id}}
    (policy,) = [p for p in _records(result, ROLE_POLICY) if p.name == "storage-lustre-release"]
    start, report, decrypt = json.loads(policy.inputs["policy"])["Statement"]
    assert start["Action"] == "fsx:CreateDataRepositoryTask"
    assert report["Action"] == "sqs:SendMessage"
    # it decrypts its own schedules' input, with the data key, and nothing else of the key's
    assert decrypt["Action"] == "kms:Decrypt"
    (decrypted,) = decrypt["Condition"]["StringEquals"].values()
    assert set(decrypt["Condition"]["StringEquals"]) == {SCHEDULE_CONTEXT}
    assert sorted(decrypted) == sorted(_schedule_arns(result, config))
    (file_system,) = _records(result, "aws:fsx/lustreFileSystem:LustreFileSystem")
    (failures,) = [q for q in _records(result, "aws:sqs/queue:Queue")
                   if q.name == "storage-lustre-release-failures"]  # fmt: skip
    (data_key,) = [k for k in _records(result, KEY) if k.name == "storage-data"]
    assert set(policy.property_dependencies["policy"]) == {
        file_system.urn,
        failures.urn,
        data_key.urn,
    }
    for schedule in _records(result, SCHEDULE):
        assert set(schedule.property_dependencies["target"]) == {
            role.urn,
            file_system.urn,
            failures.urn,
        }
    # a run FSx refuses (another task running) is kept and alarmed on, not lost
    (alarm,) = [a for a in _records(result, ALARM) if a.name == "storage-lustre-release-failures"]
    # each failed run fires it anew (a queue nobody reads would hold a "visible" alarm on)
    assert (alarm.inputs["metricName"], alarm.inputs["statistic"]) == (
        "NumberOfMessagesSent",
        "Sum",
    )
    assert alarm.inputs["comparisonOperator"] == "GreaterThanThreshold"
    assert alarm.inputs["threshold"] == 0 and alarm.inputs["evaluationPeriods"] == 1
    assert alarm.property_dependencies["dimensions"] == [failures.urn]


KEY: Final = "aws:kms/key:Key"
SCHEDULE_CONTEXT: Final = "kms:EncryptionContext:aws:scheduler:schedule:arn"


def _schedule_arns(result: StackResult, config: PlatformConfig) -> list[str]:
    """The synthesized schedules' ARNs (Scheduler's ``default`` group), in creation order."""
    return [
        f"arn:aws:scheduler:{config.region}:{config.account_id}:schedule/default/{s.inputs['name']}"
        for s in _records(result, SCHEDULE)
    ]


def _key_policy_allows(policy: dict[str, Any], action: str, request: dict[str, str]) -> bool:
    """Whether a statement for every principal (``AWS: *``) allows ``action`` in ``request``.

    What a principal whose own IAM policies grant nothing on the key gets from the key policy
    (the account's ``kms:*`` statement hands the rest to IAM). Only ``StringEquals`` and
    ``ArnLike`` appear in these statements: each key must be in the request and equal (or, for
    ``ArnLike``, match with ``*`` and ``?``) one of the values (IAM's semantics for a list); a
    statement with any other operator is refused here, so a new one cannot pass untested.
    """
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow" or statement["Principal"] not in ("*", {"AWS": "*"}):
            continue
        actions = statement["Action"]
        if not any(
            fnmatch.fnmatchcase(action, pattern)
            for pattern in ([actions] if isinstance(actions, str) else actions)
        ):
            continue
        conditions = statement.get("Condition", {})
        assert set(conditions) <= {"StringEquals", "ArnLike"}, conditions

        def listed(values: str | list[str]) -> list[str]:
            return [values] if isinstance(values, str) else values

        equals = conditions.get("StringEquals", {})
        like = conditions.get("ArnLike", {})
        if all(key in request and request[key] in listed(v) for key, v in equals.items()) and all(
            key in request and any(fnmatch.fnmatchcase(request[key], p) for p in listed(v))
            for key, v in like.items()
        ):
            return True
    return False


@pytest.mark.parametrize("stack", STACKS)
def test_release_schedules_are_encrypted_with_the_data_key_scheduler_may_use(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """checkov CKV_AWS_297: the schedules' input (file system id, paths) is under the stack's
    data key, whose policy lets EventBridge Scheduler use it for these schedules only
    (EventBridge Scheduler user guide, "Encryption at rest", "Managing KMS keys")."""
    result = synthesized[stack]
    config = parse_platform_config(stack_data(stack))
    schedules = _records(result, SCHEDULE)
    assert schedules, stack
    (data_key,) = [k for k in _records(result, KEY) if k.name == "storage-data"]
    for schedule in schedules:
        assert schedule.property_dependencies["kmsKeyArn"] == [data_key.urn], schedule.name
    policy = json.loads(data_key.inputs["policy"])
    arns = _schedule_arns(result, config)
    scheduler = f"scheduler.{config.region}.amazonaws.com"
    own = {"kms:CallerAccount": config.account_id, "kms:ViaService": scheduler}
    for arn in arns:
        # whoever creates or updates a schedule, through Scheduler, for its input
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            assert _key_policy_allows(policy, action, {**own, SCHEDULE_CONTEXT: arn}), arn
    assert _key_policy_allows(policy, "kms:DescribeKey", own)
    other_schedule = arns[0].rsplit("/", 1)[0] + "/someone-elses"
    refused = [
        # another schedule of the account cannot put its input under the data key
        ("kms:Decrypt", {**own, SCHEDULE_CONTEXT: other_schedule}),
        ("kms:GenerateDataKey", {**own, SCHEDULE_CONTEXT: other_schedule}),
        # nor another account's principals, even for these schedules' ARNs
        ("kms:Decrypt", {**own, "kms:CallerAccount": "999999999999", SCHEDULE_CONTEXT: arns[0]}),
        # nor a direct call that claims a schedule's context without going through Scheduler
        ("kms:Decrypt", {"kms:CallerAccount": config.account_id, SCHEDULE_CONTEXT: arns[0]}),
        ("kms:Decrypt", {**own, "kms:ViaService": "lambda." + config.region + ".amazonaws.com",
                         SCHEDULE_CONTEXT: arns[0]}),
        # and nothing but the two encryption calls: no Encrypt, no grants
        ("kms:Encrypt", {**own, SCHEDULE_CONTEXT: arns[0]}),
        ("kms:CreateGrant", {**own, SCHEDULE_CONTEXT: arns[0]}),
    ]  # fmt: skip
    for action, request in refused:
        assert not _key_policy_allows(policy, action, request), (action, request)


def test_a_stack_without_release_schedules_adds_nothing_to_the_data_key() -> None:
    config = parse_platform_config(stack_data("dev"))
    base = data_key_policy(config.account_id, config.region, data_key_principals(config), efs=True)
    assert with_release_schedules(base, config, None) == base
    lustre = config.storage.lustre
    assert lustre is not None
    quiet = lustre.model_copy(
        update={
            "associations": [
                a.model_copy(update={"release_after_days": None}) for a in lustre.associations
            ]
        }
    )
    assert with_release_schedules(base, config, quiet) == base
    assert with_release_schedules(base, config, lustre) != base


@pytest.mark.parametrize("stack", STACKS)
def test_an_alarm_fires_before_the_file_system_fills(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    _, lustre = _lustre_of(stack)
    (alarm,) = [a for a in _records(result, ALARM) if a.name == "storage-lustre-free-capacity"]
    inputs = alarm.inputs
    assert (inputs["namespace"], inputs["metricName"]) == ("AWS/FSx", "FreeDataStorageCapacity")
    # per storage target: Sum is the file system's free space, Minimum the fullest target's
    assert inputs["statistic"] == "Sum"
    assert inputs["comparisonOperator"] == "LessThanThreshold"
    capacity_bytes = lustre.storage_capacity_gib * 2**30
    assert inputs["threshold"] == capacity_bytes * lustre.free_capacity_alarm_percent // 100
    # FSx reports one datapoint per storage target each minute (SampleCount is the number of
    # targets), and Sum adds every datapoint of the period: a file system of four targets with
    # a point less than the threshold free must breach it, whatever the period adds up
    targets = 4
    free_per_target = capacity_bytes // targets * (lustre.free_capacity_alarm_percent - 1) // 100
    minutes_per_period = inputs["period"] // 60
    assert free_per_target * targets * minutes_per_period < inputs["threshold"]
    # and for five minutes in a row, not on one low reading
    assert inputs["period"] * inputs["evaluationPeriods"] == 300
    (file_system,) = _records(result, "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert alarm.property_dependencies["dimensions"] == [file_system.urn]
    assert inputs.get("alarmActions", []) == list(lustre.alarm_actions)


def test_prods_old_checkpoints_move_to_classes_the_file_system_can_still_read(
    synthesized: dict[str, StackResult],
) -> None:
    (lifecycle,) = [r for r in _records(synthesized["prod"], LIFECYCLE)
                    if r.name == "storage-checkpoints"]  # fmt: skip
    (rule,) = [r for r in lifecycle.inputs["rules"] if r["id"] == "transition-current-versions"]
    assert rule["transitions"] == [
        {"days": 30, "storageClass": "STANDARD_IA"},
        {"days": 90, "storageClass": "GLACIER_IR"},
    ]


@pytest.mark.parametrize(
    ("transitions", "where", "allowed"),
    [
        ([{"days": 10, "storageClass": "STANDARD_IA"}], "[0].days", "at least 30"),
        ([{"days": 90, "storageClass": "GLACIER"}], "[0].storageClass", "cannot read objects"),
        ([{"days": 90, "storageClass": "GLACIER_IR"}, {"days": 120, "storageClass": "STANDARD_IA"}],
         "", "in S3's order"),
        ([{"days": 90, "storageClass": "STANDARD_IA"}, {"days": 60, "storageClass": "GLACIER_IR"}],
         "", "later days for later classes"),
    ],
)  # fmt: skip
def test_transitions_s3_or_the_file_system_would_refuse_are_refused(
    transitions: list[dict[str, Any]], where: str, allowed: str
) -> None:
    data = stack_data("prod")
    index = [b["name"] for b in data["storage"]["buckets"]].index("checkpoints")
    data["storage"]["buckets"][index]["transitions"] = transitions
    path = f"platform.storage.buckets[{index}].transitions{where}"
    problems = [p for p in problems_of(data) if p.path == path]
    assert problems and allowed in problems[0].allowed, [str(p) for p in problems_of(data)]


def test_an_unlinked_bucket_may_archive() -> None:
    data = stack_data("dev")
    data["storage"]["buckets"].append(
        {"name": "cold", "teamAccess": True,
         "transitions": [{"days": 30, "storageClass": "GLACIER"}]}
    )  # fmt: skip
    assert parse_platform_config(data).storage.buckets[-1].transitions[0].storage_class == "GLACIER"


# --------------------------------------------------------------------------- the fast path


def test_the_fast_path_decision_uses_each_stacks_real_throughput() -> None:
    """The docs' EFA decision quotes each stack's file system throughput; it must stay true."""
    page = (REPOSITORY_ROOT / "docs" / "concepts" / "data-and-checkpoints.md").read_text()
    section = page.split("**The fast path is a decision", 1)[1].split("\n- **", 1)[0]
    section = " ".join(section.split())
    for stack in STACKS:
        lustre = parse_platform_config(stack_data(stack)).storage.lustre
        assert lustre is not None and not lustre.efa_enabled
        gigabytes = lustre.storage_capacity_gib / 1024 * lustre.throughput_per_tib / 1000
        shown = f"{gigabytes:.2f}" if gigabytes < 1 else f"{gigabytes:.1f}"
        assert f"{shown} GB/s" in section, (stack, shown)


def test_a_bucket_may_expire_its_current_objects_after_its_transitions() -> None:
    data = stack_data("prod")
    index = [b["name"] for b in data["storage"]["buckets"]].index("checkpoints")
    data["storage"]["buckets"][index]["currentVersionRetentionDays"] = 60  # before GLACIER_IR
    assert_reported(data, f"platform.storage.buckets[{index}].currentVersionRetentionDays", 60,
                    "more than 90 days, the last transition")  # fmt: skip
    data["storage"]["buckets"][index]["currentVersionRetentionDays"] = 730
    for association in data["storage"]["lustre"]["associations"]:
        if association.get("bucket") == "checkpoints":
            association.pop("releaseAfterDays", None)  # expiry and release do not mix
    bucket = parse_platform_config(data).storage.buckets[index]
    rules = {rule["id"]: rule for rule in current_version_rules(bucket)}
    assert rules["expire-current-versions"]["expiration"] == {"days": 730}
    assert "expire-current-versions" not in {
        rule["id"]
        for rule in current_version_rules(
            parse_platform_config(stack_data("prod")).storage.buckets[index]
        )
    }  # unset: kept until someone deletes it


@pytest.mark.parametrize("stack", STACKS)
def test_a_bucket_behind_a_releasing_path_keeps_its_current_objects(stack: str) -> None:
    """A released file is a stub whose data only the S3 object holds: that object never expires."""
    data = stack_data(stack)
    lustre = data["storage"]["lustre"]
    releasing = [a for a in lustre["associations"] if a.get("releaseAfterDays")]
    assert releasing, f"{stack} releases nothing?"
    key = releasing[0].get("bucket", lustre.get("bucket"))
    index = [b["name"] for b in data["storage"]["buckets"]].index(key)
    data["storage"]["buckets"][index]["currentVersionRetentionDays"] = 3650
    paths = [a["fileSystemPath"] for a in lustre["associations"]
             if a.get("releaseAfterDays") and a.get("bucket", lustre.get("bucket")) == key]  # fmt: skip
    assert_reported(
        data,
        f"platform.storage.buckets[{index}].currentVersionRetentionDays",
        3650,
        f"unset: associations release files of this bucket ({', '.join(paths)}",
    )
    for association in lustre["associations"]:
        if association.get("bucket", lustre.get("bucket")) == key:
            association.pop("releaseAfterDays", None)
    parse_platform_config(data)  # valid once nothing on that bucket releases
