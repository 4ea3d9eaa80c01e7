"""The alerts and recording rules, evaluated by promtool over synthetic series.

Every alert fires on the series that should fire it and stays silent on the near miss beside
them; every recording rule records what the cold-start ledger and the gang alert read. The rules
are those of the prod stack (GPU, EFA and Trainium pools), with the config values the cases
depend on set here. All cases run in one ``promtool test rules`` and every rule file is linted
by one ``promtool check rules`` (tests/promtool.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.config import PlatformConfig, parse_platform_config
from components.first_step import FIRST_STEP_CONTAINER
from components.health_marks import ACCEPTANCE_TAINT_KEY, UNHEALTHY_TAINT_KEY
from components.metric_names import (
    COLD_START_BUDGET_METRIC,
    COLD_START_QUANTILE_RULES,
    EFA_DEVICES_METRIC,
    FIRST_STEP_METRIC,
    GANG_COLD_START_RULE,
    GANG_QUEUE_WAIT_RULE,
    MONITORING_NAMESPACE,
    NODECLAIM_CONDITION_METRIC,
    PODGROUP_CREATED_METRIC,
    PODGROUP_MIN_MEMBER_METRIC,
    PODGROUP_MIN_RESOURCES_METRIC,
    PODGROUP_PHASE_METRIC,
    PODGROUP_PHASES,
    SLURM_JOB_START_METRIC,
    SLURM_JOB_SUBMIT_METRIC,
    TRAINJOB_CONDITION_METRIC,
    TRAINJOB_SUSPENDED_METRIC,
    efa_port_counter,
)
from components.observability import rules
from components.slurm.common import NAMESPACE as SLURM_NAMESPACE
from components.teams import SYSTEM_PRIORITY_QUOTA, TEAM_QUOTA
from synth.engine import synthesize
from synth.stackfile import REPOSITORY_ROOT, StackFile
from tests import promtool
from tests.conftest import stack_data
from tests.promtool import Case, Fired
from tests.schemas import validation_errors

PENDING_MINUTES: Final = 10
P5EN_BUDGET_MINUTES: Final = 40
P5_BUDGET_SECONDS: Final = 35 * 60
"""The p5 family's default (components/catalog.py COLD_START_BUDGET_MINUTES): p5 sets none."""
KSM: Final = 'job="kube-state-metrics"'
"""kube-state-metrics' job label: the ledger reads its custom resource series only from it."""
FIRST_STEP_JOB: Final = 'job="monitoring/first-step"'
SLURM_FIRST_STEP_JOB: Final = 'job="monitoring/first-step-slurm"'
"""The slurmd pods' own first-step PodMonitor's job: the ledger reads Slurm jobs only from it."""
DCGM_JOB: Final = "dcgm-exporter"
EFA_JOB: Final = "monitoring/efa-exporter"
RUNBOOKS: Final = REPOSITORY_ROOT / "docs" / "how-to" / "alert-runbooks.md"


@pytest.fixture(scope="module")
def config() -> PlatformConfig:
    """prod (p5 with GPUs and EFA, p5en, trn2) with the values the cases assume."""
    data = stack_data("prod")
    data["observability"]["gangPendingAlertMinutes"] = PENDING_MINUTES
    for pool in data["nodePools"]:
        if pool["name"] == "p5en":
            pool["coldStartBudgetMinutes"] = P5EN_BUDGET_MINUTES
    return parse_platform_config(data)


def _gpu(gpu: str, node: str = "node-a", job: str = DCGM_JOB) -> str:
    return (
        f'{{gpu="{gpu}", UUID="GPU-{gpu}", Hostname="{node}", modelName="NVIDIA H100 80GB HBM3", '
        f'job="{job}"}}'
    )


def _gpu_labels(gpu: str, node: str = "node-a") -> dict[str, str]:
    return {
        "gpu": gpu,
        "UUID": f"GPU-{gpu}",
        "Hostname": node,
        "modelName": "NVIDIA H100 80GB HBM3",
        "job": DCGM_JOB,
    }


def _node(node: str, pool: str, instance_type: str, *, slurm: bool = False) -> str:
    nodepool = f"{pool}-slurm" if slurm else pool
    return (
        f'kube_node_labels{{node="{node}", label_karpenter_sh_nodepool="{nodepool}", '
        f'label_trainingplatform_io_pool="{pool}", '
        f'label_node_kubernetes_io_instance_type="{instance_type}"}}'
    )


def _accelerator_cases() -> list[Case]:
    xid = Case(
        "XIDs: a new one fires, an old one does not; only DCGM's devastating ones are critical",
        at="12m",
        series={
            f"DCGM_FI_DEV_XID_ERRORS{_gpu('0')}": "0x20 31x20",  # new XID 31 at 10.5m
            f"DCGM_FI_DEV_XID_ERRORS{_gpu('1')}": "31x40",  # the same XID all along
            f"DCGM_FI_DEV_XID_ERRORS{_gpu('2')}": "0x20 79x20",  # fallen off the bus
            f"DCGM_FI_DEV_XID_ERRORS{_gpu('3')}": "0x40",
            # a team's pod serving a critical XID for another team's node: not DCGM's job
            f"DCGM_FI_DEV_XID_ERRORS{_gpu('4', 'node-b', 'monitoring/first-step')}": "0x20 79x20",
        },
        alerts={
            "GPUXidError": [Fired(_gpu_labels("0"), 31), Fired(_gpu_labels("2"), 79)],
            "GPUCriticalXid": [Fired(_gpu_labels("2"), 79)],
        },
    )
    ecc = Case(
        "uncorrectable ECC: new DBEs, new uncorrectable remaps or a failed remap; old DBEs do not",
        at="12m",
        series={
            f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{_gpu('0')}": "0x20 1x20",
            f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{_gpu('1')}": "5x40",
            f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{_gpu('2')}": "0x20 2x20",
            f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{_gpu('1')}": "3x40",
            f"DCGM_FI_DEV_ROW_REMAP_FAILURE{_gpu('3')}": "1x40",
            f"DCGM_FI_DEV_ROW_REMAP_FAILURE{_gpu('1')}": "0x40",
        },
        alerts={
            "GPUUncorrectableECC": [Fired(_gpu_labels(gpu), 0) for gpu in ("0", "2", "3")],
        },
    )

    def efa_device(counter_file: str, device: str) -> str:
        return (
            f'{efa_port_counter(counter_file)}{{node="node-a", device="{device}", port="1", '
            f'job="{EFA_JOB}"}}'
        )

    nodes = Case(
        "GPUs and EFA interfaces missing against the catalog; full nodes, trn2 and system "
        "nodes do not alert",
        at="20m",
        series={
            _node("node-a", "p5", "p5.48xlarge"): "1x40",
            _node("node-b", "p5", "p5.48xlarge"): "1x40",
            _node("node-c", "p5en", "p5en.48xlarge"): "1x40",
            # Slurm's nodes of p5 come from its p5-slurm NodePool: same pool label, same checks
            _node("node-s", "p5", "p5.48xlarge", slurm=True): "1x40",
            _node("node-f", "p5", "p5.48xlarge", slurm=True): "1x40",
            'kube_node_status_allocatable{node="node-f", resource="nvidia_com_gpu", '
            'unit="integer"}': "8x40",
            f'{EFA_DEVICES_METRIC}{{node="node-f", job="{EFA_JOB}"}}': "32x40",
            'kube_node_status_allocatable{node="node-s", resource="nvidia_com_gpu", '
            'unit="integer"}': "4x40",
            _node("node-t", "trn2", "trn2.48xlarge"): "1x40",
            'kube_node_labels{node="system-0"}': "1x40",
            'kube_node_status_allocatable{node="node-a", resource="nvidia_com_gpu", '
            'unit="integer"}': "7x40",
            'kube_node_status_allocatable{node="node-b", resource="nvidia_com_gpu", '
            'unit="integer"}': "8x40",
            f'{EFA_DEVICES_METRIC}{{node="node-a", job="{EFA_JOB}"}}': "32x40",
            f'{EFA_DEVICES_METRIC}{{node="node-b", job="{EFA_JOB}"}}': "31x40",
            f'{EFA_DEVICES_METRIC}{{node="node-t", job="{EFA_JOB}"}}': "16x40",
            # a team's pod claiming node-b has all its interfaces: not the exporter's job
            f'{EFA_DEVICES_METRIC}{{node="node-b", job="monitoring/first-step"}}': "32x40",
        },
        alerts={
            "GPUMissing": [
                Fired({"node": "node-a", "nodepool": "p5", "instance_type": "p5.48xlarge"}, 1),
                Fired({"node": "node-c", "nodepool": "p5en", "instance_type": "p5en.48xlarge"}, 8),
                Fired(
                    {"node": "node-s", "nodepool": "p5-slurm", "instance_type": "p5.48xlarge"}, 4
                ),
            ],
            "EFAInterfaceMissing": [
                Fired({"node": "node-b", "nodepool": "p5", "instance_type": "p5.48xlarge"}, 1),
                Fired({"node": "node-c", "nodepool": "p5en", "instance_type": "p5en.48xlarge"}, 16),
                Fired(
                    {"node": "node-s", "nodepool": "p5-slurm", "instance_type": "p5.48xlarge"}, 32
                ),
            ],
        },
    )
    efa = Case(
        "EFA errors and retransmits above their thresholds; the ones below stay silent",
        at="12m",
        series={
            efa_device("rx_drops", "rdmap0s0"): "0+60x60",  # 2/s
            efa_device("rx_drops", "rdmap1s0"): "0+2x60",  # 0.07/s
            efa_device("impaired_remote_conn_events", "rdmap1s0"): "0x60",
            efa_device("tx_pkts", "rdmap2s0"): "0+3000x60",  # 100/s
            efa_device("retrans_pkts", "rdmap2s0"): "0+60x60",  # 2%
            efa_device("tx_pkts", "rdmap3s0"): "0+3000x60",
            efa_device("retrans_pkts", "rdmap3s0"): "0+15x60",  # 0.5%
        },
        alerts={
            "EFAErrorsRising": [
                Fired(
                    {"node": "node-a", "device": "rdmap0s0", "port": "1", "counter": "rx_drops"}, 0
                ),
                Fired(
                    {
                        "node": "node-a",
                        "device": "rdmap2s0",
                        "port": "1",
                        "counter": "retrans_pkts",
                    },
                    0,
                ),
            ],
        },
    )
    return [xid, ecc, nodes, efa]


