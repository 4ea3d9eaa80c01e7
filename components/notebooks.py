"""JupyterHub: each user's notebook server in their team's namespace, queue and storage.

One hub for the cluster (chart :data:`~components.versions.JUPYTERHUB_CHART`, JupyterHub 5.5.0
with KubeSpawner 7.0.0 and OAuthenticator 17.4.0) on the system nodes, in its own namespace.
Servers land in team namespaces through their profiles: every profile is a team's and carries
``kubespawner_override.namespace``, which KubeSpawner applies before it creates the pod and
starts its pod reflector for that namespace (jupyterhub/kubespawner 7.0.0 kubespawner/spawner.py,
``_start`` and ``_load_profile``). The hub shows a user only the profiles of the teams whose
groups they are in (:data:`PROFILE_CONFIG`). Why this and not KubeSpawner's user namespaces or a
hub per team: docs/concepts/notebooks.md.

Pure builders: :func:`team_profiles` (the profiles of a team, one per pool shape),
:func:`notebook_pod` (the pod a profile makes, as the platform means it: what the admission
tests judge), :func:`kubespawner_override` (the same pod said as KubeSpawner's traits),
:func:`hub_values` (the chart's values), :func:`hub_team_role` (what the hub may do in a team
namespace) and :func:`metadata_egress_policy`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import versions
from components.cluster import (
    SYSTEM_NODE_SELECTOR,
    SYSTEM_TOLERATION,
    encrypted_gp3_class,
    storage_class,
)
from components.config import NotebooksConfig, OidcConfig, TeamConfig, UiExposureConfig
from components.config.pools import GENERAL_LUSTRE_POOL, GENERAL_POOL, NodePoolConfig
from components.helm import release
from components.kuberay import DO_NOT_DISRUPT
from components.node_pools import POOL_LABEL
from components.scheduling import QUEUE_ANNOTATION
from components.storage.layout import TeamDirectory
from components.storage.model_store import TEAM_VOLUME, model_store_environment
from components.tenancy import ControllerIngress, hardened_pod, pod_security_labels
from components.trainer import team_devices, team_pod_spec, team_volumes
from components.web_uis import ui_service
from components.workloads import (
    node_resources,
    pool_workload_placement,
    shared_memory_volume,
    whole_node_memory_mib,
)

NAMESPACE: Final = "jupyterhub"
RELEASE: Final = "jupyterhub"
NOTEBOOK_PORT: Final = 8888
"""The single-user server's port (jupyterhub/kubespawner 7.0.0 kubespawner/spawner.py, ``port``
default 8888): the proxy routes each user's traffic to the pod's address there."""
HUB_PORT: Final = 8081
"""The hub's API, which each server calls to log its user in and report activity
(jupyterhub/zero-to-jupyterhub-k8s 4.4.0 jupyterhub/files/hub/jupyterhub_config.py,
``hub_container_port``)."""
HUB_CONNECT_URL: Final = f"http://hub.{NAMESPACE}.svc.cluster.local:{HUB_PORT}"
"""Where servers call the hub, ``JUPYTERHUB_API_URL``'s base. The chart sets
``c.JupyterHub.hub_connect_url`` to ``http://hub:8081``, the Service's short name (4.4.0
jupyterhub/files/hub/jupyterhub_config.py), which resolves only in the hub's namespace; a server
in a team namespace needs the Service's full name. ``hub.config`` is loaded after it and wins
(same file, "load hub.config values")."""
PROXY_PORT: Final = 8000
"""configurable-http-proxy's public port in its pod (4.4.0 jupyterhub/templates/proxy/
deployment.yaml, container port ``http``)."""
HUB_POD_LABELS: Final = {"component": "hub", "release": RELEASE}
PROXY_POD_LABELS: Final = {"component": "proxy", "release": RELEASE}
"""The chart's legacy pod labels, which its own selectors use (4.4.0 jupyterhub/templates/
_helpers.tpl, ``jupyterhub.commonLabels``; the component is the template's directory)."""
NOTEBOOK_POD_LABELS: Final = {"component": "singleuser-server"}
"""What KubeSpawner labels each server's pod (kubespawner 7.0.0 spawner.py, ``component_label``
default ``singleuser-server``, set as ``component`` and ``app.kubernetes.io/component``)."""
UI_ACCESS_SERVICE: Final = "jupyterhub-access"
"""The proxy's Service as ``cluster.uiExposure`` says; the chart's ``proxy-public`` stays
ClusterIP, since its values cannot say ``externalTrafficPolicy``, which keeps the client's
address for ``loadBalancerSourceRanges`` (components/web_uis.py)."""
UI_PORT: Final = 80
HOME_MOUNT: Final = "/home/jovyan"
HOME_SUBPATH: Final = "home/{username}"
"""Each user's home: a directory of the team's model store area, ``/models/home/<user>`` seen
from a job. KubeSpawner expands ``{username}`` in volume mounts (kubespawner 7.0.0 spawner.py,
``_expand_all``)."""
METADATA_EGRESS_POLICY: Final = "deny-instance-metadata-notebooks"
INSTANCE_METADATA_CIDR: Final = "169.254.169.254/32"
SPAWNER_ROLE: Final = "jupyterhub-spawner"
"""The hub's Role and RoleBinding in each team namespace (:func:`hub_team_role`)."""
OIDC_SECRET: Final = "jupyterhub-oidc"
OIDC_SECRET_KEY: Final = "client-secret"
STORAGE_CLASS: Final = "jupyterhub-retained"
CPU_PROFILE_RESOURCES: Final = {"cpu": "2", "memory": "8Gi"}
"""The CPU profile: a small server, not a node."""
PROFILE_CONFIG: Final = "teamProfiles"
"""Key of ``custom`` holding each team's groups and profiles (the chart passes ``custom`` to the
hub as is: 4.4.0 values.schema.yaml, ``custom`` takes any keys)."""
ACCELERATOR_CAP_CONFIG: Final = "maxAcceleratorServersPerUser"
NOT_PREEMPTABLE: Final = {"volcano.sh/preemptable": "false"}
"""Volcano's reclaim and preempt actions evict only preemptable pods, and a pod is preemptable
unless this annotation says otherwise (volcano-sh/volcano v1.15.1 pkg/scheduler/api/pod_info.go,
GetPodPreemptable, default true; pkg/scheduler/actions/reclaim/reclaim.go skips a task that is
not). A server holds a person's unsaved kernel state: another queue reclaiming its share waits
for the idle culler instead."""
BYTE_SUFFIXES: Final = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
"""JupyterHub's memory suffixes, all binary (jupyterhub/jupyterhub 5.5.0 jupyterhub/traitlets.py,
``ByteSpecification.UNIT_SUFFIXES``): ``8G`` is Kubernetes' ``8Gi``."""
CPU_START_TIMEOUT: Final = 900
"""Seconds a CPU server may take to start: a general node's launch and the notebook image's pull
(several GB, the CUDA image). The chart's 300 (jupyterhub/zero-to-jupyterhub-k8s 4.4.0
jupyterhub/values.yaml, ``singleuser.startTimeout``) ends a first start on a fresh node."""
GPU_START_TIMEOUT: Final = 1800
"""Seconds an accelerator server on a pool without EFA may take: the queue, the node's launch
(its device plugin and checks) and the image's pull."""
WHOLE_NODE_START_TIMEOUT: Final = 2700
"""Seconds a whole-node server on an EFA pool may take: the queue, an EFA node's launch (its
EFA and device plugins, huge pages) and the image's pull."""

