"""Teams are isolated on the shared file system (issue 22, point 2) and the model store.

One layout (a directory per team under every team root, owned by the team's gid, setgid, 2770,
or 2750 where the team only reads, in the team's Lustre project), claims that mount only the team's own directories, root squash
for every client but the admin client that creates the layout, and runtime pods that carry
the team's gid as a supplemental group. The EFS model store (issue 43, item 4) keeps the same
promises with access points: a team's claims reach its own area and the shared one, never
another team's, and wait for what makes their directories.
"""

from __future__ import annotations

import copy
import email
import ipaddress
import json
import os
import posixpath
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest

from components.config import PlatformConfig, parse_platform_config
from components.config.storage import TEAM_HOME_PATH, admin_client_address, admin_client_block
from components.storage import admin_launch_template
from components.storage.layout import (
    ADMIN_MOUNT,
    LAYOUT_DONE,
    LAYOUT_LOG,
    admin_user_data,
    layout_script,
    team_directories,
)
from components.storage.model_store import (
    EFS_CSI_DRIVER,
    MODELS_MOUNT,
    SHARED_CLAIM,
    SHARED_MODELS_MOUNT,
    SHARED_VOLUME,
    TEAM_CLAIM,
    TEAM_VOLUME,
)
from components.storage.volumes import CSI_DRIVER as LUSTRE_CSI_DRIVER
from components.user_data import USER_DATA_LIMIT_BYTES
from synth.run import StackResult
from synth.yamlio import load_yaml
from tests import component_runs as parts
from tests.config_problems import assert_reported
from tests.conftest import STACKS, RunComponent, stack_data
from tests.team_objects import team_runtimes

FILE_SYSTEM: Final = "aws:fsx/lustreFileSystem:LustreFileSystem"
INSTANCE: Final = "aws:ec2/instance:Instance"
RESERVATION: Final = "aws:ec2/subnetCidrReservation:SubnetCidrReservation"
SUBNET: Final = "aws:ec2/subnet:Subnet"
ACCESS_POINT: Final = "aws:efs/accessPoint:AccessPoint"
MOUNT_TARGET: Final = "aws:efs/mountTarget:MountTarget"
VOLUME: Final = "kubernetes:core/v1:PersistentVolume"
CLAIM: Final = "kubernetes:core/v1:PersistentVolumeClaim"
RUNTIME: Final = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
TEAMS: Final = "platform.teams"
LUSTRE: Final = "platform.storage.lustre"


def _config(stack: str) -> PlatformConfig:
    return parse_platform_config(stack_data(stack))


def _records(result: StackResult, resource_type: str) -> list[Any]:
    return [r for r in result.records if r.type == resource_type]


def _one(result: StackResult, resource_type: str, name_contains: str = "") -> Any:
    (record,) = [r for r in _records(result, resource_type) if name_contains in r.name]
    return record


def _lustre_and_volumes(result: StackResult) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    """The stack's file system config (every shipped stack has one) and its team volumes."""
    lustre = result.config.storage.lustre
    assert lustre is not None
    return lustre, _team_volumes(result)


def _team_volumes(result: StackResult) -> dict[str, list[dict[str, Any]]]:
    """Team namespace -> the specs of the Lustre PVs bound to a claim there."""
    return {
        namespace: [record.inputs["spec"] for record in records]
        for namespace, records in _team_volume_records(result, LUSTRE_CSI_DRIVER).items()
    }


def _team_volume_records(result: StackResult, driver: str) -> dict[str, list[Any]]:
    """Team namespace -> the PVs of one CSI driver bound to a claim there."""
    teams = {team.name for team in result.config.teams}
    volumes: dict[str, list[Any]] = {}
    for record in _records(result, VOLUME):
        spec = record.inputs["spec"]
        if spec.get("csi", {}).get("driver") == driver and spec["claimRef"]["namespace"] in teams:
            volumes.setdefault(spec["claimRef"]["namespace"], []).append(record)
    return volumes


