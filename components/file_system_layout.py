"""One layout of the shared file system: a directory per team under every team root.

Every association's path and ``/teams`` (config ``LustreConfig.team_roots``) hold one directory
per team, owned by root and the team's group, setgid, mode 2770, in the team's Lustre project
(project id = gid, which carries its quota). A team's claims mount only those directories:
the FSx CSI driver mounts ``<dnsname>@tcp:/<mountname>`` and ``mountname`` may name a
subdirectory (kubernetes-sigs/aws-fsx-csi-driver v1.7.0 pkg/driver/node.go, NodePublishVolume),
and a Lustre client mounted at a subdirectory cannot walk above it. Root squash maps root on
every client to ``rootSquash`` except the admin client, whose address is the file system's only
no-squash NID (FSx API model, LustreRootSquashConfiguration); the admin client creates the
directories with :func:`layout_script` at boot.

Pure builders: the storage component creates the resources, the Trainer runtimes mount the
claims, and tests read both.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Final

from components.config import LustreConfig, TeamConfig
from components.config.storage import TeamRoot
from components.workloads import SHARED_MOUNT

TEAM_DIRECTORY_MODE: Final = "2770"
"""setgid (files and directories made inside take the team's group), rwx for owner and group,
nothing for anyone else."""
ROOT_DIRECTORY_MODE: Final = "0755"
"""A team root: every team walks through it, only root (the admin client) creates in it."""
ADMIN_MOUNT: Final = "/mnt/fsx"
LAYOUT_LOG: Final = "/var/log/fsx-layout.log"
USER_DATA_LIMIT_BYTES: Final = 16384
"""EC2 refuses user data above 16 KB (RunInstances, UserData)."""
LAYOUT_DONE: Final = "fsx-layout: done"
"""The line the layout prints last, on the instance's console (``aws ec2
get-console-output``) and in :data:`LAYOUT_LOG`."""


@dataclass(frozen=True)
class TeamDirectory:
    """One team's directory under one team root.

    Attributes:
        root: the team root it is under.
        team: the team's name (its namespace).
        gid: the team's group.
    """

    root: TeamRoot
    team: str
    gid: int

    @property
    def path(self) -> str:
        """Path on the file system, from its root: ``/checkpoints/ml-research``."""
        return f"{self.root.path}/{self.team}"

    @property
    def subdirectory(self) -> str:
        """What the CSI volume appends to the mount name: ``checkpoints/ml-research``."""
        return self.path.lstrip("/")

    @property
    def mount_path(self) -> str:
        """Where the team's pods see it: ``/fsx/checkpoints/ml-research``.

        The path the whole file system shows it at (Slurm mounts all of it at ``/fsx``), so a
        path in a log or a checkpoint means the same everywhere.
        """
        return f"{SHARED_MOUNT}{self.path}"

    @property
    def claim_name(self) -> str:
        """The team's claim on it, in the team's namespace."""
        return self.root.claim_name

    @property
    def volume_name(self) -> str:
        """Its PersistentVolume (cluster-scoped, so the team is in the name)."""
        return f"{self.claim_name}-{self.team}"


def team_directories(lustre: LustreConfig, team: TeamConfig) -> list[TeamDirectory]:
    """The team's directories, one per team root (none without a gid: config refuses that)."""
    if team.gid is None:
        return []
    return [TeamDirectory(root, team.name, team.gid) for root in lustre.team_roots]


def no_squash_nid(address: str) -> str:
    """The Lustre NID of a TCP client at ``address``: ``10.0.1.6@tcp`` (FSx API model)."""
    return f"{address}@tcp"


def layout_script(
    lustre: LustreConfig,
    teams: list[TeamConfig],
    *,
    dns_name: str,
    mount_name: str,
) -> str:
    """The admin client's user data: lay out every team's directories, set quotas, stop.

    Idempotent, so each run (a new instance after every change to it) brings the file system
    to the config: directories of teams still listed get their group, mode and project again,
    a removed quota becomes none (``-B 0``). The project is set on the directory (``-s``:
    what is made inside inherits it), not recursively: a rerun must not walk every file.
    Directories of teams no longer listed stay as they are, with their data.

    Args:
        lustre: the file system's config (team roots, mount options).
        teams: the teams with a gid.
        dns_name: the file system's DNS name.
        mount_name: its Lustre mount name.
    """
    options = ",".join(lustre.mount_options)
    roots = " ".join(shlex.quote(root.path) for root in lustre.team_roots)
    # One short line per team: the script stays far below EC2's 16 KiB of user data
    # (USER_DATA_LIMIT_BYTES) for hundreds of teams.
    entries = [
        f"  '{team.name} {team.gid} {team.lustre_quota_gib or 0}'"
        for team in teams
        if team.gid is not None
    ]
    lines = [
        "#!/bin/bash",
        "# Team directories of the shared file system (README, 'Team isolation').",
        "set -euo pipefail",
        f"exec > >(tee -a {LAYOUT_LOG} > /dev/console) 2>&1",
        "trap 'echo \"fsx-layout: failed at line $LINENO\"; shutdown -h now' ERR",
        # FSx for Lustre User Guide, "Installing the Lustre client" (Amazon Linux 2023).
        "dnf install -y lustre-client",
        f"mkdir -p {ADMIN_MOUNT}",
        f"mount -t lustre -o {shlex.quote(options)} "
        f"{shlex.quote(f'{dns_name}@tcp:/{mount_name}')} {ADMIN_MOUNT}",
        f"roots=({roots})",
        "# team, gid, quota in GiB (0: none)",
        "teams=(",
        *entries,
        ")",
        'for root in "${roots[@]}"; do',
        f'  mkdir -p "{ADMIN_MOUNT}$root"',
        f'  chmod {ROOT_DIRECTORY_MODE} "{ADMIN_MOUNT}$root"',
        "done",
        'for entry in "${teams[@]}"; do',
        '  read -r team gid quota <<< "$entry"',
        '  for root in "${roots[@]}"; do',
        f'    dir="{ADMIN_MOUNT}$root/$team"',
        '    mkdir -p "$dir"',
        '    chown "0:$gid" "$dir"',
        f'    chmod {TEAM_DIRECTORY_MODE} "$dir"',
        '    lfs project -p "$gid" -s "$dir"',
        "  done",
        '  if [ "$quota" = 0 ]; then limit=0; else limit="${quota}G"; fi',
        f'  lfs setquota -p "$gid" -B "$limit" {ADMIN_MOUNT}',
        "done",
        f"umount {ADMIN_MOUNT}",
        f"echo {shlex.quote(LAYOUT_DONE)}",
        "shutdown -h now",
    ]
    return "\n".join(lines) + "\n"
