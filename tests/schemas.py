"""Validate Kubernetes objects against the real schemas.

Core kinds go through kubernetes-validate in strict mode for the cluster's Kubernetes version;
custom resources through the ``openAPIV3Schema`` of their upstream CRD (from the reference data),
tightened so that unknown fields are rejected, as the API server's structural pruning would drop
them silently.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

CrdKey = tuple[str, str]  # (apiVersion, kind)
# kubernetes-validate parses its schema files (the definitions alone are 1.4 MB of JSON) again
# for every object; they never change, and it only reads what it parses, so each is parsed once.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)
# The C loader reads the large upstream CRDs ~10x faster; the pure one is the fallback.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UnknownKind(Exception):
    """Neither Kubernetes nor any CRD in the reference data defines this kind."""


def reject_unknown_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a CRD schema where every object with declared properties forbids others.

    Objects marked ``x-kubernetes-preserve-unknown-fields`` or that declare their own
    ``additionalProperties`` keep what they say.
    """
    tightened = copy.deepcopy(schema)
    for node in _schema_nodes(tightened):
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
    return tightened


def _schema_nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schema_nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _schema_nodes(item)


@cache
def crd_schemas(crds_dir: Path) -> dict[CrdKey, dict[str, Any]]:
    """Every served version of every CRD under ``crds_dir``, keyed by (apiVersion, kind)."""
    schemas: dict[CrdKey, dict[str, Any]] = {}
    for path in sorted(crds_dir.rglob("*.yaml")):
        for document in yaml.load_all(path.read_text(), Loader=_LOADER):
            if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
                continue
            spec = document["spec"]
            for version in spec["versions"]:
                if version.get("served", True) and "schema" in version:
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    schemas[key] = reject_unknown_fields(version["schema"]["openAPIV3Schema"])
    return schemas


def validation_errors(
    manifest: dict[str, Any], kubernetes_version: str, crds_dir: Path | None
) -> list[str]:
    """Every schema violation of one object (empty when it is valid).

    Raises:
        UnknownKind: the kind is neither built in nor defined by a CRD in ``crds_dir``.
    """
    key = (manifest.get("apiVersion", ""), manifest.get("kind", ""))
    if crds_dir is not None and key in crd_schemas(crds_dir):
        validator = jsonschema.Draft202012Validator(crd_schemas(crds_dir)[key])
        return [
            f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
            for error in validator.iter_errors(manifest)
        ]
    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        raise UnknownKind(f"no schema for {key[0]} {key[1]}") from None
    except kubernetes_validate.ValidationError as exc:
        return [str(exc).splitlines()[0]]
    return []


SWAGGER_EXTERNAL: dict[str, dict[str, Any]] = {
    # Kubernetes' own types the Katib definitions refer to and do not carry. Metadata is held to
    # the fields an Experiment's author writes; the others are only as strict as their type.
    "v1.ObjectMeta": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "v1.ListMeta": {"type": "object"},
    "v1.Time": {"type": "string"},
    "v1.Container": {"type": "object"},
    "v1.HTTPGetAction": {"type": "object"},
    # a trial's spec: the template's own kind is validated against its CRD
    "v1.unstructured.Unstructured": {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    },
}
"""Definitions a Swagger file refers to without defining them (Katib's: Kubernetes' types)."""


@cache
def _swagger_definitions(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    definitions: dict[str, Any] = {**document["definitions"], **SWAGGER_EXTERNAL}
    return reject_unknown_fields(definitions)


def swagger_errors(manifest: dict[str, Any], swagger: Path, definition: str) -> list[str]:
    """Every violation of ``manifest`` against one definition of a Swagger (OpenAPI 2) file.

    ``$ref``s resolve within the file's definitions (plus :data:`SWAGGER_EXTERNAL`); every object
    with declared properties refuses others, as for CRDs (:func:`reject_unknown_fields`).

    Args:
        manifest: the object.
        swagger: the Swagger file (its ``definitions``).
        definition: the definition the object must match, e.g. ``v1beta1.Experiment``.
    """
    definitions = _swagger_definitions(swagger)
    schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
    validator = jsonschema.Draft4Validator(schema)
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in validator.iter_errors(manifest)
    ]
