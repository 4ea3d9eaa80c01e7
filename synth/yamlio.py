"""YAML read and written through libyaml where PyYAML has it: the same safe YAML, faster.

PyYAML's ``CSafeLoader`` builds the same objects as ``safe_load`` (its SafeConstructor) with
libyaml's C scanner and parser, several times faster on the thousands of manifests a synthesis
writes and its readers read back; ``CSafeDumper`` writes them five times faster than
``safe_dump``. A PyYAML without libyaml falls back to the pure-Python classes.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

SAFE_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: Final[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
UNFOLDED: Final = 2**20
"""A line width no string reaches: libyaml and the Python emitter fold long quoted strings at
different points, and unfolded they write the same text (every file of a synthesis), so a
file reads the same whichever PyYAML wrote it."""


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, through libyaml when PyYAML has it.

    Raises:
        yaml.YAMLError: not valid YAML (with its ``problem_mark``, as ``safe_load`` raises).
    """
    return yaml.load(text, Loader=SAFE_LOADER)


def dump_yaml(document: Any) -> str:
    """``yaml.safe_dump(document, sort_keys=False)`` with no string folded, through libyaml.

    Strings stay on one line (:data:`UNFOLDED`); PyYAML without libyaml writes the same text.

    Args:
        document: plain data (mappings keep their order).
    """
    text: str = yaml.dump(document, Dumper=SAFE_DUMPER, sort_keys=False, width=UNFOLDED)
    return text
