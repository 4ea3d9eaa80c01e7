"""What changed between two syntheses of a stack: ``python -m synth diff <stack> --base DIR``.

Pure builders: :func:`load_synthesis` reads a written synthesis back, :func:`diff_syntheses`
compares two and :func:`render` puts the answer in words. Kubernetes objects and Helm releases
are compared as the files a reviewer reads (``manifests/``, ``helm/``); every other resource as
its ``resources.json`` record, by URN. Values the records mark secret stay masked.

Every changed resource and manifest is marked when the change replaces it (the providers' rules
in :mod:`synth.replacements`, plus the resource's own ``replaceOnChanges``); :func:`refusals`
lists the replacements of clusters, file systems, associations, buckets, keys and volumes,
which the command refuses unless ``--allow-replace`` is given. A retained PersistentVolume and
a claim bound to one hold no data of their own (:func:`deletes_no_data`): their replacements
are listed apart (:func:`retained_replacements`), with what they do to running jobs, and never
refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import yaml

from components.slurm.common import RELEASE as SLURM_RELEASE
from synth.engine import SECRET_MARK, UNKNOWN, ResourceRecord
from synth.output import (
    HELM_RELEASE_TYPE,
    is_kubernetes_object,
    manifest_file_name,
    manifest_of,
    resource_label,
)
from synth.replacements import (
    ASSOCIATION,
    INSTANCE,
    LATEST_VERSION,
    LATEST_VERSION_SOURCE,
    LAUNCH_TEMPLATE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    REFUSED,
    UNVERSIONED_TEMPLATE_KEYS,
    Replacement,
    kubernetes_type,
    replaced_through,
    replacing_changes,
    triggers_of,
)
from synth.yamlio import load_yaml

VALUE_WIDTH: Final = 60
"""Longest rendering of one old or new value before it is shortened."""
ABSENT: Final = "(absent)"
"""How a key that one side lacks is shown."""
_OPTION_FIELDS: Final = (
    "parent",
    "provider",
    "providers",
    "dependencies",
    "protect",
    "retainOnDelete",
    "deleteBeforeReplace",
    "replaceOnChanges",
    "ignoreChanges",
    "custom",
)
_INTERNAL_INPUT_KEYS: Final = ("__defaults",)
_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


class NoSynthesis(Exception):
    """The base directory holds no synthesis of the stack."""


@dataclass(frozen=True)
class Synthesis:
    """One stack's written synthesis, read back."""

    directory: Path
    resources: dict[str, ResourceRecord]
    """Records by URN."""
    manifests: dict[str, Any]
    """``manifests/<file>`` contents by file name."""
    helm: dict[str, Any]
    """``helm/<release>.yaml`` contents by file name."""


@dataclass(frozen=True)
class Change:
    """One key whose value differs; ``old`` or ``new`` is :data:`ABSENT` when a side lacks it."""

    key: str
    old: Any
    new: Any


@dataclass(frozen=True)
class Changed:
    """One resource or file present on both sides, and how it differs."""

    name: str
    changes: list[Change]
    replaced_by: list[Replacement] = field(default_factory=list)
    """The changes that replace it (empty: updated in place)."""
    resource_type: str = ""
    """Its Pulumi type token, where known."""
    retained: bool = False
    """A replaced PersistentVolume or claim whose replacement deletes no data
    (:func:`deletes_no_data`): listed apart, never refused."""
    renamed: bool = False
    """For a retained entry: its object had another name (file) in the base, so the new one is
    created before the old one is deleted."""
    released_volume: str = ""
    """For a retained claim that keeps its ``spec.volumeName``: that PersistentVolume, which
    this change leaves in place, so the new claim cannot bind it (:func:`_left_released`)."""

    @property
    def refused_as(self) -> str:
        """What it is when its replacement is refused (``file system``), else ``""``."""
        if not self.replaced_by or self.retained:
            return ""
        return REFUSED.get(self.resource_type, "")


@dataclass(frozen=True)
class SectionDiff:
    """Added, removed and changed entries of one kind (resources, manifests or Helm releases)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[Changed] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing was added, removed or changed."""
        return not (self.added or self.removed or self.changed)


@dataclass(frozen=True)
class SynthesisDiff:
    """Everything that differs between two syntheses of one stack."""

    resources: SectionDiff
    manifests: SectionDiff
    helm: SectionDiff
    collisions: list[str] = field(default_factory=list)
    """Added resources that AWS refuses while a removed one still exists (the engine creates
    before it deletes): :func:`association_collisions`."""
    protected: list[str] = field(default_factory=list)
    """Protected resources the change deletes or replaces, which the engine refuses:
    :func:`protected_refusals`."""
    drains: list[PoolDrain] = field(default_factory=list)
    """Accelerator pools the new synthesis no longer has, with what their removal drains
    (:func:`pool_drains`)."""
    moved_reservations: list[str] = field(default_factory=list)
    """Reservations whose pool now launches into another placement group
    (:func:`moved_reservations`)."""
    unlinked_releasing: list[str] = field(default_factory=list)
    """Associations on releasing paths that this change deletes (removed, moved or replaced):
    :func:`unlinked_releasing_associations`."""
    cluster_zones: list[str] = field(default_factory=list)
    """EKS clusters given subnets of zones they were not created in, which EKS refuses:
    :func:`cluster_zone_additions`."""
    gid_changes: list[GidChange] = field(default_factory=list)
    """Teams whose gid a replaced admin client's layout changes (:func:`gid_changes`)."""
    slurm_namespaces: list[str] = field(default_factory=list)
    """Slurm job-namespace settings that change (:func:`slurm_namespace_changes`): running jobs'
    new steps fail until their nodes drain."""
    metadata_exported_paths: list[str] = field(default_factory=list)
    """Where a gid changes: the association paths that export CHANGED files (each chgrp of the
    layout is exported as a metadata change), from :func:`metadata_exported_paths`."""

    @property
    def empty(self) -> bool:
        """True when the two syntheses are the same."""
        return self.resources.empty and self.manifests.empty and self.helm.empty


@dataclass(frozen=True)
class GidChange:
    """A team whose gid the admin client's user data changes (its layout's team line)."""

    team: str
    old: int
    new: int


@dataclass(frozen=True)
class PoolDrain:
    """An accelerator pool the new synthesis lacks (removed or renamed), and what goes with it."""

    pool: str
    """The pool's name (its ``trainingplatform.io/pool`` label)."""
    drained: list[str]
    """Removed manifests on the pool: its NodePools and EC2NodeClass, the Slurm node sets and
    the Trainer runtimes whose pods it ran."""
    placement_group: str = ""
    """Its EC2NodeClass's placement group, if it had one."""
    kept_by: str = ""
    """The new EC2NodeClass that launches into that group, if one does."""


def synthesis_directory(base: Path, stack: str) -> Path:
    """Where in ``base`` the stack's synthesis is: ``base/<stack>/`` or ``base`` itself.

    Args:
        base: an output root (``build/synth``) or one stack's directory (``build/synth/dev``).
        stack: the stack name.

    Raises:
        NoSynthesis: neither holds a ``resources.json``.

    """
    for directory in (base / stack, base):
        if (directory / "resources.json").is_file():
            return directory
    raise NoSynthesis(
        f"{base}: no synthesis of stack {stack} (expected {base / stack / 'resources.json'} or "
        f"{base / 'resources.json'})"
    )


