"""How Kubernetes reads what the tests check: quantities and taint tolerations."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Final

_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?")
_MULTIPLIERS: Final = {
    None: Decimal(1), "m": Decimal("0.001"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
}  # fmt: skip


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``8``, ``500m``, ``5Gi``) as an exact number."""
    match = _QUANTITY.fullmatch(str(value))
    assert match, f"not a quantity these tests read: {value!r}"
    return Decimal(match.group(1)) * _MULTIPLIERS[match.group(2)]


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration.ToleratesTaint)."""
    effect = toleration.get("effect", "")
    if effect and effect != taint["effect"]:
        return False
    key = toleration.get("key", "")
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint["key"]
    return bool(key == taint["key"] and toleration.get("value", "") == taint.get("value", ""))


def uncovered(tolerations: list[dict[str, Any]], taints: list[dict[str, Any]]) -> list[Any]:
    """The taints none of ``tolerations`` tolerates."""
    return [t for t in taints if not any(tolerates(toleration, t) for toleration in tolerations)]


def container_environment(container: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """The environment the kubelet gives a container, ``$(VAR)`` references expanded.

    Variables are resolved in order, each seeing only those before it; ``$$`` is a literal
    ``$`` and a reference to an unknown variable stays as written (kubernetes
    third_party/forked/golang/expansion/expand.go, used by kubelet's makeEnvironmentVariables).
    Of ``valueFrom``, only ``fieldRef`` to a pod label is resolved (from ``labels``).
    """
    resolved: dict[str, str] = {}
    for variable in container.get("env", []):
        if "value" in variable:
            resolved[variable["name"]] = _expand(str(variable["value"]), resolved)
            continue
        path = variable["valueFrom"]["fieldRef"]["fieldPath"]
        match = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
        assert match, f"unsupported fieldRef {path}"
        resolved[variable["name"]] = labels.get(match.group(1), "")
    return resolved


def expand_references(text: str, environment: dict[str, str]) -> str:
    """``$(VAR)`` references of a command or argument, as the kubelet expands them."""
    return _expand(text, environment)


def _expand(text: str, environment: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return environment.get(name, match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", replace, text)
