"""The EFS model store: file system, mount targets, access points, CSI add-on, volumes, claims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from components import versions
from components.config import parse_platform_config
from components.storage.model_store import (
    EFS_CSI_CONTROLLER_SERVICE_ACCOUNT,
    EFS_CSI_DRIVER,
    EFS_CSI_NODE_SERVICE_ACCOUNT,
    NFS_PORT,
    READER_GID,
    READER_UID,
    SHARED_CLAIM,
    SHARED_READ_ONLY_POLICY,
    TEAM_CLAIM,
    lifecycle_policies,
)
from synth.engine import ResourceRecord
from synth.jobs.admission import admit
from synth.run import StackResult
from tests import component_runs as parts
from tests.component_runs import node_security_group_id
from tests.config_problems import assert_reported
from tests.conftest import STACKS, ProgramRun, RunComponent, stack_data
from tests.mutations import without_notebooks, without_slurm, without_teams
from tests.team_objects import team_runtimes
from tests.test_tenancy import _namespace
from tests.test_tenant_api import _binding, _policy

REPOSITORY: Final = Path(__file__).resolve().parent.parent
FILE_SYSTEM: Final = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET: Final = "aws:efs/mountTarget:MountTarget"
ACCESS_POINT: Final = "aws:efs/accessPoint:AccessPoint"
BACKUP_POLICY: Final = "aws:efs/backupPolicy:BackupPolicy"
SECURITY_GROUP: Final = "aws:ec2/securityGroup:SecurityGroup"
ADDON: Final = "aws:eks/addon:Addon"
FILE_SYSTEM_POLICY: Final = "aws:efs/fileSystemPolicy:FileSystemPolicy"
ROLE: Final = "aws:iam/role:Role"
KEY: Final = "aws:kms/key:Key"
ATTACHMENT: Final = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
VOLUME: Final = "kubernetes:core/v1:PersistentVolume"
CLAIM: Final = "kubernetes:core/v1:PersistentVolumeClaim"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"


def _store(run: ProgramRun) -> ResourceRecord:
    (file_system,) = run.of_type(FILE_SYSTEM)
    return file_system


def _volumes(run: ProgramRun) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, claim) -> the spec of its EFS PV."""
    return {
        (v.inputs["spec"]["claimRef"]["namespace"], v.inputs["spec"]["claimRef"]["name"]): v.inputs[
            "spec"
        ]
        for v in run.of_type(VOLUME)
        if v.inputs["spec"].get("csi", {}).get("driver") == EFS_CSI_DRIVER
    }


@pytest.fixture(params=STACKS)
def stack_run(
    request: pytest.FixtureRequest, run_component: RunComponent
) -> tuple[str, ProgramRun]:
    """The storage component of each stack, built alone."""
    stack = request.param
    return stack, run_component(parts.storage, stack_data(stack), stack)


def test_file_system_is_encrypted_with_the_stacks_data_key(
    stack_run: tuple[str, ProgramRun],
) -> None:
    _, run = stack_run
    file_system = _store(run)
    (key,) = [k for k in run.of_type(KEY) if k.name == "storage-data"]
    assert file_system.inputs["encrypted"] is True
    assert file_system.property_dependencies["kmsKeyId"] == [key.urn]
    statements = json.loads(key.inputs["policy"])["Statement"]
    services = [
        s["Condition"]["StringEquals"]["kms:ViaService"] for s in statements if "Condition" in s
    ]
    assert any(any(v.startswith("elasticfilesystem.") for v in found) for found in services)


def test_mount_targets_in_every_private_zone_behind_nfs_from_nodes_only(
    stack_run: tuple[str, ProgramRun],
) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    targets = run.of_type(MOUNT_TARGET)
    assert sorted(t.name.removeprefix("storage-models-") for t in targets) == sorted(
        config.network.availability_zones
    )
    (group,) = [g for g in run.of_type(SECURITY_GROUP) if g.name == "storage-models"]
    assert all(t.property_dependencies["securityGroups"] == [group.urn] for t in targets)
    assert group.inputs["egress"] == []
    (rule,) = group.inputs["ingress"]
    assert (rule["protocol"], rule["fromPort"], rule["toPort"]) == ("tcp", NFS_PORT, NFS_PORT)
    assert rule["securityGroups"] == [node_security_group_id(config)]
    assert not rule.get("cidrBlocks") and not rule.get("self")


