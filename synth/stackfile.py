"""Read the project file and a stack file the way the Pulumi CLI would, without the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from components.config import CONFIG_KEY
from synth.yamlio import SAFE_LOADER, load_yaml

REPOSITORY_ROOT: Final = Path(__file__).resolve().parent.parent
SECURE_PLACEHOLDER: Final = "SYNTH-PLACEHOLDER-SECURE-VALUE"
"""What a ``secure:`` value becomes offline, where it cannot be decrypted."""


class StackFileError(Exception):
    """A stack or project file that cannot be read; the message is one line."""


@dataclass(frozen=True)
class StackFile:
    """One stack's configuration as the engine would inject it."""

    project: str
    """Project name from Pulumi.yaml (the namespace of the stack's own keys)."""
    stack: str
    """Stack name, e.g. ``dev``."""
    config: dict[str, Any]
    """Every config key, namespaced (``<project>:platform``, ``aws:region``), secure values
    replaced by :data:`SECURE_PLACEHOLDER`."""
    secret_keys: list[str]
    """Keys that held at least one ``secure:`` value."""

    @property
    def platform(self) -> Any:
        """The raw value of the structured ``platform`` key (None when absent)."""
        return self.config.get(f"{self.project}:{CONFIG_KEY}")

    def engine_config(self) -> dict[str, str]:
        """The config map in the engine's form: every value a string, objects as JSON."""
        return {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in self.config.items()
        }


def project_settings(root: Path = REPOSITORY_ROOT) -> tuple[str, Path]:
    """The project name and the directory holding the stack files."""
    document = _load_yaml(root / "Pulumi.yaml")
    if not isinstance(document, dict) or not isinstance(document.get("name"), str):
        raise StackFileError(f"{root / 'Pulumi.yaml'}: no project name")
    return document["name"], root / str(document.get("stackConfigDir", "."))


def stack_names(root: Path = REPOSITORY_ROOT) -> list[str]:
    """Every stack that has a ``Pulumi.<stack>.yaml`` file, sorted."""
    _, stacks_dir = project_settings(root)
    return sorted(
        path.name[len("Pulumi.") : -len(".yaml")] for path in stacks_dir.glob("Pulumi.*.yaml")
    )


def load_stack(stack: str, root: Path = REPOSITORY_ROOT) -> StackFile:
    """Load ``Pulumi.<stack>.yaml`` from the project's stack config directory."""
    project, stacks_dir = project_settings(root)
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names(root)) or "none"
        raise StackFileError(f"no stack file {path}; stacks: {known}")
    return stack_from_document(project, stack, _load_yaml(path), str(path))


def stack_from_document(project: str, stack: str, document: Any, source: str) -> StackFile:
    """Build a :class:`StackFile` from a parsed stack document.

    Args:
        project: project name; keys without a namespace belong to it.
        stack: stack name.
        document: the parsed YAML (a mapping with a ``config`` mapping).
        source: where the document came from, for error messages.

    """
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise StackFileError(f"{source}: expected a mapping at the top level")
    raw_config = document.get("config") or {}
    if not isinstance(raw_config, dict):
        raise StackFileError(f"{source}: 'config' must be a mapping")
    config: dict[str, Any] = {}
    secret_keys: list[str] = []
    for key, value in raw_config.items():
        full_key = key if ":" in key else f"{project}:{key}"
        replaced, had_secret = _replace_secure(value)
        config[full_key] = replaced
        if had_secret:
            secret_keys.append(full_key)
    return StackFile(project=project, stack=stack, config=config, secret_keys=secret_keys)


def _replace_secure(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECURE_PLACEHOLDER, True
        found = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[key], item_secret = _replace_secure(item)
            found = found or item_secret
        return out, found
    if isinstance(value, list):
        pairs = [_replace_secure(item) for item in value]
        return [item for item, _ in pairs], any(secret for _, secret in pairs)
    return value, False


def _repeated_key(node: yaml.Node | None) -> tuple[str, int, int] | None:
    """The first mapping key written twice under ``node``: (key, first line, second line).

    YAML keeps the last of two equal keys without a word (PyYAML's constructor), so a second
    ``observability:`` block would silently drop the first's settings.
    """
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    return key.value, seen[key.value], key.start_mark.line + 1
                seen[key.value] = key.start_mark.line + 1
            found = _repeated_key(value)
            if found is not None:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found = _repeated_key(item)
            if found is not None:
                return found
    return None


def _load_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
        repeated = _repeated_key(yaml.compose(text, Loader=SAFE_LOADER))
        if repeated is not None:
            key, first, second = repeated
            raise StackFileError(
                f"{path} line {second}: key '{key}' is written twice (lines {first} and "
                f"{second}); YAML keeps only the last, so merge them into one"
            )
        return load_yaml(text)
    except FileNotFoundError:
        raise StackFileError(f"{path}: not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise StackFileError(f"{path}{where}: not valid YAML") from None
