"""Karpenter's decisions: the NodePools a pod can use, what their types offer, their limits.

Modelled on kubernetes-sigs/karpenter v1.14.1 and aws/karpenter-provider-aws v1.14.1:
- a pod is provisioned for when its PodScheduled condition says Unschedulable, whoever its
  scheduler is (pkg/utils/pod/scheduling.go, IsProvisionable);
- a NodePool is a candidate when the pod tolerates its ``taints`` (not its startupTaints) and its
  selector and required affinity hold for the NodePool's labels and requirements
  (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go, scheduler.go);
- an instance type fits when the pod's requests plus the DaemonSets that would run there fit its
  allocatable (pkg/controllers/provisioning/scheduling/nodeclaim.go); allocatable is capacity
  less kube-reserved, eviction threshold and huge pages (pkg/cloudprovider/types.go), capacity
  as the provider computes it (pkg/providers/instancetype/types.go: no huge pages unless a
  NodeOverlay adds them, pkg/controllers/nodeoverlay/, with the ``nodeOverlay`` gate on);
- NodePool ``limits`` bound the summed capacity of its nodes, ``nodes`` counting one each
  (pkg/controllers/state/cluster.go, pkg/apis/v1/nodepool.go);
- a bound claim's PersistentVolume adds its ``nodeAffinity`` terms as alternatives to the
  node's requirements (pkg/controllers/provisioning/scheduling/volumetopology.go,
  getPersistentVolumeRequirements), as the scheduler's VolumeBinding filter requires of a node.
"""

from __future__ import annotations

import email
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from components.catalog import InstanceType, cpu_architecture
from components.requirements import Labels, catalog_types_admitted
from components.workloads import NodeAllocatable, node_allocatable
from synth.jobs.placement import required_affinity_holds, selector_holds, untolerated
from synth.jobs.view import StackView, labels_of, name_of, quantity

NODE_POOL_LABEL: Final = "karpenter.sh/nodepool"
NODE_CLASS_LABEL: Final = "karpenter.k8s.aws/ec2nodeclass"
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
KARPENTER_RELEASE: Final = "karpenter"
GIB: Final = Decimal(2**30)
MIB: Final = Decimal(2**20)
_USER_DATA_PAGES = re.compile(r"^pages=(\d+)$", re.MULTILINE)


def reserved_hugepages_gib(node_class: Mapping[str, Any]) -> int:
    """Huge pages a node of this EC2NodeClass reserves at boot, GiB.

    Only an AL2023 node runs the user data's shell parts (cloud-init, before nodeadm starts the
    kubelet); Karpenter reads a Bottlerocket class's user data as TOML and an AL2023 one as MIME
    when it starts with a MIME header (karpenter-provider-aws v1.14.1
    pkg/providers/amifamily/bootstrap/nodeadm.go, bottlerocket.go).
    """
    aliases = [str(t.get("alias", "")) for t in node_class.get("amiSelectorTerms") or []]
    text = str(node_class.get("userData") or "")
    if not text or not any(alias.startswith("al2023@") for alias in aliases):
        return 0
    message = email.message_from_string(text)
    if not message.is_multipart():
        return 0
    pages = 0
    for part in message.walk():
        if part.get_content_type() == "text/x-shellscript":
            found = _USER_DATA_PAGES.search(str(part.get_payload()))
            pages = max(pages, int(found.group(1)) if found else 0)
    return pages * 2 // 1024


