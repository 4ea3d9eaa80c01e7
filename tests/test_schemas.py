"""The schema checks themselves: they accept valid objects and catch what they must catch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.schemas import UnknownKind, crd_schemas, reject_unknown_fields, validation_errors


def _node_pool(**spec_extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    },
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["p5.48xlarge"],
                        }
                    ],
                }
            },
            **spec_extra,
        },
    }


def test_reference_crds_are_loaded(reference_dir: Path) -> None:
    keys = set(crd_schemas(reference_dir / "crds"))
    assert ("karpenter.sh/v1", "NodePool") in keys
    assert ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime") in keys
    assert ("scheduling.volcano.sh/v1beta1", "Queue") in keys


def test_valid_custom_resource_passes(reference_dir: Path) -> None:
    assert validation_errors(_node_pool(), "1.34", reference_dir / "crds") == []


def test_unknown_custom_resource_field_is_rejected(reference_dir: Path) -> None:
    errors = validation_errors(_node_pool(placementGroup="pg-1"), "1.34", reference_dir / "crds")
    assert any("placementGroup" in error for error in errors), errors


def test_wrong_enum_in_custom_resource_is_rejected(reference_dir: Path) -> None:
    pool = _node_pool()
    pool["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Equals"
    assert validation_errors(pool, "1.34", reference_dir / "crds")


def test_core_kinds_use_strict_kubernetes_schemas() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
        "data": {"a": "b"},
    }
    assert validation_errors(config_map, "1.34", None) == []
    config_map["dta"] = config_map.pop("data")
    assert validation_errors(config_map, "1.34", None)


def test_unknown_kind_is_an_error_not_a_pass() -> None:
    with pytest.raises(UnknownKind):
        validation_errors(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
            "1.34",
            None,
        )


def test_preserve_unknown_fields_is_respected() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "strict": {"type": "object", "properties": {"a": {"type": "string"}}},
            "open": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"a": {"type": "string"}},
            },
        },
    }
    tightened = reject_unknown_fields(schema)
    assert tightened["properties"]["strict"]["additionalProperties"] is False
    assert "additionalProperties" not in tightened["properties"]["open"]
    assert "additionalProperties" not in schema["properties"]["strict"], "input left untouched"
