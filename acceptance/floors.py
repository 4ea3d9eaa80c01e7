"""Bus-bandwidth floors per instance type, each with what it measures and where it comes from.

The floors live in ``baselines.json`` beside this module, data rather than code, so the baseline
command (a measured 2-node run turned into the pool's figure) and an operator can replace an
entry without touching the program; ``decide --baselines FILE`` reads another file. Published
figures are cited, and a type without one has the floor 0 until it is measured: a number copied
from another platform's gate is not a floor (runs differ by size, software and topology).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

BASELINES: Final = Path(__file__).with_name("baselines.json")
"""The floors shipped with the program."""

Check = Literal["nccl-all-reduce", "nccom-all-reduce"]
CHECKS: Final[tuple[Check, ...]] = ("nccl-all-reduce", "nccom-all-reduce")
NO_FIGURE: Final = "no published figure: floor 0 until measured"


@dataclass(frozen=True)
class Floor:
    """The least bus bandwidth one check may show on one instance type."""

    instance_type: str
    check: Check
    """``nccl-all-reduce`` (all_reduce_perf on GPUs) or ``nccom-all-reduce`` (Trainium)."""
    nodes: int
    """Nodes the figure was measured across: 1 (intra-node, what acceptance runs) or 2 (EFA)."""
    floor_gbps: float
    """Least bus bandwidth, GB/s."""
    of: str
    """What the figure measures (message size, ranks, path)."""
    source: str
    """Where the figure comes from: a citation, a measurement, or :data:`NO_FIGURE`."""
    size_bytes: int | None = None
    """The message size the figure was taken at, bytes; a run is held to the floor at that
    size, since bus bandwidth grows with the size until it levels off (the published p5 runs:
    437.8 GB/s at 2 GiB, 487.09 at 16 GiB). None: at the run's largest size."""


def load_floors(path: Path = BASELINES) -> dict[tuple[str, Check, int], Floor]:
    """The floors in a baselines file, by (instance type, check, nodes).

    Args:
        path: a baselines JSON file (default: the one shipped beside this module).

    Raises:
        ValueError: an entry without a field, with an unknown check, a negative floor or an
            empty source, naming the entry, key and value.
    """
    return parse_floors(json.loads(path.read_text()).get("floors", []), path.name)


def parse_floors(
    entries: Sequence[Mapping[str, Any]], where: str
) -> dict[tuple[str, Check, int], Floor]:
    """The floors in a list of baselines entries, by (instance type, check, nodes).

    Args:
        entries: the ``floors`` list of a baselines file, or a pool's ``floors`` in the agent's
            settings file (same field names).
        where: what to call the list in an error, e.g. ``baselines.json``.

    Raises:
        ValueError: as :func:`load_floors`.
    """
    floors: dict[tuple[str, Check, int], Floor] = {}
    for position, entry in enumerate(entries):
        where_entry = f"{where} floors[{position}]"
        missing = [k for k in ("instance_type", "check", "nodes", "floor_gbps", "of", "source")
                   if k not in entry]  # fmt: skip
        if missing:
            raise ValueError(f"{where_entry}: missing {', '.join(missing)}")
        check = entry["check"]
        if check not in CHECKS:
            raise ValueError(f"{where_entry}: check {check!r} is not one of {', '.join(CHECKS)}")
        gbps = entry["floor_gbps"]
        if not isinstance(gbps, int | float) or gbps < 0:
            raise ValueError(f"{where_entry}: floor_gbps {gbps!r} must be a number >= 0 (GB/s)")
        if not str(entry["source"]).strip():
            raise ValueError(f"{where_entry}: source is empty; say where the figure comes from")
        size = entry.get("size_bytes")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size <= 0):
            raise ValueError(f"{where_entry}: size_bytes {size!r} must be a whole number > 0")
        floor = Floor(
            str(entry["instance_type"]), check, int(entry["nodes"]), float(gbps),
            str(entry["of"]), str(entry["source"]), size,
        )  # fmt: skip
        key = (floor.instance_type, floor.check, floor.nodes)
        if key in floors:
            raise ValueError(f"{where_entry}: a second floor for {key}")
        floors[key] = floor
    return floors


def floor_for(
    floors: Mapping[tuple[str, Check, int], Floor], instance_type: str, check: Check
) -> Floor:
    """The one-node floor of a check on an instance type (floor 0 where none is recorded).

    Args:
        floors: from :func:`load_floors`.
        instance_type: EC2 instance type.
        check: which benchmark.
    """
    return floors.get(
        (instance_type, check, 1),
        Floor(instance_type, check, 1, 0.0, "no entry in the baselines file", NO_FIGURE),
    )
