"""Validation-library errors in the house style: key path, what was found, what is allowed."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Final

from components.config.base import CONFIG_KEY, MISSING, ConfigProblem, StrictModel
from components.config.slurm import PRIVATE_KEY_ERROR

MOVED_KEYS: Final[dict[tuple[str, ...], str]] = {
    ("trainer", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
    ("slurm", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
}
"""Keys that used to exist, with where their setting lives now."""


def problem_from_pydantic(error: Any, root: type[StrictModel]) -> ConfigProblem:
    """The house-style problem for one pydantic error of a document validated as ``root``."""
    loc: tuple[str | int, ...] = tuple(error["loc"])
    path = _path(loc)
    kind = error["type"]
    if kind == "missing":
        field = _field_at(root, loc)
        description = field.description if field and field.description else "a value"
        return ConfigProblem(path, MISSING, description)
    if kind == "extra_forbidden":
        moved = MOVED_KEYS.get(tuple(part for part in loc if isinstance(part, str)))
        if moved is not None:
            return ConfigProblem(path, error["input"], moved)
        model = _model_at(root, loc[:-1])
        keys = sorted(f.alias or name for name, f in model.model_fields.items()) if model else []
        return ConfigProblem(path, error["input"], "one of the keys " + ", ".join(keys))
    message: str = error["msg"]
    allowed = message.removeprefix("Input should be ").removeprefix("Value error, ")
    if kind == PRIVATE_KEY_ERROR:
        return ConfigProblem(path, "<a private key, not repeated here>", allowed)
    return ConfigProblem(path, error["input"], allowed)


def _path(loc: tuple[str | int, ...]) -> str:
    text = CONFIG_KEY
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _unwrap(annotation: Any) -> Iterator[Any]:
    """Every class an annotation can hold (through Optional, list, dict, Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        yield from _unwrap(typing.get_args(annotation)[0])
    elif origin in (list, dict, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _unwrap(arg)
    else:
        yield annotation


def _model_at(root: type[StrictModel], loc: tuple[str | int, ...]) -> type[StrictModel] | None:
    model: type[StrictModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = _by_alias(model, part)
        if field is None:
            # dict keys (zone names) sit in the loc too; stay on the dict's value model
            continue
        model = next(
            (
                t
                for t in _unwrap(field.annotation)
                if isinstance(t, type) and issubclass(t, StrictModel)
            ),
            None,
        )
    return model


def _field_at(root: type[StrictModel], loc: tuple[str | int, ...]) -> Any:
    model = _model_at(root, loc[:-1])
    last = loc[-1]
    return _by_alias(model, last) if model is not None and isinstance(last, str) else None


def _by_alias(model: type[StrictModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None
