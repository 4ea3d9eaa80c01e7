"""Slurm node sets: one ``NodeSet`` per pool, slurmd pods that each take a whole node.

Each is built from the pool's catalog entry (every accelerator and EFA interface, huge pages,
GRES), placed on the nodes the pool holds for Slurm, and mounts the shared file system where
Trainer jobs see it.
"""

from __future__ import annotations

import copy
from typing import Any

from components import versions
from components.config import NodePoolConfig, PlatformConfig, SlurmNodeSetConfig
from components.config.slurm import SlurmDirectoryConfig
from components.config.storage import SHARED_MOUNT
from components.first_step import (
    first_step_labels,
    first_step_mount,
    first_step_sidecar,
    slurm_first_step_clear_container,
    slurm_first_step_volume,
)
from components.node_pools import POOL_LABEL
from components.scheduling import STANDARD_PRIORITY_CLASS
from components.slurm import directory as slurm_directory
from components.slurm import host_keys
from components.slurm.common import CONTROLLER_NAME, LOG_SIDECAR_RESOURCES, read_only_context
from components.slurm.conf import TASK_PROLOG_CONFIG_MAP, TASK_PROLOG_DIR, node_conf, node_names
from components.slurm.sharing import job_namespace_hash, partition_line, partition_settings
from components.storage import CLAIM_NAME
from components.storage.model_store import model_store_volumes
from components.tenancy import RUNTIME_DEFAULT_SECCOMP
from components.workloads import node_resources, pool_workload_placement, shared_memory_volume


def slurmd_resources(pool: NodePoolConfig) -> dict[str, Any]:
    """Slurmd's requests and limits: the node's accelerators, EFA, huge pages and memory.

    A training pod's (:func:`components.workloads.node_resources`), memory limit equal to its
    request: the pod never uses more than it asked for, so the kubelet does not evict it for
    memory pressure first, and jobs share that limit under Slurm's cgroups, each held to its
    ``--mem`` (:func:`cgroup_conf`); Slurm gives jobs exactly the limit (:func:`node_conf`).
    """
    resources = node_resources(pool)
    # The CPU request of a Trainium training pod sizes Trainer's process count; slurmd has none.
    requests = {key: value for key, value in resources["requests"].items() if key != "cpu"}
    limits = {key: value for key, value in resources["limits"].items() if key != "cpu"}
    return {"requests": requests, "limits": limits}


def shared_volume() -> dict[str, Any]:
    """The namespace's ``shared-lustre`` claim as a pod volume."""
    return {"name": "shared", "persistentVolumeClaim": {"claimName": CLAIM_NAME}}


def shared_mount() -> dict[str, str]:
    """Where every Slurm node and login pod sees the shared file system (as Trainer jobs do)."""
    return {"name": "shared", "mountPath": SHARED_MOUNT}


