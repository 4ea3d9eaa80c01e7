"""What every part of Slurm shares: names, ports, images, and how its daemons run.

Namespaces, releases and APIs, the auth keys, the daemons' ports and pod label, the pinned
images as the slurm chart writes them, the state StorageClass, and the hardening, placement and
sidecar sizes of Slurm's own daemons.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import versions
from components.config.pools import GENERAL_POOL
from components.metric_names import SLURM_NAMESPACE
from components.node_pools import POOL_LABEL
from components.tenancy import RUNTIME_DEFAULT_SECCOMP, hardened_container_context

NAMESPACE: Final = SLURM_NAMESPACE
OPERATOR_NAMESPACE: Final = "slinky"
CERT_MANAGER_NAMESPACE: Final = "cert-manager"
MARIADB_OPERATOR_NAMESPACE: Final = "mariadb-operator"
RELEASE: Final = "slurm"
CONTROLLER_NAME: Final = RELEASE
"""The chart's Controller (``fullnameOverride``), which every NodeSet names as its controller."""
SLINKY_API: Final = "slinky.slurm.net/v1beta1"
SLURM_KEY: Final = {"name": "slurm-auth-slurm", "key": "slurm.key"}
JWT_KEY: Final = {"name": "slurm-auth-jwt", "key": "jwt.key"}
AUTH_KEY_LENGTH: Final = 1024
"""Characters of each auth key, as many as the chart would generate (``randAscii 1024``)."""
STATE_STORAGE_CLASS: Final = "slurm-retained"
"""Encrypted gp3 of slurmctld's state and the accounting database. It keeps its volumes when
their claim goes only where ``protectStatefulResources`` is true; elsewhere they go with it
(:func:`components.cluster.state_reclaim_policy`). The name stays either way: slurmctld's
StatefulSet names it in a volume claim template, which Kubernetes never lets change."""
DO_NOT_DISRUPT: Final = {"karpenter.sh/do-not-disrupt": "true"}
"""Keeps Karpenter from consolidating away the node under slurmctld or the database."""
SERVICE_PLACEMENT: Final = {"nodeSelector": {POOL_LABEL: GENERAL_POOL}}
"""Slurm's own services (controller, REST API, accounting) run on the general pool."""
PRIVILEGED_NAMESPACE: Final = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}
"""slurmd runs privileged (it manages cgroups and devices for the jobs it starts)."""
LOG_SIDECAR_RESOURCES: Final = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"memory": "64Mi"},
}
"""The operator's log sidecar (and the login set's initconf): one shell loop over one file."""
SERVICE_POD_SECURITY: Final = {"seccompProfile": RUNTIME_DEFAULT_SECCOMP}
"""Pod-level security of Slurm's daemons, merged over the operator's non-root user and group
(slurm-operator v1.2.1 internal/builder/common/pod_template.go, BuildPodTemplate)."""
SCRATCH_VOLUME: Final = {"name": "tmp", "emptyDir": {}}
SCRATCH_MOUNT: Final = {"name": "tmp", "mountPath": "/tmp"}
"""A writable ``/tmp`` beside a read-only root: slurmctld's image keeps supervisord's pid file
and the socket slurmctld notifies readiness on there (SlinkyProject/containers
schedmd/slurm/26.05 files/etc/supervisor/supervisord.conf and conf.d/slurmctld.conf), and the
MariaDB server its temporary files."""


def read_only_context() -> dict[str, Any]:
    """A daemon's container security context: :func:`hardened_container_context`, read-only root.

    Slurm's daemons write only to the operator's volumes (``/run``, the state, the log pipe)
    and slurmctld also to :data:`SCRATCH_MOUNT`; each runs as its image's unprivileged user
    (``slurm``, ``nobody``), which needs no capability. Slinky v1.2.1 drops the ``false`` of
    ``allowPrivilegeEscalation`` from the containers it builds (it prunes every false value of
    a resource's container before merging: internal/utils/structutils/kube.go, removeEmpty),
    so only mariadb-operator's pod and the containers a pod spec adds get it; it stays here
    for the day the operator keeps it.
    """
    return {**hardened_container_context(), "readOnlyRootFilesystem": True}