def _model_store_roots(result: StackResult) -> dict[str, dict[str, str]]:
    """Team namespace -> claim -> the root directory of the access point its PV mounts.

    The handle (``<fs>::<access point>``) carries the access point's id, so the PV's spec
    depends on exactly one access point; its root is the most the claim can reach.
    """
    roots = {r.urn: r.inputs["rootDirectory"]["path"] for r in _records(result, ACCESS_POINT)}
    found: dict[str, dict[str, str]] = {}
    for namespace, records in _team_volume_records(result, EFS_CSI_DRIVER).items():
        for record in records:
            spec = record.inputs["spec"]
            assert "::" in spec["csi"]["volumeHandle"], f"{namespace} mounts the whole store"
            (root,) = [roots[u] for u in record.property_dependencies["spec"] if u in roots]
            found.setdefault(namespace, {})[spec["claimRef"]["name"]] = root
    return found


# --------------------------------------------------------------------------- config


def test_a_team_on_the_shared_file_system_needs_a_gid() -> None:
    data = stack_data("prod")
    del data["teams"][1]["gid"]
    assert_reported(data, f"{TEAMS}[1].gid", None, "POSIX group id")


@pytest.mark.parametrize("gid", [0, 1000, 999])
def test_a_team_gid_is_not_a_system_group_nor_the_workloads_own(gid: int) -> None:
    data = stack_data("prod")
    data["teams"][0]["gid"] = gid
    assert_reported(data, f"{TEAMS}[0].gid", gid, "a number from 1001")


def test_two_teams_cannot_share_a_gid() -> None:
    data = stack_data("prod")
    data["teams"][1]["gid"] = data["teams"][0]["gid"]
    assert_reported(data, f"{TEAMS}[1].gid", data["teams"][0]["gid"], "no other team has")


def test_a_team_gid_is_not_the_squashed_roots() -> None:
    data = stack_data("prod")
    data["teams"][0]["gid"] = 65534
    assert_reported(data, f"{TEAMS}[0].gid", 65534, "a squashed root would own")


@pytest.mark.parametrize("squash", ["0:0", "65534:0", "0:65534", "nobody"])
def test_root_squash_cannot_be_turned_off(squash: str) -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["rootSquash"] = squash
    assert_reported(data, f"{LUSTRE}.rootSquash", squash, "both non-zero")


def test_an_association_cannot_take_the_teams_working_directories() -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["associations"][0]["fileSystemPath"] = f"{TEAM_HOME_PATH}/x"
    assert_reported(
        data, f"{LUSTRE}.associations[0].fileSystemPath", f"{TEAM_HOME_PATH}/x", "apart from"
    )


def test_the_admin_client_sits_in_a_reserved_block_of_the_training_subnet() -> None:
    for stack in STACKS:
        config = _config(stack)
        subnet = config.network.planned_private_cidr(config.network.training_zone)
        assert subnet is not None
        block = admin_client_block(config)
        assert block is not None and block.prefixlen == 28
        assert block.subnet_of(ipaddress.IPv4Network(subnet))
        # the last /28 holds the subnet's broadcast address, which AWS reserves
        assert ipaddress.IPv4Network(subnet).broadcast_address not in block
        assert admin_client_address(config) == str(block.network_address)


def test_an_existing_vpc_names_the_admin_clients_block() -> None:
    data = stack_data("dev")
    zones = data["network"]["availabilityZones"]
    data["network"] = {
        "availabilityZones": zones,
        "trainingZone": data["network"]["trainingZone"],
        "existingVpc": {
            "vpcId": "vpc-0123456789abcdef0",
            "privateSubnetIds": {
                zone: f"subnet-0123456789abcde{index}" for index, zone in enumerate(zones)
            },
        },
    }
    assert_reported(data, f"{LUSTRE}.adminClient.reservedCidr", None, "a free /28")
    data["storage"]["lustre"]["adminClient"] = {"reservedCidr": "10.10.47.224/28"}
    config = parse_platform_config(data)
    assert admin_client_address(config) == "10.10.47.224"


@pytest.mark.parametrize(
    ("cidr", "words"), [("10.40.0.0/27", "a /28 to /32"), ("10.40.0.0/28", "inside the training")]
)
def test_a_reserved_block_outside_the_training_subnet_or_too_big_is_refused(
    cidr: str, words: str
) -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["adminClient"] = {"reservedCidr": cidr}
    assert_reported(data, f"{LUSTRE}.adminClient.reservedCidr", cidr, words)


def test_the_admin_clients_instance_type_is_one_ec2_knows() -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["adminClient"] = {"instanceType": "m7i.huge"}
    assert_reported(data, f"{LUSTRE}.adminClient.instanceType", "m7i.huge", "EC2 instance type")


