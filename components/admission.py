"""ValidatingAdmissionPolicies of the platform, each registered with the binding that enforces it.

The policies' specs are pure builders beside what they guard (tenancy, Trainer runtimes,
storage); this registers one with its binding, after it, so no request is checked against a
binding whose policy does not exist yet.
"""

from __future__ import annotations

import typing
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def deny_binding(policy_name: str) -> dict[str, Any]:
    """The binding spec that refuses what ``policy_name`` refuses, wherever it matches.

    Args:
        policy_name: the ValidatingAdmissionPolicy's name.
    """
    return {"policyName": policy_name, "validationActions": ["Deny"]}


def enforced_policy(
    resource_name: str,
    policy_name: str,
    spec: dict[str, Any],
    *,
    opts: pulumi.ResourceOptions,
    binding: dict[str, Any] | None = None,
) -> k8s.admissionregistration.v1.ValidatingAdmissionPolicy:
    """A ValidatingAdmissionPolicy and its binding, both named ``policy_name``.

    Args:
        resource_name: the Pulumi name of both.
        policy_name: the Kubernetes name of both.
        spec: the policy's spec (the API's field names).
        opts: resource options of both (the cluster's provider).
        binding: the binding's spec. Default :func:`deny_binding`.
    """
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        resource_name,
        metadata={"name": policy_name},
        spec=typing.cast(Any, spec),
        opts=opts,
    )
    k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        resource_name,
        metadata={"name": policy_name},
        spec=typing.cast(Any, binding or deny_binding(policy_name)),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])),
    )
    return policy
