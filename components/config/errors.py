"""Validation-library errors in the house style: key path, what was found, what is allowed.

pydantic reports each error with a type, a location and English of its own ("Input should be a
valid integer"); :func:`problems_from_pydantic` turns every one into a :class:`ConfigProblem`
whose ``allowed`` says what the stack may write there, in the words the rest of config uses. An
unknown key that is a real key spelled in another case or in snake_case (or a near miss) gets
"did you mean", and the "missing" it causes for the real key is not reported a second time.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Final

from components.config.base import (
    CONFIG_KEY,
    MISSING,
    ConfigProblem,
    StrictModel,
    closest_match,
)
from components.config.slurm import PRIVATE_KEY_ERROR

MOVED_KEYS: Final[dict[tuple[str, ...], str]] = {
    ("trainer", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
    ("slurm", "hugepagesGiB"): "no such key: huge pages are a node setting now, "
    "nodePools[].hugepagesGiB (every whole-node pod requests what its node reserves)",
}
"""Keys that used to exist, with where their setting lives now."""

KIND_WORDS: Final[dict[str, str]] = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of this section's keys",
    "model_attributes_type": "a mapping of this section's keys",
    "none_required": "nothing (null)",
}
"""What a stack may write where pydantic reports a value of the wrong type."""

QUOTE_HINT: Final = (
    " (YAML reads an unquoted number as a number, and drops what a number cannot hold: "
    "1.30 becomes 1.3; quote it)"
)


def problems_from_pydantic(errors: list[Any], root: type[StrictModel]) -> list[ConfigProblem]:
    """House-style problems for the errors of one document validated as ``root``.

    Args:
        errors: ``ValidationError.errors()`` of that validation.
        root: the model the document was validated as (its fields name the keys).

    """
    unknown = [error for error in errors if error["type"] == "extra_forbidden"]
    meant = {tuple(error["loc"]): _meant_key(root, tuple(error["loc"])) for error in unknown}
    explained = {(*loc[:-1], key) for loc, key in meant.items() if key is not None}
    problems = []
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] == "missing" and loc in explained:
            continue  # the key is there, misspelled; its did-you-mean says so
        problems.append(problem_from_pydantic(error, root, meant.get(loc)))
    return problems


def problem_from_pydantic(
    error: Any, root: type[StrictModel], meant: str | None = None
) -> ConfigProblem:
    """The house-style problem for one pydantic error.

    Args:
        error: one entry of ``ValidationError.errors()``.
        root: the model the document was validated as.
        meant: for an unknown key, the real key it is a misspelling of (None: none found).

    """
    loc: tuple[str | int, ...] = tuple(error["loc"])
    path = _path(loc)
    kind: str = error["type"]
    given = error.get("input", MISSING)
    if kind == "missing":
        field = _field_at(root, loc)
        description = field.description if field and field.description else ""
        return ConfigProblem(path, MISSING, f"a value here (required). {description}".strip())
    if kind == "extra_forbidden":
        moved = MOVED_KEYS.get(tuple(part for part in loc if isinstance(part, str)))
        if moved is not None:
            return ConfigProblem(path, given, moved)
        if meant is not None:
            return ConfigProblem(
                path, given, f"no such key: did you mean {meant}? (stack keys are camelCase)"
            )
        model = _model_at(root, loc[:-1])
        keys = sorted(f.alias or name for name, f in model.model_fields.items()) if model else []
        return ConfigProblem(path, given, "one of the keys " + ", ".join(keys))
    if kind == PRIVATE_KEY_ERROR:
        return ConfigProblem(path, "<a private key, not repeated here>", str(error["msg"]))
    return ConfigProblem(path, given, _allowed(kind, error, _field_at(root, loc)))


def _allowed(kind: str, error: Any, field: Any) -> str:
    """What may stand where ``error`` was found, in house words."""
    context: dict[str, Any] = error.get("ctx") or {}
    given = error.get("input")
    if kind in KIND_WORDS:
        words = KIND_WORDS[kind]
        if kind == "string_type" and isinstance(given, float):
            words += QUOTE_HINT
        return words
    if kind == "literal_error":
        expected = str(context.get("expected", ""))
        # Strings come quoted ("'a' or 'b'"), numbers bare ("0, 1 or 2").
        quoted = re.findall(r"'([^']*)'", expected)
        return "one of " + (", ".join(quoted) if quoted else expected.replace(" or ", ", "))
    if kind in ("too_short", "too_long"):
        count = context["min_length"] if kind == "too_short" else context["max_length"]
        if isinstance(given, str):
            return f"text of {'at least' if kind == 'too_short' else 'at most'} {count} characters"
        noun = "entr" if context.get("field_type") == "Dictionary" else "item"
        plural = (
            {"entr": "ies", "item": "s"}[noun] if count != 1 else {"entr": "y", "item": ""}[noun]
        )
        return f"{'at least' if kind == 'too_short' else 'at most'} {count} {noun}{plural}"
    if kind == "string_too_short":
        return f"text of at least {context['min_length']} character(s)"
    if kind == "string_too_long":
        return f"text of at most {context['max_length']} characters"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return _range(field, context)
    message = str(error["msg"])
    # our own validators (PydanticCustomError, ValueError) already speak the house style
    return message.removeprefix("Value error, ")


def _range(field: Any, context: dict[str, Any]) -> str:
    """The bounds of a numeric field, both when the field has both."""
    bounds: dict[str, Any] = dict(context)
    for item in getattr(field, "metadata", []):
        # Field(ge=..., le=...) keeps each bound as a metadata object with that attribute
        for name in ("ge", "le", "gt", "lt"):
            if getattr(item, name, None) is not None:
                bounds[name] = getattr(item, name)
    if "ge" in bounds and "le" in bounds:
        return f"a number from {bounds['ge']} to {bounds['le']}"
    parts = [
        f"{words} {bounds[name]}"
        for name, words in (
            ("ge", "at least"),
            ("gt", "more than"),
            ("le", "at most"),
            ("lt", "less than"),
        )
        if name in bounds
    ]
    return "a number of " + " and ".join(parts)


def _meant_key(root: type[StrictModel], loc: tuple[str | int, ...]) -> str | None:
    """The real key an unknown key at ``loc`` most likely means, or None."""
    key = loc[-1]
    model = _model_at(root, loc[:-1])
    if model is None or not isinstance(key, str):
        return None
    keys = [field.alias or name for name, field in model.model_fields.items()]
    return closest_match(key, keys, fold=_folded)


def _folded(key: str) -> str:
    """A key without case, ``_`` and ``-``: trainingZone, training_zone, TrainingZone fold alike."""
    return key.replace("_", "").replace("-", "").lower()


def _path(loc: tuple[str | int, ...]) -> str:
    text = CONFIG_KEY
    for part in loc:
        if part == "[key]":
            text += " (the key)"
        else:
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
    if not loc:
        return None
    model = _model_at(root, loc[:-1])
    last = loc[-1]
    return _by_alias(model, last) if model is not None and isinstance(last, str) else None


def _by_alias(model: type[StrictModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None
