"""Slurm accounting: mariadb-operator and the one MariaDB that slurmdbd writes to.

The database's passwords are random values in a Secret; its volume is encrypted gp3 of the state
StorageClass, retained where the stack protects state.
"""

from __future__ import annotations

import typing
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.helm import release, with_system_placement
from components.slurm.common import (
    DO_NOT_DISRUPT,
    MARIADB_OPERATOR_NAMESPACE,
    NAMESPACE,
    SCRATCH_MOUNT,
    SCRATCH_VOLUME,
    SERVICE_PLACEMENT,
    STATE_STORAGE_CLASS,
    random_secret,
    read_only_context,
    retained,
)
from components.tenancy import RUNTIME_DEFAULT_SECCOMP

MARIADB_API: Final = "k8s.mariadb.com/v1alpha1"
DATABASE_HOST: Final = "slurm-accounting-db"
"""The MariaDB resource, its Service, and the Secret with its passwords."""
DATABASE_NAME: Final = "slurm_acct_db"
DATABASE_USER: Final = "slurm"
DATABASE_PORT: Final = 3306
DATABASE_PASSWORD_KEY: Final = "password"
MYSQL_UID: Final = 999
"""The ``mysql`` user (and group) of the MariaDB image, as which the server runs: the user
mariadb-operator v26.6.0 runs it as when the resource names none (statefulset_builder.go)."""
DATABASE_ROOT_PASSWORD_KEY: Final = "root-password"


def mariadb_operator_values() -> dict[str, Any]:
    """mariadb-operator on the system nodes, its CRDs from their own chart.

    Uninstalling a chart that owns the CRDs would delete every database.
    """
    return with_system_placement(versions.MARIADB_OPERATOR_CHART, {"crds": {"enabled": False}})


def database_claim_retention(protect: bool) -> dict[str, str]:
    """``spec.storage.pvcRetentionPolicy`` of the accounting database.

    mariadb-operator v26.6.0 hands it to its StatefulSet unchanged on Kubernetes >= 1.32
    (pkg/builder/statefulset_builder.go, mariadbPVCRetentionPolicy; every supported minor is):
    ``Delete`` lets Kubernetes delete the claim with the StatefulSet (``whenDeleted``) or with
    a removed replica (``whenScaled``), ``Retain`` keeps it. Kept only where protected, so an
    unprotected stack's ``destroy`` takes the volume too (its class reclaims with ``Delete``).

    Args:
        protect: the stack's ``protectStatefulResources``.
    """
    policy = "Retain" if protect else "Delete"
    return {"whenDeleted": policy, "whenScaled": policy}