def _pod(
    namespace: str, pod: str, group: str, *, created: int, phase: str = "Pending", steps: int = 80
) -> dict[str, str]:
    """A pod of a gang as kube-state-metrics writes it; ``steps`` below 80 ends its series
    (the pod deleted) after that many steps."""
    key = f'namespace="{namespace}", pod="{pod}", uid="{pod}-uid"'
    end = " stale" if steps < 80 else ""
    return {
        f'kube_pod_annotations{{{key}, annotation_scheduling_k8s_io_group_name="{group}"}}': (
            f"1x{steps}{end}"
        ),
        f"kube_pod_created{{{key}}}": f"{created}x{steps}{end}",
        **{
            f'kube_pod_status_phase{{{key}, phase="{state}"}}': f"{int(phase == state)}x{steps}{end}"
            for state in ("Pending", "Running", "Failed")
        },
    }


def _gang(
    namespace: str,
    group: str,
    queue: str,
    *,
    created: int,
    min_member: int = 1,
    phase: str = "Inqueue",
    min_resources: dict[str, float] | None = None,
) -> dict[str, str]:
    """A PodGroup; ``min_resources`` its ``spec.minResources`` by Kubernetes' resource names."""
    key = f'namespace="{namespace}", podgroup="{group}", queue="{queue}", {KSM}'
    return {
        f"{PODGROUP_CREATED_METRIC}{{{key}}}": f"{created}x80",
        f"{PODGROUP_MIN_MEMBER_METRIC}{{{key}}}": f"{min_member}x80",
        **{
            f'{PODGROUP_MIN_RESOURCES_METRIC}{{{key}, resource="{resource}"}}': f"{value}x80"
            for resource, value in (min_resources or {}).items()
        },
        **{
            f'{PODGROUP_PHASE_METRIC}{{{key}, phase="{state}"}}': f"{int(state == phase)}x80"
            for state in PODGROUP_PHASES
        },
    }


def _quota(
    namespace: str, resource: str, used: float, hard: float, quota: str = TEAM_QUOTA
) -> dict[str, str]:
    key = f'namespace="{namespace}", resourcequota="{quota}", resource="{resource}", {KSM}'
    return {
        f'kube_resourcequota{{{key}, type="used"}}': f"{used}x80",
        f'kube_resourcequota{{{key}, type="hard"}}': f"{hard}x80",
    }


GIB: Final = 2**30
UNITS: Final = {"cpu": "core", "memory": "byte"}
"""kube-state-metrics' ``unit`` of a request (internal/store/pod.go): extended ones are
``integer``."""


def _requests(
    namespace: str, pod: str, container: str, requests: dict[str, float], init: str | None = None
) -> dict[str, str]:
    """A container's requests as kube-state-metrics labels them (``resource`` sanitised:
    ``nvidia_com_gpu``); ``init`` makes it an init container with that ``restartPolicy``
    (``Always``: a native sidecar; empty: an ordinary one)."""
    key = f'namespace="{namespace}", pod="{pod}", uid="{pod}-uid", container="{container}", {KSM}'
    name = "kube_pod_container_resource_requests"
    series = {}
    if init is not None:
        name = "kube_pod_init_container_resource_requests"
        series[f'kube_pod_init_container_info{{{key}, restart_policy="{init}"}}'] = "1x80"
    for resource, value in requests.items():
        unit = UNITS.get(resource, "integer")
        series[f'{name}{{{key}, resource="{resource}", unit="{unit}"}}'] = f"{value}x80"
    return series


def _pending_15m(reasons: dict[str, str]) -> list[Fired]:
    """GangPending at 15 minutes for each team's gang ``job-<last letter>`` with its reason
    (the cases name a team ``team-<letter>`` and its gang after the letter)."""
    return [
        Fired(
            {"namespace": ns, "podgroup": f"job-{ns[-1]}", "queue": ns},
            900,
            {"summary": f"Gang {ns}/job-{ns[-1]} (queue {ns}) pending for 15m 0s: {why}"},
        )
        for ns, why in reasons.items()
    ]


def _gang_case() -> Case:
    """Five gangs pending 15 minutes, one per reason (the first that holds), one pending 5
    minutes and one running."""
    series: dict[str, str] = {}
    gangs = {  # namespace: (gang, created, its PodGroup's phase)
        "team-q": ("job-q", 0, "Pending"),  # lacks a pod, no quota for it (and not admitted)
        "team-v": ("job-v", 0, "Pending"),  # not admitted by its queue (and unschedulable)
        "team-w": ("job-w", 0, "Inqueue"),  # admitted, unschedulable, its queue borrowing
        "team-c": ("job-c", 0, "Inqueue"),  # admitted, unschedulable
        "team-u": ("job-u", 0, "Inqueue"),  # admitted, nothing known
    }
    for namespace, (group, created, phase) in gangs.items():
        series |= _pod(namespace, f"{group}-0", group, created=created)
        # job-q needs two pods and has one: its quota refused the other
        needs = 2 if namespace == "team-q" else 1
        series |= _gang(namespace, group, namespace, created=created, min_member=needs, phase=phase)
        if namespace != "team-u":  # Volcano marks every pending task unschedulable
            series[
                f'kube_pod_status_unschedulable{{namespace="{namespace}", pod="{group}-0", '
                f'uid="{group}-0-uid"}}'
            ] = "1x80"
    # The quota exactly one gang: its own two pending pods fill it, yet both exist and wait
    # for nodes: capacity, not quota (a ResourceQuota counts Pending pods as used).
    for pod in ("job-f-0", "job-f-1"):
        series |= _pod("team-f", pod, "job-f", created=0)
        series[
            f'kube_pod_status_unschedulable{{namespace="team-f", pod="{pod}", uid="{pod}-uid"}}'
        ] = "1x80"
    series |= _gang("team-f", "job-f", "team-f", created=0, min_member=2)
    series |= _quota("team-f", "requests.nvidia.com/gpu", 16, 16)
    # A second kube-state-metrics replica's copy of a pod's annotations: joins stay one-to-one.
    series[
        'kube_pod_annotations{namespace="team-u", pod="job-u-0", uid="job-u-0-uid", '
        'annotation_scheduling_k8s_io_group_name="job-u", instance="kube-state-metrics-1"}'
    ] = "1x80"
    series |= _pod("team-u", "job-n-0", "job-n", created=600)  # 5 minutes at 15m
    series |= _gang("team-u", "job-n", "team-u", created=600)
    # Bound to a node and pulling its images: Pending, but not waiting for a node.
    series |= _pod("team-u", "job-b-0", "job-b", created=0)
    series |= _gang("team-u", "job-b", "team-u", created=0)
    series['kube_pod_info{namespace="team-u", pod="job-b-0", uid="job-b-0-uid", node="n1"}'] = (
        "1x80"
    )
    series |= _pod("team-u", "job-r-0", "job-r", created=0, phase="Running")
    series |= _gang("team-u", "job-r", "team-u", created=0)
    series |= _quota("team-q", "requests.nvidia.com/gpu", 60, 64)  # 4 left, a pod needs 8
    series |= _requests("team-q", "job-q-0", "train", {"nvidia_com_gpu": 8})
    series |= _quota("team-v", "requests.nvidia.com/gpu", 16, 64)
    series |= _quota("team-v", "requests.aws.amazon.com/neuroncore", 0, 0)  # held at 0
    # Past its deserved share: normal borrowing under the capacity plugin, not a block.
    series['volcano_queue_overused{queue_name="team-w"}'] = "1x80"
    reasons = {"team-q": "quota", "team-v": "queue", "team-w": "capacity", "team-c": "capacity",
               "team-u": "unknown", "team-f": "capacity"}  # fmt: skip
    return Case(
        "gangs pending past the configured minutes, each with its reason",
        at="15m",
        series=series,
        alerts={
            # The reason is an annotation, not a label: the alert stays one as it changes.
            "GangPending": _pending_15m(reasons),
        },
        records={
            f'{rules.GANG_PENDING_RULE}{{podgroup="job-n"}}': [
                (
                    {
                        "__name__": rules.GANG_PENDING_RULE,
                        "namespace": "team-u",
                        "podgroup": "job-n",
                        "queue": "team-u",
                    },
                    300,
                ),
            ],
            f'{rules.GANG_PENDING_REASON_RULE}{{podgroup="job-n"}}': [
                (
                    {
                        "__name__": rules.GANG_PENDING_REASON_RULE,
                        "namespace": "team-u",
                        "podgroup": "job-n",
                        "queue": "team-u",
                        "reason": "unknown",
                    },
                    300,
                ),
            ],
            f'{rules.GANG_PENDING_RULE}{{podgroup="job-r"}}': [],
            f'{rules.GANG_PENDING_RULE}{{podgroup="job-b"}}': [],
        },
    )


