"""Where the upstream reference data keeps what the tests read about a pinned chart."""

from __future__ import annotations

from typing import Final

from components.versions import HelmChart

VERSION_WITHOUT_V: Final = frozenset({"aws-efa-k8s-device-plugin"})
"""Charts whose versions carry a leading ``v`` that their reference directory drops
(``charts/aws-efa-k8s-device-plugin/0.5.30`` for chart version ``v0.5.30``; cert-manager's
keeps it)."""


def chart_dir(chart: HelmChart) -> str:
    """``<chart name>/<version>``: the chart's directory under ``charts/`` of the reference data.

    Derived from the chart's pin, so a version bump points the tests at the new chart's defaults,
    which the reference data must then hold (a missing file fails loudly).
    """
    version = chart.version.removeprefix("v") if chart.name in VERSION_WITHOUT_V else chart.version
    return f"{chart.name}/{version}"