PROXY_INGRESS: Final = ControllerIngress(
    name="allow-jupyterhub-proxy",
    pods={"matchLabels": dict(NOTEBOOK_POD_LABELS)},
    namespace=NAMESPACE,
    controller={"matchLabels": dict(PROXY_POD_LABELS)},
    ports=(NOTEBOOK_PORT,),
    why="JupyterHub's proxy forwards each user's browser to their server's pod on 8888 "
    "(jupyterhub/kubespawner 7.0.0 kubespawner/spawner.py, port; the proxy routes to the pod's "
    "address)",
)
HUB_INGRESS: Final = ControllerIngress(
    name="allow-jupyterhub-hub",
    pods={"matchLabels": dict(NOTEBOOK_POD_LABELS)},
    namespace=NAMESPACE,
    controller={"matchLabels": dict(HUB_POD_LABELS)},
    ports=(NOTEBOOK_PORT,),
    why="the hub polls a starting server on 8888 until it answers (jupyterhub 5.5.0 "
    "jupyterhub/user.py _wait_up, objects.py Server.wait_up); the idle culler reads activity "
    "from the hub's API, not the server",
)


@dataclass(frozen=True)
class NotebookProfile:
    """One shape of server a team may start: a pool and what it takes there."""

    slug: str
    """The profile's id: ``<team>-<shape>``."""
    display_name: str
    pool: NodePoolConfig | None
    """The accelerator pool; None: the CPU profile on a general pool."""
    devices: int
    """Accelerator devices it requests (0 on the CPU profile)."""
    whole_node: bool
    """Every device, EFA interface and huge page of the node, as a job's pod."""
    image: str

    @property
    def accelerated(self) -> bool:
        """Whether it counts against the per-user cap on accelerator servers."""
        return self.devices > 0


def start_timeout(profile: NotebookProfile) -> int:
    """Seconds the hub waits for a server of ``profile`` to start before it gives up.

    JupyterHub's ``Spawner.start_timeout`` (jupyterhub 5.5.0 jupyterhub/spawner.py): the hub
    waits this long for KubeSpawner's start (jupyterhub/user.py ``spawn``, ``wait_for``), and
    KubeSpawner for the pod to run (kubespawner 7.0.0 kubespawner/spawner.py ``_start``). A
    server that needs a new node waits for the queue, the node's launch and the image's pull.
    """
    if profile.pool is None:
        return CPU_START_TIMEOUT
    return WHOLE_NODE_START_TIMEOUT if profile.pool.uses_efa else GPU_START_TIMEOUT


def byte_specification(quantity: str) -> str:
    """A Kubernetes memory quantity (``8Gi``, ``12050Mi``) as JupyterHub's memory traits take it.

    KubeSpawner's ``mem_limit`` and ``mem_guarantee`` are JupyterHub's ``ByteSpecification``
    (jupyterhub 5.5.0 jupyterhub/spawner.py ``mem_limit``, ``mem_guarantee``): an integer of
    bytes or a number with one of :data:`BYTE_SUFFIXES`; ``8Gi`` is refused, and the spawn with
    it. KubeSpawner writes the bytes into the pod (kubespawner 7.0.0 kubespawner/objects.py,
    ``make_pod``).

    Args:
        quantity: a binary-suffixed quantity (``Ki``, ``Mi``, ``Gi``, ``Ti``), as the pod
            builders write them.

    Raises:
        ValueError: another form (a decimal suffix has no JupyterHub spelling).
    """
    number, suffix = quantity[:-2], quantity[-2:]
    if suffix[1:] != "i" or suffix[0] not in BYTE_SUFFIXES or not number.isdigit():
        raise ValueError(f"memory {quantity!r}: expected a whole number with Ki, Mi, Gi or Ti")
    return f"{number}{suffix[0]}"


