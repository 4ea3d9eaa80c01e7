"""The ``slurm`` namespace's NetworkPolicies: each daemon reachable from its peers only."""

from __future__ import annotations

from typing import Any

from components.first_step import prometheus_ingress_rule
from components.metric_names import MONITORING_NAMESPACE
from components.slurm.accounting import DATABASE_POD_LABELS, DATABASE_PORT
from components.slurm.common import (
    LOGIN_SSH_PORT,
    MARIADB_OPERATOR_NAMESPACE,
    NAMESPACE,
    OPERATOR_NAMESPACE,
    SLURM_APP_LABEL,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
    SLURMRESTD_PORT,
)
from components.slurm.health_mirror import NAME as HEALTH_MIRROR
from components.tenancy import DEFAULT_DENY_POLICY, from_namespace, network_policy, tcp


def _slurm_app(app: str) -> dict[str, Any]:
    return {"matchLabels": {SLURM_APP_LABEL: app}}


def _peers(*apps: str) -> list[dict[str, Any]]:
    return [{"podSelector": _slurm_app(app)} for app in apps]


def slurm_network_policies(login_sources: list[str]) -> list[dict[str, Any]]:
    """The ``slurm`` namespace's ingress: each daemon from the daemons that talk to it.

    Every pod is isolated by a default deny; then, by Slurm's protocol (slurm.conf ports):

    * slurmctld (6817) from slurmd (registration, step completion), login (``sbatch``,
      ``srun``, ``squeue``), slurmrestd, slurmdbd, and Prometheus in the monitoring namespace
      (slurmctld serves its metrics on this port);
    * slurmd (6818) from login (``srun`` steps) and 22 (users' SSH to a node where a job of
      theirs runs, with a directory); the first-step exporter's port (9501) from the
      monitoring namespace's Prometheus pods; from slurmctld and other slurmd on every
      port: slurmctld launches on 6818 and calls back to an ``srun`` inside a batch job on the
      port that srun listens on (job complete, time limit, node failure), and a job's ranks
      (NCCL's TCP bootstrap, MPI's out-of-band, step fan-out) use ports nobody fixes;
    * login on 22 only from ``login_sources`` (the load balancer keeps the client's address:
      ``externalTrafficPolicy: Local``), and on every port from slurmctld and slurmd, which
      call back to ``srun``/``salloc`` on their own listening ports;
    * slurmrestd (6820) from the Slinky operator's namespace, whose controllers drive Slurm
      through it, and from the health mirror (:mod:`components.slurm.health_mirror`), which
      reads node states and drains and resumes nodes through it;
    * slurmdbd (6819) from slurmctld, slurmrestd and login (``sacct``, ``sacctmgr``);
    * the accounting MariaDB (3306) only from slurmdbd and mariadb-operator, which creates its
      users and grants.

    EFA traffic between slurmd pods bypasses the kernel, so no NetworkPolicy sees it.

    Args:
        login_sources: CIDRs that may reach the login service's SSH port.
    """

    def allow(name: str, pods: dict[str, Any], ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return network_policy(f"allow-{name}", NAMESPACE, pods=pods, ingress=ingress)

    every_tcp_port = [{"protocol": "TCP"}]
    return [
        network_policy(DEFAULT_DENY_POLICY, NAMESPACE, pods={}, ingress=[]),
        allow("slurmctld", _slurm_app("slurmctld"), [
            {"from": _peers("slurmd", "login", "slurmrestd", "slurmdbd"),
             "ports": tcp(SLURMCTLD_PORT)},
            # Prometheus scrapes slurmctld's metrics on its own port (the autoscaler's demand).
            {"from": [from_namespace(MONITORING_NAMESPACE)], "ports": tcp(SLURMCTLD_PORT)},
        ]),
        allow("slurmd", _slurm_app("slurmd"), [
            # srun steps; SSH into a node running one's job (with a directory, pam_slurm_adopt)
            {"from": _peers("login"), "ports": tcp(SLURMD_PORT, LOGIN_SSH_PORT)},
            {"from": _peers("slurmctld", "slurmd"), "ports": every_tcp_port},
            # Prometheus's pods, to the first-step exporter's port only (the cold-start ledger)
            prometheus_ingress_rule(),
        ]),
        allow("login", _slurm_app("login"), [
            {"from": [{"ipBlock": {"cidr": cidr}} for cidr in login_sources],
             "ports": tcp(LOGIN_SSH_PORT)},
            {"from": _peers("slurmctld", "slurmd"), "ports": every_tcp_port},
        ]),
        allow("slurmrestd", _slurm_app("slurmrestd"), [
            {"from": [from_namespace(OPERATOR_NAMESPACE), *_peers(HEALTH_MIRROR)],
             "ports": tcp(SLURMRESTD_PORT)},
        ]),
        allow("slurmdbd", _slurm_app("slurmdbd"), [
            {"from": _peers("slurmctld", "slurmrestd", "login"), "ports": tcp(SLURMDBD_PORT)},
        ]),
        allow("accounting-db", {"matchLabels": dict(DATABASE_POD_LABELS)}, [
            {"from": [*_peers("slurmdbd"), from_namespace(MARIADB_OPERATOR_NAMESPACE)],
             "ports": tcp(DATABASE_PORT)},
        ]),
    ]  # fmt: skip