def _gang_quota_case() -> Case:
    """The quota reason compares one more pod of the gang with what its team quota has left.

    job-m lacks a pod and its memory quota is 91% used, yet a pod fits: capacity. job-g lacks
    pods and has 4 GPUs of quota left (80% used) where a pod needs 8, and 0.25 cores less CPU
    than a pod with its sidecar: quota. job-a has all its pods, its quota full: capacity.
    job-p lacks a pod and may create no more pods: quota. The scoped quota of system priority
    pods (``pods: 0``) is not the team's and counts for nothing.
    """
    series: dict[str, str] = {}
    gangs = {  # namespace: (pods, minMember, PodGroup phase)
        "team-m": (1, 2, "Inqueue"),
        "team-g": (2, 4, "Pending"),
        "team-a": (1, 1, "Inqueue"),
        "team-p": (2, 3, "Pending"),
    }
    for namespace, (pods, min_member, phase) in gangs.items():
        group = f"job-{namespace[-1]}"
        series |= _gang(namespace, group, namespace, created=0, min_member=min_member, phase=phase)
        for index in range(pods):
            pod = f"{group}-{index}"
            series |= _pod(namespace, pod, group, created=0)
            series[
                f'kube_pod_status_unschedulable{{namespace="{namespace}", pod="{pod}", '
                f'uid="{pod}-uid"}}'
            ] = "1x80"
    # job-m's pod counts 2 + max(60, 61) GiB: its sidecar and the larger of its container and
    # its ordinary init container. 63 GiB are left: it fits.
    series |= _requests("team-m", "job-m-0", "train", {"memory": 60 * GIB, "cpu": 8})
    series |= _requests("team-m", "job-m-0", "sidecar", {"memory": 2 * GIB}, init="Always")
    series |= _requests("team-m", "job-m-0", "setup", {"memory": 61 * GIB}, init="")
    series |= _quota("team-m", "requests.memory", 637 * GIB, 700 * GIB)  # 91%
    series |= _quota("team-m", "requests.cpu", 16, 96)
    series |= _quota("team-m", "pods", 0, 0, quota=SYSTEM_PRIORITY_QUOTA)
    # job-g's pods need 8 and 4 GPUs and 4 cores plus a 0.5-core sidecar each.
    for pod, gpus in (("job-g-0", 8), ("job-g-1", 4)):
        series |= _requests("team-g", pod, "train", {"nvidia_com_gpu": gpus, "cpu": 4})
        series |= _requests("team-g", pod, FIRST_STEP_CONTAINER, {"cpu": 0.5}, init="Always")
    series |= _quota("team-g", "requests.nvidia.com/gpu", 16, 20)  # 80%, 4 left
    series |= _quota("team-g", "requests.cpu", 9, 13.25)  # 68%, 4.25 left
    series |= _requests("team-a", "job-a-0", "train", {"nvidia_com_gpu": 8})
    series |= _quota("team-a", "requests.nvidia.com/gpu", 8, 8)
    series |= _quota("team-a", "pods", 1, 1)
    for pod in ("job-p-0", "job-p-1"):
        series |= _requests("team-p", pod, "train", {"cpu": 1})
    series |= _quota("team-p", "pods", 2, 2)
    series |= _quota("team-p", "requests.cpu", 2, 64)
    reasons = {"team-m": "capacity", "team-g": "quota", "team-a": "capacity", "team-p": "quota"}
    shortfall = rules.GANG_QUOTA_SHORTFALL_RULE
    return Case(
        "the quota reason: one more pod of the gang against what its team quota has left",
        at="15m",
        series=series,
        alerts={
            "GangPending": _pending_15m(reasons),
        },
        records={
            shortfall: [
                (
                    {"__name__": shortfall, "namespace": ns, "podgroup": f"job-{ns[-1]}"}
                    | {"resource": resource},
                    value,
                )
                for ns, resource, value in (
                    ("team-g", "requests.nvidia.com/gpu", 4),
                    ("team-g", "requests.cpu", 0.25),
                    ("team-p", "pods", 1),
                )
            ],
            f'{rules.GANG_POD_REQUEST_RULE}{{namespace="team-m"}}': [
                (
                    {"__name__": rules.GANG_POD_REQUEST_RULE, "namespace": "team-m"}
                    | {"podgroup": "job-m", "resource": resource},
                    value,
                )
                for resource, value in (("memory", 63 * GIB), ("cpu", 8))
            ],
        },
    )


def _gang_without_pods_case() -> Case:
    """Gangs none of whose pods exist, judged from their PodGroups; live pods only as members.

    job-z: its team's GPUs used up, no pod created; its PodGroup asks 16 GPUs for 2 pods, 8 a
    pod: quota. job-y: no pod and no minResources, not admitted: queue. job-x: 8 GPUs a pod
    and 8 left, admitted: unknown (something else refuses its pods). job-r: its pod ran until
    5m and was deleted (a restart): pending 10 minutes at 15m, not since its PodGroup was
    made, and not past the alert's 10. job-d: finished (Completed), no pod: not pending.
    job-k: one pod Failed (a Job's backoff keeps it), its replacement refused by quota and one
    pod Pending: short of a pod, quota, not capacity. job-i: an unbound pod whose ordinary init
    container asks 8 GPUs (no init container status yet) counts 8 GPUs, not 16: capacity; its
    first-step sidecar, equally unreported, is added (4.5 cores).
    """
    series: dict[str, str] = {}
    gpu = "requests.nvidia.com/gpu"
    series |= _gang("team-z", "job-z", "team-z", created=0, min_member=2, phase="Pending",
                    min_resources={"nvidia.com/gpu": 16, "cpu": 16})  # fmt: skip
    series |= _quota("team-z", gpu, 96, 96)
    series |= _quota("team-z", "requests.cpu", 10, 96)
    series |= _gang("team-y", "job-y", "team-y", created=0, min_member=2, phase="Pending")
    series |= _quota("team-y", gpu, 96, 96)
    series |= _gang("team-x", "job-x", "team-x", created=0, min_member=2,
                    min_resources={"nvidia.com/gpu": 16})  # fmt: skip
    series |= _quota("team-x", gpu, 88, 96)
    series |= _gang("team-r", "job-r", "team-r", created=0)
    series |= _pod("team-r", "job-r-0", "job-r", created=0, phase="Running", steps=10)
    series |= _gang("team-d", "job-d", "team-d", created=0, phase="Completed",
                    min_resources={"nvidia.com/gpu": 8})  # fmt: skip
    series |= _quota("team-d", gpu, 96, 96)
    series |= _gang("team-k", "job-k", "team-k", created=0, min_member=2)
    series |= _pod("team-k", "job-k-0", "job-k", created=0, phase="Failed")
    series |= _pod("team-k", "job-k-1", "job-k", created=0)
    for pod in ("job-k-0", "job-k-1"):
        series |= _requests("team-k", pod, "train", {"nvidia_com_gpu": 8})
    series[
        'kube_pod_status_unschedulable{namespace="team-k", pod="job-k-1", uid="job-k-1-uid"}'
    ] = "1x80"
    series |= _quota("team-k", gpu, 92, 96)
    series |= _gang("team-i", "job-i", "team-i", created=0, min_member=2)
    series |= _pod("team-i", "job-i-0", "job-i", created=0)
    series[
        'kube_pod_status_unschedulable{namespace="team-i", pod="job-i-0", uid="job-i-0-uid"}'
    ] = "1x80"
    series |= _requests("team-i", "job-i-0", "train", {"nvidia_com_gpu": 8, "cpu": 4})
    init: dict[str, dict[str, float]] = {"setup": {"nvidia_com_gpu": 8}}
    init[FIRST_STEP_CONTAINER] = {"cpu": 0.5}
    for container, requests in init.items():
        series |= {
            name: value
            for name, value in _requests("team-i", "job-i-0", container, requests, "").items()
            if not name.startswith("kube_pod_init_container_info")  # unbound: no status yet
        }
    series |= _quota("team-i", gpu, 88, 96)
    series |= _quota("team-i", "requests.cpu", 10, 14.5)
    reasons = {"team-z": "quota", "team-y": "queue", "team-x": "unknown", "team-k": "quota",
               "team-i": "capacity"}  # fmt: skip
    pending = rules.GANG_PENDING_RULE
    shortfall = rules.GANG_QUOTA_SHORTFALL_RULE
    request = rules.GANG_POD_REQUEST_RULE
    return Case(
        "gangs without pods pend from their PodGroups; only live pods are members",
        at="15m",
        series=series,
        alerts={
            "GangPending": _pending_15m(reasons),
        },
        records={
            f'{pending}{{podgroup=~"job-r|job-d"}}': [
                (
                    {"__name__": pending, "namespace": "team-r", "podgroup": "job-r"}
                    | {"queue": "team-r"},
                    600,
                ),
            ],
            f'{shortfall}{{namespace=~"team-z|team-k"}}': [
                (
                    {"__name__": shortfall, "namespace": ns, "podgroup": f"job-{ns[-1]}"}
                    | {"resource": gpu},
                    value,
                )
                for ns, value in (("team-z", 8), ("team-k", 4))
            ],
            f'{request}{{namespace="team-i"}}': [
                (
                    {"__name__": request, "namespace": "team-i", "podgroup": "job-i"}
                    | {"resource": resource},
                    value,
                )
                for resource, value in (("nvidia_com_gpu", 8), ("cpu", 4.5))
            ],
            f'{rules.GANG_LIVE_RULE}{{namespace="team-r"}}': [],
        },
    )


