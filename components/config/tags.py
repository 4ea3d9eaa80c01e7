"""Config section ``platform.tags``: the tags every AWS resource carries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Final

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from components.config.base import CONFIG_KEY, ConfigProblem, StrictModel, whole_number_as_text

REQUIRED_TAG_KEYS: Final = ("owner", "cost-center", "environment")
"""Tag keys every AWS resource carries (through the AWS provider's default tags)."""


TAG_CHARACTERS: Final = re.compile(r"[\w .:/=+\-@]*")
"""Tag keys and values IAM, CloudWatch Logs and FSx accept: letters, digits, spaces and
_ . : / = + - @ (botocore iam tagKeyType/tagValueType, ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]``)."""


MAX_EXTRA_TAGS: Final = 40
"""AWS allows 50 tags a resource; the platform's own (owner, cost-center, environment,
managed-by, Name) and Karpenter's on instances (nodepool, nodeclaim, node class, cluster,
eks-cluster-name, pool) leave 40."""


RESERVED_TAG_KEYS: Final = (
    "eks:eks-cluster-name",
    "karpenter.sh/",
    "karpenter.k8s.aws/ec2nodeclass",
    "kubernetes.io/cluster/",
)
"""Tag keys (and prefixes) Karpenter sets itself and refuses in an EC2NodeClass's tags."""


EBS_CSI_RESERVED_TAG_KEYS: Final = (
    "CSIVolumeName",
    "CSIVolumeSnapshotName",
    "ebs.csi.aws.com/cluster",
    "iopspergb",
    "allowautoiopsincreaseonmodify",
)
EBS_CSI_RESERVED_TAG_PREFIX: Final = "kubernetes.io"
"""Tag keys (exact, case-sensitive) and the prefix the EBS CSI driver refuses in a StorageClass's
tags, failing every volume of the class (kubernetes-sigs/aws-ebs-csi-driver v1.54.0
pkg/driver/validation.go, reservedTagKeys and validateExtraTags)."""


def _tag_text(value: str) -> str:
    if not TAG_CHARACTERS.fullmatch(value):
        raise PydanticCustomError(
            "tag", "letters, digits, spaces and _ . : / = + - @ (what AWS tags accept)"
        )
    return value


TagText = Annotated[
    str,
    BeforeValidator(whole_number_as_text),
    Field(min_length=1, max_length=256),
    AfterValidator(_tag_text),
]


TagKey = Annotated[
    str,
    BeforeValidator(whole_number_as_text),
    Field(min_length=1, max_length=128),
    AfterValidator(_tag_text),
]


class TagsConfig(StrictModel):
    """Tags on every AWS resource, applied as the AWS provider's default tags."""

    owner: TagText = Field(
        description="Team or person accountable for the platform; tag `owner`. Required."
    )
    cost_center: TagText = Field(
        description="Cost center billed for the platform; tag `cost-center`. Required."
    )
    extra: dict[TagKey, TagText] = Field(
        default_factory=dict,
        max_length=MAX_EXTRA_TAGS,
        description="Further tags for every resource, at most "
        f"{MAX_EXTRA_TAGS}. Keys must not start with `aws:`, repeat a required tag or be one "
        "Karpenter sets. Default: none.",
    )


def tag_problems(tags: TagsConfig) -> Iterator[ConfigProblem]:
    """Problems of ``platform.tags.extra``: keys AWS, Karpenter or the EBS CSI driver reserve."""
    for key in tags.extra:
        if key.lower().startswith("aws:"):
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}", key, "a key not starting with aws: (reserved)"
            )
        elif key in REQUIRED_TAG_KEYS:
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key other than " + ", ".join(REQUIRED_TAG_KEYS) + " (set those above)",
            )
        elif any(key == r or (r.endswith("/") and key.startswith(r)) for r in RESERVED_TAG_KEYS):
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key other than those Karpenter sets on nodes ("
                + ", ".join(RESERVED_TAG_KEYS)
                + "): it refuses them in an EC2NodeClass",
            )
        elif "=" in key:
            # The EBS CSI driver reads a StorageClass tag as "key=value", split at the first
            # "=" (v1.54.0 pkg/util/template/template.go, Evaluate). Values may hold "=".
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key without = (the EBS CSI driver would cut the key at it on every volume)",
            )
        elif key in EBS_CSI_RESERVED_TAG_KEYS or key.startswith(EBS_CSI_RESERVED_TAG_PREFIX):
            yield ConfigProblem(
                f"{CONFIG_KEY}.tags.extra.{key}",
                key,
                "a key other than those the EBS CSI driver reserves ("
                + ", ".join(EBS_CSI_RESERVED_TAG_KEYS)
                + f", {EBS_CSI_RESERVED_TAG_PREFIX}*): it would refuse every volume",
            )
