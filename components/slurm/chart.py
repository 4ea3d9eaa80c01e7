"""Values of the Slurm charts: cert-manager, the Slinky operator, and the ``slurm`` chart.

The ``slurm`` chart's values gather the config files (:mod:`components.slurm.conf`), the login
set (:mod:`components.slurm.login`), accounting (:mod:`components.slurm.accounting`) and the
directory (:mod:`components.slurm.directory`), with each daemon hardened and sized.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from components import versions
from components.config import PlatformConfig
from components.first_step import (
    FIRST_STEP_EPILOG,
    FIRST_STEP_PROLOG,
    slurm_first_step_epilog,
    slurm_first_step_prolog,
)
from components.helm import with_system_placement
from components.slurm import directory as slurm_directory
from components.slurm import sharing
from components.slurm.accounting import (
    DATABASE_HOST,
    DATABASE_NAME,
    DATABASE_PASSWORD_KEY,
    DATABASE_PORT,
    DATABASE_USER,
)
from components.slurm.common import (
    DO_NOT_DISRUPT,
    JWT_KEY,
    LOG_SIDECAR_RESOURCES,
    RELEASE,
    SCRATCH_MOUNT,
    SCRATCH_VOLUME,
    SERVICE_PLACEMENT,
    SERVICE_POD_SECURITY,
    SLURM_KEY,
    STATE_STORAGE_CLASS,
    read_only_context,
    sidecar_image,
    slinky_image,
)
from components.slurm.conf import (
    cgroup_conf,
    controller_conf,
    gres_conf,
    job_submit_lua,
    node_names,
    topology_yaml,
)
from components.slurm.login import LOGIN_SET, login_set_values

SLURMCTLD_RESOURCES: Final = {
    "requests": {"cpu": "500m", "memory": "2Gi"},
    "limits": {"memory": "2Gi"},
}
"""slurmctld keeps every node, partition and queued job in memory; a few GiB hold tens of
thousands of jobs. No CPU limit: a throttled slurmctld answers every client late (its RPCs time
out), and it has the general pool's node to share with services that request what they use."""
SLURMRESTD_RESOURCES: Final = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"memory": "512Mi"},
}
"""slurmrestd turns slurmctld's and slurmdbd's answers into JSON, one request at a time per
connection; the operator's controllers are its main clients."""
SLURMDBD_RESOURCES: Final = {
    "requests": {"cpu": "250m", "memory": "512Mi"},
    "limits": {"memory": "1Gi"},
}
"""slurmdbd holds little itself (the database does the work); its rollups and large ``sacct``
answers pass through it."""


def _service_pod_spec() -> dict[str, Any]:
    """The chart's ``podSpec`` of Slurm's daemons: the general pool, RuntimeDefault seccomp."""
    return {**SERVICE_PLACEMENT, "securityContext": copy.deepcopy(SERVICE_POD_SECURITY)}