def _trainjob(
    namespace: str, name: str, *, suspend: str = "0x80", conditions: dict[str, str] | None = None
) -> dict[str, str]:
    """A TrainJob as kube-state-metrics' custom resource state writes it: ``suspend`` the
    series of its ``spec.suspend``, ``conditions`` each condition's (1 while True)."""
    key = f'namespace="{namespace}", trainjob="{name}", {KSM}'
    return {
        f"{TRAINJOB_SUSPENDED_METRIC}{{{key}}}": suspend,
        **{
            f'{TRAINJOB_CONDITION_METRIC}{{{key}, condition="{condition}"}}': values
            for condition, values in (conditions or {}).items()
        },
    }


def _stopped_trainjobs_case() -> Case:
    """Trainer keeps the PodGroup of a suspended or finished TrainJob, named as it is.

    job-s: suspended at 2m, its pods deleted at 3m, its PodGroup left Inqueue: not pending.
    job-c: Complete at 2m, its Succeeded pods deleted at 4m, its PodGroup moved back to
    Pending by Volcano: not pending. job-e: Failed at 2m (its deadline: Trainer deletes the
    JobSet), pods gone at 3m: not pending. job-p: a real gang without pods, its TrainJob
    running (not suspended, Complete False), its queue not admitting it: pending, queue;
    a suspended TrainJob of the same name in another namespace, or served by another job,
    changes nothing. job-r: created suspended, resumed at 12m with no pod yet: pending since
    the resume (3 minutes at 15m), not since its creation.
    """
    series: dict[str, str] = {}
    for namespace, phase in (("team-s", "Inqueue"), ("team-c", "Pending"), ("team-e", "Inqueue")):
        group = f"job-{namespace[-1]}"
        series |= _gang(namespace, group, namespace, created=0, min_member=2, phase=phase)
        for index in range(2):
            steps = 8 if namespace == "team-c" else 6
            series |= _pod(namespace, f"{group}-{index}", group, created=0, phase="Running",
                           steps=steps)  # fmt: skip
    series |= _trainjob("team-s", "job-s", suspend="0x3 1x77",
                        conditions={"Suspended": "0x3 1x77"})  # fmt: skip
    series |= _trainjob("team-c", "job-c", conditions={"Complete": "0x3 1x77"})
    series |= _trainjob("team-e", "job-e", conditions={"Failed": "0x3 1x77"})
    series |= _gang("team-p", "job-p", "team-p", created=0, min_member=2, phase="Pending")
    series |= _trainjob("team-p", "job-p", conditions={"Complete": "0x80", "Suspended": "0x80"})
    # job-r: created suspended, resumed at 12m, its pods not made yet: pending since the resume
    series |= _gang("team-r", "job-r", "team-r", created=0, min_member=2, phase="Inqueue")
    series |= _trainjob("team-r", "job-r", suspend="1x24 0x56")
    series |= _trainjob("team-x", "job-p", suspend="1x80")
    series[
        f'{TRAINJOB_SUSPENDED_METRIC}{{namespace="team-p", trainjob="job-p", '
        f'job="monitoring/first-step"}}'
    ] = "1x80"
    pending = rules.GANG_PENDING_RULE
    return Case(
        "a suspended or finished TrainJob's PodGroup without pods does not pend",
        at="15m",
        series=series,
        alerts={
            "GangPending": [
                Fired(
                    {"namespace": "team-p", "podgroup": "job-p", "queue": "team-p"},
                    900,
                    {"summary": "Gang team-p/job-p (queue team-p) pending for 15m 0s: queue"},
                )
            ],
        },
        records={
            f'{pending}{{namespace=~"team-s|team-c|team-e"}}': [],
            f'{pending}{{namespace="team-r"}}': [
                (
                    {"__name__": pending, "namespace": "team-r", "podgroup": "job-r"}
                    | {"queue": "team-r"},
                    180,
                ),
            ],
        },
    )


def _neuron_case() -> Case:
    """A node's NeuronCore utilisation goes to the running pods holding its Neuron devices:
    one whole-node pod on t1, two pods sharing t2 (each gets the node's mean). A finished pod,
    a CPU-only pod and another target's copy of the series attribute nothing. A pod holding
    t3's devices with no runtime loaded (no core reported) is idle, 0; one on t4, whose
    monitor is down, is unknown (no series)."""
    neuron = f'job="{rules.NEURON_MONITOR_JOB}"'
    series = {
        f'neuroncore_utilization_ratio{{{neuron}, node="t1", neuroncore="0"}}': "0.5x80",
        f'neuroncore_utilization_ratio{{{neuron}, node="t1", neuroncore="1"}}': "0.25x80",
        f'neuroncore_utilization_ratio{{{neuron}, node="t2", neuroncore="0"}}': "1x80",
        f'neuroncore_utilization_ratio{{{neuron}, node="t2", neuroncore="1"}}': "0.5x80",
        # a team's pod serving the name: not neuron-monitor's job
        'neuroncore_utilization_ratio{job="team-a/fake", node="t1", neuroncore="2"}': "0x80",
    }
    pods = {  # (namespace, pod): (node, resource, phase)
        ("team-a", "a-0"): ("t1", "aws_amazon_com_neuron", "Running"),
        ("team-a", "a-1"): ("t1", "cpu", "Running"),
        ("team-b", "b-0"): ("t2", "aws_amazon_com_neuron", "Running"),
        ("team-c", "c-0"): ("t2", "aws_amazon_com_neuroncore", "Running"),
        ("team-c", "c-9"): ("t2", "aws_amazon_com_neuron", "Succeeded"),
        ("team-d", "d-0"): ("t3", "aws_amazon_com_neuron", "Running"),  # no model loaded yet
        ("team-e", "e-0"): ("t4", "aws_amazon_com_neuron", "Running"),  # its monitor is down
    }
    for node, up in (("t1", 1), ("t2", 1), ("t3", 1), ("t4", 0)):
        series[f'up{{{neuron}, node="{node}", instance="{node}:8000"}}'] = f"{up}x80"
    for (namespace, pod), (node, resource, phase) in pods.items():
        key = f'namespace="{namespace}", pod="{pod}", uid="{pod}-uid", {KSM}'
        series[
            f'kube_pod_container_resource_requests{{{key}, container="train", node="{node}", '
            f'resource="{resource}", unit="integer"}}'
        ] = "4x80"
        series[f'kube_pod_status_phase{{{key}, phase="Running"}}'] = f"{int(phase == 'Running')}x80"
    name = rules.NEURON_POD_UTILIZATION_RULE
    return Case(
        "NeuronCore utilisation per pod: its node's mean, for the running pods holding devices",
        at="10m",
        series=series,
        records={
            name: [
                ({"__name__": name, "namespace": ns, "pod": pod, "node": node}, value)
                for ns, pod, node, value in (
                    ("team-a", "a-0", "t1", 0.375),
                    ("team-b", "b-0", "t2", 0.75),
                    ("team-c", "c-0", "t2", 0.75),
                    ("team-d", "d-0", "t3", 0),
                )
            ]
        },
    )