def test_each_team_has_its_access_point_and_the_shared_area_the_writers(
    stack_run: tuple[str, ProgramRun],
) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    points = {p.name.removeprefix("storage-models-"): p.inputs for p in run.of_type(ACCESS_POINT)}
    uid, writers = config.model_store.uid, config.model_store.writers_gid
    expected = {
        team.name: (f"/{team.name}", uid, team.gid, team.gid, "2770") for team in config.teams
    }
    expected["shared"] = ("/shared", uid, writers, writers, "2775")
    # The readers' user neither owns /shared nor is in its group: EFS refuses its writes. It
    # would create /shared as the writers' access point does, whichever mounts first.
    expected["shared-readers"] = ("/shared", READER_UID, READER_GID, writers, "2775")
    assert set(points) == set(expected)
    for area, (path, user, gid, owner, mode) in expected.items():
        point = points[area]
        assert point["posixUser"] == {"uid": user, "gid": gid}
        creation = point["rootDirectory"]["creationInfo"]
        assert point["rootDirectory"]["path"] == path
        assert (creation["ownerUid"], creation["ownerGid"], creation["permissions"]) == (
            uid, owner, mode,
        )  # fmt: skip


def test_the_file_system_is_protected_where_stateful_resources_are(
    stack_run: tuple[str, ProgramRun],
) -> None:
    stack, run = stack_run
    protect = parse_platform_config(stack_data(stack)).protect_stateful_resources
    store = _store(run)
    assert (store.protect, store.retain_on_delete) == (protect, protect)
    # An access point holds no data (its files are the file system's): removing a team or
    # replacing its access point is a plain up, also in prod.
    for record in run.of_type(ACCESS_POINT):
        assert (record.protect, record.retain_on_delete) == (False, False), record.name
    (backup,) = run.of_type(BACKUP_POLICY)
    assert backup.inputs["backupPolicy"]["status"] == ("ENABLED" if protect else "DISABLED")


def test_backups_follow_config_over_protection(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["modelStore"]["backups"] = True
    run = run_component(parts.storage, data, "dev")
    (backup,) = run.of_type(BACKUP_POLICY)
    assert backup.inputs["backupPolicy"]["status"] == "ENABLED"


def test_csi_add_on_at_the_bill_of_materials_version_through_pod_identity(
    stack_run: tuple[str, ProgramRun],
) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    (addon,) = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "aws-efs-csi-driver"]
    pinned = versions.EKS_ADDONS[config.cluster.kubernetes_version].aws_efs_csi_driver
    assert addon.inputs["addonVersion"] == pinned
    accounts = [a["serviceAccount"] for a in addon.inputs["podIdentityAssociations"]]
    assert accounts == [EFS_CSI_CONTROLLER_SERVICE_ACCOUNT, EFS_CSI_NODE_SERVICE_ACCOUNT]
    policies = [a.inputs["policyArn"] for a in run.of_type(ATTACHMENT) if "efs-csi" in a.name]
    assert policies == ["arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"]