def byte_specification_bytes(value: object) -> int:
    """The bytes JupyterHub reads from a memory trait's value, as its trait validates it.

    ``ByteSpecification.validate`` (jupyterhub 5.5.0 jupyterhub/traitlets.py): a number is
    bytes; a string is a number and one suffix of :data:`BYTE_SUFFIXES`.

    Args:
        value: the value of ``mem_limit`` or ``mem_guarantee`` in a profile.

    Raises:
        ValueError: a value the trait refuses (``8Gi``, ``8GB``, ``lots``).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a valid memory specification")
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{value!r} is not a valid memory specification")
    try:
        number = float(value[:-1])
    except ValueError:
        raise ValueError(f"{value!r} is not a valid memory specification") from None
    if value[-1] not in BYTE_SUFFIXES:
        raise ValueError(f"{value!r} is not a valid memory specification")
    return int(number * BYTE_SUFFIXES[value[-1]])


def pool_profiles(
    pools: Sequence[NodePoolConfig], notebooks: NotebooksConfig, team: TeamConfig
) -> list[NotebookProfile]:
    """A team's profiles: CPU first (the default), then each pool's, from the pools.

    Pools without EFA take partial nodes: GPU pools get the ``gpuProfiles`` counts their
    instance holds; EFA pools get a whole-node profile where ``efaPools: wholeNode`` (a partial
    node there would strand the rest of a node a gang needs whole), or none. Trainium profiles
    are whole nodes: a partial Trainium pod needs the Neuron scheduler extension, not Volcano.
    A profile whose devices the team's quota and queue capability cannot both hold is left
    out, as :func:`components.trainer.team_runtimes` leaves out the runtimes of a pool the
    team never holds a node of (:func:`components.trainer.team_devices`): the hub offers no
    server that would stay Pending.

    Args:
        pools: the stack's accelerator pools.
        notebooks: the validated ``notebooks`` section (images present where needed).
        team: the team, whose name prefixes each slug and whose quota and capability bound
            each profile's devices.
    """
    cuda = notebooks.images.cuda or ""
    made = [NotebookProfile(f"{team.name}-cpu", "CPU (2 vCPU, 8 GiB)", None, 0, False, cuda)]
    for pool in pools:
        instance = pool.instance
        devices = instance.accelerators
        allowed = team_devices(team, pool)
        image = cuda if instance.accelerator == "nvidia" else (notebooks.images.neuron or "")
        unit = "GPU" if instance.accelerator == "nvidia" else "Trainium device"
        if pool.uses_efa and notebooks.efa_pools == "none":
            continue
        if not pool.uses_efa and instance.accelerator == "nvidia":
            made += [
                NotebookProfile(
                    f"{team.name}-{pool.name}-{count}",
                    f"{count} {unit} on {pool.name}",
                    pool,
                    count,
                    count == devices,
                    image,
                )
                for count in sorted(set(notebooks.gpu_profiles))
                if count <= min(devices, allowed)
            ]
            continue
        if devices > allowed:
            continue
        made.append(
            NotebookProfile(
                f"{team.name}-{pool.name}-node",
                f"Whole {pool.name} node ({devices} {unit}s)",
                pool,
                devices,
                True,
                image,
            )
        )
    return made


def _partial_resources(pool: NodePoolConfig, devices: int) -> dict[str, Any]:
    """Requests and limits of ``devices`` accelerators, with that share of the node.

    The share of its vCPUs and of the memory a whole-node pod gets
    (:func:`components.workloads.whole_node_memory_mib`).
    """
    instance = pool.instance
    node_devices = instance.accelerators
    # One vCPU less than the share: the node's DaemonSets take some of every node.
    cpu = max(1, instance.vcpu * devices // node_devices - 1)
    memory_mib = whole_node_memory_mib(pool) * devices // node_devices
    amounts = {
        "cpu": str(cpu),
        "memory": f"{memory_mib}Mi",
        pool.instance.accelerator_resource: str(devices),
    }
    return {"requests": dict(amounts), "limits": dict(amounts)}


def notebook_pod(
    profile: NotebookProfile,
    team: TeamConfig,
    *,
    directories: list[TeamDirectory],
    job_service_account: bool,
    username: str = "{username}",
) -> dict[str, Any]:
    """The pod a profile makes in the team's namespace: ``{"metadata": ..., "spec": ...}``.

    The team pod of Trainer runtimes and Ray nodes (:func:`components.trainer.team_pod_spec`):
    user 1000 with the team's gid, Volcano with the team's queue annotation (Volcano's
    controller makes a bare pod's PodGroup and takes its queue from that annotation: volcano-sh/
    volcano v1.15.1 pkg/controllers/podgroup/pg_controller_handler.go,
    createNormalPodPGIfNotExist and buildPodGroupFromPod), the training priority, the pool's
    selector and tolerations, the team's Lustre claims at ``/fsx`` where the pod's pool mounts
    them, the model store at ``/models`` and the home directory on it.

    Args:
        profile: the profile.
        team: the team (namespace, queue, gid).
        directories: the team's Lustre directories where the profile's pool mounts the file
            system (none elsewhere).
        job_service_account: run as the team's job service account, its token mounted
            (``notebooks.jobServiceAccount``); otherwise the namespace's default account and
            no token.
        username: the user's name; KubeSpawner's template by default.
    """
    volumes, mounts = team_volumes(directories, models=True)
    mounts.append({"name": TEAM_VOLUME, "mountPath": HOME_MOUNT, "subPath": f"home/{username}"})
    pool = profile.pool
    if pool is None:
        resources = {
            "requests": dict(CPU_PROFILE_RESOURCES),
            "limits": dict(CPU_PROFILE_RESOURCES),
        }
        general = GENERAL_LUSTRE_POOL if directories else GENERAL_POOL
        placement: dict[str, Any] = {"nodeSelector": {POOL_LABEL: general}}
    else:
        placement = pool_workload_placement(pool)
        if profile.whole_node:
            resources = node_resources(pool)
            volumes.append(shared_memory_volume(pool))
            mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        else:
            resources = _partial_resources(pool, profile.devices)
    container = {
        "name": "notebook",
        "image": profile.image,
        "ports": [{"name": "notebook-port", "containerPort": NOTEBOOK_PORT}],
        "env": model_store_environment(),
        "resources": resources,
        "volumeMounts": mounts,
    }
    spec = hardened_pod(
        team_pod_spec(container, placement=placement, volumes=volumes, group_id=team.gid)
    )
    if job_service_account:
        spec["automountServiceAccountToken"] = True
    else:
        spec["serviceAccountName"] = "default"
    return {
        "metadata": {
            "namespace": team.name,
            "labels": dict(NOTEBOOK_POD_LABELS),
            # Karpenter neither consolidates nor drift-replaces a running server's node, nor
            # does its drain evict it (kubernetes-sigs/karpenter v1.14.1
            # pkg/utils/pod/scheduling.go, IsDisruptable: a bare pod is disruptable otherwise).
            "annotations": {
                QUEUE_ANNOTATION: team.name,
                **DO_NOT_DISRUPT,
                **NOT_PREEMPTABLE,
            },
        },
        "spec": spec,
    }


def kubespawner_override(pod: dict[str, Any]) -> dict[str, Any]:
    """:func:`notebook_pod` said as KubeSpawner's traits, a profile's ``kubespawner_override``.

    Each trait is KubeSpawner's for that part of the pod (kubespawner 7.0.0 spawner.py:
    ``namespace``, ``node_selector``, ``tolerations``, ``scheduler_name``,
    ``priority_class_name``, ``extra_annotations``, ``uid``, ``gid``, ``fs_gid``,
    ``supplemental_gids``, ``pod_security_context``, ``container_security_context``,
    ``service_account``, ``automount_service_account_token``, ``cpu_guarantee``,
    ``mem_guarantee``, ``extra_resource_guarantees``, their limits, ``volumes``,
    ``volume_mounts``, ``environment``, ``image``).

    Args:
        pod: a profile's pod (:func:`notebook_pod`).
    """
    spec = pod["spec"]
    (container,) = spec["containers"]
    context = spec["securityContext"]
    requests = dict(container["resources"]["requests"])
    limits = dict(container["resources"]["limits"])
    return {
        "namespace": pod["metadata"]["namespace"],
        "image": container["image"],
        "node_selector": dict(spec.get("nodeSelector", {})),
        "tolerations": list(spec.get("tolerations", [])),
        "scheduler_name": spec["schedulerName"],
        "priority_class_name": spec["priorityClassName"],
        "extra_annotations": dict(pod["metadata"]["annotations"]),
        "uid": context["runAsUser"],
        "gid": context["runAsGroup"],
        "fs_gid": context["fsGroup"],
        "supplemental_gids": list(context.get("supplementalGroups", [])),
        "pod_security_context": {"runAsNonRoot": True, "seccompProfile": context["seccompProfile"]},
        "container_security_context": dict(container["securityContext"]),
        "service_account": spec["serviceAccountName"],
        "automount_service_account_token": spec["automountServiceAccountToken"],
        # A whole GPU node's pod states no CPU (components/workloads.py node_resources).
        "cpu_guarantee": float(requests.pop("cpu")) if "cpu" in requests else None,
        "cpu_limit": float(limits.pop("cpu")) if "cpu" in limits else None,
        "mem_guarantee": byte_specification(requests.pop("memory")),
        "mem_limit": byte_specification(limits.pop("memory")),
        "extra_resource_guarantees": requests,
        "extra_resource_limits": limits,
        "volumes": list(spec["volumes"]),
        "volume_mounts": list(container["volumeMounts"]),
        "environment": {item["name"]: item["value"] for item in container["env"]},
    }


def team_groups(team: TeamConfig) -> list[str]:
    """The identity provider's groups whose members get the team's profiles."""
    return sorted({*team.member_groups, *team.admin_groups})


def team_profile_list(
    team: TeamConfig,
    profiles: Sequence[NotebookProfile],
    *,
    directories: dict[str, list[TeamDirectory]],
    job_service_account: bool,
) -> list[dict[str, Any]]:
    """The team's entries of KubeSpawner's ``profile_list``, the CPU one the default.

    Args:
        team: the team.
        profiles: its profiles (:func:`pool_profiles`).
        directories: pool name (``""`` for the CPU profile) -> the team's Lustre directories
            mounted there.
        job_service_account: ``notebooks.jobServiceAccount``.
    """
    entries = []
    for index, profile in enumerate(profiles):
        pool = profile.pool.name if profile.pool is not None else ""
        pod = notebook_pod(
            profile, team, directories=directories.get(pool, []),
            job_service_account=job_service_account,
        )  # fmt: skip
        entry: dict[str, Any] = {
            "slug": profile.slug,
            "display_name": f"{team.name}: {profile.display_name}",
            "description": f"Team {team.name}'s namespace and queue"
            + (f", pool {pool}" if pool else ", general nodes"),
            "kubespawner_override": {
                **kubespawner_override(pod),
                "start_timeout": start_timeout(profile),
            },
            # Read by the hub's pre-spawn hook (the per-user cap), not by KubeSpawner.
            "accelerated": profile.accelerated,
        }
        if index == 0:
            entry["default"] = True
        entries.append(entry)
    return entries


HUB_CONFIG: Final = """
# Written by components/notebooks.py: a user sees the profiles of their teams only, and may
# run at most maxAcceleratorServersPerUser accelerator servers at once.
from z2jh import get_config