def slurm_values(config: PlatformConfig) -> dict[str, Any]:
    """Values of the ``slurm`` chart: controller, REST API, accounting, login set, partition.

    Args:
        config: the validated platform (its ``slurm`` section, pools, cluster name).
    """
    slurm = config.slurm
    login = slurm.login
    assert login is not None  # config validation guarantees it when Slurm is enabled
    node_sets = [(ns, pool) for ns in slurm.node_sets if (pool := config.pool(ns.pool))]
    pools = [pool for _, pool in node_sets]
    accounting = slurm.accounting.enabled
    # The stack's own Secret holds sssd.conf (it carries the bind password); without a
    # directory the chart's default (local files only: root) stays.
    directory_values: dict[str, Any] = (
        {
            "sssd": {"secretRef": dict(slurm_directory.SSSD_SECRET)},
            "prologScripts": {slurm_directory.HOME_PROLOG: slurm_directory.home_prolog()},
        }
        if slurm.directory
        else {}
    )
    # A job's first-step files leave with it, and a requeued job starts without its old ones
    # (components/first_step.py).
    directory_values["prologScripts"] = {
        **directory_values.get("prologScripts", {}),
        FIRST_STEP_PROLOG: slurm_first_step_prolog(),
    }
    directory_values["epilogScripts"] = {FIRST_STEP_EPILOG: slurm_first_step_epilog()}
    return {
        "fullnameOverride": RELEASE,
        "clusterName": config.slurm_cluster_name,
        "slurmKey": {"create": False, "secretRef": dict(SLURM_KEY)},
        "jwtKey": {"create": False, "secretRef": dict(JWT_KEY)},
        "configFiles": {
            "gres.conf": gres_conf(pools),
            "cgroup.conf": cgroup_conf(),
            "topology.yaml": topology_yaml(pools),
            "job_submit.lua": job_submit_lua(
                {
                    ns.pool: (ns.max_nodes, ns.max_time_hours * sharing.MINUTES_PER_HOUR)
                    for ns in slurm.node_sets
                },
                slurm.default_partition_pool,
                {
                    pool.name: sharing.neuron_device_memory_mib(pool)
                    for _, pool in node_sets
                    if pool.instance.accelerator == "neuron"
                },
            ),
            "namespace.yaml": sharing.namespace_yaml(
                [(ns, pool, node_names(pool)) for ns, pool in node_sets]
            ),
        },
        # Each daemon hardened and sized (the chart sets no resources), its pod under the
        # RuntimeDefault seccomp profile; the operator runs them as non-root users and mounts
        # no service account token (slurm-operator v1.2.1 internal/builder/controllerbuilder/
        # controller_app.go, restapibuilder/restapi_app.go, accountingbuilder/
        # accounting_app.go).
        "controller": {
            "slurmctld": {
                "image": slinky_image("slurmctld"),
                "resources": copy.deepcopy(SLURMCTLD_RESOURCES),
                "securityContext": read_only_context(),
                "volumeMounts": [dict(SCRATCH_MOUNT)],
            },
            # The operator adds this sidecar only with inplaceReconfigure, which stays off
            # (the chart's default): a new config restarts slurmctld's pod instead.
            "reconfigure": {"image": slinky_image("slurmctld")},
            "logfile": {
                "image": sidecar_image(),
                "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
                "securityContext": read_only_context(),
            },
            "persistence": {
                "enabled": True,
                "storageClassName": STATE_STORAGE_CLASS,
                "resources": {"requests": {"storage": f"{slurm.controller_storage_gib}Gi"}},
            },
            "extraConfMap": controller_conf(
                node_sets, accounting=accounting, directory=slurm.directory is not None
            ),
            # slurmctld's OpenMetrics, and the ServiceMonitor the operator makes for them: the
            # autoscaler's demand (components/slurm/autoscaling.py).
            "metrics": {"enabled": True, "serviceMonitor": {"enabled": True}},
            "metadata": {"annotations": dict(DO_NOT_DISRUPT)},
            "podSpec": {**_service_pod_spec(), "volumes": [dict(SCRATCH_VOLUME)]},
        },
        "restapi": {
            "replicas": slurm.rest_api_replicas,
            "slurmrestd": {
                "image": slinky_image("slurmrestd"),
                "resources": copy.deepcopy(SLURMRESTD_RESOURCES),
                "securityContext": read_only_context(),
            },
            "podSpec": _service_pod_spec(),
        },
        "accounting": {
            "enabled": accounting,
            # sacct and sreport ask slurmdbd, whose own PrivateData hides other users' records.
            "extraConfMap": copy.deepcopy(sharing.SLURMDBD_SHARING_CONF),
            # No liveness probe: slurmdbd converts its tables after a Slurm upgrade before it
            # listens, for as long as that takes; a kubelet restart midway starts it over.
            "slurmdbd": {
                "image": slinky_image("slurmdbd"),
                "resources": copy.deepcopy(SLURMDBD_RESOURCES),
                "securityContext": read_only_context(),
            },
            "storageConfig": {
                "host": DATABASE_HOST,
                "port": DATABASE_PORT,
                "database": DATABASE_NAME,
                "username": DATABASE_USER,
                "passwordKeyRef": {"name": DATABASE_HOST, "key": DATABASE_PASSWORD_KEY},
            },
            "podSpec": _service_pod_spec(),
        },
        "loginsets": {LOGIN_SET: login_set_values(config)},
        **directory_values,
        # Only the node sets' own partitions (nodeset_spec): one spanning node sets would
        # put one job on two placement groups.
        "partitions": {},
    }


def cert_manager_values() -> dict[str, Any]:
    """cert-manager with its CRDs (kept when the release goes), every part on the system nodes."""
    return with_system_placement(
        versions.CERT_MANAGER_CHART, {"crds": {"enabled": True, "keep": True}}
    )


def slurm_operator_values() -> dict[str, Any]:
    """The Slinky operator and webhook on the system nodes, webhook certificate by cert-manager.

    Its CRDs come from their own chart (``crds.enabled: false``), so uninstalling the operator
    never deletes the Slurm resources.
    """
    return with_system_placement(
        versions.SLURM_OPERATOR_CHART,
        {"crds": {"enabled": False}, "certManager": {"enabled": True}},
    )