@dataclass(frozen=True)
class NodePoolShape:
    """One NodePool as Karpenter schedules onto it."""

    name: str
    instance_types: list[InstanceType]
    labels: Labels
    """Labels its nodes may carry: template labels, requirements, Karpenter's own."""
    taints: list[dict[str, Any]]
    startup_taints: list[dict[str, Any]]
    limits: dict[str, Decimal]
    efa_interfaces: int
    """EFA-only interfaces its EC2NodeClass attaches (what ``vpc.amazonaws.com/efa`` counts)."""
    overlay: dict[str, Decimal] = field(default_factory=dict)
    """Capacity NodeOverlays add for it in Karpenter's simulation (empty with the gate off)."""
    reserved_hugepages_gib: int = 0
    """Huge pages its nodes really reserve at boot (EC2NodeClass user data), GiB."""

    def labels_for(self, instance: InstanceType) -> Labels:
        """The labels of this NodePool's node of ``instance``."""
        return {
            **self.labels,
            INSTANCE_TYPE_LABEL: {instance.name},
            "kubernetes.io/arch": {
                "arm64" if cpu_architecture(instance.name) == "arm64" else "amd64"
            },
        }

    def allocatable(self, instance: InstanceType, *, simulated: bool) -> NodeAllocatable:
        """What one node offers: in Karpenter's simulation, or on the running node."""
        if simulated:
            hugepages = int(self.overlay.get("hugepages-2Mi", Decimal(0)) / GIB)
        else:
            hugepages = self.reserved_hugepages_gib
        return node_allocatable(
            instance,
            efa_interfaces=self.efa_interfaces,
            hugepages_gib=hugepages,
            as_scheduled_by_karpenter=simulated,
        )

    def node_limit(self) -> int:
        """Most nodes the limits allow (each node counted at its largest type's capacity)."""
        caps: list[int] = []
        if "nodes" in self.limits:
            caps.append(int(self.limits["nodes"]))
        for instance in self.instance_types:
            per_node = {
                "cpu": Decimal(instance.vcpu),
                "memory": Decimal(instance.memory_gib) * GIB,
                instance.accelerator_resource: Decimal(instance.accelerators),
            }
            for resource, amount in per_node.items():
                if resource in self.limits and amount:
                    caps.append(int(self.limits[resource] / amount))
        return min(caps) if caps else 0


def node_overlays_enabled(view: StackView) -> bool:
    """Whether Karpenter runs with the ``nodeOverlay`` feature gate (chart value)."""
    values = view.values(KARPENTER_RELEASE) or {}
    gates = (values.get("settings") or {}).get("featureGates") or {}
    return bool(gates.get("nodeOverlay"))


def _requirement_labels(requirements: list[Mapping[str, Any]]) -> Labels:
    labels: Labels = {}
    for requirement in requirements:
        if requirement.get("operator") == "In":
            labels[str(requirement["key"])] = {str(v) for v in requirement.get("values") or []}
    return labels


def _overlay_capacity(view: StackView, pool: str, labels: Labels) -> dict[str, Decimal]:
    """Capacity the NodeOverlays add to a NodePool's types, highest weight first.

    Two overlays of the same weight that set the same resource conflict, and Karpenter applies
    neither (pkg/controllers/nodeoverlay/controller.go, store.go).
    """
    capacity: dict[str, Decimal] = {}
    weights: dict[str, int] = {}
    conflicts: set[str] = set()
    overlays = sorted(
        view.of_kind("NodeOverlay"), key=lambda o: -int((o.get("spec") or {}).get("weight", 0))
    )
    for overlay in overlays:
        spec = overlay.get("spec") or {}
        if not required_affinity_holds(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": spec.get("requirements") or []}]
                    }
                }
            },
            {**labels, NODE_POOL_LABEL: {pool}},
        ):
            continue
        weight = int(spec.get("weight", 0))
        for resource, amount in (spec.get("capacity") or {}).items():
            name = str(resource)
            if name in capacity and weights[name] == weight:
                conflicts.add(name)
            elif name not in capacity:
                capacity[name], weights[name] = quantity(amount), weight
    return {name: amount for name, amount in capacity.items() if name not in conflicts}


def node_pools(view: StackView) -> list[NodePoolShape]:
    """Every NodePool of the stack with its EC2NodeClass and NodeOverlays applied."""
    classes = {name_of(c): c.get("spec") or {} for c in view.of_kind("EC2NodeClass")}
    overlays_on = node_overlays_enabled(view)
    shapes = []
    for pool in view.of_kind("NodePool"):
        name = name_of(pool)
        spec = pool.get("spec") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        requirements = list(template_spec.get("requirements") or [])
        labels = _requirement_labels(requirements)
        types = catalog_types_admitted(requirements)
        class_name = str((template_spec.get("nodeClassRef") or {}).get("name"))
        node_class = classes.get(class_name, {})
        interfaces = node_class.get("networkInterfaces") or []
        labels.update({k: {v} for k, v in labels_of(template).items()})
        labels[NODE_POOL_LABEL] = {name}
        labels[NODE_CLASS_LABEL] = {class_name}
        labels.setdefault("kubernetes.io/os", {"linux"})
        shapes.append(
            NodePoolShape(
                name=name,
                instance_types=types,
                labels=labels,
                taints=list(template_spec.get("taints") or []),
                startup_taints=list(template_spec.get("startupTaints") or []),
                limits={str(k): quantity(v) for k, v in (spec.get("limits") or {}).items()},
                efa_interfaces=sum(1 for i in interfaces if i.get("interfaceType") == "efa-only"),
                overlay=_overlay_capacity(view, name, labels) if overlays_on else {},
                reserved_hugepages_gib=reserved_hugepages_gib(node_class),
            )
        )
    return shapes