_TEAMS = get_config("custom.teamProfiles", [])
_CAP = int(get_config("custom.maxAcceleratorServersPerUser", 0))


def _user_groups(spawner):
    return {group.name for group in spawner.user.groups}


def _refusal(message):
    # The hub's error page shows an exception's jupyterhub_message (jupyterhub 5.5.0
    # handlers/base.py, write_error), a bare 500 otherwise.
    error = RuntimeError(message)
    error.jupyterhub_message = message
    return error


def _profiles(spawner):
    groups = _user_groups(spawner)
    profiles = [
        profile
        for team in _TEAMS
        if groups & set(team["groups"])
        for profile in team["profiles"]
    ]
    if not profiles:
        # Without profiles KubeSpawner would start its defaults in the hub's namespace,
        # which its Pod Security level refuses: say why instead.
        raise _refusal(
            f"{spawner.user.name} is in no team's group (groups: "
            f"{', '.join(sorted(groups)) or 'none'}): a server starts only in a team's "
            "namespace; ask your team's admins to add you to its group"
        )
    return profiles


def _chosen(spawner):
    slug = spawner.user_options.get("profile")
    profiles = _profiles(spawner)
    for profile in profiles:
        if profile["slug"] == slug or (not slug and profile.get("default")):
            return profile
    return profiles[0]