@pytest.mark.parametrize(
    ("instance_type", "architecture"),
    [("m7i.large", "x86_64"), ("t3.medium", "x86_64"), ("g4dn.xlarge", "x86_64"),
     ("m7g.large", "arm64"), ("c7gn.large", "arm64"), ("t4g.small", "arm64")],
)  # fmt: skip
def test_the_admin_client_boots_the_ami_of_its_architecture(
    instance_type: str, architecture: str
) -> None:
    data = stack_data("prod")
    data["storage"]["lustre"]["adminClient"] = {"instanceType": instance_type}
    lustre = parse_platform_config(data).storage.lustre
    assert lustre is not None
    template = admin_launch_template(lustre, {})
    assert template["image_id"].startswith("resolve:ssm:/aws/service/ami-amazon-linux-latest/")
    assert template["image_id"].endswith(f"-{architecture}")


# --------------------------------------------------------------------------- the layout


def _run_layout(script: str, root: Path) -> subprocess.CompletedProcess[str]:
    """Run the admin client's script with the file system at ``root`` and stub commands.

    ``dnf``, ``mount``, ``umount``, ``lfs`` and ``shutdown`` are recorded, not run; ``chown``
    and ``chmod`` are the real ones on the real directories.
    """
    bin_dir = root / "bin"
    bin_dir.mkdir()
    calls = root / "calls"
    for command in ("dnf", "mount", "umount", "lfs", "shutdown"):
        shim = bin_dir / command
        shim.write_text(f'#!/bin/sh\necho "{command} $*" >> {calls}\n')
        shim.chmod(0o755)
    mount = root / "fsx"
    mount.mkdir()
    console = root / "console"
    script = (
        script.replace(ADMIN_MOUNT, str(mount))
        .replace(LAYOUT_LOG, str(root / "layout.log"))
        .replace("/dev/console", str(console))
    )
    return subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to a team's gid needs root")
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_layout_gives_each_team_a_setgid_directory_under_every_root(
    tmp_path: Path,
) -> None:
    config = _config("prod")
    lustre = config.storage.lustre
    assert lustre is not None
    script = layout_script(lustre, config.teams, dns_name="fs-1.fsx", mount_name="abcd")
    result = _run_layout(script, tmp_path)
    assert result.returncode == 0, result.stderr
    mount = tmp_path / "fsx"
    for root in lustre.team_roots:
        root_mode = (mount / root.path.lstrip("/")).stat().st_mode
        assert stat.S_IMODE(root_mode) == 0o755, root.path
    import_only = [root for root in lustre.team_roots if not root.writable]
    assert import_only, "prod imports datasets: the 2750 case must be exercised"
    for team in config.teams:
        for directory in team_directories(lustre, team):
            status = (mount / directory.path.lstrip("/")).stat()
            # the team writes where it may; where the path only imports it reads and walks,
            # and the permission, not a read-only mount (which records no access times), says so
            expected = 0o2770 if directory.root.writable else 0o2750
            assert stat.S_IMODE(status.st_mode) == expected, directory.path
            assert (status.st_uid, status.st_gid) == (0, team.gid)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "dnf install -y lustre-client"
    assert calls[1] == f"mount -t lustre -o relatime,flock fs-1.fsx@tcp:/abcd {mount}"
    for team in config.teams:
        for directory in team_directories(lustre, team):
            assert f"lfs project -p {team.gid} -s {mount}{directory.path}" in calls
        assert f"lfs setquota -p {team.gid} -B {team.lustre_quota_gib}G {mount}" in calls
    # the project goes on each directory (what is made inside inherits it), never a walk of
    # every file: a rerun after each change must not touch the whole file system
    assert not [call for call in calls if call.startswith("lfs project") and " -r" in call]
    assert calls[-2:] == [f"umount {mount}", "shutdown -h now"]
    assert LAYOUT_DONE in (tmp_path / "console").read_text()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_failed_step_stops_the_layout_and_says_where(tmp_path: Path) -> None:
    config = _config("dev")
    lustre = config.storage.lustre
    assert lustre is not None
    script = layout_script(lustre, config.teams, dns_name="fs-1.fsx", mount_name="abcd")
    # the step every run takes (the walk of a changed gid runs only then)
    step = 'lfs project -p "$gid" -s'
    assert step in script
    failing = script.replace(step, f"false; {step}", 1)
    result = _run_layout(failing, tmp_path)
    console = (tmp_path / "console").read_text()
    assert "fsx-layout: failed at line" in console
    assert LAYOUT_DONE not in console
    assert (tmp_path / "calls").read_text().splitlines()[-1] == "shutdown -h now"
    assert result.returncode != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to a team's gid needs root")
