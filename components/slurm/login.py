"""The Slurm login set: login pods behind an internal NLB, with the users' directory.

Who may reach it (``slurm.login.allowedCidrs``, else the VPC), its image (the stack's login
build, else Slinky's), and, with a directory, the container that keeps the teams' accounts.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from components.config import PlatformConfig
from components.config.pools import GENERAL_LUSTRE_POOL
from components.node_pools import POOL_LABEL
from components.slurm import directory as slurm_directory
from components.slurm import host_keys
from components.slurm.common import (
    LOG_SIDECAR_RESOURCES,
    LOGIN_SSH_PORT,
    chart_image,
    chart_reference,
    sidecar_image,
    slinky_image_reference,
)
from components.slurm.node_sets import shared_mount, shared_volume
from components.storage.model_store import model_store_volumes
from components.web_uis import INTERNAL_LOAD_BALANCER

LOGIN_PLACEMENT: Final = {"nodeSelector": {POOL_LABEL: GENERAL_LUSTRE_POOL}}
"""Login pods mount the file system, so they run on the CPU pool in its zone."""
LOGIN_SET: Final = "login"


def login_image(config: PlatformConfig) -> str:
    """The login pods' image: the stack's login build, else Slinky's login image.

    Args:
        config: the validated platform; ``slurm.images.login`` names the stack's build of
            ``images/slurmd`` with ``ROLE=login``. Default: the chart's Slurm release's image.
    """
    return config.slurm.images.login or slinky_image_reference("login")


def login_sources(config: PlatformConfig) -> list[str]:
    """Who may reach the login service: ``slurm.login.allowedCidrs``.

    Config requires them and holds them outside the VPC's block, whose addresses the pods take.

    Args:
        config: the validated platform config (Slurm on).
    """
    login = config.slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    return list(login.allowed_cidrs)


def login_set_values(config: PlatformConfig) -> dict[str, Any]:
    """The chart's ``loginsets`` entry: login pods behind an internal NLB.

    With a directory, users log in with their directory keys (sshd asks SSSD), and a
    container beside the login container keeps the teams' Slurm accounts
    (:func:`components.slurm.directory.accounts_script`).

    Args:
        config: the validated platform.
    """
    slurm = config.slurm
    login = slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    directory = slurm.directory
    dropped = {"capabilities": {"drop": list(slurm_directory.LOGIN_DROPPED_CAPABILITIES)}}
    mounts = [shared_mount()]
    volumes = [shared_volume()]
    if config.model_store.enabled:
        # The whole model store at /models, as on the node sets: users reach their teams'.
        model_volumes, model_mounts = model_store_volumes(whole_file_system=True)
        mounts += model_mounts
        volumes += model_volumes
    containers: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    if directory is not None:
        with_ca = directory.ca_certificates is not None
        if with_ca:
            mounts.append(slurm_directory.ca_mount())
            volumes.append(slurm_directory.ca_volume())
        volumes += [slurm_directory.accounts_sssd_volume(), slurm_directory.teams_volume()]
        # Users ssh to the nodes from here: every node's persistent key is known.
        mounts.append(host_keys.known_hosts_mount())
        volumes.append(host_keys.known_hosts_volume())
        extra["metadata"] = {"annotations": slurm_directory.config_hash(directory)}
        script = slurm_directory.accounts_script(
            cluster=config.slurm_cluster_name,
            interval=slurm_directory.ACCOUNTS_INTERVAL_SECONDS,
        )
        containers.append(
            # The reference the chart renders for the login container, so both pull one image.
            slurm_directory.accounts_container(
                chart_reference(login_image(config)), script, ca_certificates=with_ca
            )
        )
        extra["extraSshdConfig"] = slurm_directory.SSH_KEYS_COMMAND
    return {
        # Explicit, though loginsetDefaults says the same: an entry renders only when on.
        "enabled": True,
        "replicas": login.replicas,
        "login": {
            "image": chart_image(login_image(config)),
            "volumeMounts": mounts,
            "resources": {
                "requests": {"cpu": str(login.cpu), "memory": f"{login.memory_gib}Gi"},
                "limits": {"memory": f"{login.memory_gib}Gi"},
            },
            # supervisord restarts sshd inside the pod; this catches a pod where nothing
            # listens on 22 any more (the operator sets only a readiness probe on sackd's
            # socket, loginbuilder/login_app.go).
            "livenessProbe": {
                "tcpSocket": {"port": LOGIN_SSH_PORT},
                "periodSeconds": 30,
                "failureThreshold": 4,
            },
            # sshd, sssd and sackd need root's usual capabilities (setuid to the user, chroot
            # for privilege separation) and file capabilities of sssd's helpers, so no
            # allowPrivilegeEscalation: false; raw sockets and device nodes they never need.
            "securityContext": dropped,
        },
        # Copies and chowns a few config files (the operator's initconf.sh).
        "initconf": {
            "image": sidecar_image(),
            "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
            "securityContext": dropped,
        },
        "rootSshAuthorizedKeys": "\n".join(login.ssh_authorized_keys) + "\n",
        **extra,
        "podSpec": {
            **LOGIN_PLACEMENT,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": volumes,
            **({"containers": containers} if containers else {}),
        },
        "service": {
            "metadata": {"annotations": dict(INTERNAL_LOAD_BALANCER)},
            "spec": {
                "type": "LoadBalancer",
                "loadBalancerSourceRanges": login_sources(config),
                # Keeps the client's address, which the login NetworkPolicy filters (with
                # Cluster, kube-proxy would SNAT it to a node's).
                "externalTrafficPolicy": "Local",
            },
        },
    }
