"""Shared pieces of the stack schema: value types, the strict base model, the problem record."""

from __future__ import annotations

import difflib
import functools
import ipaddress
import json
import re
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Final

import botocore.loaders
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

CONFIG_KEY: Final = "platform"
"""The structured Pulumi config key (``<project>:platform``) that holds the whole model."""


LOG_RETENTION_DAYS: Final[tuple[int, ...]] = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""Retention periods CloudWatch Logs accepts (PutRetentionPolicy)."""


def closest_match(
    given: str,
    choices: Iterable[str],
    fold: Callable[[str], str] = str.lower,
    cutoff: float = 0.8,
) -> str | None:
    """The choice ``given`` most likely misspells (difflib's closest), or None.

    Args:
        given: what the user wrote (a key, an instance type, a policy name).
        choices: the values that exist.
        fold: what both sides are compared as (default: lower case), so that differences the
            caller does not count (case, ``_`` and ``-`` in keys) make no difference.
        cutoff: how alike (difflib's ratio, 0 to 1) a choice must be to count; default 0.8.

    """
    # Sorted, so that a set of choices gives the same answer whatever its hash order.
    folded = {fold(choice): choice for choice in sorted(choices)}
    if fold(given) in folded:
        return folded[fold(given)]
    close = difflib.get_close_matches(fold(given), list(folded), n=1, cutoff=cutoff)
    return folded[close[0]] if close else None


def did_you_mean(given: str, choices: Iterable[str]) -> str:
    """``"did you mean X? "`` when ``given`` looks like a misspelt choice, else ``""``.

    Looser than a key's match (75% alike): values such as instance types are often shortened
    (``p5.48xl``), and a wrong hint costs less here than none.

    Args:
        given: what the user wrote.
        choices: the values that exist.

    """
    meant = closest_match(given, choices, cutoff=0.75)
    return f"did you mean {meant}? " if meant is not None and meant != given else ""


def matching(regex: str, allowed: str) -> Callable[[str], str]:
    """A validator accepting values that match ``regex`` whole; ``allowed`` says what fits."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise PydanticCustomError("pattern", allowed)
        return value

    return check


def parsed_by(
    parse: Callable[[str], object], errors: type[Exception], code: str, allowed: str
) -> Callable[[str], str]:
    """A validator accepting values that a library's parser reads; ``allowed`` says what fits.

    Args:
        parse: the parser; its result is not kept.
        errors: what it raises on a value it cannot read.
        code: the pydantic error type of a refusal.
        allowed: the allowed-text of the refusal.
    """

    def check(value: str) -> str:
        try:
            parse(value)
        except errors:
            raise PydanticCustomError(code, allowed) from None
        return value

    return check


ipv4_cidr = parsed_by(
    lambda value: ipaddress.IPv4Network(value, strict=True),
    ValueError,
    "cidr",
    "an IPv4 network in CIDR form with no host bits set, e.g. 10.0.0.0/16",
)
"""``value`` if it is an IPv4 network with no host bits set."""


def retention(value: int) -> int:
    """``value`` if CloudWatch Logs accepts it as a retention in days."""
    if value not in LOG_RETENTION_DAYS:
        raise PydanticCustomError(
            "retention", "a CloudWatch Logs retention: " + ", ".join(map(str, LOG_RETENTION_DAYS))
        )
    return value


EnvironmentName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z][a-z0-9-]{0,19}",
            "lower-case letters, digits and '-', starting with a letter, at most 20 characters",
        )
    ),
]


ClusterName = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z][a-z0-9-]{0,28}",
            "lower-case letters, digits and '-', starting with a letter, at most 29 characters "
            "(the system node group's name prefix, <cluster>-system-, may have 37: "
            "terraform-provider-aws node_group_name_prefix)",
        )
    ),
]


AwsRegion = Annotated[
    str,
    AfterValidator(
        matching(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "an AWS region name such as us-west-2")
    ),
]


AvailabilityZone = Annotated[
    str,
    AfterValidator(
        matching(
            r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d[a-z]",
            "an availability zone name such as us-west-2a",
        )
    ),
]


def account_number_as_text(value: Any) -> Any:
    """A 12-digit number as an account id: `pulumi config set --path` stores digits as a number.

    A number cannot hold leading zeros, so one of other length is refused with the reason; an id
    given as a string keeps its zeros (the CLI keeps a value starting with 0 as a string).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if len(str(value)) == 12:
            return str(value)
        raise PydanticCustomError(
            "account_number",
            "a 12-digit AWS account id; this number has {digits} digits. A number drops leading "
            "zeros, so write an id that starts with 0 as a quoted string, e.g. '012345678901'",
            {"digits": len(str(value))},
        )
    return value


def whole_number_as_text(value: Any) -> Any:
    """An integer as its decimal text, where any text is allowed (tags): YAML reads 4711 as one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