def test_a_removed_quota_is_lifted_and_a_team_without_one_has_none(tmp_path: Path) -> None:
    config = _config("dev")
    lustre = config.storage.lustre
    assert lustre is not None
    (team,) = config.teams
    assert team.lustre_quota_gib is None
    script = layout_script(lustre, config.teams, dns_name="d", mount_name="m")
    assert _run_layout(script, tmp_path).returncode == 0
    calls = (tmp_path / "calls").read_text().splitlines()
    assert f"lfs setquota -p {team.gid} -B 0 {tmp_path / 'fsx'}" in calls


def test_the_layout_script_fits_in_ec2_user_data_and_config_says_when_not() -> None:
    data = stack_data("prod")
    config = parse_platform_config(data)
    lustre = config.storage.lustre
    assert lustre is not None
    script = layout_script(lustre, config.teams, dns_name="fs-1", mount_name="m")
    assert len(admin_user_data(script).encode()) < USER_DATA_LIMIT_BYTES
    template = copy.deepcopy(data["teams"][1])
    many = []
    for index in range(600):
        team = copy.deepcopy(template)
        team.update(name=f"team-with-a-long-name-{index:04d}", gid=6000 + index)
        team.pop("memberPrincipalArns", None)
        many.append(team)
    data["teams"] = many
    assert_reported(data, TEAMS, "600 teams", "at most 16384 bytes of user data")


# --------------------------------------------------------------------------- AWS side


