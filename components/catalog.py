"""Instance-type facts, one source of truth for every component that needs them."""

from __future__ import annotations

import re
from typing import Literal

CpuArchitecture = Literal["x86_64", "arm64"]

# Graviton families carry a "g" right after the generation digit: m7g, c7gn, r8g, t4g.
# GPU families that end in "g" before the digit (g5, g6e, p5) are x86_64.
_GRAVITON_FAMILY = re.compile(r"[a-z]+\d+g[a-z]*")


def cpu_architecture(instance_type: str) -> CpuArchitecture:
    """CPU architecture of an EC2 instance type, e.g. ``arm64`` for ``m7g.xlarge``."""
    family = instance_type.split(".", 1)[0]
    return "arm64" if _GRAVITON_FAMILY.fullmatch(family) else "x86_64"
