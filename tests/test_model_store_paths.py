"""``synth jobs`` checks the model store on every path that mounts it (issue 43, item 5).

Trainer runtimes, Ray, notebooks, Slurm's node sets and login pods mount ``/models``. Each
check of :mod:`synth.jobs.storage` is reproduced by changing one thing of the synthesized dev
stack: the claim, the PV it binds, the file system and access point in the PV's handle, the
access point's gid, the shared area's read-only mount, the mount targets' zones and their
security group.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Final

import pytest

from components.config import PlatformConfig
from components.storage.model_store import SHARED_CLAIM, TEAM_CLAIM
from synth.jobs.model import PathReport, evaluate_jobs
from synth.jobs.storage import ACCESS_POINT, MOUNT_TARGET, SECURITY_GROUP, SUBNET
from synth.jobs.view import Manifest, StackView, name_of, namespace_of
from synth.run import StackResult

TEAM: Final = "ml-dev"
SLURM: Final = "slurm"
KINDS: Final = ("trainjob", "rayjob", "notebook", "slurm-partition", "slurm-login")
"""The path kinds whose pods mount the model store in dev."""


def _view(result: StackResult) -> StackView:
    view = StackView.from_records(result.records)
    return StackView(
        copy.deepcopy(view.objects),
        copy.deepcopy(view.releases),
        view.kustomizations,
        copy.deepcopy(view.cloud),
    )


def _object(view: StackView, kind: str, name: str, namespace: str | None = None) -> Manifest:
    found = view.named(kind, name, namespace)
    assert found is not None, (kind, name, namespace)
    return found


def _volume(view: StackView, namespace: str, claim: str) -> Manifest:
    volume_name = _object(view, "PersistentVolumeClaim", claim, namespace)["spec"]["volumeName"]
    return _object(view, "PersistentVolume", volume_name)


def _aws(view: StackView, resource_type: str, name: str) -> Manifest:
    (found,) = [r for r in view.aws(resource_type) if r["name"] == name]
    return found


def _refused(
    view: StackView, config: PlatformConfig, words: str, kinds: tuple[str, ...] = KINDS
) -> list[PathReport]:
    """Every path of ``kinds`` is refused with ``words``; the paths returned."""
    reports = [r for r in evaluate_jobs(view, config=config) if r.kind in kinds]
    assert {r.kind for r in reports} == set(kinds), [r.kind for r in reports]
    for report in reports:
        assert not report.runnable, report
        assert any(words in reason for reason in report.reasons), (report.kind, report.reasons)
    return reports


def test_every_path_of_dev_mounts_the_model_store_and_reaches_it(
    synthesized: dict[str, StackResult],
) -> None:
    result = synthesized["dev"]
    reports = [r for r in result.jobs if r.kind in KINDS]
    assert {r.kind for r in reports} == set(KINDS)
    assert all(r.runnable for r in reports), [r.to_json() for r in reports if not r.runnable]
    # the checks have something to check: the team's claims and Slurm's bind EFS volumes
    view = _view(result)
    for namespace, claim in ((TEAM, TEAM_CLAIM), (TEAM, SHARED_CLAIM), (SLURM, TEAM_CLAIM)):
        assert _volume(view, namespace, claim)["spec"]["csi"]["driver"] == "efs.csi.aws.com"


def _drop_claim(view: StackView) -> None:
    doomed = _object(view, "PersistentVolumeClaim", TEAM_CLAIM, TEAM)
    view.objects.remove(doomed)


def _bind_elsewhere(view: StackView) -> None:
    _volume(view, TEAM, TEAM_CLAIM)["spec"]["claimRef"]["namespace"] = "ml-other"


Edit = Callable[[StackView], None]


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_drop_claim, f"claim {TEAM_CLAIM} does not exist in {TEAM}"),
        (_bind_elsewhere, "which is bound to ml-other/model-store"),
    ],
    ids=["claim-missing", "pv-bound-elsewhere"],
)
def test_a_team_path_without_its_bound_claim_stays_pending(
    synthesized: dict[str, StackResult], edit: Edit, words: str
) -> None:
    view = _view(synthesized["dev"])
    edit(view)
    _refused(view, synthesized["dev"].config, words, ("trainjob", "rayjob", "notebook"))


def test_the_pv_must_name_the_stacks_file_system_and_the_teams_access_point(
    synthesized: dict[str, StackResult],
) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    csi = _volume(view, TEAM, TEAM_CLAIM)["spec"]["csi"]
    shared_point = _aws(view, ACCESS_POINT, "storage-models-shared")["id"]
    file_system = csi["volumeHandle"].split("::")[0]
    # the driver's newer spelling names the same volume (node.go, parseVolumeId)
    csi["volumeHandle"] = f"efs:{csi['volumeHandle']}"
    assert all(r.runnable for r in evaluate_jobs(view, config=config) if r.kind == "notebook")
    csi["volumeHandle"] = f"{file_system}::{shared_point}"
    _refused(view, config, f"rooted at /shared, not /{TEAM}", ("trainjob", "notebook"))
    csi["volumeHandle"] = file_system  # no access point: the whole file system
    _refused(view, config, "mounts no access point of the model store", ("notebook",))
    csi["volumeHandle"] = f"fs-0123456789abcdef0::{shared_point}"
    _refused(view, config, "not the stack's model store", ("trainjob", "notebook"))
    # Slurm's claim mounts the whole file system, but it must be the store's
    slurm = _volume(view, SLURM, TEAM_CLAIM)["spec"]["csi"]
    slurm["volumeHandle"] = "fs-0123456789abcdef0"
    _refused(view, config, "not the stack's model store", ("slurm-partition", "slurm-login"))


def test_the_teams_access_point_carries_the_teams_gid(
    synthesized: dict[str, StackResult],
) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    point = _aws(view, ACCESS_POINT, f"storage-models-{TEAM}")
    point["inputs"]["posixUser"]["gid"] = 1000
    _refused(view, config, "POSIX gid is 1000, not team ml-dev's (5003)", ("trainjob", "notebook"))
    # without the config, the team's gid is the one its pods carry
    reports = evaluate_jobs(view)
    notebook = next(r for r in reports if r.kind == "notebook" and r.team == TEAM)
    assert any("POSIX gid is 1000" in reason for reason in notebook.reasons), notebook.reasons


def test_the_shared_area_is_read_only_for_a_team_that_does_not_publish(
    synthesized: dict[str, StackResult],
) -> None:
    """A reader's shared claim must go through an access point that cannot write /shared, and
    its pods must mount the claim read-only (what admission asks)."""
    config = synthesized["dev"].config
    assert TEAM in config.model_store.publishers
    view = _view(synthesized["dev"])
    shared = _volume(view, TEAM, SHARED_CLAIM)
    assert shared["spec"]["csi"]["readOnly"] is False
    readers = config.model_copy(
        update={"model_store": config.model_store.model_copy(update={"publishers": []})}
    )
    # dev's publisher's claim goes through the writers' access point: as a reader, refused
    _refused(view, readers, "could change the released models", ("trainjob", "notebook"))
    reading = _aws(view, ACCESS_POINT, "storage-models-shared-readers")
    file_system = shared["spec"]["csi"]["volumeHandle"].split(":")[0]
    shared["spec"]["csi"]["volumeHandle"] = f"{file_system}::{reading['id']}"
    reports = {r.kind: r for r in evaluate_jobs(view, config=readers) if r.team == TEAM}
    # the notebook mounts the shared claim read-only (the builder's default): nothing to say
    assert not any("released models" in r or "readOnly" in r for r in reports["notebook"].reasons)
    # dev's runtimes were built for a publisher: read-write, which admission refuses a reader
    assert any(
        "without persistentVolumeClaim.readOnly" in r for r in reports["trainjob"].reasons
    ), reports["trainjob"].reasons


def test_a_volume_that_does_not_mount_with_iam_is_refused(
    synthesized: dict[str, StackResult],
) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    del _volume(view, TEAM, TEAM_CLAIM)["spec"]["mountOptions"]
    _refused(view, config, "mount options lack iam", ("trainjob", "notebook"))


def _zone_of(view: StackView, target: Manifest) -> str:
    (subnet,) = [s for s in view.aws(SUBNET) if s["id"] == target["inputs"]["subnetId"]]
    return str(subnet["inputs"]["availabilityZone"])


def test_every_zone_of_a_pool_needs_a_mount_target(synthesized: dict[str, StackResult]) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    # gpu-small and the Slurm pools launch in the training zone only
    zone = config.network.training_zone
    (target,) = [t for t in view.aws(MOUNT_TARGET) if _zone_of(view, t) == zone]
    view.cloud.remove(target)
    reports = _refused(view, config, f"in {zone}, where the model store", KINDS)
    assert {r.pool for r in reports if r.kind == "trainjob"} >= {"gpu-small"}
    # the other zone's mount target alone serves none of them
    assert any(_zone_of(view, t) != zone for t in view.aws(MOUNT_TARGET))


def test_the_mount_targets_admit_nfs_from_the_nodes_security_group(
    synthesized: dict[str, StackResult],
) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    group = _aws(view, SECURITY_GROUP, "storage-models")
    (rule,) = group["inputs"]["ingress"]
    rule["fromPort"] = rule["toPort"] = 2048
    _refused(view, config, "admits NFS (TCP 2049) from none of NodePool", KINDS)
    rule["fromPort"] = rule["toPort"] = 2049
    # a group the nodes do not carry (the Lustre file servers')
    rule["securityGroups"] = [_aws(view, SECURITY_GROUP, "storage-lustre")["id"]]
    _refused(view, config, "admits NFS (TCP 2049) from none of NodePool", KINDS)


def test_slurms_claim_must_exist_for_its_login_and_node_sets(
    synthesized: dict[str, StackResult],
) -> None:
    config = synthesized["dev"].config
    view = _view(synthesized["dev"])
    doomed = _object(view, "PersistentVolumeClaim", TEAM_CLAIM, SLURM)
    view.objects.remove(doomed)
    _refused(
        view, config, f"claim {TEAM_CLAIM} does not exist in {SLURM}",
        ("slurm-partition", "slurm-login"),
    )  # fmt: skip
    assert namespace_of(doomed) == SLURM and name_of(doomed) == TEAM_CLAIM