def _accelerated(spawner):
    return bool(spawner.user_options.get("profile")) and any(
        p["slug"] == spawner.user_options["profile"] and p.get("accelerated")
        for team in _TEAMS for p in team["profiles"]
    )


def _pre_spawn(spawner):
    # The hub reads start_timeout before KubeSpawner applies the profile (jupyterhub
    # user.py spawn), so the profile's own is set here, before the start.
    spawner.start_timeout = int(_chosen(spawner)["kubespawner_override"]["start_timeout"])
    _cap(spawner)


def _cap(spawner):
    if not _accelerated(spawner):
        return
    running = [
        other for name, other in spawner.user.spawners.items()
        if other is not spawner and other.active and _accelerated(other)
    ]
    if len(running) >= _CAP:
        raise _refusal(
            f"at most {_CAP} accelerator servers per user: stop one of yours first"
        )


c.KubeSpawner.profile_list = _profiles
c.KubeSpawner.pre_spawn_hook = _pre_spawn
"""
"""``hub.extraConfig``: KubeSpawner takes a callable ``profile_list`` (kubespawner 7.0.0
spawner.py, ``profile_list``: "a callable that returns a list") and a ``pre_spawn_hook``
(jupyterhub 5.5.0 Spawner), which runs before the hub reads ``start_timeout`` for its wait
(jupyterhub 5.5.0 jupyterhub/user.py, ``spawn``: ``run_pre_spawn_hook``, then ``wait_for`` with
``spawner.start_timeout``), while KubeSpawner applies the profile's overrides only inside its
start (kubespawner 7.0.0 spawner.py, ``_start`` calls ``load_user_options``). Group membership
comes from the login (OAuthenticator 17.4.0 ``manage_groups``)."""


def authenticator_config(
    notebooks: NotebooksConfig, oidc: OidcConfig, teams: Sequence[TeamConfig]
) -> dict[str, Any]:
    """``hub.config``: the authenticator, its allowed groups the teams' groups.

    The generic OAuth authenticator (oauthenticator 17.4.0 oauthenticator/generic.py) with
    ``manage_groups`` (the token's groups become JupyterHub groups, which the profiles filter
    on) and ``allowed_groups`` the teams' (oauthenticator/oauth2.py, ``allowed_groups``): a user
    in no team's group is refused at login. Its client secret comes from ``OAUTH_CLIENT_SECRET``
    (oauth2.py, ``_client_secret_default``), set from a Secret (:func:`hub_values`).

    Args:
        notebooks: the ``notebooks`` section (its authenticator).
        oidc: the ``oidc`` section.
        teams: the teams.
    """
    if notebooks.authenticator == "dummy":
        return {"JupyterHub": {"authenticator_class": "dummy", "admin_access": False}}
    allowed = sorted({group for team in teams for group in team_groups(team)})
    return {
        "JupyterHub": {"authenticator_class": "generic-oauth", "admin_access": False},
        "GenericOAuthenticator": {
            "client_id": oidc.client_id,
            "authorize_url": oidc.authorize_url,
            "token_url": oidc.token_url,
            "userdata_url": oidc.userdata_url,
            "scope": list(oidc.scopes),
            "username_claim": oidc.username_claim,
            "manage_groups": True,
            "auth_state_groups_key": f"oauth_user.{oidc.groups_claim}",
            "allowed_groups": allowed,
            "admin_groups": sorted(oidc.hub_admin_groups),
            "allow_all": False,
        },
        "Authenticator": {"enable_auth_state": True},
    }


def hub_values(
    notebooks: NotebooksConfig,
    oidc: OidcConfig,
    teams: Sequence[TeamConfig],
    team_profiles: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """The jupyterhub chart's values.

    Off, as the platform's rules require: the user scheduler (a second scheduler; servers are
    Volcano's), user placeholders (capacity held without use), both image pullers (DaemonSets
    that stall the install while Karpenter launches nodes), per-user EBS homes (one zone), the
    iptables init container that blocks instance metadata (privileged: refused by the team
    namespaces' Pod Security level; the nodes' hop limit and :func:`metadata_egress_policy`
    block it instead) and the chart's user-pod tolerations (the tenant pods policy allows only
    the pools'). Hub and proxy run on the system nodes; the hub's SQLite database is on a
    retained, encrypted volume (:data:`STORAGE_CLASS`). Culling is on with the config's
    timeout.

    Args:
        notebooks: the ``notebooks`` section.
        oidc: the ``oidc`` section.
        teams: the teams.
        team_profiles: team -> its ``profile_list`` entries (:func:`team_profile_list`).
    """
    system = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": [dict(SYSTEM_TOLERATION)]}
    team_label_from = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
            "podSelector": {"matchLabels": dict(NOTEBOOK_POD_LABELS)},
        }
        for team in teams
    ]
    config = authenticator_config(notebooks, oidc, teams)
    config["JupyterHub"]["hub_connect_url"] = HUB_CONNECT_URL
    # Homes are on the model store: no per-user claim, and the hub may not delete claims in
    # team namespaces (:func:`hub_team_role`). KubeSpawner's default True would try on every
    # user's deletion (kubespawner 7.0.0 spawner.py, delete_pvc, delete_forever) and get 403.
    config["KubeSpawner"] = {"delete_pvc": False}
    timeouts = [
        int(entry["kubespawner_override"]["start_timeout"])
        for entries in team_profiles.values()
        for entry in entries
    ]
    hub: dict[str, Any] = {
        **system,
        "config": config,
        "db": {
            "type": "sqlite-pvc",
            "pvc": {
                "storage": f"{notebooks.hub_database_storage_gib}Gi",
                "storageClassName": STORAGE_CLASS,
                # Helm leaves the claim, and so its volume, when the release goes (Helm's
                # docs, "Tell Helm Not To Uninstall a Resource").
                "annotations": {"helm.sh/resource-policy": "keep"},
            },
        },
        # Never exit after failed starts: a refused spawn (the accelerator cap) or a slow
        # node would otherwise restart the hub after the chart's 5 (jupyterhub 5.5.0
        # jupyterhub/spawner.py consecutive_failure_limit, 0: not tracked;
        # jupyterhub/handlers/base.py, the abort after that many).
        "consecutiveFailureLimit": 0,
        "extraConfig": {"platform": HUB_CONFIG},
        "allowNamedServers": notebooks.max_accelerator_servers_per_user > 1,
        "networkPolicy": {
            "enabled": True,
            # The servers in team namespaces call the hub's API (login, activity).
            "ingress": [{"from": team_label_from, "ports": [{"port": HUB_PORT}]}],
            # The chart's own hub -> server rule selects its namespace only (4.4.0
            # jupyterhub/templates/hub/netpol.yaml); servers in team namespaces are reached
            # through egressAllowRules' privateIPs and nonPrivateIPs, left on (the proxy's
            # likewise), which admit every address but instance metadata's.
            "egressAllowRules": {
                "cloudMetadataServer": False,
                "dnsPortsCloudMetadataServer": False,
            },
        },
    }
    if notebooks.max_accelerator_servers_per_user > 1:
        # One default server plus the named ones the cap allows.
        hub["namedServerLimitPerUser"] = notebooks.max_accelerator_servers_per_user + 1
    if notebooks.authenticator == "oidc":
        hub["extraEnv"] = {
            "OAUTH_CLIENT_SECRET": {
                "valueFrom": {"secretKeyRef": {"name": OIDC_SECRET, "key": OIDC_SECRET_KEY}}
            }
        }
    return {
        "hub": hub,
        "proxy": {
            "service": {"type": "ClusterIP"},
            "chp": {
                **system,
                "networkPolicy": {
                    "enabled": True,
                    # No port open to every source: the access Service's policy admits clients.
                    "allowedIngressPorts": [],
                    "egressAllowRules": {
                        "cloudMetadataServer": False,
                        "dnsPortsCloudMetadataServer": False,
                    },
                },
            },
        },
        "singleuser": {
            "cloudMetadata": {"blockWithIptables": False},
            "storage": {"type": "none"},
            # The chart's own policy would select servers in its namespace only: there are none.
            "networkPolicy": {"enabled": False},
            "memory": {"guarantee": None},
            "cmd": "jupyterhub-singleuser",
            # The hub's wait where no profile sets its own (each profile does): the longest.
            "startTimeout": max(timeouts, default=CPU_START_TIMEOUT),
            "image": {
                "name": (notebooks.images.cuda or "").split(":", 1)[0],
                "tag": (notebooks.images.cuda or ":").split(":", 1)[1],
            },
        },
        "scheduling": {
            "userScheduler": {"enabled": False},
            "userPlaceholder": {"enabled": False},
            "podPriority": {"enabled": False},
            "userPods": {"tolerations": [], "nodeAffinity": {"matchNodePurpose": "ignore"}},
            "corePods": {"tolerations": [], "nodeAffinity": {"matchNodePurpose": "ignore"}},
        },
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
        "cull": {
            "enabled": True,
            "timeout": notebooks.cull_timeout_seconds,
            "every": 600,
        },
        "custom": {
            PROFILE_CONFIG: [
                {
                    "team": team.name,
                    "groups": team_groups(team),
                    "profiles": team_profiles.get(team.name, []),
                }
                for team in teams
            ],
            ACCELERATOR_CAP_CONFIG: notebooks.max_accelerator_servers_per_user,
        },
    }


def hub_team_role(team: str) -> dict[str, Any]:
    """The hub's Role in a team namespace: what KubeSpawner does there, no more.

    It creates, watches and deletes the server's pod and reads its events (kubespawner 7.0.0
    spawner.py, ``_start``, ``_start_watching_pods``, ``_start_watching_events``). No claims
    (homes are on the model store, ``storage.type: none``), no Secrets (no internal SSL) and no
    Services (``services_enabled`` is false): the chart's own Role in the hub's namespace grants
    those (4.4.0 jupyterhub/templates/hub/rbac.yaml), never here.

    Args:
        team: the team's namespace.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": SPAWNER_ROLE, "namespace": team},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get", "watch", "list", "create", "delete"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "watch", "list"]},
        ],
    }


