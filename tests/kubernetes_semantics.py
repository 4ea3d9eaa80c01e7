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
