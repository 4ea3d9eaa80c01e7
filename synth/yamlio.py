"""YAML read through libyaml where PyYAML was built with it: the same safe loading, faster.

PyYAML's ``CSafeLoader`` builds the same objects as ``safe_load`` (its SafeConstructor) with
libyaml's C scanner and parser, several times faster on the thousands of manifests a synthesis
writes and its readers read back; a PyYAML without libyaml falls back to the pure-Python
loader.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

SAFE_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, through libyaml when PyYAML has it.

    Raises:
        yaml.YAMLError: not valid YAML (with its ``problem_mark``, as ``safe_load`` raises).
    """
    return yaml.load(text, Loader=SAFE_LOADER)