def volume_node_terms(
    view: StackView, namespace: str | None, pod: Mapping[str, Any]
) -> list[list[list[dict[str, Any]]]]:
    """Per claim of the pod, the alternative node requirements its PersistentVolume sets.

    Each entry is one volume's OR'd terms, each term a list of AND'd expressions. A claim or
    volume the stack does not create adds nothing (a claim made by hand is not modelled).

    Args:
        view: the stack's objects.
        namespace: the pod's namespace (claims are namespaced).
        pod: the pod spec.
    """
    found: list[list[list[dict[str, Any]]]] = []
    for volume in pod.get("volumes") or []:
        claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        claim = (
            view.named("PersistentVolumeClaim", str(claim_name), namespace) if claim_name else None
        )
        volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
        persistent = view.named("PersistentVolume", str(volume_name)) if volume_name else None
        affinity = ((persistent or {}).get("spec") or {}).get("nodeAffinity") or {}
        terms = (affinity.get("required") or {}).get("nodeSelectorTerms") or []
        alternatives = [list(t["matchExpressions"]) for t in terms if t.get("matchExpressions")]
        if alternatives:
            found.append(alternatives)
    return found


def with_volume_topology(
    pod: Mapping[str, Any], volume_terms: list[list[list[dict[str, Any]]]]
) -> dict[str, Any]:
    """The pod with its volumes' node requirements ANDed into its required node affinity.

    Karpenter keeps them beside the pod's own (volumetopology.go, GetRequirements: the cross
    product of every volume's alternatives); for where a node may come from the two read alike.

    Args:
        pod: the pod spec.
        volume_terms: :func:`volume_node_terms` of the pod.
    """
    if not volume_terms:
        return dict(pod)
    affinity = dict(pod.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    combined = [
        list(term.get("matchExpressions") or []) for term in required.get("nodeSelectorTerms") or []
    ] or [[]]
    for alternatives in volume_terms:
        combined = [own + theirs for own in combined for theirs in alternatives]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchExpressions": term} for term in combined]
    }
    affinity["nodeAffinity"] = node_affinity
    return {**pod, "affinity": affinity}


def candidate_pools(pod: Mapping[str, Any], pools: list[NodePoolShape]) -> list[NodePoolShape]:
    """The NodePools Karpenter may launch a node from for ``pod``."""
    tolerations = list(pod.get("tolerations") or [])
    found = []
    for pool in pools:
        if untolerated(tolerations, pool.taints):
            continue
        if any(
            selector_holds(pod.get("nodeSelector") or {}, pool.labels_for(t))
            and required_affinity_holds(pod.get("affinity"), pool.labels_for(t))
            for t in pool.instance_types
        ):
            found.append(pool)
    return found


def _base_amount(allocatable: NodeAllocatable, resource: str) -> Decimal:
    """An allocatable amount in the base units of requests (cores, bytes, counts)."""
    if resource == "cpu":
        return Decimal(allocatable.cpu_millis) / 1000
    if resource in ("memory", "hugepages-2Mi"):
        return Decimal(allocatable.amount(resource)) * MIB
    return Decimal(allocatable.amount(resource))


def shortfalls(
    requests: Mapping[str, Decimal], allocatable: NodeAllocatable, overhead: Mapping[str, Decimal]
) -> Iterator[str]:
    """Resources of which ``requests`` plus DaemonSet ``overhead`` exceed a node's allocatable."""
    for resource in sorted(set(requests) | set(overhead)):
        wanted = requests.get(resource, Decimal(0)) + overhead.get(resource, Decimal(0))
        if wanted and wanted > _base_amount(allocatable, resource):
            yield resource


def pods_per_node(requests: Mapping[str, Decimal], allocatable: NodeAllocatable) -> int:
    """How many pods of ``requests`` one node holds (0 when one does not fit)."""
    counts = [
        int(_base_amount(allocatable, resource) / amount)
        for resource, amount in requests.items()
        if amount > 0
    ]
    return max(min(counts), 0) if counts else 1
