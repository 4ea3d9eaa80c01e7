"""A reachability model of Kubernetes NetworkPolicies (ingress), written from the API's rules.

It answers "may this source reach this pod on this port?" the way networking.k8s.io/v1 defines
it (kubernetes website, "Network Policies"; the NetworkPolicy API reference), independently of
the builders it checks:

* a pod is isolated for ingress when some policy of its namespace selects it and lists
  ``Ingress`` in ``policyTypes`` (absent: ``Ingress``, plus ``Egress`` when egress rules exist);
  a pod no policy selects accepts everything;
* an isolated pod accepts a connection when any selecting policy has a rule whose ``from``
  matches the source (absent or empty ``from``: every source) and whose ``ports`` match the
  destination port (absent or empty: every port; a rule port without ``protocol`` is TCP, one
  without ``port`` every port of its protocol, ``endPort`` a range);
* a peer with only ``podSelector`` selects pods of the policy's own namespace; with only
  ``namespaceSelector`` every pod of the selected namespaces; with both, pods selected in
  those namespaces; ``ipBlock`` addresses in ``cidr`` and not in ``except`` (pods are matched
  by their own addresses too, but the cases here give external sources only);
* label selectors AND their ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists,
  DoesNotExist); an empty selector selects everything.

Egress (:meth:`Cluster.may_send`) mirrors it: a pod is isolated for egress when a policy of its
namespace selects it and lists ``Egress``; a ``to`` peer matches the destination pod as a
``from`` peer matches a source, and an ``ipBlock`` the destination pod's address.

Not modelled: named ports, and what the VPC CNI adds on top (it always admits the node's own
address, for the kubelet's probes).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Pod:
    """A pod: its namespace and labels."""

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Address:
    """A source outside the cluster's pods, by IP address."""

    ip: str


Source = Pod | Address


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector selects an object with ``labels`` (empty selects all)."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class Cluster:
    """Namespaces (with their labels) and the NetworkPolicies in them."""

    def __init__(
        self,
        policies: Sequence[Mapping[str, Any]],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Args:
        policies: NetworkPolicy manifests (apiVersion, kind, metadata, spec).
        namespace_labels: extra labels per namespace; every namespace also has
            ``kubernetes.io/metadata.name``, which the API server sets.
        """
        self.policies = list(policies)
        self.namespace_labels = dict(namespace_labels or {})

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        return {**self.namespace_labels.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    def _selecting(self, pod: Pod, direction: str = "Ingress") -> list[Mapping[str, Any]]:
        found = []
        for policy in self.policies:
            spec = policy.get("spec") or {}
            if policy["metadata"].get("namespace") != pod.namespace:
                continue
            types = spec.get("policyTypes") or [
                "Ingress",
                *(["Egress"] if "egress" in spec else []),
            ]
            if direction in types and selects(spec.get("podSelector"), pod.labels):
                found.append(policy)
        return found

    def _peer_matches(self, peer: Mapping[str, Any], policy_namespace: str, source: Source) -> bool:
        if "ipBlock" in peer:
            if not isinstance(source, Address):
                return False
            address = ipaddress.ip_address(source.ip)
            block = peer["ipBlock"]
            inside = address in ipaddress.ip_network(block["cidr"])
            excluded = any(address in ipaddress.ip_network(e) for e in block.get("except") or [])
            return inside and not excluded
        if not isinstance(source, Pod):
            return False
        if "namespaceSelector" in peer:
            if not selects(peer["namespaceSelector"], self._namespace_labels(source.namespace)):
                return False
        elif source.namespace != policy_namespace:
            return False
        return "podSelector" not in peer or selects(peer["podSelector"], source.labels)

    @staticmethod
    def _port_matches(ports: list[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
        if not ports:
            return True
        for entry in ports:
            if entry.get("protocol", "TCP") != protocol:
                continue
            if "port" not in entry:
                return True
            first = int(entry["port"])
            if first <= port <= int(entry.get("endPort", first)):
                return True
        return False

    def may_reach(self, source: Source, target: Pod, port: int, protocol: str = "TCP") -> bool:
        """Whether ``source`` may open a connection to ``target`` on ``port``."""
        selecting = self._selecting(target)
        if not selecting:
            return True
        for policy in selecting:
            for rule in (policy.get("spec") or {}).get("ingress") or []:
                peers = rule.get("from")
                namespace = policy["metadata"]["namespace"]
                if peers and not any(self._peer_matches(p, namespace, source) for p in peers):
                    continue
                if self._port_matches(rule.get("ports"), port, protocol):
                    return True
        return False

    def may_send(self, source: Pod, target: Pod, target_ip: str, port: int) -> bool:
        """Whether ``source``'s egress policies let it open a TCP connection to ``target``.

        Args:
            source: the connecting pod.
            target: the destination pod.
            target_ip: the destination pod's address, which ``ipBlock`` peers match.
            port: the destination port.
        """
        selecting = self._selecting(source, "Egress")
        if not selecting:
            return True
        for policy in selecting:
            namespace = policy["metadata"]["namespace"]
            for rule in (policy.get("spec") or {}).get("egress") or []:
                peers = rule.get("to")
                if peers and not any(
                    self._peer_matches(p, namespace, Address(target_ip))
                    if "ipBlock" in p
                    else self._peer_matches(p, namespace, target)
                    for p in peers
                ):
                    continue
                if self._port_matches(rule.get("ports"), port, "TCP"):
                    return True
        return False