def mariadb_spec(storage_gib: int, *, protect: bool) -> dict[str, Any]:
    """The accounting database: one MariaDB on an encrypted volume, retained where protected.

    Passwords come from the Secret :data:`DATABASE_HOST` (random values Pulumi keeps as secrets).
    InnoDB settings follow Slurm's accounting guide (buffer pool, lock wait timeout).

    Args:
        storage_gib: size of its volume, GiB.
        protect: keep its claim when the database goes (:func:`database_claim_retention`).
    """
    secret = DATABASE_HOST
    return {
        "image": versions.MARIADB_IMAGE,
        "replicas": 1,
        "port": DATABASE_PORT,
        "rootPasswordSecretKeyRef": {"name": secret, "key": DATABASE_ROOT_PASSWORD_KEY},
        "username": DATABASE_USER,
        "passwordSecretKeyRef": {"name": secret, "key": DATABASE_PASSWORD_KEY},
        "database": DATABASE_NAME,
        "storage": {
            "size": f"{storage_gib}Gi",
            "storageClassName": STATE_STORAGE_CLASS,
            "resizeInUseVolumes": True,
            "pvcRetentionPolicy": database_claim_retention(protect),
        },
        "myCnf": (
            "[mariadb]\n"
            "innodb_buffer_pool_size=1024M\n"
            "innodb_log_file_size=64M\n"
            "innodb_lock_wait_timeout=900\n"
            "max_allowed_packet=16M\n"
        ),
        "resources": {
            "requests": {"cpu": "500m", "memory": "2Gi"},
            "limits": {"memory": "2Gi"},
        },
        # The server as the image's mysql user, as mariadb-operator runs it by default (a
        # podSecurityContext replaces the operator's whole: v26.6.0 pkg/builder/
        # securitycontext_builder.go, buildPodSecurityContextWithUserGroup), under
        # RuntimeDefault seccomp, with no capability and a read-only root: it writes its data
        # volume, its socket and lock under /run/mysqld and temporary files under /tmp
        # (MariaDB/mariadb-docker 11.8 Dockerfile and docker-entrypoint.sh).
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": MYSQL_UID,
            "runAsGroup": MYSQL_UID,
            "fsGroup": MYSQL_UID,
            "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
        },
        "securityContext": read_only_context(),
        "volumes": [dict(SCRATCH_VOLUME), {"name": "run", "emptyDir": {}}],
        "volumeMounts": [dict(SCRATCH_MOUNT), {"name": "run", "mountPath": "/run/mysqld"}],
        "podMetadata": {"annotations": dict(DO_NOT_DISRUPT)},
        **SERVICE_PLACEMENT,
    }


DATABASE_POD_LABELS: Final = {"app.kubernetes.io/name": "mariadb",
                              "app.kubernetes.io/instance": DATABASE_HOST}  # fmt: skip
"""mariadb-operator's labels on the MariaDB resource's pods."""


def database(
    name: str,
    storage_gib: int,
    namespace: k8s.core.v1.Namespace,
    state_class: k8s.storage.v1.StorageClass,
    *,
    parent: pulumi.Resource,
    opts_after: typing.Callable[..., pulumi.ResourceOptions],
) -> k8s.apiextensions.CustomResource:
    """mariadb-operator and the accounting database, with its passwords in a Secret.

    Args:
        name: the Slurm component's name, prefix of the resources' names.
        storage_gib: size of the database's volume, GiB.
        namespace: the Slurm namespace.
        state_class: the StorageClass of its volume (:data:`STATE_STORAGE_CLASS`).
        parent: the Slurm component.
        opts_after: the component's options for a resource that waits for the given ones
            (``stateful=True``: protected where the stack protects state).
    """
    crds = release(
        "mariadb-operator-crds",
        versions.MARIADB_OPERATOR_CRDS_CHART,
        namespace=MARIADB_OPERATOR_NAMESPACE,
        values={},
        create_namespace=True,
        opts=retained(opts_after(stateful=True)),
    )
    operator = release(
        "mariadb-operator",
        versions.MARIADB_OPERATOR_CHART,
        namespace=MARIADB_OPERATOR_NAMESPACE,
        values=mariadb_operator_values(),
        opts=opts_after(crds),
    )
    # The passwords the retained database was made with stay beside it (docs/how-to/tear-down.md
    # says how to adopt both again).
    passwords = random_secret(
        f"{name}-{DATABASE_HOST}",
        DATABASE_HOST,
        {DATABASE_PASSWORD_KEY: 32, DATABASE_ROOT_PASSWORD_KEY: 32},
        namespace=namespace,
        parent=parent,
        opts=retained(opts_after(namespace, stateful=True)),
    )
    database_opts = retained(opts_after(operator, passwords, state_class, stateful=True))
    return k8s.apiextensions.CustomResource(
        f"{name}-{DATABASE_HOST}",
        api_version=MARIADB_API,
        kind="MariaDB",
        metadata={"name": DATABASE_HOST, "namespace": NAMESPACE},
        spec=typing.cast(Any, mariadb_spec(storage_gib, protect=bool(database_opts.protect))),
        opts=database_opts,
    )
