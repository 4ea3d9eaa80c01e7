"""The Slurm health mirror: one health truth across Slurm and Kubernetes, deployed.

The program is ``python -m acceptance mirror`` (:mod:`acceptance.mirror`), run from the
acceptance image by one Deployment in the ``slurm`` namespace. Builders of its objects beside
:class:`components.slurm.Slurm`, which registers them (:func:`health_mirror_manifests`) when an
acceptance image is configured; docs/concepts/slurm.md, "One health truth with Kubernetes".

Its slurmrestd credential is a JWT that Slinky's Token controller signs with the cluster's JWT
key and renews (slurm-operator v1.2.1 api/v1beta1/token_types.go,
internal/builder/common/token_secret.go), so the mirror never holds the key that could sign a
token for any user.
"""

from __future__ import annotations

from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import health_marks
from components.acceptance_gate import TOKEN_DIR as API_TOKEN_DIR
from components.acceptance_gate import api_token_projection
from components.config import PlatformConfig
from components.slurm.common import (
    JWT_KEY,
    NAMESPACE,
    RELEASE,
    SERVICE_PLACEMENT,
    SLINKY_API,
    SLURM_APP_LABEL,
    SLURMRESTD_PORT,
    read_only_context,
)
from components.tenancy import hardened_pod

NAME: Final = health_marks.MIRROR_ACCOUNT
"""The ServiceAccount, ClusterRole, Role, Deployment and Token; the pods' app label. Another
admission policy keys on this ServiceAccount to hold its node patches to the health marks."""
SLURM_USER: Final = "slurm"
"""The Slurm user of the mirror's token: SlurmUser, the user Slinky's own operator drives
slurmrestd as (slurm-operator v1.2.1 internal/controller/token/slurmjwt/token.go, NewToken).

Draining and resuming a node (the update_node RPC) takes more than an operator: root,
SlurmUser, or an accounting user with AdminLevel=Administrator (SchedMD/slurm slurm-26-05-3-1
src/slurmctld/proc_req.c: _slurm_rpc_update_node calls validate_super_user, which wants
SLURMDB_ADMIN_SUPER_USER; AdminLevel=Operator passes only validate_operator, which node updates
do not use). A token's user must also resolve to a Unix account where slurmctld checks it
(src/plugins/auth/jwt/auth_jwt.c, cred_get_ids: ``uid_from_string`` then ``gid_from_uid``), and
Slinky's slurmctld image knows only root, slurm and the system users (SlinkyProject/containers
schedmd/slurm/26.05 Dockerfile: ``useradd ... slurm``); Slinky's Token signs only the name
(``sun``), no uid. A dedicated Administrator would hold the same rights as SlurmUser and need
an account in slurmctld's image or directory and accounting on, which not every stack has. So
the mirror is SlurmUser, confined instead by its token (an hour, renewed, never the signing key)
and the network (only the mirror and the operator reach slurmrestd)."""
TOKEN_SECRET: Final = {"name": f"{NAME}-jwt", "key": "SLURM_JWT"}
"""The Secret the Token controller writes the JWT into (api/v1beta1/token_keys.go, SecretRef)."""
TOKEN_LIFETIME: Final = "1h"
"""The controller renews a token at four fifths of its lifetime
(internal/controller/token/token_sync.go): 12 minutes before expiry, ample for the kubelet to
refresh the mounted Secret (about a minute)."""
TOKEN_DIR: Final = "/var/run/slurm-jwt"
RESTD_URL: Final = f"http://{RELEASE}-restapi.{NAMESPACE}:{SLURMRESTD_PORT}"
"""slurmrestd's Service: the RestApi ``slurm`` plus ``-restapi`` (api/v1beta1/restapi_keys.go)."""
RESOURCES: Final = {
    "requests": {"cpu": "20m", "memory": "96Mi"},
    "limits": {"cpu": "500m", "memory": "384Mi"},
}
"""Two lists (nodes, NodeSet pods) every 30 seconds; a thousand nodes are a few MiB of JSON."""
MIRROR_UID: Final = 65534
"""nobody: the program reads its package, the token and the service account's token only."""


def mirror_image(config: PlatformConfig) -> str | None:
    """The mirror's image: the acceptance image, GPU's if set, else Trainium's; None if neither.

    The program needs nothing of either vendor's tools, only the acceptance package.

    Args:
        config: the platform (``acceptance.images``).
    """
    images = config.acceptance.images
    return images.nvidia or images.neuron


def _labels() -> dict[str, str]:
    return {SLURM_APP_LABEL: NAME}