AccountId = Annotated[
    str,
    BeforeValidator(account_number_as_text),
    AfterValidator(matching(r"\d{12}", "a 12-digit AWS account id")),
]


_SESSION_ARN: Final = re.compile(r"arn:aws[a-z-]*:sts::(\d{12}):assumed-role/([^/]+)/.+")


def _not_a_session(value: str) -> str:
    session = _SESSION_ARN.fullmatch(value)
    if session:
        account, role = session.groups()
        raise PydanticCustomError(
            "session",
            f"the IAM role's ARN, arn:aws:iam::{account}:role/<its path>/{role}, not a session "
            "(EKS refuses session ARNs; `aws iam get-role --role-name {role}` shows the path)",
            {"role": role},
        )
    return value


PrincipalArn = Annotated[
    str,
    AfterValidator(_not_a_session),
    AfterValidator(
        matching(
            r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/([A-Za-z0-9+=,.@_-]+/){0,20}"
            r"[A-Za-z0-9+=,.@_-]{1,64}",
            "an IAM role or user ARN, arn:aws:iam::<account>:role/<path>/<name>, the name at most "
            "64 of A-Z a-z 0-9 + = , . @ _ - (IAM roleNameType)",
        )
    ),
]


@functools.cache
def ec2_instance_types() -> frozenset[str]:
    """Instance types the EC2 API model knows (botocore's ``InstanceType`` enum)."""
    model = botocore.loaders.Loader().load_service_model("ec2", "service-2")
    return frozenset(model["shapes"]["InstanceType"]["enum"])


def _known_instance_type(value: str) -> str:
    if value not in ec2_instance_types():
        raise ValueError(
            f"{value!r} is not an EC2 instance type (EC2 API model, InstanceType)"
            + (f"; {hint.strip()}" if (hint := did_you_mean(value, ec2_instance_types())) else "")
        )
    return value


InstanceType = Annotated[
    str,
    AfterValidator(
        matching(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", "an EC2 instance type such as m7i.xlarge")
    ),
    AfterValidator(_known_instance_type),
]


VpcId = Annotated[str, AfterValidator(matching(r"vpc-[0-9a-f]{8,17}", "a VPC id, vpc-<hex>"))]


SubnetId = Annotated[
    str, AfterValidator(matching(r"subnet-[0-9a-f]{8,17}", "a subnet id, subnet-<hex>"))
]


Ipv4Cidr = Annotated[str, AfterValidator(ipv4_cidr)]


RetentionDays = Annotated[int, AfterValidator(retention)]


class StrictModel(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected, immutable.

    Strict types: a boolean is true or false and a number a number, as YAML and the Pulumi CLI
    write them, never "yes", 0 or a number given as text; the one coercion is digits where text
    is expected (below).
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True
    )

    @model_validator(mode="before")
    @classmethod
    def _digits_as_text(cls, data: Any) -> Any:
        """Whole numbers become text where the field holds text (items of lists and maps too).

        `pulumi config set --path` stores a value of digits as a number (pulumi/pulumi
        sdk/go/common/resource/config, adjustObjectValue), and YAML reads 4711 as one. Fields
        with a number rule of their own (account ids) keep theirs.
        """
        if not isinstance(data, dict):
            return data
        converted = dict(data)
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key in converted and _holds_text(field.annotation) and not _converts_itself(field):
                converted[key] = _digits_to_text(converted[key])
        return converted


def _holds_text(annotation: Any) -> bool:
    """True when a field's values are text: str, optional str, or a list or map of str."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _holds_text(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(args) == 1 and _holds_text(args[0])
    if origin is list:
        return _holds_text(typing.get_args(annotation)[0])
    if origin is dict:
        return _holds_text(typing.get_args(annotation)[1])
    return annotation is str


def _converts_itself(field: Any) -> bool:
    return any(isinstance(item, BeforeValidator) for item in field.metadata)


def _digits_to_text(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return [_digits_to_text(item) for item in value]
    if isinstance(value, dict):
        return {key: _digits_to_text(item) for key, item in value.items()}
    return value


MISSING: Final = object()


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in a stack file."""

    path: str
    """Key path from the config root, e.g. ``platform.network.trainingZone``."""
    value: Any
    """The value found there (``MISSING`` when the key is absent)."""
    allowed: str
    """What would be accepted, in words."""

    def __str__(self) -> str:
        found = "missing" if self.value is MISSING else f"got {shown(self.value)}"
        return f"{self.path}: {found}; allowed: {self.allowed}"


class ConfigError(Exception):
    """A stack file that cannot be deployed; ``problems`` lists every mistake found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


def shown(value: Any) -> str:
    """``value`` as JSON, cut to 120 characters."""
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def duplicates(items: list[str]) -> set[str]:
    """The items that occur more than once."""
    return {item for item, count in Counter(items).items() if count > 1}