def hub_team_role_binding(team: str) -> dict[str, Any]:
    """Binds :func:`hub_team_role` to the hub's service account (the chart's ``hub``)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": SPAWNER_ROLE, "namespace": team},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": SPAWNER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": NAMESPACE}],
    }  # fmt: skip


def ebs_key_policy(key_arn: str) -> dict[str, Any]:
    """What the EBS CSI driver's role needs to make and attach volumes with the stack's key.

    The driver's managed policy covers the AWS managed key only (kubernetes-sigs/
    aws-ebs-csi-driver v1.54.0 docs/install.md, "Encrypted EBS Volumes via KMS": ``Decrypt``,
    ``GenerateDataKeyWithoutPlaintext``, ``CreateGrant``); EC2 also describes the key and
    re-encrypts (Amazon EBS User Guide, "Permissions for IAM users" of EBS encryption). Grants
    only for AWS resources (the volume EC2 makes), on this key only; the key's policy lets the
    account's IAM policies decide (:func:`components.iam.account_administers_key`).

    Args:
        key_arn: the stack's data key.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "UseTheDataKeyForVolumes",
                "Effect": "Allow",
                "Action": [
                    "kms:Decrypt",
                    "kms:DescribeKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:ReEncrypt*",
                ],
                "Resource": key_arn,
            },
            {
                "Sid": "GrantTheDataKeyToVolumes",
                "Effect": "Allow",
                "Action": "kms:CreateGrant",
                "Resource": key_arn,
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
        ],
    }