def test_team_namespaces_get_their_area_and_the_shared_one_read_only(
    stack_run: tuple[str, ProgramRun],
) -> None:
    stack, run = stack_run
    config = parse_platform_config(stack_data(stack))
    volumes = _volumes(run)
    points = {p.urn: p.inputs["rootDirectory"]["path"] for p in run.of_type(ACCESS_POINT)}
    by_volume = {v.inputs["metadata"]["name"]: v for v in run.of_type(VOLUME)}
    for team in config.teams:
        own, shared = volumes[(team.name, TEAM_CLAIM)], volumes[(team.name, SHARED_CLAIM)]
        for spec in (own, shared):
            assert spec["persistentVolumeReclaimPolicy"] == "Retain"
            assert spec["accessModes"] == ["ReadWriteMany"]
            assert spec["csi"]["volumeAttributes"] == {"encryptInTransit": "true"}
            assert "::" in spec["csi"]["volumeHandle"]
        assert own["csi"]["readOnly"] is False
        assert shared["csi"]["readOnly"] is (team.name not in config.model_store.publishers)
        # Each handle names its own access point: the team's, and the shared area's.
        for claim_name, path in ((TEAM_CLAIM, f"/{team.name}"), (SHARED_CLAIM, "/shared")):
            (volume,) = [
                v
                for v in by_volume.values()
                if v.inputs["spec"]["claimRef"] == {"namespace": team.name, "name": claim_name}
            ]
            sources = volume.property_dependencies["spec"]
            assert [points[u] for u in sources if u in points] == [path]
    claims = {
        (c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"])
        for c in run.of_type(CLAIM)
    }
    assert {
        (team.name, name) for team in config.teams for name in (TEAM_CLAIM, SHARED_CLAIM)
    } <= claims


def test_readers_and_publishers_differ_in_staging(run_component: RunComponent) -> None:
    """A reader's shared volume goes through the readers' access point, a publisher's
    through the writers'; the PV's readOnly is recorded too (it enforces nothing on EFS)."""
    run = run_component(parts.storage, stack_data("staging"), "staging")
    volumes = _volumes(run)
    assert volumes[("ml-research", SHARED_CLAIM)]["csi"]["readOnly"] is True
    assert volumes[("ml-platform-ci", SHARED_CLAIM)]["csi"]["readOnly"] is False
    users = {p.urn: p.inputs["posixUser"]["uid"] for p in run.of_type(ACCESS_POINT)}
    through = {
        v.inputs["spec"]["claimRef"]["namespace"]: [
            users[u] for u in v.property_dependencies["spec"] if u in users
        ]
        for v in run.of_type(VOLUME)
        if v.inputs["spec"]["claimRef"]["name"] == SHARED_CLAIM
    }
    store_uid = parse_platform_config(stack_data("staging")).model_store.uid
    assert through == {"ml-research": [READER_UID], "ml-platform-ci": [store_uid]}


def test_slurm_mounts_the_whole_file_system(run_component: RunComponent) -> None:
    run = run_component(parts.storage, stack_data("dev"), "dev")
    spec = _volumes(run)[("slurm", TEAM_CLAIM)]
    assert "::" not in spec["csi"]["volumeHandle"] and spec["csi"]["readOnly"] is False


def test_no_model_store_when_off(run_component: RunComponent) -> None:
    data = stack_data("dev")
    data["modelStore"]["enabled"] = False
    without_notebooks(data)  # their homes live on the model store
    run = run_component(parts.storage, data, "dev")
    assert not run.of_type(FILE_SYSTEM) and not run.of_type(ACCESS_POINT)
    assert not _volumes(run)
    key = next(k for k in run.of_type(KEY) if k.name == "storage-data")
    assert "elasticfilesystem" not in key.inputs["policy"]


def test_lifecycle_policies_one_transition_each() -> None:
    config = parse_platform_config(stack_data("dev")).model_store
    assert lifecycle_policies(config) == [
        {"transition_to_ia": "AFTER_30_DAYS"},
        {"transition_to_primary_storage_class": "AFTER_1_ACCESS"},
    ]
    later = config.model_copy(update={"archive_after_days": 90, "infrequent_access_after_days": 1})
    assert lifecycle_policies(later) == [
        {"transition_to_ia": "AFTER_1_DAY"},
        {"transition_to_archive": "AFTER_90_DAYS"},
        {"transition_to_primary_storage_class": "AFTER_1_ACCESS"},
    ]
    never = config.model_copy(update={"infrequent_access_after_days": None})
    assert lifecycle_policies(never) == []


def test_every_team_runtime_mounts_its_area_and_the_shared_one(stack_result: StackResult) -> None:
    """Each TrainingRuntime's pods mount the team's claims at /models and /models/shared, say
    where (MODELS_DIR, SHARED_MODELS_DIR) and carry the gid its access point writes as."""
    config = stack_result.config
    gids = {team.name: team.gid for team in config.teams}
    runtimes = team_runtimes(stack_result.records)
    assert runtimes
    for runtime in runtimes:
        namespace = runtime.inputs["metadata"]["namespace"]
        assert namespace in gids, runtime.name
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            claims = {
                v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in pod.get("volumes", [])
                if "persistentVolumeClaim" in v
            }
            assert pod["securityContext"]["supplementalGroups"] == [gids[namespace]]
            for container in pod["containers"]:
                mounted = {
                    m["mountPath"]: claims[m["name"]]
                    for m in container.get("volumeMounts", [])
                    if m["name"] in claims
                }
                where = runtime.inputs["metadata"]["name"], container["name"]
                assert mounted.get("/models") == TEAM_CLAIM, where
                assert mounted.get("/models/shared") == SHARED_CLAIM, where
                # Read-only for a team that does not publish, in the volume (the driver's
                # NodePublishVolume gets it) and the container's mount alike.
                reader = namespace not in config.model_store.publishers
                (shared,) = [v for v in pod["volumes"] if v["name"] == "models-shared"]
                assert shared["persistentVolumeClaim"].get("readOnly", False) is reader, where
                (mount,) = [
                    m for m in container["volumeMounts"] if m["mountPath"] == "/models/shared"
                ]
                assert mount.get("readOnly", False) is reader, where
                env = {e["name"]: e.get("value") for e in container.get("env", [])}
                assert env.get("MODELS_DIR") == "/models", where
                assert env.get("SHARED_MODELS_DIR") == "/models/shared", where


def test_a_publisher_must_be_a_team_even_where_no_team_is_defined() -> None:
    """A stale publisher is refused, not ignored: a team added later under that name would
    write the shared area unasked. A stack without teams states no publishers."""
    data = stack_data("dev")
    publisher = data["modelStore"]["publishers"][0]
    data["teams"] = []
    assert_reported(
        data, "platform.modelStore.publishers[0]", publisher, "a team of platform.teams (none"
    )
    without_teams(data)
    assert parse_platform_config(data).model_store.publishers == []


def test_a_reader_pod_must_mount_the_shared_claim_read_only(
    synthesized: dict[str, StackResult],
) -> None:
    """The admission rule, through its own CEL: in staging, ml-research (a reader) may not
    mount model-store-shared without persistentVolumeClaim.readOnly; ml-platform-ci (a
    publisher) may; a pod of neither claim is not judged."""
    result = synthesized["staging"]
    policy = _policy(result, SHARED_READ_ONLY_POLICY)
    assert _binding(result, SHARED_READ_ONLY_POLICY)["validationActions"] == ["Deny"]
    assert policy["failurePolicy"] == "Fail"

    def pod(namespace: str, **claim: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": namespace},
            "spec": {
                "containers": [{"name": "main", "image": "x"}],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "s", "persistentVolumeClaim": {"claimName": SHARED_CLAIM, **claim}},
                ],
            },
        }  # fmt: skip

    reader, publisher = _namespace(result, "ml-research"), _namespace(result, "ml-platform-ci")
    for claim in ({}, {"readOnly": False}):
        admitted, message = admit(policy, pod("ml-research", **claim), reader)
        assert not admitted and "persistentVolumeClaim.readOnly: true" in str(message), claim
    assert admit(policy, pod("ml-research", readOnly=True), reader) == (True, None)
    assert admit(policy, pod("ml-platform-ci"), publisher) == (True, None)
    bare = pod("ml-research")
    del bare["spec"]["volumes"]
    assert admit(policy, bare, reader) == (True, None)


