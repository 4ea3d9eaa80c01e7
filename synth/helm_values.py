"""Values as Helm hands them to a chart's templates: the release's over the chart's defaults."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def helm_coalesced(defaults: Any, values: Any) -> Any:
    """``values`` over a chart's ``values.yaml`` as Helm coalesces them before rendering.

    Maps merge recursively, anything else in ``values`` replaces the default (an empty list
    too, unlike :func:`synth.pods.chart_merged`), and a null removes it.

    Args:
        defaults: the chart's values.
        values: the release's values.
    """
    if not (isinstance(defaults, Mapping) and isinstance(values, Mapping)):
        return copy.deepcopy(values)
    merged = {key: copy.deepcopy(value) for key, value in defaults.items()}
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = helm_coalesced(defaults[key], value) if key in defaults else value
    return merged
