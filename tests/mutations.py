"""Small edits of a stack's raw ``platform`` data, for tests of invalid configurations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Mutation = Callable[[dict[str, Any]], None]


def set_at(path: str, value: Any) -> Mutation:
    """Set a dotted key path (creating missing mappings)."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def delete_at(path: str) -> Mutation:
    """Delete the key at a dotted path."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


def both(*mutations: Mutation) -> Mutation:
    """Apply several mutations in order."""

    def mutate(data: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(data)

    return mutate


def without_slurm(data: dict[str, Any]) -> None:
    """Drop the Slurm section: for tests that remove the pools or the file system it needs."""
    data.pop("slurm", None)


def without_notebooks(data: dict[str, Any]) -> None:
    """Turn JupyterHub off: for tests that remove what it needs (the model store its homes
    live on) or change pools so that they get profiles whose images the stack names none of."""
    data.setdefault("notebooks", {})["enabled"] = False


def without_lustre(data: dict[str, Any]) -> None:
    """Drop the file system, and Slurm that needs it; the buckets stay reachable.

    With no association left, jobs reach the buckets only through the team roles, so each
    bucket gets ``teamAccess`` (config refuses a bucket nothing reaches).
    """
    storage = data.setdefault("storage", {})
    storage.pop("lustre", None)
    for bucket in storage.get("buckets", []):
        bucket["teamAccess"] = True
    without_slurm(data)


def without_teams(data: dict[str, Any]) -> None:
    """Drop every team, and the model store's publishers, which name teams.

    Config refuses a publisher that is no team (a stale name would make a team added later
    under it a publisher unasked), so a stack without teams has none.
    """
    data["teams"] = []
    store = data.get("modelStore")
    if store is not None:
        store.pop("publishers", None)
