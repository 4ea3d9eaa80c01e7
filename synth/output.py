"""Turn recorded registrations into the files a reviewer reads and CI checks."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from synth.chart_pods import chart_pods
from synth.engine import ResourceRecord
from synth.pods import pods_of
from synth.reference import MissingReference
from synth.terraform import terraform_plan
from synth.yamlio import dump_yaml

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
    pods: int = 0
    """Pods written to ``pods/``: what the custom resources' controllers would run."""
    notes: tuple[str, ...] = ()
    """What was left out of the files and why (the CLI prints each on stderr)."""


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
    """Write one stack's ``resources.json``, ``manifests/``, ``helm/``, ``pods/`` and plan files.

    ``pods/`` holds the pods its custom resources stand for (:mod:`synth.pods`);
    ``terraform-plan.json`` its AWS resources as a Terraform plan shows them
    (:mod:`synth.terraform`), for scanners that read Terraform. The directory
    is emptied first, so files of objects a change removed do not linger.
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
    manifests: dict[str, Any] = {}
    releases: dict[str, Any] = {}
    for record in records:
        if is_kubernetes_object(record):
            manifest = manifest_of(record)
            path = manifests_dir / manifest_file_name(manifest)
            if path.exists():
                raise ValueError(f"two objects would be written to {path.name}")
            path.write_text(dump_yaml(manifest))
            manifests[path.name] = manifest
        elif record.type == HELM_RELEASE_TYPE:
            release = helm_release_of(record)
            (helm_dir / f"{release['release']}.yaml").write_text(dump_yaml(release))
            releases[release["release"]] = release
    notes: list[str] = []
    try:
        rebuilt = chart_pods(releases)
    except MissingReference as exc:
        rebuilt = []
        notes.append(chart_pods_skipped(exc))
    pods = pods_of(manifests, releases, rebuilt)
    pods_dir = directory / "pods"
    pods_dir.mkdir()
    for name, pod in pods.items():
        (pods_dir / name).write_text(dump_yaml(pod))
    (directory / "terraform-plan.json").write_text(
        json.dumps(terraform_plan(records), indent=1) + "\n"
    )
    return WrittenStack(
        directory, len(records), len(manifests), len(releases), len(pods), tuple(notes)
    )


def chart_pods_skipped(missing: MissingReference) -> str:
    """The one line that says the observability charts' pods are not in ``pods/``, and why.

    Args:
        missing: the reference file that was not there.
    """
    return (
        f"WARNING: no chart pods in pods/: reference data missing ({missing.path}), so the "
        "observability charts' pods (kube-prometheus-stack, dcgm-exporter) are neither written "
        "nor scanned; get it with scripts/fetch-reference or set "
        "TRAINING_PLATFORM_REFERENCE_DIR (README, 'Reference data')"
    )


def resource_label(urn: str) -> str:
    """``<type> <name>`` of a URN (``urn:pulumi:<stack>::<project>::<parents$type>::<name>``).

    Anything that is not such a URN comes back unchanged.

    Args:
        urn: a resource's URN.

    """
    parts = urn.split("::")
    if not urn.startswith("urn:pulumi:") or len(parts) < 4:
        return urn
    return f"{parts[2].rsplit('$', 1)[-1]} {'::'.join(parts[3:])}"


def top_level_components(records: list[ResourceRecord]) -> dict[str, ResourceRecord]:
    """Each record's top-level component, by the record's URN.

    The top-level components are read off the resource tree: when the program registers one
    root component (``TrainingPlatform``) they are the components directly under it (network,
    cluster, karpenter, ...), and the root's own resources and the root itself count as the
    root's; otherwise every root is one. A record belongs to the top-level component it sits
    under, a component to itself.

    Args:
        records: every registered resource (parents before children is not required).

    """
    by_urn = {record.urn: record for record in records}
    roots = [record for record in records if record.parent not in by_urn]
    tops = {root.urn for root in roots}
    wrapper = roots[0] if len(roots) == 1 and not roots[0].custom else None
    if wrapper is not None:
        tops = {r.urn for r in records if r.parent == wrapper.urn and not r.custom} | {wrapper.urn}
    owner: dict[str, ResourceRecord] = {}
    for record in records:
        current = record
        seen = {current.urn}
        while current.urn not in tops and current.parent in by_urn:
            current = by_urn[current.parent]
            if current.urn in seen:
                break
            seen.add(current.urn)
        owner[record.urn] = current
    return owner


def component_label(component: ResourceRecord) -> str:
    """``<name> (<Type>)`` of a component, e.g. ``network (Network)``."""
    return f"{component.name} ({component.type.rsplit(':', 1)[-1]})"


def component_counts(records: list[ResourceRecord]) -> list[tuple[str, int]]:
    """Resources per top-level component (see :func:`top_level_components`), in label order.

    The counts include each component's own record, so they add up to ``len(records)``.

    Args:
        records: every registered resource.

    """
    owner = top_level_components(records)
    counts = Counter(component_label(owner[record.urn]) for record in records)
    return sorted(counts.items())


def summary(
    stack: str, written: WrittenStack, records: list[ResourceRecord], *, long: bool = False
) -> str:
    """A short human summary: totals, then resource counts by top-level component.

    Args:
        stack: stack name, leading the first line.
        written: where the files went and how many of each.
        records: every registered resource.
        long: also list resource counts by type (``--long``).

    """
    lines = [
        f"{stack}: {written.resources} resources, {written.manifests} Kubernetes objects, "
        f"{written.helm_releases} Helm releases -> {written.directory}"
    ]
    lines += _table("resources by component", component_counts(records))
    if long:
        lines += _table("resources by type", sorted(Counter(r.type for r in records).items()))
    return "\n".join(lines)


def _table(title: str, counts: list[tuple[str, int]]) -> list[str]:
    """``  title:`` then one indented ``label  count`` row per entry, counts aligned."""
    if not counts:
        return [f"  {title}: none"]
    width = max(len(label) for label, _ in counts)
    digits = max(len(str(count)) for _, count in counts)
    return [f"  {title}:"] + [f"    {label:<{width}}  {count:>{digits}}" for label, count in counts]