def metadata_egress_policy(team: str) -> dict[str, Any]:
    """An egress NetworkPolicy of the team's notebook pods: everything but instance metadata.

    The team's other policies are ingress-only, so this one selects notebook pods alone and
    leaves every other pod's egress as it was. With the nodes' hop limit of 1 (the
    EC2NodeClass's ``metadataOptions``) a container cannot reach the instance's credentials
    anyway; this holds even if that changes, which the chart's iptables init container would
    have done with privilege.

    Args:
        team: the team's namespace.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": METADATA_EGRESS_POLICY, "namespace": team},
        "spec": {
            "podSelector": {"matchLabels": dict(NOTEBOOK_POD_LABELS)},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [INSTANCE_METADATA_CIDR]}}]},
                # Pods and Services inside the cluster are not ipBlocks to every CNI.
                {"to": [{"namespaceSelector": {}}]},
            ],
        },
    }


def access_service(exposure: UiExposureConfig) -> dict[str, Any]:
    """The proxy's access Service (:data:`UI_ACCESS_SERVICE`), as ``cluster.uiExposure`` says."""
    shape = ui_service(exposure, selector=dict(PROXY_POD_LABELS), port=UI_PORT,
                       target_port=PROXY_PORT)  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": UI_ACCESS_SERVICE, "namespace": NAMESPACE,
                     "annotations": shape["annotations"]},
        "spec": shape["spec"],
    }  # fmt: skip


