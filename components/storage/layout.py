"""One layout of the shared file system: a directory per team under every team root.

Every association's path and ``/teams`` (config ``LustreConfig.team_roots``) hold one directory
per team, owned by root and the team's group, setgid, mode 2770 (2750 under a path that only
imports from S3), in the team's Lustre project (project id = gid, which carries its quota). A
team's claims mount only those directories:
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

from components.config import CONFIG_KEY, ConfigProblem, LustreConfig, PlatformConfig, TeamConfig
from components.config.storage import SHARED_MOUNT, TeamRoot
from components.user_data import (
    CLOUD_CONFIG_PART,
    SHELL_SCRIPT_PART,
    USER_DATA_LIMIT_BYTES,
    multipart_user_data,
)

TEAM_DIRECTORY_MODE: Final = "2770"
"""setgid (files and directories made inside take the team's group), rwx for owner and group,
nothing for anyone else."""
IMPORT_ONLY_DIRECTORY_MODE: Final = "2750"
"""A team directory under a path that only imports from S3: the team reads and walks it, only
the import (and the admin client) writes it. The permission keeps jobs from writing there, not
a read-only mount: Linux updates no access time through a read-only mount (fs/inode.c,
touch_atime: ``mnt_get_write_access`` fails), so the Lustre client would report no reads at
close (the MDT takes the client's atime then: lustre/mdd/mdd_object.c, "atime only set for
read atime update on close"), and a dataset read every day would look unread to the release
task."""
ROOT_DIRECTORY_MODE: Final = "0755"
"""A team root: every team walks through it, only root (the admin client) creates in it."""
ADMIN_MOUNT: Final = "/mnt/fsx"
LAYOUT_LOG: Final = "/var/log/fsx-layout.log"
EVERY_BOOT: Final = "#cloud-config\ncloud_final_modules:\n  - [scripts-user, always]\n"
"""cloud-init runs a user data script once per instance; run at every boot instead (cloud-init
"Modules": a module's frequency ``always``; AWS's Knowledge Center, "run user data with every
restart", sets the same), so starting the stopped admin client lays the file system out again,
e.g. after an import gave a team directory another owner or mode."""
LAYOUT_DONE: Final = "fsx-layout: done"
"""The line the layout prints last, on the instance's console (``aws ec2
get-console-output``) and in :data:`LAYOUT_LOG`."""
LONGEST_DNS_NAME: Final = "fs-0123456789abcdef0.fsx.ap-southeast-7.amazonaws.com.cn" + "x" * 8
"""Longer than any file system's DNS name, for sizing the layout script before it exists."""
LONGEST_MOUNT_NAME: Final = "x" * 16
"""As long as any file system's Lustre mount name, for the same."""


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
    def volume_stem(self) -> str:
        """Its PersistentVolume's name before the source's digest.

        Cluster-scoped, so the team is in it; :func:`components.storage.persistent_volume_name`
        appends the digest.
        """
        return f"{self.claim_name}-{self.team}"

    @property
    def mode(self) -> str:
        """Its mode (:func:`team_directory_mode`)."""
        return team_directory_mode(self.root)


def team_directory_mode(root: TeamRoot) -> str:
    """Mode of every team's directory under ``root``.

    :data:`TEAM_DIRECTORY_MODE`, or :data:`IMPORT_ONLY_DIRECTORY_MODE` under a path that only
    imports from S3.

    Args:
        root: the team root.
    """
    return TEAM_DIRECTORY_MODE if root.writable else IMPORT_ONLY_DIRECTORY_MODE


def team_directories(lustre: LustreConfig, team: TeamConfig) -> list[TeamDirectory]:
    """The team's directories, one per team root (none without a gid: config refuses that)."""
    if team.gid is None:
        return []
    return [TeamDirectory(root, team.name, team.gid) for root in lustre.team_roots]


def admin_user_data(script: str) -> str:
    """The admin client's user data: :func:`layout_script`, run at every boot (:data:`EVERY_BOOT`).

    Args:
        script: the layout script.
    """
    return multipart_user_data([(CLOUD_CONFIG_PART, EVERY_BOOT), (SHELL_SCRIPT_PART, script)])


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
    what is made inside inherits it), not recursively: a rerun must not walk every file. Only
    a directory whose group is not the team's gid (a changed ``teams[].gid``) is walked, once:
    its files of the old group and its project follow (:func:`_regroup_lines`). Directories
    of teams no longer listed stay as they are, with their data.

    Args:
        lustre: the file system's config (team roots, mount options).
        teams: the teams with a gid.
        dns_name: the file system's DNS name.
        mount_name: its Lustre mount name.
    """
    options = ",".join(lustre.mount_options)
    roots = " ".join(
        shlex.quote(f"{root.path} {team_directory_mode(root)}") for root in lustre.team_roots
    )
    # One short line per team: the script stays far below EC2's 16 KiB of user data
    # (components.user_data.USER_DATA_LIMIT_BYTES) for hundreds of teams.
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
        "# team root, mode of each team's directory in it",
        f"roots=({roots})",
        "# team, gid, quota in GiB (0: none)",
        "teams=(",
        *entries,
        ")",
        'for entry in "${roots[@]}"; do',
        '  read -r root mode <<< "$entry"',
        f'  mkdir -p "{ADMIN_MOUNT}$root"',
        f'  chmod {ROOT_DIRECTORY_MODE} "{ADMIN_MOUNT}$root"',
        "done",
        'for entry in "${teams[@]}"; do',
        '  read -r team gid quota <<< "$entry"',
        '  for root_entry in "${roots[@]}"; do',
        '    read -r root mode <<< "$root_entry"',
        f'    dir="{ADMIN_MOUNT}$root/$team"',
        '    if [ -d "$dir" ]; then old=$(stat -c %g "$dir"); else old=$gid; fi',
        '    mkdir -p "$dir"',
        *_regroup_lines(),
        '    chown "0:$gid" "$dir"',
        '    chmod "$mode" "$dir"',
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


def _regroup_lines() -> list[str]:
    """Shell lines that move a team directory's contents to the team's gid when it changed.

    A team directory whose group is not the team's gid (the gid changed in config, or an
    import gave it another owner) has files and directories of the old group, in the old
    group's quota project: group members lose access and the old project keeps counting them.
    The contents of the old group get the new one (``find -gid``: files of other groups stay
    as they are) and the whole tree the new project (``lfs project -p ID -r -s``: recursive,
    and inherited by what is made later; lustre lfs-project(1)). The directory's own group is
    set after (the caller's ``chown``), so a run cut short walks again at the next boot, and a
    directory already in its group walks nothing: the layout stays idempotent and cheap.
    """
    return [
        '    if [ "$old" != "$gid" ]; then',
        '      echo "fsx-layout: $dir: group $old -> $gid, its files and project follow"',
        '      find "$dir" -mindepth 1 -gid "$old" -exec chgrp -h "$gid" {} +',
        '      lfs project -p "$gid" -r -s "$dir"',
        "    fi",
    ]


def layout_problems(config: PlatformConfig) -> list[ConfigProblem]:
    """The admin client's layout script must fit in EC2's user data.

    A check of the parsed config, run with the others that need more than config
    (:func:`components.platform.validated_config`): the script is built here, on top of config.

    Args:
        config: the parsed stack configuration.
    """
    lustre = config.storage.lustre
    if lustre is None:
        return []
    script = layout_script(
        lustre, config.teams, dns_name=LONGEST_DNS_NAME, mount_name=LONGEST_MOUNT_NAME
    )
    size = len(admin_user_data(script).encode())
    if size <= USER_DATA_LIMIT_BYTES:
        return []
    return [
        ConfigProblem(
            f"{CONFIG_KEY}.teams",
            f"{len(config.teams)} teams",
            f"fewer teams or team roots: the admin client's layout script takes {size} bytes, "
            f"and EC2 takes at most {USER_DATA_LIMIT_BYTES} bytes of user data",
        )
    ]