def _mounting(run: ProgramRun) -> tuple[dict[str, Any], str]:
    """(the file system policy's document, the ARN of the node plugin's role)."""
    (policy,) = run.of_type(FILE_SYSTEM_POLICY)
    (addon,) = [a for a in run.of_type(ADDON) if a.inputs["addonName"] == "aws-efs-csi-driver"]
    (node,) = [
        a["roleArn"]
        for a in addon.inputs["podIdentityAssociations"]
        if a["serviceAccount"] == EFS_CSI_NODE_SERVICE_ACCOUNT
    ]
    return json.loads(policy.inputs["policy"]), node


def test_only_the_node_plugins_signed_tls_mounts_get_in(stack_run: tuple[str, ProgramRun]) -> None:
    """The file system policy denies plain NFS to everyone and allows mount and write only to
    the node plugin's Pod Identity role (no ClientRootAccess); every PV asks for iam, so
    efs-utils signs the mount with that role. Slurm mounts the root: no access point required."""
    _, run = stack_run
    document, node_role = _mounting(run)
    deny, allow = document["Statement"]
    assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", {"AWS": "*"}, "*")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert allow["Principal"] == {"AWS": node_role}
    assert allow["Action"] == ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    assert allow["Condition"] == {"Bool": {"aws:SecureTransport": "true"}}
    assert deny["Resource"] == allow["Resource"]
    roles = [r for r in run.of_type(ROLE) if "efs-csi-node" in r.name]
    (trust,) = [json.loads(r.inputs["assumeRolePolicy"]) for r in roles]
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    volumes = _volumes(run)
    assert volumes and all(v["mountOptions"] == ["iam"] for v in volumes.values())


def test_without_a_root_mount_every_mount_goes_through_an_access_point(
    run_component: RunComponent,
) -> None:
    data = stack_data("staging")
    without_slurm(data)
    run = run_component(parts.storage, data, "staging")
    document, _ = _mounting(run)
    (key, arns), *others = document["Statement"][1]["Condition"]["StringEquals"].items()
    assert key == "elasticfilesystem:AccessPointArn" and not others
    # every access point of the store, the team's and both of /shared, and nothing else
    assert (
        len(set(arns))
        == len(run.of_type(ACCESS_POINT))
        == len(parse_platform_config(data).teams) + 2
    )


def test_the_store_writes_as_no_persons_uid_and_slurm_shells_share_by_group() -> None:
    """The access points' default uid is neither the runtimes' 1000 nor in the ranges useradd
    gives people or services; Slurm's login and node image gives login shells, and through
    SLURM_UMASK their jobs, umask 002."""
    store = parse_platform_config(stack_data("prod")).model_store
    assert store.uid == 65533 and not 100 <= store.uid <= 60000
    dockerfile = (REPOSITORY / "images" / "slurmd" / "Dockerfile").read_text()
    assert "RUN printf 'umask 002\\n' > /etc/profile.d/platform-umask.sh" in dockerfile
