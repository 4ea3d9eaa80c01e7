"""The configuration reference, generated from the config model so the two never drift.

``scripts/synth reference`` prints it; ``docs/reference/configuration.md`` holds a copy between
two markers (``synth/reference_pages.py``) and a test fails when they differ.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from components.config import CONFIG_KEY, PlatformConfig, StrictModel


def render_reference() -> str:
    """Markdown table of every key under ``platform``, with its type and documentation."""
    lines = [
        "| Key | Type | Meaning and default |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{path}` | {kind} | {text} |" for path, kind, text in _rows(PlatformConfig, CONFIG_KEY)
    ]
    return "\n".join(lines) + "\n"


def _rows(model: type[StrictModel], prefix: str) -> Iterator[tuple[str, str, str]]:
    for name, field in model.model_fields.items():
        path = f"{prefix}.{field.alias or name}"
        description = _outside_code((field.description or "").replace("|", "\\|"))
        yield path, _type_name(field.annotation), description
        nested = _section(field.annotation)
        if nested is not None:
            is_list = typing.get_origin(field.annotation) is list
            yield from _rows(nested, f"{path}[]" if is_list else path)


def _outside_code(text: str) -> str:
    """``text`` with ``<`` escaped outside code spans, where Markdown would read a tag."""
    parts = text.split("`")
    return "`".join(
        part.replace("<", "&lt;") if index % 2 == 0 else part for index, part in enumerate(parts)
    )


def _section(annotation: Any) -> type[StrictModel] | None:
    for candidate in _flatten(annotation):
        if isinstance(candidate, type) and issubclass(candidate, StrictModel):
            return candidate
    return None


def _flatten(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _flatten(typing.get_args(annotation)[0])
    if origin is not None and origin is not Literal:
        return [item for arg in typing.get_args(annotation) for item in _flatten(arg)]
    return [annotation]


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return "one of " + ", ".join(f"`{value}`" for value in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if origin in (typing.Union, __import__("types").UnionType):
        named = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(named) + (" (optional)" if type(None) in args else "")
    if isinstance(annotation, type) and issubclass(annotation, StrictModel):
        return "section"
    if annotation is Any:
        return "reserved"
    return {str: "string", int: "integer", bool: "boolean"}.get(annotation, str(annotation))