def _ops_cases() -> list[Case]:
    disrupted = "karpenter_nodeclaims_disrupted_total"
    errors = 'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle", provider="aws"'
    karpenter = Case(
        "Karpenter: insufficient capacity and other launch errors in the last 15 minutes",
        at="12m",
        series={
            f'{disrupted}{{reason="insufficient_capacity", nodepool="p5", '
            'capacity_type="reserved"}': "0x20 1x20",
            f'{disrupted}{{reason="insufficient_capacity", nodepool="p5en", '
            'capacity_type="on-demand"}': "3x40",  # long ago
            f'{disrupted}{{reason="drifted", nodepool="p5en", capacity_type="on-demand"}}': (
                "0+1x40"
            ),
            f'{errors}, method="Create", error="NodeClassNotReadyError"}}': "0x20 1x20",
            f'{errors}, method="Create", error="InsufficientCapacityError"}}': "0+1x40",
            f'{errors}, method="Get", error=""}}': "0+1x40",
        },
        alerts={
            "KarpenterInsufficientCapacity": [
                Fired({"nodepool": "p5", "capacity_type": "reserved"}, 0)
            ],
            "KarpenterLaunchErrors": [Fired({"error": "NodeClassNotReadyError"}, 0)],
        },
    )
    taint = 'kube_node_spec_taint{{node="{}", key="{}", value="{}", effect="NoSchedule"}}'
    ready = 'kube_node_status_condition{{node="{}", condition="Ready", status="true"}}'
    health = Case(
        "nodes unhealthy in Slurm and Kubernetes for longer than the settling time",
        at="20m",
        series={
            # p5: two drained; p5en: four draining for a scale-in, jobs still running; gpu: one
            # node down and drained and failed, counted in all three (one node, not three)
            **{
                f'slurm_partition_nodes_{state}{{partition="{partition}"}}': f"{count}x40"
                for partition, counts in (
                    ("p5", (0, 2, 0, 0)),
                    ("p5en", (0, 0, 4, 0)),
                    ("gpu", (1, 1, 0, 1)),
                )
                for state, count in zip(
                    ("down", "drained", "draining", "fail"), counts, strict=True
                )
            },
            'slurm_partition_nodes_drained{partition="trn2"}': "0x30 1x10",  # 5 minutes only
            'slurm_partition_nodes_down{partition="trn2"}': "0x40",
            'slurm_partition_nodes_fail{partition="trn2"}': "0x40",
            taint.format("node-a", UNHEALTHY_TAINT_KEY, "slurm"): "1x40",
            taint.format("node-b", ACCEPTANCE_TAINT_KEY, ""): "1x40",
            ready.format("node-a"): "0x40",
            ready.format("node-b"): "1x40",
            ready.format("node-c"): "1x30 0x10",  # 5 minutes only
        },
        alerts={
            "SlurmNodesUnhealthy": [
                Fired({"partition": "p5"}, 2),
                Fired({"partition": "gpu"}, 1),
            ],
            "NodeUnhealthyTainted": [
                Fired(
                    {
                        "node": "node-a",
                        "key": UNHEALTHY_TAINT_KEY,
                        "value": "slurm",
                        "effect": "NoSchedule",
                    },
                    1,
                )
            ],
            "NodeNotReady": [Fired({"node": "node-a", "condition": "Ready", "status": "true"}, 0)],
        },
    )
    return [karpenter, health]


def _ledger_case() -> Case:
    """Four gangs: g1 and g5 cold on p5, g3 cold on p5en and over its budget, g2 warm (its node
    launched before it was submitted), g4 cold with a pod not yet Ready."""
    series: dict[str, str] = {}
    claims = {  # node: (pool, launched, registered, initialized)
        "n1": ("p5", 160, 250, 500), "n2": ("p5", 190, 280, 520), "n3": ("p5", 50, 80, 120),
        "n4": ("p5en", 300, 400, 900), "n5": ("p5", 100, 200, 300), "n6": ("p5", 60, 70, 80),
        "n7": ("p5en", 100, 150, 200), "n8": ("trn2", 200, 250, 300),
    }  # fmt: skip
    for node, (pool, *times) in claims.items():
        for condition, at in zip(("Launched", "Registered", "Initialized"), times, strict=True):
            key = f'nodeclaim="{pool}-{node}", nodepool="{pool}", node="{node}", {KSM}'
            series[
                f'{NODECLAIM_CONDITION_METRIC}{{{key}, condition="{condition}", status="True"}}'
            ] = f"{at}x40"
    # A condition not yet True has a transition time too (kube-state-metrics writes every
    # condition): it must not count, or n1 would look initialized at 9000.
    series[
        f'{NODECLAIM_CONDITION_METRIC}{{nodeclaim="p5-n1", nodepool="p5", node="n1", {KSM}, '
        'condition="Initialized", status="Unknown"}'
    ] = "9000x40"
    # A team's pod serving ledger inputs of its own (any target but kube-state-metrics and the
    # first-step monitor): a launch of g2's node after g2 was submitted, in its pool and in
    # another (which would make the join many-to-many), and an early first step for g3.
    spoofed = 'namespace="team-x", pod="evil", container="first-step-exporter"'
    for pool in ("p5", "p5en"):
        series[
            f'{NODECLAIM_CONDITION_METRIC}{{{spoofed}, {FIRST_STEP_JOB}, nodepool="{pool}", '
            'node="n3", condition="Launched", status="True"}'
        ] = "99999x40"
    series[f'{FIRST_STEP_METRIC}{{namespace="team-b", pod="g3-0", job="team-x/own-monitor"}}'] = (
        "100x40"
    )
    for pool in ("p5", "p5en"):  # launching, no node yet
        series[
            f'{NODECLAIM_CONDITION_METRIC}{{nodeclaim="{pool}-new", nodepool="{pool}", '
            'condition="Launched", status="True"}'
        ] = "550x40"
    # gang: (namespace, created, {pod: (node, ready or None, first step or None)})
    gangs: dict[str, tuple[str, int, dict[str, tuple[str, int | None, int | None]]]] = {
        "g1": ("team-a", 100, {"g1-0": ("n1", 700, 1000), "g1-1": ("n2", 760, 1010)}),
        "g2": ("team-a", 1000, {"g2-0": ("n3", 1100, 1200)}),
        "g3": ("team-b", 0, {"g3-0": ("n4", 1200, 3000)}),
        "g4": ("team-b", 0, {"g4-0": ("n6", 100, None), "g4-1": ("n6", None, None)}),
        "g5": ("team-a", 0, {"g5-0": ("n5", 400, 1300)}),
        "g6": ("team-c", 0, {"g6-0": ("n7", 500, 1000), "g6-1": ("n8", 600, 1000)}),
    }
    for group, (namespace, created, pods) in gangs.items():
        series[
            f'{PODGROUP_CREATED_METRIC}{{namespace="{namespace}", podgroup="{group}", '
            f'queue="{namespace}", {KSM}}}'
        ] = f"{created}x40"
        for pod, (node, ready_at, step_at) in pods.items():
            key = f'namespace="{namespace}", pod="{pod}", uid="{pod}-uid"'
            series[
                f'kube_pod_annotations{{{key}, annotation_scheduling_k8s_io_group_name="{group}"}}'
            ] = "1x40"
            series[f'kube_pod_info{{{key}, node="{node}", host_ip="10.0.0.1"}}'] = "1x40"
            if ready_at is not None:
                series[f"kube_pod_status_ready_time{{{key}}}"] = f"{ready_at}x40"
            if step_at is not None:
                series[
                    f'{FIRST_STEP_METRIC}{{namespace="{namespace}", pod="{pod}", {FIRST_STEP_JOB}}}'
                ] = f"{step_at}x40"

    def stages(group: str, namespace: str, pool: str, values: dict[str, int]) -> list[Any]:
        return _stages({"namespace": namespace, "podgroup": group, "nodepool": pool}, values)

    p50, p95 = (COLD_START_QUANTILE_RULES[q] for q in (0.5, 0.95))
    return Case(
        "the cold-start ledger: stages of cold gangs, budgets, the day's quantiles",
        at="10m",
        series=series,
        alerts={
            "ColdStartOverBudget": [
                Fired({"namespace": "team-b", "podgroup": "g3", "nodepool": "p5en"}, 3000)
            ],
        },
        records={
            # No PodGroup phase series here: no admission is known, so no queue wait.
            f'{GANG_COLD_START_RULE}{{podgroup="g1"}}': stages(
                "g1",
                "team-a",
                "p5",
                {
                    "nodes_launched": 90,
                    "nodes_registered": 180,
                    "nodes_initialized": 420,
                    "pods_running": 660,
                    "first_step": 900,
                    "cold_start": 900,
                },
            ),
            f'{GANG_COLD_START_RULE}{{podgroup="g2"}}': [],
            f'{rules.GANG_FIRST_STEP_RULE}{{podgroup="g1"}}': [
                (
                    {
                        "__name__": rules.GANG_FIRST_STEP_RULE,
                        "namespace": "team-a",
                        "podgroup": "g1",
                    },
                    1000,
                )
            ],
            # over two pools: counted once, every stage under the last-launched pool (trn2),
            # the node stages its last node's of either pool
            f'{GANG_COLD_START_RULE}{{podgroup="g6", stage!="cold_start"}}': stages(
                "g6",
                "team-c",
                "trn2",
                {
                    "nodes_launched": 200,
                    "nodes_registered": 250,
                    "nodes_initialized": 300,
                    "pods_running": 600,
                    "first_step": 1000,
                },
            ),
            f'{GANG_COLD_START_RULE}{{podgroup="g4"}}': stages(
                "g4",
                "team-b",
                "p5",
                {"nodes_launched": 60, "nodes_registered": 70, "nodes_initialized": 80},
            ),
            f'{rules.POD_GANG_RULE}{{podgroup="g3"}}': [
                (
                    {
                        "__name__": rules.POD_GANG_RULE,
                        "namespace": "team-b",
                        "pod": "g3-0",
                        "podgroup": "g3",
                        "node": "n4",
                    },
                    1,
                )
            ],
            f'{rules.GANG_NODE_RULE}{{podgroup="g4"}}': [
                (
                    {
                        "__name__": rules.GANG_NODE_RULE,
                        "namespace": "team-b",
                        "podgroup": "g4",
                        "node": "n6",
                    },
                    1,
                )
            ],
            COLD_START_BUDGET_METRIC: [
                ({"__name__": COLD_START_BUDGET_METRIC, "nodepool": "p5"}, P5_BUDGET_SECONDS),
                (
                    {"__name__": COLD_START_BUDGET_METRIC, "nodepool": "p5en"},
                    P5EN_BUDGET_MINUTES * 60,
                ),
                ({"__name__": COLD_START_BUDGET_METRIC, "nodepool": "trn2"}, 35 * 60),
            ],
            f'{p50}{{nodepool="p5", stage="first_step"}}': [
                ({"__name__": p50, "nodepool": "p5", "stage": "first_step"}, 1100)
            ],
            f'{p95}{{nodepool="p5", stage="nodes_launched"}}': [
                # g4 launched 60 s after, g1 90 s, g5 100 s: p95 is 90% of the way from 90 to 100
                ({"__name__": p95, "nodepool": "p5", "stage": "nodes_launched"}, 99)
            ],
        },
    )


