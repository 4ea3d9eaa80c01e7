"""The upstream reference data (CRD schemas, chart values) as the synthesis and tests find it.

The data is not part of this repository: it sits in ``$TRAINING_PLATFORM_REFERENCE_DIR``, else
``../shared`` beside the checkout (README, "Reference data"; ``scripts/fetch-reference`` gets
it), laid out as ``charts/<chart>/<version>/values.yaml`` and ``Chart.yaml``. The synthesis
reads a chart's defaults from there where it rebuilds what the chart renders
(:mod:`synth.chart_pods`); without the data it says so and skips that part, never falls back
on a copy.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any, Final

from components.versions import HelmChart
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml

REFERENCE_ENV: Final = "TRAINING_PLATFORM_REFERENCE_DIR"
"""The variable naming the reference data's directory (tests/conftest.py and .ci/run set it)."""
REQUIRE_ENV: Final = "TRAINING_PLATFORM_REQUIRE_REFERENCE"
"""``1`` where a test that needs the reference data fails without it instead of skipping."""
FETCH_HINT: Final = (
    f"get it with scripts/fetch-reference or point {REFERENCE_ENV} at it (README, 'Reference data')"
)
"""How to get the data, for a message that says it is missing."""

VERSION_WITHOUT_V: Final = frozenset({"aws-efa-k8s-device-plugin"})
"""Charts whose versions carry a leading ``v`` that their reference directory drops
(``charts/aws-efa-k8s-device-plugin/0.5.30`` for chart version ``v0.5.30``; cert-manager's
keeps it)."""


class MissingReference(Exception):
    """A reference file the synthesis needs is not there."""

    def __init__(self, path: Path) -> None:
        """The missing file.

        Args:
            path: where it was looked for.
        """
        self.path = path
        super().__init__(f"reference data missing: {path} ({FETCH_HINT})")


def reference_root() -> Path:
    """``$TRAINING_PLATFORM_REFERENCE_DIR``, else ``../shared`` beside the checkout, resolved."""
    return Path(os.environ.get(REFERENCE_ENV, REPOSITORY_ROOT.parent / "shared")).resolve()


def chart_dir(chart: HelmChart) -> str:
    """``<chart name>/<version>``: the chart's directory under ``charts/`` of the reference data.

    Derived from the chart's pin, so a version bump points at the new chart's defaults, which
    the reference data must then hold.

    Args:
        chart: the chart's pin (components/versions.py).
    """
    version = chart.version.removeprefix("v") if chart.name in VERSION_WITHOUT_V else chart.version
    return f"{chart.name}/{version}"


@functools.cache
def _load(path: Path) -> Any:
    """A YAML file's content, read once per process (the files are pinned, never rewritten)."""
    if not path.is_file():
        raise MissingReference(path)
    return load_yaml(path.read_text())


def chart_file(chart: HelmChart, name: str, root: Path | None = None) -> dict[str, Any]:
    """One file of a pinned chart in the reference data, parsed (a copy: callers may change it).

    Args:
        chart: the chart's pin.
        name: ``values.yaml`` or ``Chart.yaml``.
        root: the reference directory (default :func:`reference_root`, read at each call).

    Raises:
        MissingReference: the file is not there.
    """
    path = (root or reference_root()) / "charts" / chart_dir(chart) / name
    content = _load(path)
    if not isinstance(content, dict):
        raise ValueError(f"{path}: expected a YAML map, got {type(content).__name__}")
    return copy.deepcopy(content)