def client_ingress_policy(exposure: UiExposureConfig) -> dict[str, Any]:
    """The hub namespace's way in for people: the proxy's port from the exposure's clients.

    With ``internalLoadBalancer`` the load balancer keeps the client's address, so the policy
    admits ``clientCidrs`` only; with ``portForward`` it admits no source (a port-forward
    enters the pod through its kubelet, not the pod network).

    Args:
        exposure: ``cluster.uiExposure``.
    """
    sources = [{"ipBlock": {"cidr": cidr}} for cidr in exposure.client_cidrs]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow-notebook-clients", "namespace": NAMESPACE},
        "spec": {
            "podSelector": {"matchLabels": dict(PROXY_POD_LABELS)},
            "policyTypes": ["Ingress"],
            "ingress": (
                [{"from": sources, "ports": [{"port": PROXY_PORT, "protocol": "TCP"}]}]
                if sources
                else []
            ),
        },
    }


def _network_policy(
    resource_name: str, body: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.networking.v1.NetworkPolicy:
    return k8s.networking.v1.NetworkPolicy(
        resource_name, metadata=body["metadata"], spec=body["spec"], opts=opts
    )


class JupyterHub(pulumi.ComponentResource):
    """The hub, its namespace, its Role in each team namespace and the notebook policies."""

    def __init__(
        self,
        name: str,
        *,
        values: dict[str, Any],
        teams: Sequence[str],
        exposure: UiExposureConfig,
        kubernetes_version: str,
        client_secret: pulumi.Input[str] | None,
        protect: bool,
        volume_tags: dict[str, str],
        database_key_arn: pulumi.Input[str],
        ebs_csi_role_name: pulumi.Input[str],
        team_ready: dict[str, list[pulumi.Resource]],
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the namespace, the database's class, the Secret, the release, then RBAC.

        Args:
            name: prefix of child resource names.
            values: the chart's values (:func:`hub_values`).
            teams: the team namespaces servers start in.
            exposure: ``cluster.uiExposure``.
            kubernetes_version: the cluster's minor (the namespace's Pod Security labels).
            client_secret: the OIDC client's secret (stack secret ``oidcClientSecret``,
                which the config refuses to leave unset with OIDC:
                :func:`components.config.oidc_client_secret_problems`); None with the dummy
                authenticator.
            protect: keep the release on delete (the database's volume is kept always).
            volume_tags: tags of the database's EBS volume.
            database_key_arn: the stack's data key, which encrypts the database's volume.
            ebs_csi_role_name: the EBS CSI driver's role, allowed that key's use here.
            team_ready: team -> its namespace and claims (the Role and policies go there).
            cluster_ready: what in-cluster resources wait for.
            kubernetes_provider: the provider of every object.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:JupyterHub", name, None, opts)
        base = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": NAMESPACE,
                "labels": pod_security_labels(
                    "restricted", kubernetes_version=kubernetes_version, advise="restricted"
                ),
            },
            opts=base,
        )
        in_namespace = pulumi.ResourceOptions.merge(
            base, pulumi.ResourceOptions(depends_on=[*cluster_ready, namespace])
        )
        # The driver may use the key before the class can provision with it.
        key_use = aws.iam.RolePolicy(
            f"{name}-ebs-data-key",
            role=ebs_csi_role_name,
            policy=pulumi.Output.from_input(database_key_arn).apply(
                lambda arn: json.dumps(ebs_key_policy(arn))
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        database_class = storage_class(
            f"{name}-database-class",
            encrypted_gp3_class(
                STORAGE_CLASS,
                kms_key_id=database_key_arn,
                # Every stack: the users, their groups and their servers' state outlive a
                # deleted claim, where a Delete class would take them with it.
                reclaim_policy="Retain",
                default=False,
                tags=volume_tags,
            ),
            opts=pulumi.ResourceOptions.merge(
                base, pulumi.ResourceOptions(depends_on=[*cluster_ready, key_use])
            ),
        )
        after: list[pulumi.Resource] = [namespace, database_class]
        if client_secret is not None:
            after.append(
                k8s.core.v1.Secret(
                    f"{name}-oidc",
                    metadata={"name": OIDC_SECRET, "namespace": NAMESPACE},
                    string_data={OIDC_SECRET_KEY: client_secret},
                    opts=in_namespace,
                )
            )
        service = access_service(exposure)
        k8s.core.v1.Service(
            f"{name}-access", metadata=service["metadata"], spec=service["spec"],
            opts=in_namespace,
        )  # fmt: skip
        _network_policy(f"{name}-clients", client_ingress_policy(exposure), in_namespace)
        self.release = release(
            RELEASE,
            versions.JUPYTERHUB_CHART,
            namespace=NAMESPACE,
            values=values,
            opts=pulumi.ResourceOptions.merge(
                base,
                pulumi.ResourceOptions(
                    depends_on=[*cluster_ready, *after],
                    protect=protect,
                    retain_on_delete=protect,
                ),
            ),
        )
        for team in teams:
            in_team = pulumi.ResourceOptions.merge(
                base, pulumi.ResourceOptions(depends_on=[*cluster_ready, *team_ready.get(team, [])])
            )
            role, binding = hub_team_role(team), hub_team_role_binding(team)
            k8s.rbac.v1.Role(
                f"{name}-{team}-spawner", metadata=role["metadata"], rules=role["rules"],
                opts=in_team,
            )  # fmt: skip
            k8s.rbac.v1.RoleBinding(
                f"{name}-{team}-spawner", metadata=binding["metadata"],
                role_ref=binding["roleRef"], subjects=binding["subjects"], opts=in_team,
            )  # fmt: skip
            _network_policy(f"{name}-{team}-metadata", metadata_egress_policy(team), in_team)
        self.register_outputs({})