def _stages(labels: dict[str, str], values: dict[str, int]) -> list[Any]:
    """The ledger's samples of one gang or job: ``labels`` and each stage's value."""
    return [
        ({"__name__": GANG_COLD_START_RULE, **labels, "stage": stage}, value)
        for stage, value in values.items()
    ]


def _gang_on_node(
    namespace: str,
    group: str,
    *,
    created: int,
    node: str,
    launched: str,
    pods: dict[str, tuple[str, str, str]],
    initialized: str = "",
    pending: str = "",
    bound: str = "",
) -> dict[str, str]:
    """One gang on one p5 node; ``launched`` and each pod's (present, ready, first step) values
    in promtool's notation, so that pods can be replaced on a new node. ``initialized``: its
    node's Initialized time; ``pending``: 1 while its PodGroup is Pending, 0 once admitted
    (Inqueue); ``bound``: when its pods are bound to the node (``kube_pod_info``'s node), if
    not when they are present."""
    labels = f'namespace="{namespace}", podgroup="{group}", queue="{namespace}", {KSM}'
    claim = f'nodeclaim="p5-{node}", nodepool="p5", node="{node}", {KSM}'
    series = {
        f"{PODGROUP_CREATED_METRIC}{{{labels}}}": f"{created}x200",
        f'{NODECLAIM_CONDITION_METRIC}{{{claim}, condition="Launched", status="True"}}': launched,
    }
    if initialized:
        series[
            f'{NODECLAIM_CONDITION_METRIC}{{{claim}, condition="Initialized", status="True"}}'
        ] = initialized
    if pending:
        admitted = " ".join(
            f"{1 - int(value)}x{count}"
            for value, count in (part.split("x") for part in pending.split())
        )
        series[f'{PODGROUP_PHASE_METRIC}{{{labels}, phase="Pending"}}'] = pending
        series[f'{PODGROUP_PHASE_METRIC}{{{labels}, phase="Inqueue"}}'] = admitted
    for pod, (present, ready_at, step_at) in pods.items():
        key = f'namespace="{namespace}", pod="{pod}", uid="{pod}-uid"'
        series[
            f'kube_pod_annotations{{{key}, annotation_scheduling_k8s_io_group_name="{group}"}}'
        ] = present
        series[f'kube_pod_info{{{key}, node="{node}"}}'] = bound or present
        if ready_at:
            series[f"kube_pod_status_ready_time{{{key}}}"] = ready_at
        if step_at:
            series[
                f'{FIRST_STEP_METRIC}{{namespace="{namespace}", pod="{pod}", {FIRST_STEP_JOB}}}'
            ] = step_at
    return series


def _queue_wait_cases() -> list[Case]:
    """Queue wait is not cold start: a gang (or Slurm job) that waited for its queue with its
    nodes up is judged from its nodes being ready, one admitted before its nodes were (Volcano's
    root queue knew no node of its kind yet) from its submission; a Slurm job without a first
    step is judged at its start. p5's budget is 2100 s."""
    # gq: nodes up at 300 s (Karpenter provisions for its Unschedulable pods whatever the
    # queue says), Pending in its queue until 3000 s, bound at 3030 s, first step at 3300 s.
    queued = _gang_on_node(
        "team-q", "gq", created=0, node="nq", launched="60x200", initialized="300x200",
        pending="1x99 0x100", bound="_x101 1x98",
        pods={"gq-0": ("1x200", "_x103 3100x96", "_x110 3300x89")},
    )  # fmt: skip
    # gz: admitted at 240 s, before its node is initialized (400 s): no queue wait. Back to
    # Pending at 54.5 min (it lost a pod): its admission stays the first.
    zero = _gang_on_node(
        "team-q", "gz", created=0, node="nz", launched="60x200", initialized="400x200",
        pending="1x7 0x100 1x4 0x87", bound="_x14 1x185",
        pods={"gz-0": ("1x200", "_x67 2000x132", "_x100 3000x99")},
    )  # fmt: skip
    # Slurm: 45 waited behind other jobs with its node's slurmd Ready at 400 s and started at
    # 3000 s; 46 started 30 s after its slurmd was Ready. Without a first step: 47's slurmd
    # was Ready only at 2800 s (over the budget), 48 started at once (healthy, no mark). The
    # TaskProlog writes the submit and start times once the job has started.
    slurm: dict[str, str] = {}
    jobs = {  # job: (node, slurmd Ready, started, first step)
        "45": ("sn45", 400, 3000, 3200), "46": ("sn46", 400, 430, 2500),
        "47": ("sn47", 2800, 2830, None), "48": ("sn48", 400, 430, None),
    }  # fmt: skip
    for job_id, (node, ready_at, started, step_at) in jobs.items():
        pod = f"slurm-worker-p5-{job_id}"
        slurm[_node(node, "p5", "p5.48xlarge", slurm=True)] = "1x200"
        for condition, at in (("Launched", 60), ("Registered", 120), ("Initialized", 300)):
            slurm[
                f'{NODECLAIM_CONDITION_METRIC}{{nodeclaim="p5-slurm-{node}", '
                f'nodepool="p5-slurm", node="{node}", {KSM}, condition="{condition}", '
                'status="True"}'
            ] = f"{at}x200"
        pod_key = f'namespace="{SLURM_NAMESPACE}", pod="{pod}"'
        slurm[f'kube_pod_info{{{pod_key}, node="{node}"}}'] = "1x200"
        slurm[f'kube_pod_status_ready_time{{{pod_key}, uid="{pod}-uid"}}'] = (
            f"_x{ready_at // 30} {ready_at}x150"
        )
        key = f'{pod_key}, {SLURM_FIRST_STEP_JOB}, slurm_job_id="{job_id}"'
        from_start = f"_x{started // 30} "
        slurm[f"{SLURM_JOB_SUBMIT_METRIC}{{{key}}}"] = from_start + "0x150"
        slurm[f"{SLURM_JOB_START_METRIC}{{{key}}}"] = from_start + f"{started}x150"
        if step_at is not None:
            slurm[f"{FIRST_STEP_METRIC}{{{key}}}"] = f"_x{step_at // 30} {step_at}x100"
    team_q = {"namespace": "team-q", "nodepool": "p5"}
    job = {"namespace": SLURM_NAMESPACE, "nodepool": "p5"}
    return [
        Case(
            "a gang or Slurm job that waited for its queue with its nodes up is judged without "
            "the wait; one admitted before its nodes were ready is not excused",
            at="56m",
            series=queued | zero | slurm,
            alerts={
                "ColdStartOverBudget": [
                    Fired({**team_q, "podgroup": "gz"}, 3000),
                    Fired({**job, "slurm_job_id": "46"}, 2470),
                    Fired({**job, "slurm_job_id": "47"}, 2800),
                ]
            },
            records={
                f'{rules.GANG_ADMITTED_RULE}{{namespace="team-q"}}': [
                    (
                        {
                            "__name__": rules.GANG_ADMITTED_RULE,
                            "namespace": "team-q",
                            "podgroup": group,
                        },
                        at,
                    )
                    for group, at in (("gq", 3000), ("gz", 240))
                ],
                f'{GANG_COLD_START_RULE}{{podgroup="gq"}}': _stages(
                    {**team_q, "podgroup": "gq"},
                    {
                        "nodes_launched": 60,
                        "nodes_initialized": 300,
                        "admitted": 3000,
                        "pods_running": 3100,
                        "first_step": 3300,
                        "cold_start": 600,
                    },
                ),
                f'{GANG_COLD_START_RULE}{{podgroup="gz", stage=~"admitted|cold_start"}}': (
                    _stages({**team_q, "podgroup": "gz"}, {"admitted": 240, "cold_start": 3000})
                ),
                GANG_QUEUE_WAIT_RULE: [
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **team_q, "podgroup": "gq"}, 2700),
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **team_q, "podgroup": "gz"}, 0),
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **job, "slurm_job_id": "45"}, 2600),
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **job, "slurm_job_id": "46"}, 30),
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **job, "slurm_job_id": "47"}, 30),
                    ({"__name__": GANG_QUEUE_WAIT_RULE, **job, "slurm_job_id": "48"}, 30),
                ],
                rules.SLURM_JOB_START_RULE: [
                    (
                        {
                            "__name__": rules.SLURM_JOB_START_RULE,
                            "namespace": SLURM_NAMESPACE,
                            "slurm_job_id": job_id,
                        },
                        started,
                    )
                    for job_id, (_, _, started, _) in jobs.items()
                ],
                f'{GANG_COLD_START_RULE}{{slurm_job_id="45", stage=~"admitted|cold_start"}}': (
                    _stages({**job, "slurm_job_id": "45"}, {"admitted": 3000, "cold_start": 600})
                ),
            },
        )
    ]