def _meta(name: str = NAME, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": _labels()}
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def rbac_manifests() -> list[dict[str, Any]]:
    """The mirror's ServiceAccount and what it may do.

    Cluster-wide: nodes get/list/watch/patch (the health marks; an admission policy narrows the
    patches) and Karpenter's NodeClaims get/list/watch (a deleting one is the first sign of a
    node going away). In ``slurm``: pods list/watch (the NodeSet pods map Slurm nodes to
    Kubernetes nodes).
    """
    account = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta()},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(namespace=None),
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"],
                 "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"],
                 "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(namespace=None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": NAME},
            "subjects": [account],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [account],
        },
    ]  # fmt: skip


def token_manifest() -> dict[str, Any]:
    """The Slinky Token whose Secret holds the mirror's JWT (user :data:`SLURM_USER`)."""
    return {
        "apiVersion": SLINKY_API,
        "kind": "Token",
        "metadata": _meta(),
        "spec": {
            "jwtKeyRef": dict(JWT_KEY),
            "username": SLURM_USER,
            "lifetime": TOKEN_LIFETIME,
            "refresh": True,
            "secretRef": dict(TOKEN_SECRET),
        },
    }


def deployment_manifest(image: str) -> dict[str, Any]:
    """One mirror: ``python -m acceptance mirror`` on the general pool.

    ``Recreate``: two mirrors at once would act twice on the same change.

    Args:
        image: the acceptance image (:func:`mirror_image`).
    """
    pod = hardened_pod({
        "serviceAccountName": NAME,
        # Its API token by a projected volume, as the acceptance agent's: the automatic mount
        # would give the token to every container a later change adds.
        "automountServiceAccountToken": False,
        **SERVICE_PLACEMENT,
        "securityContext": {"runAsNonRoot": True, "runAsUser": MIRROR_UID,
                            "runAsGroup": MIRROR_UID, "fsGroup": MIRROR_UID},
        "containers": [{
            "name": "mirror",
            "image": image,
            "command": ["python", "-m", "acceptance", "mirror"],
            "env": [
                {"name": "SLURMRESTD_URL", "value": RESTD_URL},
                {"name": "SLURM_JWT_FILE", "value": f"{TOKEN_DIR}/{TOKEN_SECRET['key']}"},
            ],
            "resources": RESOURCES,
            "securityContext": read_only_context(),
            "volumeMounts": [
                {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
                {"name": "api-token", "mountPath": API_TOKEN_DIR, "readOnly": True},
            ],
        }],
        "volumes": [
            {"name": "token", "secret": {
                "secretName": TOKEN_SECRET["name"], "defaultMode": 0o440,
                "items": [{"key": TOKEN_SECRET["key"], "path": TOKEN_SECRET["key"]}],
            }},
            {"name": "api-token", "projected": api_token_projection()},
        ],
    })  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _labels()},
            "template": {"metadata": {"labels": _labels()}, "spec": pod},
        },
    }


def health_mirror_manifests(config: PlatformConfig) -> list[dict[str, Any]]:
    """Everything the mirror needs, or nothing without an acceptance image.

    Args:
        config: the platform (Slurm enabled; ``acceptance.images``).
    """
    image = mirror_image(config)
    if image is None:
        return []
    return [*rbac_manifests(), token_manifest(), deployment_manifest(image)]


_TYPED_KINDS: Final[dict[str, Any]] = {
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "Role": k8s.rbac.v1.Role,
    "RoleBinding": k8s.rbac.v1.RoleBinding,
    "Deployment": k8s.apps.v1.Deployment,
}
"""The mirror's kinds pulumi-kubernetes types; the Token is a custom resource."""
_SNAKE_CASE: Final = {"roleRef": "role_ref"}
"""Manifest keys whose Python argument is spelt otherwise."""


def register_health_mirror(
    name: str, config: PlatformConfig, opts: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """Create :func:`health_mirror_manifests`' objects; returns them (none without an image).

    Args:
        name: prefix of the resource names.
        config: the platform.
        opts: options of every object (parent, provider, what they wait for: the slurm chart,
            whose operator serves Tokens and whose JWT key signs them).
    """
    created: list[pulumi.Resource] = []
    for manifest in health_mirror_manifests(config):
        kind = manifest["kind"]
        resource_name = f"{name}-health-mirror-{kind.lower()}"
        options = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=created[:]))
        fields = {_SNAKE_CASE.get(key, key): value for key, value in manifest.items()
                  if key not in ("apiVersion", "kind")}  # fmt: skip
        resource: pulumi.Resource
        if kind in _TYPED_KINDS:
            resource = _TYPED_KINDS[kind](resource_name, **fields, opts=options)
        else:
            resource = k8s.apiextensions.CustomResource(
                resource_name,
                api_version=manifest["apiVersion"],
                kind=kind,
                **fields,
                opts=options,
            )
        created.append(resource)
    return created
