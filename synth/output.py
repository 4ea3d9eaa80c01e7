"""Turn recorded registrations into the files a reviewer reads and CI checks."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from synth.engine import ResourceRecord

HELM_RELEASE_TYPE: Final = "kubernetes:helm.sh/v3:Release"
_NOT_OBJECTS: Final = (HELM_RELEASE_TYPE,)
_INTERNAL_INPUT_KEYS: Final = ("__defaults",)


@dataclass(frozen=True)
class WrittenStack:
    """Where one stack's files went and how many of each."""

    directory: Path
    resources: int
    manifests: int
    helm_releases: int


def is_kubernetes_object(record: ResourceRecord) -> bool:
    """True for a Kubernetes object the stack creates itself (core kind or custom resource)."""
    return (
        record.custom and record.type.startswith("kubernetes:") and record.type not in _NOT_OBJECTS
    )


def manifest_of(record: ResourceRecord) -> dict[str, Any]:
    """The Kubernetes object a resource record stands for, as it would be applied.

    ``apiVersion``, ``kind`` and ``metadata`` lead; the other fields follow in name order.
    """
    fields = {k: v for k, v in record.inputs.items() if k not in _INTERNAL_INPUT_KEYS}
    leading = [key for key in ("apiVersion", "kind", "metadata") if key in fields]
    ordered = leading + sorted(key for key in fields if key not in leading)
    return {key: fields[key] for key in ordered}


def manifest_file_name(manifest: dict[str, Any]) -> str:
    """``<kind>.<namespace or _cluster>.<name>.yaml`` for one object."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace") or "_cluster"
    return f"{manifest['kind']}.{namespace}.{metadata['name']}.yaml"


def helm_release_of(record: ResourceRecord) -> dict[str, Any]:
    """Chart, repository or OCI reference, version, namespace and values of a Helm release."""
    inputs = record.inputs
    chart = str(inputs.get("chart", ""))
    repository = (inputs.get("repositoryOpts") or {}).get("repo")
    return {
        "release": inputs.get("name", record.name),
        "chart": chart,
        "repository": repository if repository else (chart if chart.startswith("oci://") else None),
        "version": inputs.get("version"),
        "namespace": inputs.get("namespace"),
        "values": inputs.get("values") or {},
    }


def write_stack(records: list[ResourceRecord], directory: Path) -> WrittenStack:
    """Write ``resources.json``, ``manifests/`` and ``helm/`` for one stack into ``directory``.

    The directory is emptied first, so files of objects a change removed do not linger.
    """
    if directory.exists():
        shutil.rmtree(directory)
    manifests_dir = directory / "manifests"
    helm_dir = directory / "helm"
    manifests_dir.mkdir(parents=True)
    helm_dir.mkdir()
    (directory / "resources.json").write_text(
        json.dumps([record.to_json() for record in records], indent=2) + "\n"
    )
    manifests = 0
    releases = 0
    for record in records:
        if is_kubernetes_object(record):
            manifest = manifest_of(record)
            path = manifests_dir / manifest_file_name(manifest)
            if path.exists():
                raise ValueError(f"two objects would be written to {path.name}")
            path.write_text(yaml.safe_dump(manifest, sort_keys=False))
            manifests += 1
        elif record.type == HELM_RELEASE_TYPE:
            release = helm_release_of(record)
            (helm_dir / f"{release['release']}.yaml").write_text(
                yaml.safe_dump(release, sort_keys=False)
            )
            releases += 1
    return WrittenStack(directory, len(records), manifests, releases)


def summary(stack: str, written: WrittenStack, records: list[ResourceRecord]) -> str:
    """A short human summary: totals, then resource counts by type."""
    counts = Counter(record.type for record in records)
    lines = [
        f"{stack}: {written.resources} resources, {written.manifests} Kubernetes objects, "
        f"{written.helm_releases} Helm releases -> {written.directory}"
    ]
    width = max(len(kind) for kind in counts)
    lines += [f"  {kind:<{width}}  {count}" for kind, count in sorted(counts.items())]
    return "\n".join(lines)
