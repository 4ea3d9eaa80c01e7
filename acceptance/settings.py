"""The agent's settings file: what the gate component renders and the agent reads.

The gate renders one ConfigMap ``acceptance-settings-<vendor>`` in ``node-acceptance`` with the
key ``settings.json``, mounted in the agent's pods; ``ACCEPTANCE_SETTINGS`` names its path. Its
pools carry what the agent needs per pool: replacement policy, EFA, the file systems its nodes
must mount and the bus-bandwidth floors (baselines.json's field names).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

POOL_LABEL: Final = "trainingplatform.io/pool"
"""Node label naming the node's pool. The same string as components.node_pools.POOL_LABEL (a
test holds them equal): this package may not import the Pulumi side."""
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
"""Well-known node label with the node's EC2 instance type (set by the kubelet)."""


@dataclass(frozen=True)
class FileSystem:
    """One shared file system a pool's nodes must have mounted."""

    name: str
    """What findings call it, e.g. ``lustre``."""
    claim: str
    """PersistentVolumeClaim in the agent's namespace the check pod mounts read-only."""
    mount_path: str
    """Where the check pod mounts it."""
    fs_type: str
    """File system type as /proc/self/mounts shows it, e.g. ``lustre``, ``nfs4``."""


@dataclass(frozen=True)
class Pool:
    """What the agent does on one pool's nodes."""

    replace_failed_nodes: bool = False
    """Delete a failed node's NodeClaim so Karpenter replaces it."""
    max_replacements_per_hour: int = 0
    """Most NodeClaims the agents of this pool delete in any hour."""
    efa: bool = True
    """Whether the pool attaches EFA (the check asks for EFA only where the type has it too)."""
    file_systems: tuple[FileSystem, ...] = ()
    floors: tuple[Mapping[str, Any], ...] = ()
    """Baselines entries (baselines.json's field names) of the pool's types."""


@dataclass(frozen=True)
class Settings:
    """The whole settings file."""

    deadline_minutes: int
    """Minutes after the node's creation by which acceptance must end."""
    dcgm_diag_level: int
    """``dcgmi diag -r`` level the check runs (0: none)."""
    check_image: str
    """Image of the check pod."""
    pools: dict[str, Pool] = field(default_factory=dict)

    def pool(self, name: str | None) -> Pool:
        """A pool's settings; a pool the file does not list gets no replacement and no floors.

        Args:
            name: the node's pool label (``None`` where the node has none).
        """
        return self.pools.get(name or "", Pool())


def _require(document: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in document:
        raise ValueError(f"{where}: missing {key}")
    value = document[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: {key} {value!r} must be a {kind.__name__}")
    return value


def parse_settings(document: Mapping[str, Any], where: str = "settings.json") -> Settings:
    """The settings in a parsed settings document.

    Args:
        document: the JSON object.
        where: what to call the document in an error.

    Raises:
        ValueError: a missing or mistyped key, named with its value.
    """
    pools: dict[str, Pool] = {}
    for name, pool in _require(document, "pools", dict, where).items():
        at = f"{where} pools.{name}"
        file_systems = tuple(
            FileSystem(
                name=_require(fs, "name", str, f"{at}.fileSystems[{i}]"),
                claim=_require(fs, "claim", str, f"{at}.fileSystems[{i}]"),
                mount_path=_require(fs, "mountPath", str, f"{at}.fileSystems[{i}]"),
                fs_type=_require(fs, "fsType", str, f"{at}.fileSystems[{i}]"),
            )
            for i, fs in enumerate(pool.get("fileSystems", []))
        )
        pools[name] = Pool(
            replace_failed_nodes=_require(pool, "replaceFailedNodes", bool, at),
            max_replacements_per_hour=_require(pool, "maxReplacementsPerHour", int, at),
            efa=bool(pool.get("efa", True)),
            file_systems=file_systems,
            floors=tuple(pool.get("floors", [])),
        )
    return Settings(
        deadline_minutes=_require(document, "deadlineMinutes", int, where),
        dcgm_diag_level=_require(document, "dcgmDiagLevel", int, where),
        check_image=_require(document, "checkImage", str, where),
        pools=pools,
    )


def load_settings(path: Path) -> Settings:
    """The settings in a settings file.

    Args:
        path: the mounted ``settings.json`` (env ``ACCEPTANCE_SETTINGS``).
    """
    return parse_settings(json.loads(path.read_text()), str(path))


def settings_from_environment(
    command: str, variables: tuple[str, ...], out: TextIO
) -> Settings | None:
    """The settings a command's pod names in its environment, or None after saying what is wrong.

    Args:
        command: the command's name, which starts each message (``agent``, ``sweep``).
        variables: the environment variables it needs, ``ACCEPTANCE_SETTINGS`` among them.
        out: where the problem is written.
    """
    missing = [name for name in variables if not os.environ.get(name)]
    if missing:
        print(f"{command}: environment variable(s) {', '.join(missing)} not set", file=out)
        return None
    try:
        return load_settings(Path(os.environ["ACCEPTANCE_SETTINGS"]))
    except (OSError, ValueError) as error:
        print(f"{command}: settings: {error}", file=out)
        return None
