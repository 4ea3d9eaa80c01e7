"""The synthesized stack as the controllers see it: objects by kind and name, quantities, labels.

The jobs model reads only what synthesis wrote (the Kubernetes objects and the Helm releases'
values), so it judges exactly what a reviewer reads and what ``pulumi up`` would apply.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from kubernetes.utils.quantity import parse_quantity

from synth.engine import (
    EKS_CLUSTER_TYPE,
    ResourceRecord,
    mock_cluster_security_groups,
    mock_id,
)
from synth.output import HELM_RELEASE_TYPE, helm_release_of, is_kubernetes_object, manifest_of

Manifest = dict[str, Any]


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``8``, ``500m``, ``5Gi``) in base units (cores, bytes, counts)."""
    return Decimal(parse_quantity(str(value)))


def name_of(manifest: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return str((manifest.get("metadata") or {}).get("name", ""))


def namespace_of(manifest: Mapping[str, Any]) -> str | None:
    """``metadata.namespace`` (None for cluster-scoped objects)."""
    value = (manifest.get("metadata") or {}).get("namespace")
    return None if value is None else str(value)


def labels_of(manifest: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels``."""
    return {
        str(k): str(v) for k, v in ((manifest.get("metadata") or {}).get("labels") or {}).items()
    }


KUSTOMIZE_DIRECTORY_TYPE: Final = "kubernetes:kustomize/v2:Directory"


@dataclass(frozen=True)
class StackView:
    """Every Kubernetes object a stack creates, and its Helm releases' values by release name."""

    objects: list[Manifest]
    releases: dict[str, dict[str, Any]]
    kustomizations: tuple[str, ...] = ()
    """The directories of the kustomizations the stack applies (their objects render only at
    deploy time), e.g. the legacy Training Operator's."""
    cloud: list[Manifest] = field(default_factory=list)
    """The AWS resources (and the EKS cluster), each ``{"type", "name", "id", "inputs"}``: the
    id the offline synthesis gave it (:func:`synth.engine.mock_id`), which other resources'
    inputs name; the EKS cluster's ``inputs`` gain its ``nodeSecurityGroupId``. Empty: a view
    of Kubernetes objects only, whose cloud side is not judged."""

    @classmethod
    def from_records(cls, records: list[ResourceRecord]) -> StackView:
        """The view of a synthesis' resource records (what ``resources.json`` holds)."""
        objects = [manifest_of(record) for record in records if is_kubernetes_object(record)]
        releases = {}
        for record in records:
            if record.type == HELM_RELEASE_TYPE:
                release = helm_release_of(record)
                releases[str(release["release"])] = release
        kustomizations = tuple(
            str(record.inputs.get("directory"))
            for record in records
            if record.type == KUSTOMIZE_DIRECTORY_TYPE
        )
        cloud = []
        for record in records:
            if record.type == EKS_CLUSTER_TYPE:
                _, node_group = mock_cluster_security_groups(record.name)
                inputs = {**record.inputs, "nodeSecurityGroupId": node_group}
                cloud.append({"type": record.type, "name": record.name, "id": None,
                              "inputs": inputs})  # fmt: skip
            elif record.type.startswith("aws:") and record.custom:
                cloud.append({"type": record.type, "name": record.name,
                              "id": mock_id(record.type, record.name),
                              "inputs": dict(record.inputs)})  # fmt: skip
        return cls(objects, releases, kustomizations, cloud)

    def aws(self, resource_type: str) -> Iterator[Manifest]:
        """The cloud resources of ``resource_type`` (e.g. ``aws:efs/mountTarget:MountTarget``)."""
        return (r for r in self.cloud if r["type"] == resource_type)

    def of_kind(self, kind: str, namespace: str | None = None) -> Iterator[Manifest]:
        """Objects of ``kind`` (in ``namespace``, when given)."""
        for manifest in self.objects:
            if manifest.get("kind") != kind:
                continue
            if namespace is not None and namespace_of(manifest) != namespace:
                continue
            yield manifest

    def named(self, kind: str, name: str, namespace: str | None = None) -> Manifest | None:
        """The object of ``kind`` called ``name`` (in ``namespace`` for namespaced kinds)."""
        return next(
            (m for m in self.of_kind(kind, namespace) if name_of(m) == name),
            None,
        )

    def values(self, release: str) -> dict[str, Any] | None:
        """The values of a Helm release, or None when the stack does not install it."""
        found = self.releases.get(release)
        return None if found is None else dict(found.get("values") or {})


def requests_of(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """A container's resource requests in base units."""
    requests = (container.get("resources") or {}).get("requests") or {}
    return {str(name): quantity(value) for name, value in requests.items()}


def limits_of(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """A container's resource limits in base units."""
    limits = (container.get("resources") or {}).get("limits") or {}
    return {str(name): quantity(value) for name, value in limits.items()}
