"""Run the pack over synthesized resources, the way ``pulumi preview --policy-pack`` would.

Mirrors the analyzer in pulumi-policy: per-policy enforcement levels and properties from the
policy config file (``all`` first, then the policy's own entry, then its default), schema defaults
for properties the file leaves out, inputs wrapped in the unknown-checking proxy, an unknown value
reported as an advisory "can't run during preview" note instead of a violation, and
``not_applicable`` skipping the resource.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import jsonschema
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.policy import PolicyCustomTimeouts, _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from components.config.base import did_you_mean
from policies.rules import ALL_POLICIES, PACK_NAME
from synth.engine import ResourceRecord

CONFIG_DIR: Final = Path(__file__).resolve().parent / "config"
PACK_DEFAULT_LEVEL: Final = EnforcementLevel.MANDATORY


class PolicyConfigError(Exception):
    """The policy config file is missing or does not fit the policies' schemas."""


@dataclass(frozen=True)
class Finding:
    """One line of the policy report."""

    policy: str
    enforcementLevel: str  # noqa: N815 (the report's JSON key)
    urn: str
    message: str


def config_path(stack: str) -> Path:
    """Where a stack's policy configuration lives."""
    return CONFIG_DIR / f"{stack}.json"


def load_policy_config(stack: str, path: Path | None = None) -> dict[str, Any]:
    """Read ``policies/config/<stack>.json`` (the file ``--policy-pack-config`` is given)."""
    path = path or config_path(stack)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyConfigError(f"no policy config {path} for stack {stack}") from None
    except json.JSONDecodeError as exc:
        raise PolicyConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(document, dict):
        raise PolicyConfigError(f"{path}: expected a JSON object")
    return document


@dataclass(frozen=True)
class _Settings:
    level: EnforcementLevel
    properties: dict[str, Any]


def resolve(policy: Policy, config: dict[str, Any]) -> _Settings:
    """The enforcement level and properties a policy runs with under ``config``.

    Raises:
        PolicyConfigError: unknown policy names, bad levels, or properties the schema rejects.

    """
    level = policy.enforcement_level or PACK_DEFAULT_LEVEL
    properties: dict[str, Any] = {}
    for key in ("all", policy.name):
        entry = config.get(key)
        if isinstance(entry, str):
            level = _level(entry, key)
        elif isinstance(entry, dict):
            if "enforcementLevel" in entry:
                level = _level(entry["enforcementLevel"], key)
            if key == policy.name:
                properties = {k: v for k, v in entry.items() if k != "enforcementLevel"}
    schema = policy.config_schema
    declared = dict(schema.properties or {}) if schema else {}
    unknown = set(properties) - set(declared)
    if unknown:
        raise PolicyConfigError(
            f"{policy.name}: unknown properties {sorted(unknown)}; known: {sorted(declared)}"
        )
    try:
        jsonschema.validate(properties, {"type": "object", "properties": declared})
    except jsonschema.ValidationError as exc:
        raise PolicyConfigError(f"{policy.name}: {exc.message}") from None
    defaults = {name: spec["default"] for name, spec in declared.items() if "default" in spec}
    return _Settings(level, {**defaults, **properties})


def _level(value: Any, key: str) -> EnforcementLevel:
    try:
        return EnforcementLevel(value)
    except ValueError:
        allowed = [level.value for level in EnforcementLevel]
        raise PolicyConfigError(f"{key}: enforcement level {value!r}; allowed {allowed}") from None


def check_config_names(config: dict[str, Any], policies: Iterable[Policy]) -> None:
    """Reject config entries that name no policy (a typo would silently disable nothing)."""
    names = {policy.name for policy in policies} | {"all"}
    unknown = sorted(set(config) - names)
    if unknown:
        hints = "".join(
            f" ({name!r}: {did_you_mean(name, names).strip()})"
            for name in unknown
            if did_you_mean(name, names)
        )
        raise PolicyConfigError(
            f"unknown policies in config: {unknown}{hints}; known: {sorted(names)}"
        )


class RecordedResourceOptions(PolicyResourceOptions):
    """The analyzer's options of a resource, plus two the analyzer does not pass.

    pulumi-policy 1.21.0 (``pulumi_policy/policy.py``, ``PolicyResourceOptions`` and the
    server's ``_get_resource_options``) hands a policy ``protect``, ``ignore_changes`` and
    ``delete_before_replace`` (``None`` unless ``deleteBeforeReplaceDefined``) from the engine's
    ``AnalyzerResourceOptions`` (pulumi ``proto/pulumi/analyzer.proto``), which has no
    ``retainOnDelete`` or ``replaceOnChanges``. The offline gate knows both from the
    registration, so it adds them here; under ``pulumi preview`` a policy finds no such
    attribute (see :func:`policies.rules.lifecycle.retain_on_delete`).
    """

    retain_on_delete: bool
    """The engine leaves the cloud resource behind when it deletes this one."""
    replace_on_changes: list[str]
    """Input paths whose change replaces the resource."""

    def __init__(self, record: ResourceRecord) -> None:
        """The options of one recorded registration.

        Args:
            record: the resource as synthesis recorded it.

        """
        super().__init__(
            protect=record.protect,
            ignore_changes=list(record.ignore_changes),
            delete_before_replace=record.delete_before_replace,
            aliases=[],
            custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
            additional_secret_outputs=[],
            parent=record.parent,
        )
        self.retain_on_delete = record.retain_on_delete
        self.replace_on_changes = list(record.replace_on_changes)


