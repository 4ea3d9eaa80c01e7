"""Node selector requirements, evaluated the way Kubernetes and Karpenter evaluate them.

One source for two readers: the policy pack, which must recognise an accelerated NodePool
however its requirements select instances (by type, family, category or GPU count), and the
offline job model, which needs the instance types a NodePool can launch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from components.catalog import CATALOG, InstanceType, cpu_architecture

Labels = dict[str, set[str]]
"""Label key -> the values a node may carry for it."""

# Karpenter v1.14.1 pkg/providers/instancetype/types.go: instanceTypeScheme gives the
# category (letters before the generation) and generation of an instance type.
_INSTANCE_TYPE_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
_KARPENTER_AWS = "karpenter.k8s.aws/"
# Labels whose value (or absence) on an instance type the catalog decides. Any other label
# (capacity type, zone, memory in MiB, ...) a catalog entry may or may not satisfy.
CATALOG_LABELS = frozenset({
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    *(_KARPENTER_AWS + name for name in (
        "instance-family", "instance-size", "instance-category", "instance-generation",
        "instance-cpu", "instance-local-nvme", "instance-capability-flex",
        "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count",
        "instance-accelerator-name", "instance-accelerator-manufacturer",
        "instance-accelerator-count",
    )),
})  # fmt: skip


def expression_holds(expression: Mapping[str, Any], labels: Labels) -> bool:
    """Whether one ``matchExpressions`` entry (or NodePool requirement) can hold.

    As kubernetes pkg/apis/core/v1/helper and Karpenter's scheduling.Requirement: ``NotIn`` and
    ``DoesNotExist`` hold where the label is absent; ``Gt``/``Lt`` compare integers.

    Args:
        expression: ``{key, operator, values}``.
        labels: the values a node may carry per label key (absent key: the node lacks it).
    """
    key = str(expression.get("key"))
    operator = expression.get("operator")
    wanted = {str(value) for value in expression.get("values") or []}
    present = labels.get(key)
    if operator == "Exists":
        return present is not None
    if operator == "DoesNotExist":
        return present is None
    if operator == "In":
        return present is not None and bool(present & wanted)
    if operator == "NotIn":
        return present is None or bool(present - wanted)
    if operator in ("Gt", "Lt") and present is not None and len(wanted) == 1:
        bound = int(next(iter(wanted)))
        numbers = [int(v) for v in present if v.lstrip("-").isdigit()]
        return any(n > bound if operator == "Gt" else n < bound for n in numbers)
    return False


def karpenter_labels(entry: InstanceType) -> dict[str, str]:
    """The well-known labels Karpenter gives a node of ``entry`` (those the catalog decides).

    Karpenter v1.14.1 pkg/providers/instancetype/types.go computeRequirements: GPU labels
    come from EC2 GpuInfo (NVIDIA types), accelerator labels from NeuronInfo (Trainium), names
    lower-kebab-cased; a label missing here is absent on the node.
    """
    family, size = entry.name.split(".", 1)
    labels = {
        "node.kubernetes.io/instance-type": entry.name,
        "kubernetes.io/arch": "arm64" if cpu_architecture(entry.name) == "arm64" else "amd64",
        _KARPENTER_AWS + "instance-family": family,
        _KARPENTER_AWS + "instance-size": size,
        _KARPENTER_AWS + "instance-cpu": str(entry.vcpu),
        _KARPENTER_AWS + "instance-capability-flex": str("-flex" in family).lower(),
    }
    scheme = _INSTANCE_TYPE_SCHEME.match(entry.name)
    if scheme:
        labels[_KARPENTER_AWS + "instance-category"] = scheme.group(1)
        labels[_KARPENTER_AWS + "instance-generation"] = scheme.group(3)
    if entry.nvme_gb:
        labels[_KARPENTER_AWS + "instance-local-nvme"] = str(entry.nvme_gb)
    model = entry.accelerator_model.lower().replace(" ", "-")
    kind = "gpu" if entry.accelerator == "nvidia" else "accelerator"
    labels[f"{_KARPENTER_AWS}instance-{kind}-name"] = model
    labels[f"{_KARPENTER_AWS}instance-{kind}-manufacturer"] = (
        "nvidia" if entry.accelerator == "nvidia" else "aws"
    )
    labels[f"{_KARPENTER_AWS}instance-{kind}-count"] = str(entry.accelerators)
    return labels


def catalog_types_admitted(requirements: Iterable[Mapping[str, Any]]) -> list[InstanceType]:
    """Catalog instance types a NodePool's requirements let Karpenter launch, by name.

    Only labels the catalog decides can rule a type out; a requirement on any other label
    (zone, capacity type) leaves every type possible. A pool with no instance requirement
    admits every accelerated type: Karpenter would buy one for a pod that asks for GPUs.

    Args:
        requirements: ``spec.template.spec.requirements`` of a NodePool.
    """
    relevant = [r for r in requirements if str(r.get("key")) in CATALOG_LABELS]
    admitted = []
    for entry in CATALOG.values():
        labels = {key: {value} for key, value in karpenter_labels(entry).items()}
        if all(expression_holds(requirement, labels) for requirement in relevant):
            admitted.append(entry)
    return sorted(admitted, key=lambda entry: entry.name)