def nodeset_spec(
    node_set: SlurmNodeSetConfig,
    pool: NodePoolConfig,
    *,
    image: str,
    shared_file_system: bool,
    default_partition: bool = False,
    model_store: bool = False,
    directory: SlurmDirectoryConfig | None = None,
    billing: str | None = None,
) -> dict[str, Any]:
    """The NodeSet of one pool: slurmd pods that each take a whole node of the pool.

    Args:
        node_set: the node set's config (pool, replicas, its partition's limits).
        pool: the pool it runs on (catalog entry, taints).
        image: the pinned slurmd image (with the EFA libraries).
        shared_file_system: mount the namespace's Lustre claim at the shared path.
        default_partition: its partition is the cluster's default. Default False.
        model_store: mount the namespace's model store claim (the whole EFS file system) at
            ``/models``, as the login pods do. Default False.
        directory: the users' directory: slurmd pods get the login pods' ``sssd.conf``
            through the NodeSet's SSH settings (the operator mounts it only there), and users
            may SSH to a node while a job of theirs runs on it (pam_slurm_adopt in the slurmd
            image), each node offering its node set's persistent host key. Default: none.
        billing: the partition's ``TRESBillingWeights`` (fair-share usage). Default: none.
    """
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "task-prolog", "mountPath": TASK_PROLOG_DIR, "readOnly": True},
        # jobs write their first step here (the TaskProlog names each job's file)
        first_step_mount(),
    ]
    volumes: list[dict[str, Any]] = [
        shared_memory_volume(pool),
        {"name": "task-prolog",
         "configMap": {"name": TASK_PROLOG_CONFIG_MAP, "defaultMode": 0o555}},
        # every job of the node keeps its files here until its Epilog
        slurm_first_step_volume(),
    ]  # fmt: skip
    if shared_file_system:
        mounts.append(shared_mount())
        volumes.append(shared_volume())
    if model_store:
        model_volumes, model_mounts = model_store_volumes(whole_file_system=True)
        mounts += model_mounts
        volumes += model_volumes
    if directory is not None and directory.ca_certificates is not None:
        mounts.append(slurm_directory.ca_mount())
        volumes.append(slurm_directory.ca_volume())
    partition = partition_line(
        partition_settings(node_set, pool, default_partition=default_partition, billing=billing)
    )
    ssh: dict[str, Any] = {}
    if directory is not None:
        # The node set's own host key, the same on every pod and up, and every node's in
        # known_hosts (components/slurm/host_keys.py).
        mounts += [host_keys.host_key_mount(), host_keys.known_hosts_mount()]
        volumes += [host_keys.host_key_volume(pool.name), host_keys.known_hosts_volume()]
        ssh = {"ssh": {
            "enabled": True,
            "extraSshdConfig": slurm_directory.SSH_KEYS_COMMAND
            + host_keys.sshd_host_key_config(),
            "sssdConfRef": dict(slurm_directory.SSSD_SECRET),
        }}  # fmt: skip
    return {
        **ssh,
        "controllerRef": {"name": CONTROLLER_NAME},
        "scalingMode": "StatefulSet",
        # Where KEDA starts it from; from then on KEDA owns the count (the NodeSet ignores
        # later changes to it: Slurm.node_sets).
        "replicas": node_set.warm_nodes,
        "extraConf": node_conf(pool),
        "partition": {"enabled": True, "config": partition},
        "slurmd": {
            "image": image,
            "resources": slurmd_resources(pool),
            "volumeMounts": mounts,
        },
        # The operator's sidecar that tails slurmd's log (merged as a container: slurm-operator
        # v1.2.1 internal/builder/common/common.go, LogfileContainer): it reads one file.
        "logfile": {
            "image": versions.SIDECAR_IMAGE,
            "resources": copy.deepcopy(LOG_SIDECAR_RESOURCES),
            "securityContext": read_only_context(),
        },
        "template": {
            "metadata": {
                "labels": {POOL_LABEL: pool.name, **first_step_labels()},
                # slurmd reads namespace.yaml only when it starts ("scontrol reconfigure is not
                # sufficient": namespace.yaml(5)), so a change rolls the node set's pods, which
                # the operator drains node by node.
                "annotations": {
                    **job_namespace_hash(node_set, pool, node_names(pool)),
                    **(slurm_directory.config_hash(directory) if directory is not None else {}),
                },
            },
            "spec": {
                # For the sidecar: a privileged container (slurmd) always runs unconfined
                # (Kubernetes, "Restrict a Container's Syscalls with seccomp").
                "securityContext": {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)},
                # The operator appends each pod's ordinal: Slurm nodes are <pool>-0, <pool>-1...
                "hostname": f"{pool.name}-",
                "priorityClassName": STANDARD_PRIORITY_CLASS,
                # The pool's nodes held for Slurm (its -slurm NodePool), never a node that
                # Volcano could give to a gang.
                **pool_workload_placement(pool, slurm=True),
                # The operator merges the template's init containers with its log sidecar
                # (slurm-operator v1.2.1 internal/builder/common/pod_template.go): dead jobs'
                # files are cleared, then the first-step exporter serves every job's file on
                # this node.
                "initContainers": [slurm_first_step_clear_container(), first_step_sidecar()],
                "volumes": volumes,
            },
        },
        # A node running a Slurm job is kept by a PodDisruptionBudget until the job ends.
        "workloadDisruptionProtection": True,
    }


def node_set_image(config: PlatformConfig, node_set: SlurmNodeSetConfig) -> str:
    """The slurmd image of a node set: its own, or the stack's for its pool's accelerator."""
    pool = config.pool(node_set.pool)
    assert pool is not None  # config validation guarantees it
    chosen = node_set.image or config.slurm.images.for_accelerator(pool.instance.accelerator)[1]
    assert chosen is not None  # config validation guarantees it
    return chosen