class _LazyInputs(Mapping[str, Any]):
    """A resource's inputs behind pulumi-policy's unknown-checking proxy, made on first read.

    The proxy (``pulumi_policy/proxy.py``, ``unknown_checking_proxy``) copies the whole input
    tree; most policies read the inputs of a few resource types only, so proxying every
    resource up front was most of an evaluation's time. Reads go to the same proxy, so an
    unknown value raises as it does under ``pulumi preview``.
    """

    __slots__ = ("_inputs", "_proxy")

    def __init__(self, inputs: dict[str, Any]) -> None:
        self._inputs = inputs
        self._proxy: Mapping[str, Any] | None = None

    def _proxied(self) -> Mapping[str, Any]:
        if self._proxy is None:
            self._proxy = unknown_checking_proxy(self._inputs)
        return self._proxy

    def __getitem__(self, key: str) -> Any:
        return self._proxied()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._proxied())

    def __len__(self) -> int:
        return len(self._proxied())


def _options(record: ResourceRecord) -> PolicyResourceOptions:
    return RecordedResourceOptions(record)


def evaluate(
    records: list[ResourceRecord],
    config: dict[str, Any],
    policies: list[Policy] | None = None,
) -> list[Finding]:
    """Every violation (and every "can't run during preview" note) the pack reports.

    Args:
        records: the resources of one stack, as synthesis recorded them.
        config: the stack's policy config (``policies/config/<stack>.json``).
        policies: run only these (default: the whole pack); config names are checked against
            the whole pack either way.

    """
    policies = ALL_POLICIES if policies is None else policies
    check_config_names(config, [*ALL_POLICIES, *policies])
    by_urn = {record.urn: record for record in records}
    findings: list[Finding] = []
    # Built once and handed to every policy (the pack's policies only read them): proxying every
    # resource's inputs again for each policy was most of the pack's time.
    proxied: dict[str, Any] = {}
    providers: dict[str, PolicyProviderResource | None] = {}
    stack_resources: list[PolicyResource] = []

    def inputs_of(record: ResourceRecord) -> Any:
        if record.urn not in proxied:
            proxied[record.urn] = _LazyInputs(record.inputs)
        return proxied[record.urn]

    def provider_of(record: ResourceRecord) -> PolicyProviderResource | None:
        key = record.provider or ""
        if key not in providers:
            provider = by_urn.get(key)
            providers[key] = (
                None
                if provider is None
                else PolicyProviderResource(
                    provider.type, inputs_of(provider), provider.urn, provider.name
                )
            )
        return providers[key]

    for policy in policies:
        settings = resolve(policy, config)
        if settings.level == EnforcementLevel.DISABLED:
            continue
        level = (
            EnforcementLevel.MANDATORY
            if settings.level == EnforcementLevel.REMEDIATE
            else settings.level
        )

        if isinstance(policy, ResourceValidationPolicy):
            for record in records:
                args = ResourceValidationArgs(
                    record.type,
                    inputs_of(record),
                    record.urn,
                    record.name,
                    _options(record),
                    provider_of(record),
                    settings.properties,
                )
                _run(policy, args, findings, _reporter(findings, policy.name, level, record.urn))
        elif isinstance(policy, StackValidationPolicy):
            if not stack_resources:
                stack_resources.extend(_stack_resources(records, inputs_of, provider_of))
            stack_args = StackValidationArgs(stack_resources, settings.properties)
            _run(policy, stack_args, findings, _reporter(findings, policy.name, level, ""))
    return findings


def _reporter(
    findings: list[Finding], policy_name: str, level: EnforcementLevel, default_urn: str
) -> Callable[[str, str | None], None]:
    """A ``report_violation`` callback that appends to ``findings``."""

    def report(message: str, urn: str | None) -> None:
        findings.append(Finding(policy_name, level.value, urn or default_urn, message))

    return report


def _run(policy: Policy, args: Any, findings: list[Finding], report: Any) -> None:
    try:
        policy.validate(args, report)  # type: ignore[attr-defined]
    except UnknownValueError as exc:
        findings.append(
            Finding(
                policy.name,
                EnforcementLevel.ADVISORY.value,
                getattr(args, "urn", ""),
                f"can't run policy '{policy.name}' from policy pack '{PACK_NAME}' during "
                f"preview: {exc.message}",
            )
        )
    except _NotApplicableError:
        pass


def _stack_resources(
    records: list[ResourceRecord], inputs_of: Any, provider_of: Any
) -> list[PolicyResource]:
    resources = {
        record.urn: PolicyResource(
            record.type,
            inputs_of(record),
            record.urn,
            record.name,
            _options(record),
            provider_of(record),
            None,
            [],
            {},
        )
        for record in records
    }
    for record in records:
        resource = resources[record.urn]
        resource.parent = resources.get(record.parent or "")
        resource.dependencies = [resources[u] for u in record.dependencies if u in resources]
        resource.property_dependencies = {
            key: [resources[u] for u in urns if u in resources]
            for key, urns in record.property_dependencies.items()
        }
    return list(resources.values())


def mandatory(findings: list[Finding]) -> list[Finding]:
    """The findings that block a deployment."""
    return [f for f in findings if f.enforcementLevel == EnforcementLevel.MANDATORY.value]


def write_report(findings: list[Finding], path: Path) -> None:
    """Write ``policy-report.json``: one object per finding, sorted for stable diffs."""
    ordered = sorted(findings, key=lambda f: (f.policy, f.urn, f.message))
    path.write_text(json.dumps([asdict(f) for f in ordered], indent=2) + "\n")
