"""Accelerator pools as a stack file states them, with their catalog facts.

Tests derive what the program must build from this view of the stack data, never from the
program's own config model, so a wrong default or derivation in the program cannot pass.
"""

from __future__ import annotations

from typing import Any, Final

from components.catalog import CATALOG, InstanceType

GPU: Final = "nvidia.com/gpu"
NEURON: Final = "aws.amazon.com/neuron"


class StackPool:
    """One ``nodePools`` entry of a stack file."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.name: str = raw["name"]
        self.max_nodes: int = raw["maxNodes"]
        self.instance_types: list[str] = raw["instanceTypes"]
        self.entries: list[InstanceType] = [CATALOG[name] for name in self.instance_types]
        # The config requires one accelerator and EFA layout per pool: check the data agrees.
        assert len({(e.accelerator, e.accelerators, e.efa_interfaces) for e in self.entries}) == 1
        self.instance: InstanceType = self.entries[0]

    @property
    def gpu(self) -> bool:
        return self.instance.accelerator == "nvidia"

    @property
    def accelerator_resource(self) -> str:
        return GPU if self.gpu else NEURON

    @property
    def efa(self) -> bool:
        """``efa`` as configured; default true for EFA-capable types (config docs)."""
        configured = self.raw.get("efa")
        if configured is not None:
            return bool(configured)
        return all(entry.efa_interfaces > 0 for entry in self.entries)