@pytest.mark.parametrize("stack", STACKS)
def test_root_is_squashed_everywhere_but_on_the_admin_client(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    lustre = result.config.storage.lustre
    assert lustre is not None
    file_system = _one(result, FILE_SYSTEM)
    squash = file_system.inputs["rootSquashConfiguration"]
    assert squash["rootSquash"] == lustre.root_squash
    admin = _one(result, INSTANCE)
    assert squash["noSquashNids"] == [f"{admin.inputs['privateIp']}@tcp"]
    reservation = _one(result, RESERVATION)
    assert reservation.inputs["reservationType"] == "explicit"
    assert ipaddress.IPv4Address(admin.inputs["privateIp"]) in ipaddress.IPv4Network(
        reservation.inputs["cidrBlock"]
    )
    # the admin client, its reservation and the file system share the training subnet
    assert admin.inputs["subnetId"] == reservation.inputs["subnetId"]
    subnets = file_system.inputs["subnetIds"]
    assert (subnets if isinstance(subnets, list) else [subnets]) == [admin.inputs["subnetId"]]


@pytest.mark.parametrize("stack", STACKS)
def test_a_layout_change_replaces_the_admin_client_old_one_first(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    admin = _one(synthesized[stack], INSTANCE)
    assert admin.inputs["userDataReplaceOnChange"] is True
    assert admin.delete_before_replace is True
    assert admin.inputs["instanceInitiatedShutdownBehavior"] == "stop"
    assert admin.inputs["metadataOptions"]["httpTokens"] == "required"
    assert "iamInstanceProfile" not in admin.inputs and "keyName" not in admin.inputs
    # its root volume is its template's, encrypted
    template = _one(synthesized[stack], "aws:ec2/launchTemplate:LaunchTemplate", "lustre-admin")
    (root,) = template.inputs["blockDeviceMappings"]
    assert root["ebs"]["encrypted"] == "true"
    assert admin.property_dependencies["launchTemplate"] == [template.urn]
    # its script lays out the stack's teams, at every boot: starting it again lays out again
    message = email.message_from_string(admin.inputs["userData"])
    assert message.is_multipart()
    parts = {
        part.get_content_type(): str(part.get_payload())
        for part in message.walk()
        if not part.is_multipart()
    }
    assert load_yaml(parts["text/cloud-config"]) == {
        "cloud_final_modules": [["scripts-user", "always"]]
    }
    assert parts["text/x-shellscript"].startswith("#!/bin/bash")
    for team in synthesized[stack].config.teams:
        assert f"'{team.name} {team.gid} " in parts["text/x-shellscript"]


def test_the_admin_client_reaches_only_lustre_and_package_downloads(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["prod"]
    groups = {r.name: r for r in _records(result, "aws:ec2/securityGroup:SecurityGroup")}
    admin = groups["storage-lustre-admin"]
    assert "ingress" not in admin.inputs or not admin.inputs["ingress"]
    ports = sorted((rule["fromPort"], rule["toPort"]) for rule in admin.inputs["egress"])
    assert ports == [(443, 443), (988, 988), (1018, 1023)]
    (anywhere,) = [rule for rule in admin.inputs["egress"] if rule.get("cidrBlocks")]
    assert anywhere["fromPort"] == 443


# --------------------------------------------------------------------------- claims


@pytest.mark.parametrize("stack", STACKS)
def test_each_team_claims_only_its_own_directory_under_every_root(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    lustre, volumes = _lustre_and_volumes(result)
    for team in result.config.teams:
        if not team.shared_file_system:
            continue
        specs = volumes[team.name]
        mounted = sorted(
            spec["csi"]["volumeAttributes"]["mountname"].split("/", 1)[1] for spec in specs
        )
        assert mounted == sorted(
            f"{root.path.lstrip('/')}/{team.name}" for root in lustre.team_roots
        )
        for spec in specs:
            # read-write even where the team only reads: a read-only mount records no access
            # times, and release would free a dataset read every day (file_system_layout,
            # IMPORT_ONLY_DIRECTORY_MODE)
            assert "readOnly" not in spec["csi"], spec["csi"]["volumeAttributes"]["mountname"]
            assert not {"ro", "noatime"} & set(spec["mountOptions"])


def _reachable(mount_names: list[str], path: str) -> bool:
    """Whether a path of the file system lies under one of these mounts (a Lustre client
    mounted at a subdirectory sees nothing above it)."""
    return any(path == m or path.startswith(m + "/") for m in mount_names)


@pytest.mark.parametrize("stack", STACKS)
def test_no_pod_can_mount_two_volumes_of_one_handle(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """Kubelet mounts one volume per handle in a pod, and a pod mounts claims of its own
    namespace only: no namespace has two PVs of one handle, and every Lustre PV has a handle
    of its own. The model store's shared area is one handle in every team namespace on
    purpose: PVs of one handle in several namespaces are how Kubernetes shares a volume
    (kubernetes test/e2e/storage/framework/testdriver.go, CapMultiplePVsSameID, vendored in
    kubernetes-sigs/aws-efs-csi-driver v3.4.1), and the EFS driver stages nothing
    (pkg/driver/driver.go: no STAGE_UNSTAGE_VOLUME), so each pod's mount is its own
    NodePublishVolume with its own read-only flag."""
    result = synthesized[stack]
    by_namespace: dict[str, list[str]] = {}
    for record in _records(result, VOLUME):
        spec = record.inputs["spec"]
        by_namespace.setdefault(spec["claimRef"]["namespace"], []).append(
            spec["csi"]["volumeHandle"]
        )
    for namespace, handles in by_namespace.items():
        assert len(handles) == len(set(handles)), (namespace, handles)
    # Each team directory is a handle of its own. The platform's namespaces (Slurm, the
    # acceptance gate) share the whole file system's handle, as the teams share the model
    # store's: the FSx driver stages nothing either (kubernetes-sigs/aws-fsx-csi-driver
    # v1.7.0 pkg/driver/node.go: empty nodeCaps), so each pod's mount is its own.
    lustre_handles = [
        record.inputs["spec"]["csi"]["volumeHandle"]
        for records in _team_volume_records(result, LUSTRE_CSI_DRIVER).values()
        for record in records
    ]
    assert lustre_handles and len(lustre_handles) == len(set(lustre_handles))
    whole = {
        spec["claimRef"]["namespace"]
        for spec in (r.inputs["spec"] for r in _records(result, VOLUME))
        if spec["csi"]["driver"] == LUSTRE_CSI_DRIVER and "::" not in spec["csi"]["volumeHandle"]
    }
    assert whole and not whole & {team.name for team in result.config.teams}, whole
    shared = {
        namespace: spec["csi"]["volumeHandle"]
        for namespace, records in _team_volume_records(result, EFS_CSI_DRIVER).items()
        for spec in (r.inputs["spec"] for r in records)
        if spec["claimRef"]["name"] == SHARED_CLAIM
    }
    assert set(shared) == {team.name for team in result.config.teams}
    # One shared area, through two access points: the writers' for the teams that publish, the
    # readers' (EFS refuses its writes) for every other team.
    publishers = set(result.config.model_store.publishers)
    for group in (publishers, set(shared) - publishers):
        assert len({shared[team] for team in group}) <= 1, group
    assert len({handle.split("::")[0] for handle in shared.values()}) == 1


@pytest.mark.parametrize("stack", STACKS)
def test_one_teams_claims_cannot_reach_another_teams_paths(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    lustre, volumes = _lustre_and_volumes(result)
    for team, specs in volumes.items():
        mounts = [spec["csi"]["volumeAttributes"]["mountname"] for spec in specs]
        prefix = mounts[0].split("/", 1)[0]
        assert prefix not in mounts, f"{team} mounts the whole file system"
        for other in result.config.teams:
            if other.name == team:
                continue
            for directory in team_directories(lustre, other):
                assert not _reachable(mounts, f"{prefix}/{directory.subdirectory}"), (
                    team, directory.path
                )  # fmt: skip
                # nor the checkpoint or compile cache paths inside it
                assert not _reachable(
                    mounts, posixpath.join(prefix, directory.subdirectory, "job-1", "step-10")
                )


@pytest.mark.parametrize("stack", STACKS)
def test_one_teams_model_store_claims_cannot_reach_another_teams_area(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """An access point's root is all its clients see, as whoever it says (EFS API model,
    CreateAccessPoint): a team's claims reach its own area and the shared one, nothing else."""
    result = synthesized[stack]
    roots = _model_store_roots(result)
    teams = [team.name for team in result.config.teams]
    assert set(roots) == set(teams)
    for team in teams:
        assert roots[team] == {TEAM_CLAIM: f"/{team}", SHARED_CLAIM: "/shared"}
        mounts = list(roots[team].values())
        for other in teams:
            if other != team:
                assert not _reachable(mounts, f"/{other}"), (team, other)
                assert not _reachable(mounts, f"/{other}/llama/weights.safetensors")


@pytest.mark.parametrize("stack", STACKS)
def test_team_claims_wait_for_the_layout(synthesized: dict[str, StackResult], stack: str) -> None:
    """Lustre's team directories are the admin client's layout; a model store area is made
    by EFS, from its access point's creation info, when a client first mounts through it
    (EFS API model, RootDirectory), which needs the access point and a mount target."""
    result = synthesized[stack]
    admin = _one(result, INSTANCE)
    team_volumes = [
        record
        for records in _team_volume_records(result, LUSTRE_CSI_DRIVER).values()
        for record in records
    ]
    assert team_volumes
    assert all(admin.urn in volume.dependencies for volume in team_volumes)
    targets = {r.urn for r in _records(result, MOUNT_TARGET)}
    points = {r.urn for r in _records(result, ACCESS_POINT)}
    store_volumes = [
        record
        for records in _team_volume_records(result, EFS_CSI_DRIVER).values()
        for record in records
    ]
    assert store_volumes and targets
    for volume in store_volumes:
        assert targets <= set(volume.dependencies), volume.name
        assert len(points & set(volume.property_dependencies["spec"])) == 1, volume.name


# --------------------------------------------------------------------------- pods


def _runtime_pods(result: StackResult) -> list[tuple[str, dict[str, Any]]]:
    pods = []
    for runtime in team_runtimes(result.records):
        namespace = runtime.inputs["metadata"]["namespace"]
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            pods.append((namespace, job["template"]["spec"]["template"]["spec"]))
    return pods


@pytest.mark.parametrize("stack", STACKS)
def test_every_runtime_pod_runs_as_the_workload_user_with_its_teams_group(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    gids = {team.name: team.gid for team in result.config.teams}
    pods = _runtime_pods(result)
    assert pods
    for namespace, pod in pods:
        context = pod["securityContext"]
        assert context["runAsUser"] == 1000 and context["runAsNonRoot"] is True
        assert context["supplementalGroups"] == [gids[namespace]]


@pytest.mark.parametrize("stack", STACKS)
def test_runtime_pods_mount_their_teams_directories_where_the_file_system_has_them(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    result = synthesized[stack]
    lustre = result.config.storage.lustre
    assert lustre is not None
    teams = {team.name: team for team in result.config.teams}
    # every runtime pod mounts the model store, on any pool; Lustre only where the pool has it
    store = {TEAM_VOLUME: TEAM_CLAIM, SHARED_VOLUME: SHARED_CLAIM}
    store_mounts = {TEAM_VOLUME: MODELS_MOUNT, SHARED_VOLUME: SHARED_MODELS_MOUNT}
    assert result.config.model_store.enabled
    mounting = 0
    for namespace, pod in _runtime_pods(result):
        (container,) = pod["containers"]
        every_claim = {
            v["name"]: v["persistentVolumeClaim"]
            for v in pod["volumes"] if "persistentVolumeClaim" in v
        }  # fmt: skip
        assert {name: every_claim[name]["claimName"] for name in store} == store
        paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert {name: paths[name] for name in store} == store_mounts
        claims = {name: c for name, c in every_claim.items() if name not in store}
        if not claims:
            continue
        mounting += 1
        expected = {d.claim_name: d for d in team_directories(lustre, teams[namespace])}
        assert {name: c["claimName"] for name, c in claims.items()} == {n: n for n in expected}
        mounts = {m["name"]: m for m in container["volumeMounts"] if m["name"] in claims}
        for name, directory in expected.items():
            assert mounts[name]["mountPath"] == directory.mount_path
            # a read-only bind mount would stop access times as a read-only volume would
            assert "readOnly" not in mounts[name] and "readOnly" not in claims[name]
        environment = {e["name"]: e.get("value") for e in container["env"]}
        writable = [d.mount_path for d in expected.values() if d.root.writable]
        for variable in ("CHECKPOINT_DIR", "NEURON_COMPILE_CACHE_URL"):
            if variable in environment:
                assert any(
                    str(environment[variable]).startswith(path + "/") for path in writable
                ), (variable, environment[variable])
    assert mounting


def test_a_torch_pod_without_a_password_entry_has_a_home_it_can_write(
    synthesized: dict[str, StackResult],
) -> None:
    for runtime in _records(synthesized["prod"], RUNTIME):
        framework = runtime.inputs["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        for job in runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
            environment = {e["name"]: e.get("value") for e in container["env"]}
            if framework == "mpi":
                assert "HOME" not in environment  # mpiuser's own home in the image
            else:
                assert environment["HOME"] == "/tmp" and environment["USER"]


def test_a_team_without_the_shared_file_system_mounts_none_of_it(
    run_component: RunComponent,
) -> None:
    """sharedFileSystem is Lustre's switch: the team keeps its model store claims."""
    data = copy.deepcopy(stack_data("prod"))
    data["teams"][1]["sharedFileSystem"] = False
    run = run_component(parts.storage, data, stack="prod")
    name = data["teams"][1]["name"]
    claims = [
        r.inputs["metadata"]["name"] for r in run.records
        if r.type == CLAIM and r.inputs["metadata"]["namespace"] == name
    ]  # fmt: skip
    assert sorted(claims) == [TEAM_CLAIM, SHARED_CLAIM]
    drivers = [
        r.inputs["spec"]["csi"]["driver"] for r in run.records
        if r.type == VOLUME and r.inputs["spec"]["claimRef"]["namespace"] == name
    ]  # fmt: skip
    assert drivers == [EFS_CSI_DRIVER, EFS_CSI_DRIVER]


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_in_the_training_subnet_starts_before_the_admin_address_is_reserved(
    synthesized: dict[str, StackResult], stack: str
) -> None:
    """An ENI (the cluster's, a node's, a pod's) could otherwise take the address first."""
    result = synthesized[stack]
    reservation = _one(result, RESERVATION)
    subnet_id = reservation.inputs["subnetId"]
    users = [
        record
        for record in result.records
        if record.urn != reservation.urn
        # a route table association takes no address
        and record.type != "aws:ec2/routeTableAssociation:RouteTableAssociation"
        and subnet_id in json.dumps(record.inputs)
    ]
    kinds = {record.type for record in users}
    # the cluster, its nodes' classes and the file system all put interfaces there
    assert {
        "eks:index:Cluster",
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        FILE_SYSTEM,
    } <= kinds
    assert users, "something uses the training subnet"
    for record in users:
        carried = {urn for urns in record.property_dependencies.values() for urn in urns}
        assert reservation.urn in carried | set(record.dependencies), record.name