def _cold_start_cases() -> list[Case]:
    """A gang (or Slurm job) restarted onto a new node after an hour is no new cold start; a
    cold gang with no first step past its pool's budget fires, a younger one does not."""
    restarted = _gang_on_node(  # the first start: node at 5m, first step at 10m, gone at 60m
        "team-r", "gr", created=0, node="n1", launched="300x119",
        pods={"gr-a": ("1x119", "_x14 400x105", "_x20 600x99")},
    ) | _gang_on_node(  # replaced at 61m on n2, first step at 70m
        "team-r", "gr", created=0, node="n2", launched="_x122 3900x80",
        pods={"gr-b": ("_x122 1x80", "_x134 4000x68", "_x140 4200x60")},
    )  # fmt: skip
    restart = Case(
        "a gang restarted on a new node an hour after its cold start is recorded no more",
        at="90m",
        series=restarted,
        alerts={"ColdStartOverBudget": []},
        records={f'{GANG_COLD_START_RULE}{{podgroup="gr"}}': []},
    )
    # Without a first step: gs's pod never turns Ready (stuck), gl's turned Ready at 40 min
    # (over p5's 35 min), gh's at 5 min (healthy, its program marks no first step; its pod
    # restarted at 40 min, which starts no clock again), gy is younger than the budget.
    no_first_step = (
        _gang_on_node("team-s", "gs", created=0, node="n9", launched="100x200",
                      pods={"gs-0": ("1x200", "", "")})
        | _gang_on_node("team-s", "gl", created=0, node="n7", launched="100x200",
                        pods={"gl-0": ("1x200", "_x80 2400x119", "")})
        | _gang_on_node("team-s", "gh", created=0, node="n6", launched="100x200",
                        pods={"gh-0": ("1x200", "_x10 300x69 _x5 2580x115", "")})
        | _gang_on_node("team-s", "gy", created=900, node="n8", launched="1000x100",
                        pods={"gy-0": ("1x100", "1100x100", "")})
    )  # fmt: skip
    team_s = {"namespace": "team-s", "nodepool": "p5"}
    stuck = Case(
        "a cold gang stuck before its pods run fires, one whose pods ran past the budget "
        "fires; a healthy one that marks no first step and a younger one do not",
        at="45m",
        series=no_first_step,
        alerts={
            "ColdStartOverBudget": [
                Fired({**team_s, "podgroup": "gs"}, 2700),
                Fired({**team_s, "podgroup": "gl"}, 2400),
            ]
        },
        records={
            f'{rules.GANG_PODS_RUNNING_RULE}{{podgroup=~"gl|gh"}}': [
                (
                    {
                        "__name__": rules.GANG_PODS_RUNNING_RULE,
                        "namespace": "team-s",
                        "podgroup": group,
                    },
                    at,
                )
                for group, at in (("gl", 2400), ("gh", 300))
            ],
        },
    )
    # The clock stopped at its pods running: 15 minutes after, gl is judged no more; gs is
    # still stuck.
    later = Case(
        "a gang whose pods ran past the budget without a first step is judged for 15 min",
        at="57m",
        series=no_first_step,
        alerts={"ColdStartOverBudget": [Fired({**team_s, "podgroup": "gs"}, 3420)]},
    )
    # A Slurm job requeued onto a new node after an hour: its first start's values only.
    requeued: dict[str, str] = {}
    for node, pod, launched, submitted, step_at in (  # submitted at 0, first step at 10m
        ("sn5", "slurm-worker-p5-2", "300x119", "0x119", "_x20 600x99"),
        ("sn6", "slurm-worker-p5-3", "_x122 3900x80", "_x122 0x80", "_x140 4200x60"),
    ):
        requeued[_node(node, "p5", "p5.48xlarge", slurm=True)] = "1x200"
        requeued[
            f'{NODECLAIM_CONDITION_METRIC}{{nodeclaim="p5-slurm-{node}", nodepool="p5-slurm", '
            f'node="{node}", {KSM}, condition="Launched", status="True"}}'
        ] = launched
        requeued[f'kube_pod_info{{namespace="{SLURM_NAMESPACE}", pod="{pod}", node="{node}"}}'] = (
            "1x200"
        )
        key = (
            f'namespace="{SLURM_NAMESPACE}", pod="{pod}", {SLURM_FIRST_STEP_JOB}, slurm_job_id="77"'
        )
        requeued[f"{SLURM_JOB_SUBMIT_METRIC}{{{key}}}"] = submitted
        requeued[f"{FIRST_STEP_METRIC}{{{key}}}"] = step_at
    requeue = Case(
        "a Slurm job requeued on a new node an hour after its cold start is recorded no more",
        at="90m",
        series=requeued,
        alerts={"ColdStartOverBudget": []},
        records={f'{GANG_COLD_START_RULE}{{slurm_job_id="77"}}': []},
    )
    # A gang whose node launched at 2 min and never initializes (its startup taint stays): its
    # PodGroup admitted, its pod bound to no node. The ledger's clock, stages and queue wait
    # come from the nodes a gang's pods are bound to, so it has no ledger series and
    # ColdStartOverBudget cannot fire, past p5's budget or not; GangPending (capacity) does.
    pod_key = 'namespace="team-n", pod="gn-0", uid="gn-0-uid"'
    claim = f'nodeclaim="p5-n5", nodepool="p5", node="n5", {KSM}'
    unbound = {
        **_gang("team-n", "gn", "team-n", created=0),
        f'kube_pod_annotations{{{pod_key}, annotation_scheduling_k8s_io_group_name="gn"}}': (
            "1x200"
        ),
        f"kube_pod_created{{{pod_key}}}": "0x200",
        f'kube_pod_status_phase{{{pod_key}, phase="Pending"}}': "1x200",
        f'kube_pod_info{{{pod_key}, node=""}}': "1x200",
        f"kube_pod_status_unschedulable{{{pod_key}}}": "1x200",
        _node("n5", "p5", "p5.48xlarge"): "1x200",
        f'{NODECLAIM_CONDITION_METRIC}{{{claim}, condition="Launched", status="True"}}': "120x200",
        f'{NODECLAIM_CONDITION_METRIC}{{{claim}, condition="Registered", status="True"}}': (
            "200x200"
        ),
    }
    never_initialized = Case(
        "a gang whose nodes never initialize has no ledger series: GangPending sees it",
        at="45m",
        series={key: value.replace("x80", "x200") for key, value in unbound.items()},
        alerts={
            "ColdStartOverBudget": [],
            "GangPending": [
                Fired(
                    {"namespace": "team-n", "podgroup": "gn", "queue": "team-n"},
                    2700,
                    {"summary": "Gang team-n/gn (queue team-n) pending for 45m 0s: capacity"},
                )
            ],
        },
        records={f'{GANG_COLD_START_RULE}{{podgroup="gn"}}': []},
    )
    return [restart, stuck, later, requeue, never_initialized]