def load_synthesis(directory: Path) -> Synthesis:
    """Read ``resources.json``, ``manifests/`` and ``helm/`` of one written synthesis.

    Args:
        directory: one stack's directory, as :func:`synth.output.write_stack` wrote it.

    Raises:
        NoSynthesis: a file is missing or cannot be parsed.

    """
    try:
        entries = json.loads((directory / "resources.json").read_text())
        records = [ResourceRecord.from_json(entry) for entry in entries]
        manifests = _yaml_files(directory / "manifests")
        helm = _yaml_files(directory / "helm")
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise NoSynthesis(f"{directory}: not a readable synthesis ({exc})") from None
    return Synthesis(directory, {r.urn: r for r in records}, manifests, helm)


def _yaml_files(directory: Path) -> dict[str, Any]:
    if not directory.is_dir():
        return {}
    return {path.name: load_yaml(path.read_text()) for path in sorted(directory.glob("*"))}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values of nested maps and lists by key path (``spec.limits.cpu``, ``args[0]``).

    A key that is not a plain identifier is quoted (``labels["karpenter.sh/nodepool"]``); an
    empty map or list is a leaf.

    Args:
        value: a JSON-like value.
        prefix: the path of ``value`` itself.

    """
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            step = (
                (f"{prefix}.{key}" if prefix else str(key))
                if _PLAIN_KEY.fullmatch(str(key))
                else f"{prefix}[{json.dumps(str(key))}]"
            )
            flat.update(flatten(item, step))
        return flat
    if isinstance(value, list) and value:
        flat = {}
        for index, item in enumerate(value):
            flat.update(flatten(item, f"{prefix}[{index}]"))
        return flat
    return {prefix: value}


def value_changes(old: Any, new: Any, prefix: str = "") -> list[Change]:
    """The key paths whose leaf values differ between ``old`` and ``new``, in path order.

    Args:
        old: the earlier value.
        new: the current value.
        prefix: a path to put before every key.

    """
    before, after = flatten(old, prefix), flatten(new, prefix)
    return [
        Change(key, before.get(key, ABSENT), after.get(key, ABSENT))
        for key in sorted(before.keys() | after.keys())
        if before.get(key, ABSENT) != after.get(key, ABSENT)
    ]


def _has_own_file(record: ResourceRecord) -> bool:
    return is_kubernetes_object(record) or record.type == HELM_RELEASE_TYPE


def _has_manifest(record: ResourceRecord) -> bool:
    """Whether the record is a Kubernetes object written to ``manifests/`` (it has a name)."""
    return is_kubernetes_object(record) and bool((record.inputs.get("metadata") or {}).get("name"))


def record_changes(old: ResourceRecord, new: ResourceRecord) -> list[Change]:
    """Changed inputs (by key path), then changed resource options (``option:<field>``).

    Args:
        old: the record in the base synthesis.
        new: the record with the same URN now.

    """
    changes = value_changes(_inputs(old), _inputs(new))
    before, after = old.to_json(), new.to_json()
    changes += [
        Change(f"option:{name}", before[name], after[name])
        for name in _OPTION_FIELDS
        if before[name] != after[name]
    ]
    return changes


def _inputs(record: ResourceRecord) -> dict[str, Any]:
    return {k: v for k, v in record.inputs.items() if k not in _INTERNAL_INPUT_KEYS}


def manifest_changes(old: Any, new: Any) -> list[Change]:
    """:func:`value_changes` of two manifests; a Secret's ``data`` and ``stringData`` masked.

    The engine already masks what the program marks secret; this keeps a Secret's payload out
    of the output even where the program did not.

    Args:
        old: the earlier manifest.
        new: the current manifest.

    """
    changes = value_changes(old, new)
    if "Secret" not in (_kind(old), _kind(new)):
        return changes
    return [
        Change(c.key, SECRET_MARK, SECRET_MARK)
        if c.key.split(".", 1)[0].split("[", 1)[0] in ("data", "stringData")
        else c
        for c in changes
    ]


def _kind(manifest: Any) -> Any:
    return manifest.get("kind") if isinstance(manifest, dict) else None


def _section(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    compare: Callable[[Any, Any], list[Change]],
    label: Callable[[str], str] = str,
    marked: Callable[[str, list[Change]], Changed] | None = None,
) -> SectionDiff:
    def changed_entry(key: str, changes: list[Change]) -> Changed:
        return marked(key, changes) if marked else Changed(label(key), changes)

    changed = sorted(
        (
            changed_entry(key, changes)
            for key in old.keys() & new.keys()
            if (changes := compare(old[key], new[key]))
        ),
        key=lambda entry: entry.name,
    )
    return SectionDiff(
        added=sorted(label(key) for key in new.keys() - old.keys()),
        removed=sorted(label(key) for key in old.keys() - new.keys()),
        changed=changed,
    )


def diff_syntheses(old: Synthesis, new: Synthesis) -> SynthesisDiff:
    """Compare two syntheses of one stack.

    Args:
        old: the base (earlier) synthesis.
        new: the current one.

    """

    def others(synthesis: Synthesis) -> dict[str, ResourceRecord]:
        return {u: r for u, r in synthesis.resources.items() if not _has_own_file(r)}

    def marked_resource(urn: str, changes: list[Change]) -> Changed:
        record = new.resources[urn]
        return _marked(
            resource_label(urn), record.type, changes, record.replace_on_changes, record.inputs
        )

    object_records = {
        manifest_file_name(manifest_of(r)): r for r in new.resources.values() if _has_manifest(r)
    }

    def marked_manifest(file_name: str, changes: list[Change]) -> Changed:
        record = object_records.get(file_name)
        manifest = new.manifests[file_name]
        resource_type = kubernetes_type(manifest) if isinstance(manifest, Mapping) else ""
        return _marked(
            file_name, resource_type, changes, record.replace_on_changes if record else []
        )

    resources, manifests = _cascaded(
        _section(others(old), others(new), record_changes, resource_label, marked_resource),
        _section(old.manifests, new.manifests, manifest_changes, marked=marked_manifest),
        old,
        new,
    )
    return SynthesisDiff(
        resources=resources,
        manifests=_with_retained_volumes(manifests, old, new),
        helm=_section(
            old.helm,
            new.helm,
            value_changes,
            marked=lambda name, changes: _marked(name, HELM_RELEASE_TYPE, changes, []),
        ),
        collisions=association_collisions(old, new),
        protected=protected_refusals(old, new, (*resources.changed, *manifests.changed)),
        drains=pool_drains(old, new),
        moved_reservations=moved_reservations(old, new),
        unlinked_releasing=unlinked_releasing_associations(old, new),
        cluster_zones=cluster_zone_additions(old, new),
        slurm_namespaces=slurm_namespace_changes(old, new),
        gid_changes=(changes := gid_changes(old, new)),
        metadata_exported_paths=metadata_exported_paths(new) if changes else [],
    )


def _cascaded(
    resources: SectionDiff, manifests: SectionDiff, old: Synthesis, new: Synthesis
) -> tuple[SectionDiff, SectionDiff]:
    """Both sections with every resource a replacement drags along marked replaced too.

    A resource whose replace-on-change input depends (the engine's property dependencies) on a
    replaced resource is replaced in turn, e.g. a new VPC block replaces the subnets, which
    replace the file system in them, whose associations and PersistentVolumes follow: followed
    until nothing more is reached. Kubernetes objects are entered under their manifest files.
    """

    def label(record: ResourceRecord) -> str:
        if _has_manifest(record):
            return manifest_file_name(manifest_of(record))
        return resource_label(record.urn)

    # Helm releases are compared as their values, not followed.
    followed = {
        urn: record
        for urn, record in new.resources.items()
        if _has_manifest(record) or not _has_own_file(record)
    }
    by_label = {label(record): urn for urn, record in followed.items()}
    changed = {
        by_label[c.name]: c for c in (*resources.changed, *manifests.changed) if c.name in by_label
    }
    replaced = {urn for urn, c in changed.items() if c.replaced_by}
    dragged: dict[str, list[Replacement]] = _latest_version_replacements(
        changed, followed, old, label
    )
    replaced |= set(dragged)
    grew = True
    while grew:
        grew = False
        for urn, record in followed.items():
            if urn in replaced or urn not in old.resources:
                continue
            triggers = triggers_of(record.type, record.replace_on_changes, record.inputs)
            for input_name, dependencies in sorted(record.property_dependencies.items()):
                cause = next((d for d in dependencies if d in replaced), None)
                rule = replaced_through(triggers, input_name) if cause else None
                if cause and rule:
                    cause_label = label(followed[cause])
                    dragged[urn] = [
                        Replacement(
                            input_name,
                            f"depends on {cause_label}, which is replaced: {rule.source}",
                        )
                    ]
                    replaced.add(urn)
                    grew = True
                    break
    if not dragged:
        return resources, manifests

    def merged(section: SectionDiff, own_files: bool) -> SectionDiff:
        entries = [c for c in section.changed if by_label.get(c.name) not in dragged]
        for urn, reasons in dragged.items():
            record = followed[urn]
            if _has_manifest(record) is not own_files:
                continue
            before = changed.get(urn)
            resource_type = record.type
            if own_files:
                manifest = new.manifests.get(label(record))
                resource_type = kubernetes_type(manifest) if isinstance(manifest, Mapping) else ""
            entries.append(
                Changed(
                    label(record),
                    before.changes if before else [],
                    [*(before.replaced_by if before else []), *reasons],
                    resource_type,
                )
            )
        return SectionDiff(section.added, section.removed, sorted(entries, key=lambda c: c.name))

    return merged(resources, own_files=False), merged(manifests, own_files=True)


def _latest_version_replacements(
    changed: Mapping[str, Changed],
    followed: Mapping[str, ResourceRecord],
    old: Synthesis,
    label: Callable[[ResourceRecord], str],
) -> dict[str, list[Replacement]]:
    """Instances launched from ``$Latest`` of a launch template this change gives a new version.

    An update of a launch template's data creates a new version (terraform-provider-aws
    internal/service/ec2/ec2_launch_template.go), and the instance's CustomizeDiff forces a new
    instance when its ``launch_template.version`` is ``$Latest`` and the template's latest version
    is no longer the instance's (internal/service/ec2/ec2_instance.go): the admin client is
    replaced by a change of its launch template alone.

    Args:
        changed: the changed entries by URN (updated in place or replaced).
        followed: the new synthesis's records that are followed, by URN.
        old: the base synthesis (an instance new in this change is created, not replaced).
        label: how a record is named in the diff.

    Returns:
        The replaced instances' URNs, each with the reason.
    """
    versioned = {
        urn
        for urn, c in changed.items()
        if urn in followed
        and followed[urn].type == LAUNCH_TEMPLATE
        and not c.replaced_by
        and any(
            change.key.split(".", 1)[0].split("[", 1)[0] not in UNVERSIONED_TEMPLATE_KEYS
            for change in c.changes
        )
    }
    found: dict[str, list[Replacement]] = {}
    for urn, record in followed.items():
        template = record.inputs.get("launchTemplate")
        if record.type != INSTANCE or urn not in old.resources or not isinstance(template, Mapping):
            continue
        if template.get("version") != LATEST_VERSION:
            continue
        cause = next(
            (d for d in record.property_dependencies.get("launchTemplate", []) if d in versioned),
            None,
        )
        if cause is not None:
            found[urn] = [
                Replacement(
                    "launchTemplate.version",
                    f"{LATEST_VERSION} of {label(followed[cause])}, which gets a new version:"
                    f" {LATEST_VERSION_SOURCE}",
                )
            ]
    return found


def _spec(manifest: Any) -> Mapping[str, Any]:
    spec = manifest.get("spec") if isinstance(manifest, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _of_type(manifest: Any, resource_type: str) -> bool:
    return isinstance(manifest, Mapping) and kubernetes_type(manifest) == resource_type


def _volume_file(manifests: Mapping[str, Any], name: Any) -> str | None:
    """The file of the PersistentVolume called ``name`` among ``manifests``, if there is one."""
    return next(
        (
            file_name
            for file_name, manifest in manifests.items()
            if _of_type(manifest, PERSISTENT_VOLUME)
            and (manifest.get("metadata") or {}).get("name") == name
        ),
        None,
    )


def deletes_no_data(manifest: Any, manifests: Mapping[str, Any]) -> bool:
    """Whether deleting this object of the base synthesis leaves the data it reaches in place.

    True for a PersistentVolume whose ``spec.persistentVolumeReclaimPolicy`` is ``Retain``, and
    for a claim whose ``spec.volumeName`` names such a PersistentVolume in ``manifests``.
    Deleting a claim releases its volume, and deleting a Retain volume, or releasing it, never
    touches its storage (kubernetes pkg/controller/volume/persistentvolume/pv_controller.go,
    reclaimVolume: nothing to do for Retain). The stack's Lustre volumes are such static,
    retained volumes; their data lives on the file system.

    Args:
        manifest: the object's manifest in the base synthesis (anything else: False).
        manifests: every manifest of the base synthesis, by file name.
    """

    # Only an explicit Retain counts. The API server defaults a PersistentVolume created
    # without the field to Retain, but a provisioned one gets its class's policy (Delete
    # unless the class says otherwise), and a manifest does not say which it is.
    def retained(volume: Any) -> bool:
        return _spec(volume).get("persistentVolumeReclaimPolicy") == "Retain"

    if _of_type(manifest, PERSISTENT_VOLUME):
        return retained(manifest)
    if not _of_type(manifest, PERSISTENT_VOLUME_CLAIM):
        return False
    volume_name = _spec(manifest).get("volumeName")
    volume_file = _volume_file(manifests, volume_name) if volume_name else None
    return volume_file is not None and retained(manifests[volume_file])


def _with_retained_volumes(section: SectionDiff, old: Synthesis, new: Synthesis) -> SectionDiff:
    """The manifests section with each replacement that deletes no data marked ``retained``.

    An entry's object in the base is found by its URN (an entry the cascade drags along is
    named by its new file, which a renamed object lacks in the base), else by its file.

    Args:
        section: the manifests section of the diff.
        old: the base synthesis.
        new: the current one.
    """
    replaced = {c.name for c in section.changed if c.replaced_by}
    urns = {
        manifest_file_name(manifest_of(r)): urn
        for urn, r in new.resources.items()
        if _has_manifest(r)
    }

    def base_file(file_name: str) -> str:
        record = old.resources.get(urns.get(file_name, ""))
        if record is None or not _has_manifest(record):
            return file_name
        return manifest_file_name(manifest_of(record))

    def marked(changed: Changed) -> Changed:
        base_name = base_file(changed.name)
        before = old.manifests.get(base_name)
        if not (changed.replaced_by and deletes_no_data(before, old.manifests)):
            return changed
        return replace(
            changed,
            retained=True,
            renamed=base_name != changed.name,
            released_volume=_left_released(
                before, new.manifests.get(changed.name), old, new, replaced
            ),
        )

    return SectionDiff(section.added, section.removed, [marked(c) for c in section.changed])


def _left_released(
    before: Any, after: Any, old: Synthesis, new: Synthesis, replaced: set[str]
) -> str:
    """The PersistentVolume a replaced claim names before and after, when the change keeps it.

    The old claim's deletion releases the volume, which keeps the old claim's uid in its
    ``spec.claimRef``; a Retain volume stays Released so (pv_controller.go, reclaimVolume),
    and a claim of the same name but another uid does not bind it: the new claim stays
    Pending (pv_controller.go, syncUnboundClaim: "volume already bound to a different claim";
    kubernetes component-helpers storage/volume/pv_helpers.go, IsVolumeBoundToClaim). A
    volume this change creates or replaces has no uid in its ``claimRef`` and binds.

    Args:
        before: the claim's manifest in the base synthesis.
        after: its manifest now.
        old: the base synthesis.
        new: the current one.
        replaced: the manifest files this change replaces.

    Returns:
        The volume's name, or ``""`` when the claim is not such a one.
    """
    if not _of_type(before, PERSISTENT_VOLUME_CLAIM):
        return ""
    volume_name = _spec(before).get("volumeName")
    if volume_name != _spec(after).get("volumeName"):
        return ""
    volume_file = _volume_file(new.manifests, volume_name)
    kept = volume_file is not None and volume_file in old.manifests and volume_file not in replaced
    return str(volume_name) if kept else ""


def _overlapping(path: str, other: str) -> bool:
    first, second = (p.rstrip("/") + "/" for p in (path, other))
    return first.startswith(second) or second.startswith(first)


def association_collisions(old: Synthesis, new: Synthesis) -> list[str]:
    """Added data repository associations that FSx refuses while a removed one exists.

    A moved ``fileSystemPath`` is a new association (they are named by it), which Pulumi
    creates before it deletes the old one; FSx gives every association of a file system its
    own directory and its own S3 prefix, neither overlapping another's (FSx for Lustre user
    guide, "Linking your file system to an S3 bucket"; CreateDataRepositoryAssociation fails
    otherwise), so the create fails while the old one holds them. Such a move takes two
    ``up``s: remove the association, then add it at its new path (docs/upgrades/0.1.0.md).

    Args:
        old: the base synthesis.
        new: the current one.

    Returns:
        One line per colliding pair, ``<added> collides with <removed>: <what they share>``.
    """

    def associations(synthesis: Synthesis, urns: set[str]) -> list[ResourceRecord]:
        return [r for u, r in synthesis.resources.items() if u in urns and r.type == ASSOCIATION]

    added = associations(new, new.resources.keys() - old.resources.keys())
    removed = associations(old, old.resources.keys() - new.resources.keys())
    found = []
    for created in added:
        for deleted in removed:
            shared = [
                f"{key} {created.inputs.get(key)!r} and {deleted.inputs.get(key)!r}"
                for key in ("fileSystemPath", "dataRepositoryPath")
                if isinstance(created.inputs.get(key), str)
                and isinstance(deleted.inputs.get(key), str)
                and _overlapping(created.inputs[key], deleted.inputs[key])
            ]
            same_file_system = created.inputs.get("fileSystemId") == deleted.inputs.get(
                "fileSystemId"
            )
            if shared and same_file_system:
                found.append(f"{created.name} collides with {deleted.name}: " + "; ".join(shared))
    return sorted(found)


RETAINED_PROTECTED: Final = "protected (and retained: a destroy would only forget it)"
"""How a protected resource that is also retained on delete is listed when the change removes it
(the engine refuses it for ``protect``; ``retainOnDelete`` alone would only drop it from the
state, pulumi pkg/resource/deploy/step.go, DeleteStep.Apply)."""
GATE_REFUSALS: Final = (
    "replacements refused",
    "protected resources refused",
    "creates AWS refuses",
    "reservations left behind",
    "cluster zones refused",
)
"""The headings of what makes ``synth diff --gate`` exit 1 (:func:`gate_refusals`), as
:func:`render` prints them."""


def gate_refusals(diff: SynthesisDiff, *, allow_replace: bool = False) -> list[str]:
    """Which of :data:`GATE_REFUSALS` the diff holds: what ``pulumi up`` refuses or breaks.

    Args:
        diff: what :func:`diff_syntheses` found.
        allow_replace: whether ``--allow-replace`` was given (replacements are then accepted;
            protected resources stay refused). Default false.
    """
    found = {
        "replacements refused": bool(refusals(diff)) and not allow_replace,
        "protected resources refused": bool(diff.protected),
        "creates AWS refuses": bool(diff.collisions),
        "reservations left behind": bool(diff.moved_reservations),
        "cluster zones refused": bool(diff.cluster_zones),
    }
    return [heading for heading in GATE_REFUSALS if found[heading]]


PROTECTED_NOTE: Final = (
    "    (pulumi up fails on each: unprotect it first (protectStatefulResources, or `pulumi state"
    " unprotect <urn>`) in an up of its own if deleting it and its data is meant)"
)
"""What to do about a protected resource the change deletes or replaces."""


def protected_refusals(old: Synthesis, new: Synthesis, changed: Iterable[Changed]) -> list[str]:
    """The protected resources this change deletes or replaces, which ``pulumi up`` refuses.

    The engine refuses to delete a resource whose state says ``protect`` (pulumi v3.272.0
    pkg/resource/deploy/step.go, DeleteStep.Apply: "cannot be deleted because it is
    protected"), so a protected resource gone from the program (Slurm or Trainer turned off,
    a team removed, a rename without an alias) fails the ``up``, and it refuses to replace one
    protected before and after (pkg/resource/deploy/step_generator.go, "unable to replace
    resource ... as it is currently marked for protection"). Component resources count too.

    Args:
        old: the base synthesis (its records' ``protect`` is the state's).
        new: the current one.
        changed: every changed entry of the diff (resources and manifests).

    Returns:
        ``<label>: deleted`` or ``<label>: replaced``, sorted; a Kubernetes object replaced is
        named by its manifest file, as the diff lists it. A protected resource gone from the
        program that is also retained on delete (``retainOnDelete``: prod's MariaDB and its
        namespace) is ``<label>:`` :data:`RETAINED_PROTECTED`: refused all the same, but its
        removal would delete nothing in the cluster or account.
    """
    found = [
        f"{resource_label(urn)}: {RETAINED_PROTECTED if record.retain_on_delete else 'deleted'}"
        for urn, record in old.resources.items()
        if record.protect and urn not in new.resources
    ]
    labels = {
        (manifest_file_name(manifest_of(r)) if _has_manifest(r) else resource_label(urn)): urn
        for urn, r in new.resources.items()
    }
    for entry in changed:
        urn = labels.get(entry.name, "")
        before, after = old.resources.get(urn), new.resources.get(urn)
        if entry.replaced_by and before and after and before.protect and after.protect:
            found.append(f"{entry.name}: replaced")
    return sorted(found)


EKS_CLUSTERS: Final = {
    "eks:index:Cluster": ("privateSubnetIds", "publicSubnetIds", "subnetIds"),
    "aws:eks/cluster:Cluster": ("vpcConfig",),
}
"""Cluster types and the inputs holding their own subnets (pulumi-eks 4.4.0
nodejs/eks/cluster/cluster.ts passes private and public subnet ids into the cluster's
``vpcConfig.subnetIds``)."""
SUBNET: Final = "aws:ec2/subnet:Subnet"
CLUSTER_ZONES_NOTE: Final = (
    "    (EKS refuses subnets outside the zones a cluster was created in, and the up fails"
    " after creating the zone's network: set network.clusterZones to the zones the cluster"
    " has; docs/how-to/add-an-environment.md, 'Add a zone to an environment that exists')"
)
"""What to do about a cluster given subnets of a new zone."""


def _cluster_subnet_zones(synthesis: Synthesis, record: ResourceRecord) -> dict[str, str]:
    """Zone -> label of the subnet there, for the subnets a cluster record's inputs name.

    Read from the record's property dependencies (the subnets' URNs), since records carry
    inputs, not the ids the provider would return; a subnet the stack does not create (an
    existing VPC's) has no record and no zone here.
    """
    zones = {}
    for key in EKS_CLUSTERS.get(record.type, ()):
        for urn in record.property_dependencies.get(key, []):
            subnet = synthesis.resources.get(urn)
            if subnet is not None and subnet.type == SUBNET:
                zone = subnet.inputs.get("availabilityZone")
                if isinstance(zone, str):
                    zones[zone] = resource_label(urn)
    return zones


def cluster_zone_additions(old: Synthesis, new: Synthesis) -> list[str]:
    """Existing EKS clusters this change gives a subnet of a zone they do not span.

    EKS UpdateClusterConfig takes new subnets only in the zones the cluster was created in
    (EKS user guide, networking requirements for VPC and subnets: "All subnets that you add
    must be in the same set of AZs as originally provided when you created the cluster"; also
    aws/containers-roadmap#2330), so the ``up`` fails on the cluster after creating the new
    zone's subnets, NAT gateway and routes. A cluster that is new has no such limit.

    Args:
        old: the base synthesis (the cluster's zones as deployed).
        new: the current one.

    Returns:
        ``<cluster label>: new zone <zone> (<subnet label>)``, one per zone, sorted.
    """
    found = []
    for urn, after in new.resources.items():
        before = old.resources.get(urn)
        if after.type not in EKS_CLUSTERS or before is None:
            continue
        had = _cluster_subnet_zones(old, before)
        for zone, subnet in sorted(_cluster_subnet_zones(new, after).items()):
            if had and zone not in had:
                found.append(f"{resource_label(urn)}: new zone {zone} ({subnet})")
    return sorted(found)


def _render_cluster_zones(diff: SynthesisDiff) -> list[str]:
    """The clusters given subnets of new zones (:func:`cluster_zone_additions`), refused."""
    if not diff.cluster_zones:
        return []
    return [
        f"  cluster zones refused: {len(diff.cluster_zones)}",
        *(f"    ! {entry}" for entry in diff.cluster_zones),
        CLUSTER_ZONES_NOTE,
    ]


RELEASE_SCHEDULE: Final = "aws:scheduler/schedule:Schedule"
_RELEASE_SCHEDULE_PATH: Final = re.compile(r"-release(/.*)$")


def releasing_paths(synthesis: Synthesis) -> set[str]:
    """File system paths a daily release task frees (their schedules, ``<storage>-release/p``)."""
    return {
        match.group(1)
        for record in synthesis.resources.values()
        if record.type == RELEASE_SCHEDULE and (match := _RELEASE_SCHEDULE_PATH.search(record.name))
    }


def unlinked_releasing_associations(old: Synthesis, new: Synthesis) -> list[str]:
    """Associations on a releasing path that the change deletes: removed, moved or replaced.

    FSx deletes such an association without deleting file-system data (the program sets
    ``delete_data_in_filesystem=False``) or anything in S3, but the path is then linked to no
    bucket: a released file is a stub whose data only S3 holds, which nothing can restore any
    more, and a file not yet exported is never exported (FSx for Lustre User Guide, "Deleting
    an association to an S3 bucket"; the provider replaces it on ``file_system_id``,
    ``file_system_path`` or ``data_repository_path``, terraform-provider-aws
    internal/service/fsx/data_repository_association.go).

    Args:
        old: the base synthesis.
        new: the current one.

    Returns:
        ``<name> (<path>)`` for each, sorted.
    """
    releasing = releasing_paths(old)
    found = []
    for urn, record in old.resources.items():
        path = record.inputs.get("fileSystemPath")
        if record.type != ASSOCIATION or not isinstance(path, str):
            continue
        if normalized_path(path) not in releasing:
            continue
        now = new.resources.get(urn)
        kept = now is not None and all(
            now.inputs.get(key) == record.inputs.get(key)
            for key in ("fileSystemId", "fileSystemPath", "dataRepositoryPath")
        )
        if not kept:
            found.append(f"{record.name} ({path})")
    return sorted(found)


def normalized_path(path: str) -> str:
    """A file system path without a trailing slash (``/`` stays)."""
    return path.rstrip("/") or "/"


def _marked(
    name: str,
    resource_type: str,
    changes: list[Change],
    replace_on_changes: list[str],
    record_inputs: Mapping[str, Any] | None = None,
) -> Changed:
    """A changed entry with the changes that replace it (options never do)."""
    inputs = [(c.key, c.old, c.new) for c in changes if not c.key.startswith("option:")]
    replaced_by = replacing_changes(
        triggers_of(resource_type, replace_on_changes, record_inputs), inputs, absent=ABSENT
    )
    return Changed(name, changes, replaced_by, resource_type)


POOL_LABEL: Final = "trainingplatform.io/pool"
"""The node label naming a node's pool (components/node_pools.py POOL_LABEL), which every
object bound to a pool carries (metadata labels, node selectors, affinity terms)."""


NODE_POOL_LABEL: Final = "karpenter.sh/nodepool"
"""The node label naming a node's NodePool (a NodeOverlay selects its pool's nodes by it)."""


def _pool_names(manifest: Any, label: str = POOL_LABEL) -> set[str]:
    """Every value ``manifest`` gives ``label`` (a label, selector or tag key), at any depth."""
    found: set[str] = set()
    if isinstance(manifest, Mapping):
        for key, value in manifest.items():
            if key == label and isinstance(value, str):
                found.add(value)
            else:
                found |= _pool_names(value, label)
        if manifest.get("key") == label and isinstance(manifest.get("values"), list):
            found |= {str(v) for v in manifest["values"]}  # a requirement or affinity term
    elif isinstance(manifest, list):
        for item in manifest:
            found |= _pool_names(item, label)
    return found


def _on_pool(file_name: str, manifests: Mapping[str, Any], pool: str) -> bool:
    """Whether a manifest runs on ``pool``.

    It does when it names the pool, or one of the pool's NodePools, or scales an object that
    does (a ScaledObject's ``scaleTargetRef``).
    """
    manifest = manifests[file_name]
    if pool in _pool_names(manifest):
        return True
    node_pools = {
        str(m["metadata"]["name"])
        for m in manifests.values()
        if _of_type(m, "kubernetes:karpenter.sh/v1:NodePool") and pool in _pool_names(m)
    }
    if node_pools & _pool_names(manifest, NODE_POOL_LABEL):
        return True
    target = _spec(manifest).get("scaleTargetRef")
    if not isinstance(target, Mapping):
        return False
    namespace = manifest.get("metadata", {}).get("namespace")
    return any(
        isinstance(m, Mapping)
        and m.get("kind") == target.get("kind")
        and m.get("metadata", {}).get("name") == target.get("name")
        and m.get("metadata", {}).get("namespace") == namespace
        and pool in _pool_names(m)
        for m in manifests.values()
    )


def _node_pool_pools(synthesis: Synthesis) -> set[str]:
    """The accelerator and CPU pools of a synthesis, by their NodePools' pool label."""
    return {
        pool
        for manifest in synthesis.manifests.values()
        if _of_type(manifest, "kubernetes:karpenter.sh/v1:NodePool")
        for pool in _pool_names(manifest)
    }


def _node_classes(synthesis: Synthesis) -> dict[str, Mapping[str, Any]]:
    """EC2NodeClass specs by object name."""
    return {
        str(manifest["metadata"]["name"]): _spec(manifest)
        for manifest in synthesis.manifests.values()
        if _of_type(manifest, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    }


def _group_of(spec: Mapping[str, Any]) -> str:
    selector = spec.get("placementGroupSelector")
    return str(selector.get("name", "")) if isinstance(selector, Mapping) else ""


def pool_drains(old: Synthesis, new: Synthesis) -> list[PoolDrain]:
    """The pools ``new`` no longer has, each with the removed manifests that ran on it.

    A renamed pool is a removed one and an added one: Karpenter deletes the NodeClaims of a
    deleted NodePool (they carry an ownerReference to it), so every node of the old pool is
    drained and its jobs stop; the Slurm node set and the Trainer runtimes on it go with it
    (jobs submitted to them fail to resolve) and come back under the new name.

    Args:
        old: the base synthesis.
        new: the current one.
    """
    gone = _node_pool_pools(old) - _node_pool_pools(new)
    removed = sorted(old.manifests.keys() - new.manifests.keys())
    classes = _node_classes(old)
    groups = {_group_of(spec): name for name, spec in _node_classes(new).items()}
    drains = []
    for pool in sorted(gone):
        group = _group_of(classes.get(pool, {}))
        drains.append(
            PoolDrain(
                pool,
                [f for f in removed if _on_pool(f, old.manifests, pool)],
                group,
                groups.get(group, "") if group else "",
            )
        )
    return drains


def _reservation_terms(spec: Mapping[str, Any]) -> str:
    terms = spec.get("capacityReservationSelectorTerms")
    return json.dumps(terms, sort_keys=True) if terms else ""


def moved_reservations(old: Synthesis, new: Synthesis) -> list[str]:
    """Capacity reservations whose node class now launches into another placement group.

    A reservation made for a cluster placement group only serves launches into that group
    (EC2 user guide, "Capacity Reservations in cluster placement groups"), so a reserved pool
    renamed without ``placementGroupName`` (or given another) launches nowhere: Karpenter's
    reserved offerings fail with insufficient capacity. Matched by the reservation selector
    terms (ids or tags), whichever node class carries them.

    Args:
        old: the base synthesis.
        new: the current one.

    Returns:
        One line per node class, ``<reservations>: placement group <old> -> <new>``.
    """
    before = {
        _reservation_terms(spec): (name, _group_of(spec))
        for name, spec in _node_classes(old).items()
        if _reservation_terms(spec) and _group_of(spec)
    }
    found = []
    for name, spec in sorted(_node_classes(new).items()):
        terms = _reservation_terms(spec)
        if terms not in before:
            continue
        old_name, old_group = before[terms]
        if _group_of(spec) != old_group:
            found.append(
                f"EC2NodeClass {name} (was {old_name}) launches into placement group "
                f"{_group_of(spec) or '(none)'!r}, but its reservations {terms} were made for "
                f"{old_group!r}: set placementGroupName: {old_group} on the pool"
            )
    return found


def refusals(diff: SynthesisDiff) -> list[Changed]:
    """The changed resources whose replacement would destroy data or the cluster."""
    return [c for c in (*diff.resources.changed, *diff.manifests.changed) if c.refused_as]


def retained_replacements(diff: SynthesisDiff) -> list[Changed]:
    """The replaced PersistentVolumes and claims that :func:`deletes_no_data` lets through."""
    return [c for c in diff.manifests.changed if c.replaced_by and c.retained]


def _is_secret(value: Any) -> bool:
    return value == SECRET_MARK or (isinstance(value, str) and SECRET_MARK in value)


def shorten(value: Any, width: int = VALUE_WIDTH) -> str:
    """One value as compact JSON, cut to ``width`` characters with ``...``.

    :data:`ABSENT` and the engine's unknown marker are shown as words.

    Args:
        value: a leaf value (or a whole resource option).
        width: the longest rendering kept whole.

    """
    if value == ABSENT:
        return ABSENT
    if value == UNKNOWN:
        return "(known after deploy)"
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def render_change(change: Change) -> str:
    """``key: old -> new``; a value either side marks secret shows as the mark on both."""
    if _is_secret(change.old) or _is_secret(change.new):
        return f"{change.key}: {SECRET_MARK} -> {SECRET_MARK} (secret; value not shown)"
    old, new = _from_first_difference(change.old, change.new)
    return f"{change.key}: {shorten(old)} -> {shorten(new)}"


def _from_first_difference(old: Any, new: Any, context: int = 15) -> tuple[Any, Any]:
    """Two long strings from a little before where they differ, the common start as ``...``.

    Anything else comes back unchanged.
    """
    if not (isinstance(old, str) and isinstance(new, str)) or ABSENT in (old, new):
        return old, new
    common = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
        min(len(old), len(new)),
    )
    if common <= context or max(len(old), len(new)) <= VALUE_WIDTH:
        return old, new
    return "..." + old[common - context :], "..." + new[common - context :]


def count_line(diff: SynthesisDiff) -> str:
    """``N added, N removed, N changed`` over the three sections."""
    sections = (diff.resources, diff.manifests, diff.helm)
    added = sum(len(s.added) for s in sections)
    removed = sum(len(s.removed) for s in sections)
    changed = sum(len(s.changed) for s in sections)
    return f"{added} added, {removed} removed, {changed} changed"


def render(stack: str, base: Path, diff: SynthesisDiff, *, allow_replace: bool = False) -> str:
    """The diff in words: per section ``+`` added, ``-`` removed, ``~`` changed with its keys.

    A changed entry that would be replaced says ``(replaced)`` and each replacing key names the
    rule behind it; refused replacements are listed last, then the retained volumes and claims
    replaced (:func:`retained_replacements`) with what replacing them does.

    Args:
        stack: the stack name, leading the first line.
        base: the base synthesis directory, named in the first line.
        diff: what :func:`diff_syntheses` found.
        allow_replace: whether ``--allow-replace`` was given (refusals become notes).
            Default false.

    """
    if diff.empty:
        return f"{stack}: no changes against {base}"
    lines = [f"{stack}: {count_line(diff)} against {base}"]
    for title, section in (
        ("resources", diff.resources),
        ("manifests/", diff.manifests),
        ("helm/", diff.helm),
    ):
        if section.empty:
            continue
        lines.append(
            f"  {title}: {len(section.added)} added, {len(section.removed)} removed, "
            f"{len(section.changed)} changed"
        )
        lines += [f"    + {name}" for name in section.added]
        lines += [f"    - {name}" for name in section.removed]
        for changed in section.changed:
            lines += _render_changed(changed)
    refused = refusals(diff)
    if refused:
        verb = "allowed (--allow-replace)" if allow_replace else "refused"
        lines.append(f"  replacements {verb}: {len(refused)}")
        lines += [f"    ! {c.refused_as}: {c.name}" for c in refused]
        if not allow_replace:
            kinds = {c.refused_as for c in refused}
            if kinds - {"association"}:
                lines.append(
                    "    (the old one is deleted with its data; pass --allow-replace if that is"
                    " meant)"
                )
            if "association" in kinds:
                lines.append(ASSOCIATION_REPLACED_NOTE)
    if diff.protected:
        lines.append(f"  protected resources refused: {len(diff.protected)}")
        lines += [f"    ! {entry}" for entry in diff.protected]
        lines.append(PROTECTED_NOTE)
    lines += _render_cluster_zones(diff)
    lines += _render_rerun(rerun_replacements(diff), diff)
    lines += _render_retained(retained_replacements(diff))
    if diff.unlinked_releasing:
        lines.append(f"  associations on releasing paths deleted: {len(diff.unlinked_releasing)}")
        lines += [f"    ! {association}" for association in diff.unlinked_releasing]
        lines.append(UNLINKED_RELEASING_NOTE)
    if diff.collisions:
        lines.append(f"  creates AWS refuses: {len(diff.collisions)}")
        lines += [f"    ! {collision}" for collision in diff.collisions]
        lines.append(
            "    (remove the old association in one up, add the new one in the next:"
            " docs/upgrades/0.1.0.md, 'Subnet addresses and association names')"
        )
    lines += _render_drains(diff)
    if diff.slurm_namespaces:
        lines.append(f"  Slurm job namespaces change: {len(diff.slurm_namespaces)}")
        lines += [f"    ! {change}" for change in diff.slurm_namespaces]
        lines.append(SLURM_NAMESPACE_NOTE)
    return "\n".join(lines)


SLURM_RELEASE_FILE: Final = f"{SLURM_RELEASE}.yaml"
SLURM_NAMESPACE_KEYS: Final = (
    ("controller", "extraConfMap", "NamespaceType"),
    ("configFiles", "namespace.yaml"),
)
"""Where the slurm chart's values say how jobs get their namespaces (components/slurm/
sharing.py)."""
SLURM_NAMESPACE_NOTE: Final = (
    "    (drain every Slurm node and let its jobs end before this up: a job that started "
    "without the namespaces cannot start another step or take an adopted ssh session once "
    "slurmd reloads (SchedMD/slurm slurm-26-05-3-1 src/slurmd/slurmd/req.c, "
    "src/plugins/namespace/linux/namespace_linux.c); docs/upgrades/index.md, 'Slurm as a "
    "shared service on a running stack')"
)


def slurm_namespace_changes(old: Synthesis, new: Synthesis) -> list[str]:
    """The job-namespace settings of the slurm release that differ, as ``key: old -> new``.

    slurmctld restarts with the new slurm.conf and tells every slurmd to reconfigure
    (``reconfig_on_restart``: slurm-operator v1.2.1 internal/builder/controllerbuilder/
    controller_config.go); a slurmd that reloads a new namespace setting applies it to the
    steps of jobs that started under the old one, which fail to join a namespace they never had
    (namespace.yaml(5), NOTES: "disruptive to jobs already running").
    """

    def setting(synthesis: Synthesis, path: tuple[str, ...]) -> Any:
        node: Any = (synthesis.helm.get(SLURM_RELEASE_FILE) or {}).get("values") or {}
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    if SLURM_RELEASE_FILE not in new.helm:
        return []
    found = []
    for path in SLURM_NAMESPACE_KEYS:
        before, after = setting(old, path), setting(new, path)
        if before != after:
            found.append(f"{'.'.join(path)}: {shorten(before)} -> {shorten(after)}")
    return found


def _render_drains(diff: SynthesisDiff) -> list[str]:
    """The pools removed or renamed with what each drains, then the reservations moved."""
    lines = []
    if diff.drains:
        lines.append(f"  pools removed or renamed, their nodes drained: {len(diff.drains)}")
        for drain in diff.drains:
            lines.append(f"    - pool {drain.pool}: {len(drain.drained)} objects go")
            lines += [f"        {name}" for name in drain.drained]
            if drain.placement_group and drain.kept_by:
                lines.append(
                    f"        placement group {drain.placement_group} stays, used by "
                    f"EC2NodeClass {drain.kept_by}"
                )
        lines.append(
            "    (Karpenter deletes a removed NodePool's nodes and the jobs on them stop; its"
            " runtimes and node sets come back under the new name only)"
        )
    if diff.moved_reservations:
        lines.append(f"  reservations left behind: {len(diff.moved_reservations)}")
        lines += [f"    ! {line}" for line in diff.moved_reservations]
    return lines


ASSOCIATION_REPLACED_NOTE: Final = (
    "    (a replaced association is deleted without deleting file-system data or anything in S3"
    " (delete_data_in_filesystem: false); until the new one exists its path imports and exports"
    " nothing; pass --allow-replace if that is meant)"
)
"""What replacing an association does, which the data note of other kinds would misstate."""
UNLINKED_RELEASING_NOTE: Final = (
    "    (FSx deletes the association without deleting file-system data or anything in S3, but"
    " released stubs and files not yet exported stay behind on the path, linked to no bucket:"
    " no read can restore a stub, and a file not yet exported never reaches S3. Restore the"
    " path's released files, export it and wait for the task, then change:"
    " docs/concepts/data-and-checkpoints.md, 'Replacing or moving a releasing association')"
)
"""What deleting an association on a releasing path leaves behind (:func:`render`)."""
CLAIMS_NOTE: Final = (
    "    (a claim holds no data, which stays on the file system, but deleting a claim waits until"
    " no pod mounts it: stop the jobs that mount it before up, or up fails after its delete"
    " timeout with the claim Terminating, and the next up finishes once they end)"
)
"""What replacing a retained claim does (:func:`_render_retained`)."""
VOLUMES_NOTE: Final = (
    "    (Retain: deleting it leaves its storage alone, but it is deleted before it is created"
    " again under the same name, and that waits while a claim is bound to it: up fails after its"
    " delete timeout with the volume Terminating unless the claim is deleted first; a volume"
    " given a new name is created first, and its claim follows)"
)
"""What replacing a retained PersistentVolume under its own name does."""


_RERUN_LAYOUT: Final = (
    "    (user_data_replace_on_change: the old instance is terminated first (deleteBeforeReplace,"
    " its address is fixed) and a new one boots, mounts the file system and runs the layout"
    " again: every listed team's directories get their group, mode and project again and its"
    " quota is set (none where removed); directories of teams no longer listed stay, with"
    " their data; then it stops."
)
RERUN_NOTE: Final = _RERUN_LAYOUT + " Jobs keep running; nothing is refused)"
"""What replacing the Lustre admin client does (components/storage/layout.py, layout_script)
when no team's gid changes."""
RERUN_GID_NOTE: Final = (
    _RERUN_LAYOUT
    + " A team whose gid changes is not safe with jobs running: a running pod keeps the old gid"
    " as its supplemental group, so once the layout moves the team's files and directories to"
    " the new gid it loses the group's access (group write on the 2770 directories). Stop the"
    " team's jobs before the up and start them after it; the layout moves the team's files of"
    " the old group and its quota project to the new gid (docs/concepts/data-and-checkpoints.md,"
    " 'Changing a team's gid'))"
)
"""What replacing the admin client does when a team's gid changes (:func:`gid_changes`)."""

_TEAM_LINE: Final = re.compile(
    r"^\s*'(?P<team>[a-z0-9][a-z0-9-]*) (?P<gid>\d+) (?P<quota>\d+)'$", re.M
)
"""One team line of the layout's ``teams`` array: ``'<team> <gid> <quota GiB>'``
(components/storage/layout.py, layout_script)."""


def layout_gids(user_data: str) -> dict[str, int]:
    """The gid of each team an admin client's user data lays out (its team lines).

    Args:
        user_data: the instance's ``userData`` input (the layout script, as synthesized).
    """
    return {m.group("team"): int(m.group("gid")) for m in _TEAM_LINE.finditer(user_data)}


def gid_changes(old: Synthesis, new: Synthesis) -> list[GidChange]:
    """Teams laid out on both sides whose gid changes in an instance's user data.

    A new gid replaces the admin client (its user data changes), whose layout then moves the
    team's files of the old group and its quota project (components/storage/layout.py,
    ``_regroup_lines``). Teams added or removed are not gid changes.

    Args:
        old: the base synthesis.
        new: the current one.

    Returns:
        One entry per team, sorted by team.
    """
    found: dict[str, GidChange] = {}
    for urn, record in old.resources.items():
        now = new.resources.get(urn)
        if record.type != INSTANCE or now is None:
            continue
        before, after = record.inputs.get("userData"), now.inputs.get("userData")
        if not isinstance(before, str) or not isinstance(after, str):
            continue
        old_gids, new_gids = layout_gids(before), layout_gids(after)
        for team in old_gids.keys() & new_gids.keys():
            if old_gids[team] != new_gids[team]:
                found[team] = GidChange(team, old_gids[team], new_gids[team])
    return [found[team] for team in sorted(found)]


def metadata_exported_paths(synthesis: Synthesis) -> list[str]:
    """File system paths whose association exports ``CHANGED`` files to S3.

    FSx exports a changed file's metadata too (FSx for Lustre User Guide, "Automatically export
    updates to your S3 bucket": CHANGED covers content and metadata changes), so every file a
    gid change moves to the new group is exported again.

    Args:
        synthesis: the synthesis whose associations are read (the new one).
    """
    found = set()
    for record in synthesis.resources.values():
        path = record.inputs.get("fileSystemPath")
        s3 = record.inputs.get("s3")
        if record.type != ASSOCIATION or not isinstance(path, str) or not isinstance(s3, Mapping):
            continue
        policy = s3.get("autoExportPolicy")
        events = policy.get("events") if isinstance(policy, Mapping) else None
        if isinstance(events, list) and "CHANGED" in events:
            found.add(normalized_path(path))
    return sorted(found)


def rerun_replacements(diff: SynthesisDiff) -> list[Changed]:
    """The instances replaced because their user data changed: the admin client, rebooted.

    It boots again and runs its layout (terraform-provider-aws
    internal/service/ec2/ec2_instance.go, ``customdiff.ForceNewIf("user_data")`` when
    ``user_data_replace_on_change``), and so it does when a new version of the launch template
    it uses as ``$Latest`` replaces it (:func:`_latest_version_replacements`).

    Args:
        diff: what :func:`diff_syntheses` found.
    """
    return [
        c
        for c in diff.resources.changed
        if c.resource_type == INSTANCE
        and any(r.key in ("userData", "launchTemplate.version") for r in c.replaced_by)
    ]


def _render_rerun(replaced: list[Changed], diff: SynthesisDiff) -> list[str]:
    """The replaced instances, what their layout does, and the teams whose gid changes."""
    if not replaced:
        return []
    lines = [f"  instances that boot again: {len(replaced)}"]
    lines += [f"    ! {c.name}" for c in replaced]
    if not diff.gid_changes:
        return [*lines, RERUN_NOTE]
    lines += [
        f"    ! team {c.team}: gid {c.old} -> {c.new}: stop its jobs before the up"
        for c in diff.gid_changes
    ]
    lines.append(RERUN_GID_NOTE)
    if diff.metadata_exported_paths:
        lines.append(
            f"    (on {', '.join(diff.metadata_exported_paths)} (exportEvents CHANGED) each file"
            " the layout moves to the new group is a metadata change FSx exports to S3: one"
            " export per file of the team there)"
        )
    return lines


def _render_retained(retained: list[Changed]) -> list[str]:
    """The block of replaced retained claims, then the one of replaced retained volumes.

    A claim's deletion waits for its pods (the kubernetes.io/pvc-protection finalizer, kubernetes
    pkg/controller/volume/pvcprotection), and pulumi-kubernetes deletes an object replaced under
    its own name before it creates the new one (provider/pkg/provider/provider.go, Diff:
    deleteBeforeReplace when the name stays), so the old claim must go while jobs still run.

    Args:
        retained: what :func:`retained_replacements` found.
    """
    claims = [c for c in retained if c.resource_type == PERSISTENT_VOLUME_CLAIM]
    lines = []
    if claims:
        lines.append(f"  claims replaced: {len(claims)}")
        for claim in claims:
            line = f"    ! volume claim: {claim.name}"
            if claim.released_volume:
                line += (
                    f" (its PersistentVolume {claim.released_volume} stays, Released with the old"
                    " claim's uid in spec.claimRef: the new claim stays Pending until that uid is"
                    " removed)"
                )
            lines.append(line)
        lines.append(CLAIMS_NOTE)
    # A renamed volume is created first and the old one deleted last, after its claim, which
    # releases it; that deletion does not wait, so it is not listed. A volume replaced under its
    # own name is: pulumi-kubernetes deletes it first, while its claim is still bound, and the
    # kubernetes.io/pv-protection finalizer holds a Bound volume (kubernetes
    # pkg/controller/volume/pvprotection, isBeingUsed). The engine deletes the claim first
    # only when the claim is replaced through a property dependency on the volume itself.
    volumes = [c for c in retained if c.resource_type == PERSISTENT_VOLUME and not c.renamed]
    if volumes:
        lines.append(f"  volumes replaced under their own name: {len(volumes)}")
        lines += [f"    ! volume: {c.name}" for c in volumes]
        lines.append(VOLUMES_NOTE)
    return lines


def _render_changed(changed: Changed) -> list[str]:
    replacing = {r.key: r for r in changed.replaced_by}
    lines = [f"    ~ {changed.name}" + (" (replaced)" if replacing else "")]
    for change in changed.changes:
        lines.append(f"        {render_change(change)}")
        if change.key in replacing:
            lines.append(f"          replaces it: {replacing[change.key].source}")
    keys = {change.key for change in changed.changes}
    for replacement in changed.replaced_by:
        if replacement.key not in keys:
            lines.append(f"        {replacement.key}: {replacement.source}")
    return lines