def slinky_image_reference(component: str) -> str:
    """A Slinky Slurm image (``slurmctld``, ``login``...) as the bill of materials pins it."""
    return versions.SLINKY_IMAGES[component]


def slinky_image(component: str) -> dict[str, str]:
    """:func:`slinky_image_reference` as the slurm chart's image map (:func:`chart_image`)."""
    return chart_image(slinky_image_reference(component))


def chart_image(reference: str) -> dict[str, str]:
    """``repository[:tag][@digest]`` as the slurm chart's image map.

    With a digest the chart renders ``repository@digest`` and ignores the tag
    (``slurm.format-image``, slurm-operator v1.2.1 helm/slurm/templates/_helpers.tpl), which
    stays in the values for people.
    """
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    repository, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, "")
    image = {"repository": repository}
    if tag:
        image["tag"] = tag
    if digest:
        image["digest"] = digest
    return image


def chart_rendered(image: str | Mapping[str, Any]) -> str:
    """An image value as the slurm chart writes it into a container (``slurm.format-image``).

    A string as it is; a map as ``repository@digest`` when it has a digest (the tag is then
    dropped), else ``repository:tag``.
    """
    if isinstance(image, str):
        return image
    if image.get("digest"):
        return f"{image['repository']}@{image['digest']}"
    return f"{image['repository']}:{image['tag']}"


def chart_reference(reference: str) -> str:
    """``reference`` as the chart writes it into a container, given as :func:`chart_image`."""
    return chart_rendered(chart_image(reference))


def sidecar_image() -> dict[str, str]:
    """The pinned image of the chart's log and init sidecars (alpine:latest by default)."""
    return chart_image(versions.SIDECAR_IMAGE)


SLURM_APP_LABEL: Final = "app.kubernetes.io/name"
"""The label Slinky v1.2.1 gives each component's pods (internal/builder/labels/labels.go:
``slurmctld``, ``slurmd``, ``slurmrestd``, ``slurmdbd``, ``login``)."""
SLURMCTLD_PORT: Final = 6817
SLURMD_PORT: Final = 6818
SLURMDBD_PORT: Final = 6819
SLURMRESTD_PORT: Final = 6820
LOGIN_SSH_PORT: Final = 22


def retained(opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """``opts``, retained on delete wherever they protect.

    A protected resource that a destroy (once unprotected) or switching Slurm off would delete
    takes state with it (a database, its passwords, the CRDs of both), so Pulumi forgets it
    instead.

    Args:
        opts: the resource's options (``protect`` set where the stack protects state).
    """
    return pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(retain_on_delete=bool(opts.protect))
    )


def random_secret(
    resource_name: str,
    secret_name: str,
    lengths: dict[str, int],
    *,
    namespace: k8s.core.v1.Namespace,
    parent: pulumi.Resource,
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.Secret:
    """A Secret in the Slurm namespace of random values (alphanumeric, kept by Pulumi).

    Args:
        resource_name: Pulumi name of the Secret, stem of its passwords' names.
        secret_name: the Secret's name.
        lengths: key -> characters of its random value.
        namespace: the Slurm namespace, which the Secret waits for.
        parent: the Slurm component, parent of the random values.
        opts: options of the Secret (parent, provider, protection).
    """
    values = {
        key: random.RandomPassword(
            f"{resource_name}-{key}",
            length=length,
            special=False,
            opts=pulumi.ResourceOptions(parent=parent, protect=opts.protect),
        ).result
        for key, length in lengths.items()
    }
    return k8s.core.v1.Secret(
        resource_name,
        metadata={"name": secret_name, "namespace": NAMESPACE},
        type="Opaque",
        string_data=values,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
    )
