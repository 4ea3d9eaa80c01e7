"""Where the upstream reference data keeps what the tests read about a pinned chart."""

from __future__ import annotations

from synth.reference import VERSION_WITHOUT_V, chart_dir

__all__ = ["VERSION_WITHOUT_V", "chart_dir"]
