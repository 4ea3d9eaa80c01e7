"""terraform-provider-aws's own names for the resource types the platform creates.

``terraform_schema.json`` holds, for each Terraform type the export writes, its configurable
attributes and nested blocks as the provider's schema declares them. It is extracted (by
``scripts/terraform-schema``) from the CDKTF prebuilt AWS provider bindings, which are
generated from ``terraform providers schema -json`` of a stated provider release; each binding
module lists every attribute with its Terraform name, whether it is a block, and its nesting.
No Terraform, provider plugin or network is needed to read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

SCHEMA_FILE: Final = Path(__file__).with_name("terraform_schema.json")
_RESOURCE_TYPE: Final = re.compile(r'\.tfResourceType = "(\w+)";')
_PROVIDER_VERSION: Final = re.compile(r"providerVersion: '([^']+)'")
_FUNCTION: Final = re.compile(
    r"^function (\w+)ToHclTerraform\(struct\) \{\n(.*?)^\}", re.MULTILINE | re.DOTALL
)
_ROOT: Final = re.compile(
    r"    synthesizeHclAttributes\(\) \{\n(.*?)^    \}", re.MULTILINE | re.DOTALL
)
_ATTRIBUTE: Final = re.compile(
    r"^ +(\w+): \{\n +value: (.*?),\n +isBlock: (true|false),\n +type: \"(\w+)\",\n"
    r" +storageClassType: \"\w+\",\n +\},",
    re.MULTILINE | re.DOTALL,
)
_RESOURCE_CLASS: Final = "extends cdktf.TerraformResource "
_CHILD: Final = re.compile(r"(?<![.\w])(\w+)ToHclTerraform\b")


class SchemaError(Exception):
    """The bindings or the extract do not have the expected shape (the message says where)."""


def _attributes(body: str, functions: Mapping[str, str], where: str) -> dict[str, Any]:
    """The attributes one ``attrs`` literal declares, nested blocks resolved through functions."""
    attributes: dict[str, Any] = {}
    for name, value, is_block, kind in _ATTRIBUTE.findall(body):
        if is_block == "true":
            child = _CHILD.search(value)
            if child is None or child.group(1) not in functions:
                raise SchemaError(f"{where}.{name}: block without its mapping function")
            attributes[name] = {
                "block": kind,
                "attributes": _attributes(functions[child.group(1)], functions, f"{where}.{name}"),
            }
        else:
            attributes[name] = kind
    if not attributes and "." not in where:  # a nested block may be empty (simple_prefix)
        raise SchemaError(f"{where}: no attributes found")
    return attributes


def parse_binding(module_js: str) -> tuple[str, str, dict[str, Any]]:
    """Read one generated CDKTF resource module (``lib/<resource>/index.js``).

    Returns:
        The Terraform type, the provider version it was generated from, and its schema:
        attribute -> ``"simple"``, ``"list"``, ``"set"`` or ``"map"``, or, for a nested
        block, ``{"block": "list" | "set", "attributes": {...}}``.

    Raises:
        SchemaError: the module is not a resource binding of the expected shape.
    """
    resource_type = _RESOURCE_TYPE.search(module_js)
    version = _PROVIDER_VERSION.search(module_js)
    root = _ROOT.search(module_js)
    if resource_type is None or version is None or root is None:
        raise SchemaError("not a CDKTF resource binding (tfResourceType, providerVersion)")
    functions = {name: body for name, body in _FUNCTION.findall(module_js)}
    type_name = resource_type.group(1)
    return type_name, version.group(1), _attributes(root.group(1), functions, type_name)


@dataclass(frozen=True)
class TerraformSchema:
    """The extract: Terraform type -> its schema, and where it comes from."""

    types: Mapping[str, Mapping[str, Any]]
    source: Mapping[str, Any]

    @classmethod
    def load(cls, path: Path = SCHEMA_FILE) -> TerraformSchema:
        """Read the extract.

        Raises:
            SchemaError: the file is missing (with how to make it) or malformed.
        """
        if not path.exists():
            raise SchemaError(f"{path} is missing: run scripts/terraform-schema")
        document = json.loads(path.read_text())
        return cls(types=document["types"], source=document["source"])

    def of(self, terraform_type: str) -> Mapping[str, Any]:
        """The schema of one type.

        Raises:
            SchemaError: the extract lacks it.
        """
        if terraform_type not in self.types:
            raise SchemaError(
                f"{terraform_type}: not in {SCHEMA_FILE.name}; add it to TERRAFORM_TYPES "
                "(synth/terraform.py) and run scripts/terraform-schema"
            )
        return self.types[terraform_type]


BINDINGS_PACKAGE: Final = "@cdktf/provider-aws@21.22.1"
"""The CDKTF prebuilt AWS provider the extract is read from (generated from
terraform-provider-aws 6.25.0, the 6.x line pulumi-aws 7 bridges)."""


def extract(package_dir: Path, terraform_types: Iterable[str]) -> dict[str, Any]:
    """The extract for ``terraform_types`` from an unpacked bindings package.

    Raises:
        SchemaError: a type has no binding module, or a module does not parse.
    """
    wanted = set(terraform_types)
    types: dict[str, Any] = {}
    versions = set()
    for module in sorted((package_dir / "lib").glob("*/index.js")):
        text = module.read_text()
        found = _RESOURCE_TYPE.search(text)
        if found is None or found.group(1) not in wanted or _RESOURCE_CLASS not in text:
            continue  # data sources share their resource's type name
        type_name, version, schema = parse_binding(text)
        if type_name in types:
            raise SchemaError(f"two bindings declare {type_name}")
        types[type_name] = schema
        versions.add(version)
    if missing := sorted(wanted - set(types)):
        raise SchemaError(f"no binding in {package_dir} for {', '.join(missing)}")
    package = json.loads((package_dir / "package.json").read_text())
    return {
        "source": {
            "package": f"{package['name']}@{package['version']}",
            "terraformProviderAws": sorted(versions),
            "note": "configurable attributes and blocks of terraform-provider-aws's schema, as "
            "the package's generated bindings declare them; regenerate: scripts/terraform-schema",
        },
        "types": dict(sorted(types.items())),
    }