def _slurm_ledger_case() -> Case:
    """Slurm jobs in the ledger: 42 cold on a p5-slurm node and over p5's budget, 43 warm (its
    node launched before it was submitted), 44 spoofed by a team's pod (any namespace but
    Slurm's), its node launched after its submission."""
    series: dict[str, str] = {}
    # node: (launched, registered, initialized)
    claims = {"sn1": (160, 250, 500), "sn2": (50, 80, 120), "sn3": (300, 400, 600)}
    for node, times in claims.items():
        series[_node(node, "p5", "p5.48xlarge", slurm=True)] = "1x40"
        for condition, at in zip(("Launched", "Registered", "Initialized"), times, strict=True):
            key = f'nodeclaim="p5-slurm-{node}", nodepool="p5-slurm", node="{node}", {KSM}'
            series[
                f'{NODECLAIM_CONDITION_METRIC}{{{key}, condition="{condition}", status="True"}}'
            ] = f"{at}x40"
    # job: (namespace, pod, node, submitted, first step)
    jobs = {
        "42": (SLURM_NAMESPACE, "slurm-worker-p5-0", "sn1", 100, 2400),
        "43": (SLURM_NAMESPACE, "slurm-worker-p5-1", "sn2", 1000, 1100),
        "44": ("team-x", "evil", "sn3", 100, 5000),
    }
    for job_id, (namespace, pod, node, submitted, step_at) in jobs.items():
        # a team's pod is scraped by the training pods' monitor, a slurmd pod by its own
        scraped = SLURM_FIRST_STEP_JOB if namespace == SLURM_NAMESPACE else FIRST_STEP_JOB
        key = f'namespace="{namespace}", pod="{pod}", {scraped}, slurm_job_id="{job_id}"'
        series[f"{SLURM_JOB_SUBMIT_METRIC}{{{key}}}"] = f"{submitted}x40"
        series[f"{FIRST_STEP_METRIC}{{{key}}}"] = f"{step_at}x40"
        series[f'kube_pod_info{{namespace="{namespace}", pod="{pod}", node="{node}"}}'] = "1x40"
    # An early first step for 42 from another target than the first-step monitor.
    series[
        f'{FIRST_STEP_METRIC}{{namespace="{SLURM_NAMESPACE}", pod="slurm-worker-p5-0", '
        'job="team-x/own-monitor", slurm_job_id="42"}'
    ] = "150x40"
    job = {"namespace": SLURM_NAMESPACE, "slurm_job_id": "42"}
    job43 = {**job, "slurm_job_id": "43"}
    p50 = COLD_START_QUANTILE_RULES[0.5]
    return Case(
        "the cold-start ledger: a cold Slurm job under its platform pool, a warm one, a spoof",
        at="10m",
        series=series,
        alerts={"ColdStartOverBudget": [Fired({**job, "nodepool": "p5"}, 2300)]},
        records={
            f'{GANG_COLD_START_RULE}{{slurm_job_id!=""}}': [
                ({"__name__": GANG_COLD_START_RULE, **job, "nodepool": "p5", "stage": stage}, value)
                for stage, value in (
                    ("nodes_launched", 60),
                    ("nodes_registered", 150),
                    ("nodes_initialized", 400),
                    ("first_step", 2300),
                    ("cold_start", 2300),  # no start known: no queue wait
                )
            ],
            rules.SLURM_JOB_NODE_RULE: [
                (
                    {"__name__": rules.SLURM_JOB_NODE_RULE, **job, "node": "sn1", "nodepool": "p5"},
                    1,
                ),
                (
                    {
                        "__name__": rules.SLURM_JOB_NODE_RULE,
                        **job43,
                        "node": "sn2",
                        "nodepool": "p5",
                    },
                    1,
                ),
            ],
            rules.SLURM_JOB_SUBMIT_RULE: [
                ({"__name__": rules.SLURM_JOB_SUBMIT_RULE, **job}, 100),
                ({"__name__": rules.SLURM_JOB_SUBMIT_RULE, **job43}, 1000),
            ],
            rules.SLURM_JOB_FIRST_STEP_RULE: [
                ({"__name__": rules.SLURM_JOB_FIRST_STEP_RULE, **job}, 2400),
                ({"__name__": rules.SLURM_JOB_FIRST_STEP_RULE, **job43}, 1100),
            ],
            f'{p50}{{nodepool="p5", stage="first_step"}}': [
                ({"__name__": p50, "nodepool": "p5", "stage": "first_step"}, 2300)
            ],
        },
    )


def _cases() -> list[Case]:
    return [
        *_accelerator_cases(),
        _gang_case(),
        _gang_quota_case(),
        _gang_without_pods_case(),
        _stopped_trainjobs_case(),
        _neuron_case(),
        *_ops_cases(),
        _ledger_case(),
        _slurm_ledger_case(),
        *_cold_start_cases(),
        *_queue_wait_cases(),
    ]


def test_every_rule_passes_promtool_on_synthetic_series(
    config: PlatformConfig, tmp_path: Path
) -> None:
    groups = rules.rule_groups(config)
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False, width=1000))
    every_rule = [rule for group in groups for rule in group["rules"]]
    cases = _cases()
    # Every alert has a case where it fires and one where a near miss does not (each case's
    # other series); every recording rule is read by a case.
    fired = {name for case in cases for name, alerts in case.alerts.items() if alerts}
    alerts = {rule["alert"] for rule in every_rule if "alert" in rule}
    assert alerts == fired, f"alerts without a firing case: {alerts - fired}"
    records = {rule["record"] for rule in every_rule if "record" in rule}
    checked = {re.split(r"[{]", expr)[0] for case in cases for expr in case.records}
    assert records <= checked, f"recording rules no case reads: {records - checked}"

    checked_rules = promtool.run("check", "rules", str(rule_file))
    assert checked_rules.returncode == 0, checked_rules.stdout + checked_rules.stderr
    assert "duplicate" not in checked_rules.stdout.lower() + checked_rules.stderr.lower()
    # Each case evaluates only the groups it needs (tests/promtool.py), which holds only
    # while no rule reads what another alerts.
    assert not [rule for rule in every_rule if "ALERTS" in promtool.NAME.findall(rule["expr"])]
    tests = promtool.unit_test_files(tmp_path, groups, cases)
    result = promtool.run("test", "rules", *map(str, tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests) > 1, result.stdout


def test_rules_are_prometheus_rules_with_runbooks(
    config: PlatformConfig, reference_dir: Path
) -> None:
    """Each group is a PrometheusRule the chart's Prometheus selects, valid against the
    operator's CRD; each alert links a runbook section that exists, and each section is an
    alert's."""
    groups = rules.rule_groups(config)
    crds = reference_dir / "crds" / "prometheus-operator" / "v0.93.1"
    sections = set(re.findall(r"^## (\w+)$", RUNBOOKS.read_text(), re.MULTILINE))
    alerts = set()
    for group in groups:
        manifest = rules.prometheus_rule(group)
        assert validation_errors(manifest, config.cluster.kubernetes_version, crds) == []
        assert manifest["metadata"]["namespace"] == MONITORING_NAMESPACE
        assert manifest["metadata"]["labels"]["release"] == "monitoring"
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            alerts.add(rule["alert"])
            notes = rule["annotations"]
            assert notes["runbook_url"] == (
                f"docs/how-to/alert-runbooks.md#{rule['alert'].lower()}"
            )
            assert notes["summary"] and notes["description"]
            assert rule["labels"]["severity"] in {"critical", "warning"}
    # With the docs site's address, each link is the published section.
    published = config.model_copy(
        update={
            "observability": config.observability.model_copy(
                update={"runbooks_url": "https://docs.example.com/platform/"}
            )
        }
    )
    for group in rules.rule_groups(published):
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["annotations"]["runbook_url"] == (
                    "https://docs.example.com/platform/how-to/alert-runbooks/"
                    f"#{rule['alert'].lower()}"
                )
    alerts.add("FSxThroughputSaturated")  # a CloudWatch alarm, beside the PrometheusRules
    alerts.add("FSxFreeCapacityLow")
    assert sections == alerts


def test_registered_rules_and_fsx_alarm(config: PlatformConfig) -> None:
    """Under mocks: one PrometheusRule per group, after what it waits for; and the throughput
    alarm at 80% of prod's file system's throughput, in bytes a second, from read plus write."""
    lustre = config.storage.lustre
    assert lustre is not None

    def program() -> None:
        provider = k8s.Provider("cluster", kubeconfig="{}")
        stack = k8s.core.v1.Namespace("monitoring", opts=pulumi.ResourceOptions(provider=provider))
        rules.register_rules(config, ready=[stack], provider=provider)
        rules.register_fsx_alarms("storage", config, file_system_id="fs-0123")

    stack_file = StackFile(project="p", stack="prod", config={}, secret_keys=[])
    run = synthesize(stack_file, program, region=config.region, account_id=config.account_id)
    made = [
        r for r in run.records if r.type == "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
    ]
    by_name = {record.inputs["metadata"]["name"]: record for record in made}
    groups = rules.rule_groups(config)
    assert sorted(by_name) == sorted(group["name"] for group in groups)
    for group in groups:
        record = by_name[group["name"]]
        assert record.inputs["spec"] == rules.prometheus_rule(group)["spec"]
        assert record.inputs["metadata"]["labels"] == {"release": "monitoring"}
        assert any("Namespace::monitoring" in urn for urn in record.dependencies)
    (alarm,) = [r.inputs for r in run.records if r.type == "aws:cloudwatch/metricAlarm:MetricAlarm"]
    # 250 MB/s per TiB over prod's capacity, 80% of it, in bytes a second.
    expected = lustre.throughput_per_tib * 10**6 * lustre.storage_capacity_gib / 1024 * 0.8
    assert abs(alarm["threshold"] - expected) <= 1
    assert alarm["comparisonOperator"] == "GreaterThanThreshold"
    queries = {query["id"]: query for query in alarm["metricQueries"]}
    assert queries["throughput"]["expression"] == "(read + write) / PERIOD(read)"
    assert queries["throughput"]["returnData"] is True
    for name, metric in (("read", "DataReadBytes"), ("write", "DataWriteBytes")):
        assert queries[name]["metric"]["metricName"] == metric
        assert queries[name]["metric"]["dimensions"] == {"FileSystemId": "fs-0123"}
        assert queries[name]["returnData"] is False
