"""Can my job run here, on how many nodes, and if not, why.

Every team x runtime and every Slurm partition, decided the way the controllers decide (each
rule's module cites its source).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import yaml

from components.catalog import GPU_RESOURCE, NEURON_RESOURCE, InstanceType
from components.checkpoints import checkpoint_location
from components.config import PlatformConfig
from components.config.trainer import RUNTIME_IMAGE_KEYS
from components.fabric_test import FABRIC_NODES
from components.fabric_test import NAMESPACE as FABRIC_NAMESPACE
from components.katib import CONFIG_KEY as KATIB_CONFIG_KEY
from components.katib import CONFIG_MAP as KATIB_CONFIG_MAP
from components.katib import METRICS_COLLECTOR_INJECTION, TRAINJOB_TRIAL
from components.katib import NAMESPACE as KATIB_NAMESPACE
from components.kuberay import ray_image, ray_job
from components.lustre_boundary import LUSTRE_BOUNDARY_POLICY
from components.notebooks import NAMESPACE as NOTEBOOKS_NAMESPACE
from components.notebooks import (
    NOTEBOOK_POD_LABELS,
    NOTEBOOK_PORT,
    PROFILE_CONFIG,
    byte_specification_bytes,
)
from components.notebooks import RELEASE as NOTEBOOKS_RELEASE
from components.platform import lustre_pools
from components.scheduling import PLATFORM_QUEUE, QUEUE_ANNOTATION
from components.storage.layout import team_directories
from components.tenancy import QUEUE_POLICY
from components.tenant_api import RAY_GANG_POLICY
from components.tenant_pods import TENANT_PODS_POLICY
from components.trainer import team_runtimes
from components.versions import TRAINING_OPERATOR_KUSTOMIZATION
from components.workloads import NodeAllocatable
from synth.jobs import admission, karpenter, kuberay, rbac, slurm, storage, trainer, volcano
from synth.jobs.daemonsets import (
    DevicePlugin,
    daemonset_overhead,
    device_plugins,
    stack_daemonsets,
)
from synth.jobs.karpenter import NodePoolShape, candidate_pools, node_pools
from synth.jobs.placement import required_affinity_holds, selector_holds, untolerated
from synth.jobs.trainer import Runtime
from synth.jobs.view import StackView, labels_of, name_of, namespace_of, quantity, requests_of

TEAM_LABEL: Final = "trainingplatform.io/team"
POOL_LABEL: Final = "trainingplatform.io/pool"
RESERVED_FOR_LABEL: Final = "trainingplatform.io/reserved-for"
CAPACITY_TYPE_LABEL: Final = "karpenter.sh/capacity-type"
ACCELERATORS: Final = (GPU_RESOURCE, "aws.amazon.com/neuron")
LEGACY_OPERATOR: Final = "training-operator"
LEGACY_GANG_FLAG: Final = "--gang-scheduler-name=volcano"
LEGACY_POLICY: Final = "trainingplatform-legacy-min-resources"
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"
EXTENDED_BY_PLUGIN: Final = (GPU_RESOURCE, "aws.amazon.com/neuron", "vpc.amazonaws.com/efa")
MAX_GANG_NODES: Final = 10000
MIB: Final = Decimal(1024 * 1024)


@dataclass
class PathReport:
    """The answer for one path: a team's runtime, or a Slurm partition."""

    kind: str
    """``trainjob``, ``legacy-job`` (a kubeflow.org/v1 PyTorchJob), ``slurm-partition``,
    ``slurm-login`` (a login set), or one of the kinds of Ray, Katib and notebooks."""
    team: str
    namespace: str | None
    runtime: str
    pool: str | None
    max_nodes: int
    """The most nodes one gang (TrainJob ``numNodes``, or Slurm job) can get."""
    runnable: bool
    reasons: list[str] = field(default_factory=list)
    offered: bool = True
    """Whether the stack offers the path (a runtime exists); a pair the platform left out
    because the team's queue or quota can never hold it is listed too, as not runnable."""

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {
            "kind": self.kind,
            "team": self.team,
            "namespace": self.namespace,
            "runtime": self.runtime,
            "pool": self.pool,
            "maxNodes": self.max_nodes,
            "runnable": self.runnable,
            "reasons": self.reasons,
            "offered": self.offered,
        }


@dataclass(frozen=True)
class Bound:
    """A constraint on how many nodes a gang gets: ``holds(n)`` for numNodes ``n``."""

    holds: Callable[[int], bool]
    describe: Callable[[int], str]
    """What caps the gang, given the most nodes it allows."""


def _limit_range_defaults(view: StackView, namespace: str) -> dict[str, Decimal]:
    """Container default requests of the namespace's LimitRanges (admission fills them in)."""
    defaults: dict[str, Decimal] = {}
    for limit_range in view.of_kind("LimitRange", namespace):
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                for name, value in (item.get("defaultRequest") or {}).items():
                    defaults[str(name)] = quantity(value)
    return defaults


def _largest(holds: Callable[[int], bool], upper: int) -> int:
    """The largest n in 1..upper for which ``holds`` (monotonic) is true, 0 if none."""
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class StandingGang:
    """A RayCluster the stack itself creates (``teams[].ray.clusters``).

    Its nodes, queue share and quota share are held for as long as it exists, so every other
    path of its team, queue and pool gets the rest.
    """

    namespace: str
    name: str
    queue: str
    pools: dict[str, int]
    """NodePool -> nodes its workers hold (one pod per node, as the platform builds them)."""
    queued: dict[str, Decimal]
    """What the queue counts as allocated: its PodGroup's minResources, or its running pods'
    requests where larger."""
    charged: dict[str, Decimal]
    """Its pods' requests with LimitRange defaults: what the namespace's quotas count."""

    def label(self) -> str:
        """How reasons name it."""
        return f"standing RayCluster {self.namespace}/{self.name}"


def _summed(parts: Iterator[dict[str, Decimal]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for part in parts:
        for resource, amount in part.items():
            total[resource] = total.get(resource, Decimal(0)) + amount
    return total


class Stack:
    """The decisions that hold for the whole stack, computed once."""

    def __init__(self, view: StackView, config: PlatformConfig | None = None) -> None:
        """Compute the stack-wide decisions.

        Args:
            view: the synthesized stack.
            config: its configuration, for what the view cannot say (the teams' gids, who
                publishes to the model store); None: gids from the pods, publishers not judged.
        """
        self.view = view
        self.team_of = team_namespaces(view)
        self.team_gids = (
            {t.name: t.gid for t in config.teams if t.gid is not None} if config else {}
        )
        self.publishers = frozenset(config.model_store.publishers) if config else None
        self.pools: list[NodePoolShape] = node_pools(view)
        self.plugins: list[DevicePlugin] = [*device_plugins(view), *stack_daemonsets(view)]
        self.queues = volcano.queues(view)
        self.scheduler = volcano.scheduler_config(view)
        self.manager_reads = all(
            rbac.allowed(
                view, rbac.trainer_manager(view), verb, "scheduling.k8s.io", "priorityclasses"
            )
            for verb in ("get", "list", "watch")
        )
        self.node_sets = list(view.of_kind("NodeSet"))
        self.standing = list(self._standing_gangs())

    def _standing_gangs(self) -> Iterator[StandingGang]:
        """The RayClusters in the view that KubeRay gang-schedules (the stack's own)."""
        for cluster in self.view.of_kind("RayCluster"):
            group = kuberay.pod_group(cluster)
            namespace = namespace_of(cluster)
            if group is None or namespace is None:
                continue
            defaults = _limit_range_defaults(self.view, namespace)
            pools: dict[str, int] = {}
            for role, pod, count in kuberay.pods(cluster):
                pool = _pool_of(pod)
                if role.startswith("worker group") and pool is not None:
                    pools[pool] = pools.get(pool, 0) + count
            charged = _summed(
                {r: a * count for r, a in trainer.pod_requests(pod, defaults).items()}
                for _, pod, count in kuberay.pods(cluster)
            )
            # Once its pods run, the queue counts their requests (LimitRange defaults
            # included), not the PodGroup's minResources (volcano v1.15.1
            # pkg/scheduler/plugins/capacity/capacity.go): the larger of the two, per resource.
            queued = {
                resource: max(group.min_resources.get(resource, Decimal(0)), amount)
                for resource, amount in {**group.min_resources, **charged}.items()
            }
            yield StandingGang(
                namespace,
                name_of(cluster),
                group.queue or volcano.DEFAULT_QUEUE,
                pools,
                queued,
                charged,
            )

    def standing_other_than(self, obj: Mapping[str, Any] | None) -> list[StandingGang]:
        """The standing gangs, less ``obj`` itself (a standing cluster judged on its own)."""
        if obj is None or obj.get("kind") != "RayCluster":
            return self.standing
        key = (namespace_of(obj), name_of(obj))
        return [g for g in self.standing if (g.namespace, g.name) != key]

    def node_set_bounds(self, node_set: Mapping[str, Any]) -> tuple[int, int]:
        """(most, warm) slurmd pods of a node set.

        What its ScaledObject grows it to and keeps while idle (KEDA's maxReplicaCount;
        minReplicaCount, or 0 with idleReplicaCount 0), or its replicas both where nothing
        scales it.
        """
        replicas = int((node_set.get("spec") or {}).get("replicas", 1))
        for scaler in self.view.of_kind("ScaledObject"):
            spec = scaler.get("spec") or {}
            target = spec.get("scaleTargetRef") or {}
            if (
                target.get("kind") == "NodeSet"
                and target.get("name") == name_of(node_set)
                and namespace_of(scaler) == namespace_of(node_set)
            ):
                warm = 0 if spec.get("idleReplicaCount") == 0 else spec.get("minReplicaCount", 1)
                return int(spec.get("maxReplicaCount", 100)), int(warm)
        return replicas, replicas

    def storage_problems(
        self, namespace: str | None, pod: Mapping[str, Any], pools: list[str]
    ) -> list[str]:
        """Why the pod's claims or model store fail it (:func:`synth.jobs.storage.claim_problems`).

        Args:
            namespace: the pod's namespace.
            pod: the pod spec.
            pools: the NodePools it may land on.
        """
        team = self.team_of.get(namespace or "")
        return storage.claim_problems(
            self.view, namespace, pod, pools=pools, team=team,
            team_gid=self.team_gids.get(team or ""), publishers=self.publishers,
        )  # fmt: skip

    def placed(self, pod: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
        """The pod as Karpenter and the scheduler place it: with its volumes' node affinity."""
        return karpenter.with_volume_topology(
            pod, karpenter.volume_node_terms(self.view, namespace, pod)
        )

    def slurm_pods(self) -> Iterator[tuple[Mapping[str, Any], dict[str, Any], int]]:
        """(NodeSet, slurmd pod spec with its requests, warm replicas) of every node set."""
        for node_set in self.node_sets:
            spec = node_set.get("spec") or {}
            pod = self.placed(
                (spec.get("template") or {}).get("spec") or {}, namespace_of(node_set)
            )
            slurmd = dict(spec.get("slurmd") or {})
            pod["containers"] = [{"name": "slurmd", "resources": slurmd.get("resources") or {}}]
            yield node_set, pod, self.node_set_bounds(node_set)[1]

    def held_by_slurm(self, resource: str) -> Decimal:
        """What slurmd pods hold of ``resource`` on nodes that always exist."""
        return sum(
            (
                requests_of(pod["containers"][0]).get(resource, Decimal(0)) * replicas
                for _, pod, replicas in self.slurm_pods()
            ),
            Decimal(0),
        )

    def warm_total(self, resource: str) -> Decimal:
        """What the nodes hold of ``resource`` (base units) with every NodePool at its limit."""
        total = Decimal(0)
        for pool in self.pools:
            per_node = max(
                (
                    node_amount(pool.allocatable(t, simulated=False), resource)
                    for t in pool.instance_types
                ),
                default=Decimal(0),
            )
            total += per_node * pool.node_limit()
        return total


def node_amount(allocatable: NodeAllocatable, resource: str) -> Decimal:
    """One node's ``resource`` in base units (cores, bytes, counts), as requests are summed."""
    amount = Decimal(allocatable.amount(resource))
    if resource == "cpu":
        return amount / 1000
    if resource == "memory" or resource.startswith("hugepages-"):
        return amount * MIB
    return amount


def _fit_problems(
    stack: Stack, pod: Mapping[str, Any], requests: Mapping[str, Decimal], what: str
) -> tuple[list[NodePoolShape], list[str]]:
    """The candidate NodePools a pod fits, and why it fits none (Karpenter, then the kubelet)."""
    candidates = candidate_pools(pod, stack.pools)
    if not candidates:
        return [], [
            f"{what}: no NodePool takes it (its node selector, affinity, its volumes' node "
            "affinity or its tolerations match none): Karpenter never adds a node"
        ]
    fitting: list[NodePoolShape] = []
    problems: list[str] = []
    for pool in candidates:
        overhead = daemonset_overhead(pool, stack.plugins)
        simulated = {
            t.name: list(
                karpenter.shortfalls(requests, pool.allocatable(t, simulated=True), overhead)
            )
            for t in pool.instance_types
        }
        if not any(not short for short in simulated.values()):
            short = sorted({r for s in simulated.values() for r in s})
            hint = ""
            if "hugepages-2Mi" in short:
                hint = (
                    " (Karpenter's instance types offer no huge pages unless a NodeOverlay, "
                    "with the nodeOverlay feature gate on, adds them: karpenter-provider-aws"
                    "#3315)"
                )
            problems.append(
                f"{what}: fits no instance type of NodePool {pool.name} in "
                f"Karpenter's simulation ({', '.join(short)}){hint}: it never scales"
            )
            continue
        real = [
            t
            for t in pool.instance_types
            if not simulated[t.name]
            and not list(
                karpenter.shortfalls(requests, pool.allocatable(t, simulated=False), overhead)
            )
        ]
        if not real:
            problems.append(
                f"{what}: Karpenter launches NodePool {pool.name}'s nodes, but they "
                "offer less than it simulated (huge pages the node does not "
                "reserve): the kubelet refuses the pod"
            )
            continue
        missing = [
            (resource, plugin)
            for resource in EXTENDED_BY_PLUGIN
            if requests.get(resource)
            for plugin in [next((p for p in stack.plugins if p.resource == resource), None)]
            if plugin is None or not plugin.runs_on(pool)
        ]
        if missing:
            for resource, plugin in missing:
                detail = "is not installed" if plugin is None else plugin.why_not(pool)
                problems.append(
                    f"{what}: no node of NodePool {pool.name} ever offers {resource}: "
                    f"its device plugin {detail}"
                )
            continue
        fitting.append(pool)
    return fitting, ([] if fitting else problems)


def _karpenter_bound(
    fitting: list[NodePoolShape],
    gang: Callable[[int], list[tuple[Decimal, int]]],
    per_node: Callable[[NodePoolShape], int],
    slurm_pools: dict[str, str],
    standing: list[StandingGang] = [],  # noqa: B006  # read only
) -> Bound:
    held = {pool.name: sum(g.pools.get(pool.name, 0) for g in standing) for pool in fitting}
    limit = sum(pool.node_limit() - held[pool.name] for pool in fitting)

    def nodes_for(n: int) -> int:
        fit = min(per_node(pool) for pool in fitting)
        return sum(math.ceil(count / max(fit, 1)) for _, count in gang(n))

    def describe(best: int) -> str:
        parts = []
        for pool in fitting:
            text = f"NodePool {pool.name} allows {pool.node_limit()} nodes"
            if pool.name in slurm_pools:
                text += f" (the rest of the pool is Slurm's, NodePool {slurm_pools[pool.name]})"
            if pool.labels.get(CAPACITY_TYPE_LABEL) == {"reserved"}:
                text += ", and no more than its capacity reservations hold"
            holders = [g.label() for g in standing if g.pools.get(pool.name)]
            if holders:
                text += f", of which {held[pool.name]} held by {', '.join(holders)}"
            parts.append(text)
        return "; ".join(parts)

    return Bound(lambda n: nodes_for(n) <= limit, describe)


def _pods_bound(
    stack: Stack,
    fitting: list[NodePoolShape],
    requests: Mapping[str, Decimal],
    standing: list[StandingGang],
) -> Bound:
    """Karpenter's bound on n pods of ``requests``, as many to a node as fit.

    The NodePools' limits less what Slurm and the ``standing`` gangs hold (a whole-node pod:
    one to a node).

    Args:
        stack: the stack.
        fitting: the NodePools the pod fits.
        requests: one pod's requests.
        standing: the standing gangs that hold nodes of these pools.
    """

    def per_node(shape: NodePoolShape) -> int:
        return min(
            karpenter.pods_per_node(requests, shape.allocatable(t, simulated=True))
            for t in shape.instance_types
        )

    return _karpenter_bound(
        fitting, lambda n: [(Decimal(0), n)], per_node, _slurm_pool_names(stack), standing
    )


def quota_applies(quota: dict[str, Any], priority_class: str | None) -> bool:
    """Whether ``quota`` counts a pod of ``priority_class`` (None: the pod names none).

    A quota scoped by ``PriorityClass`` counts only the pods its expression matches (the
    scope's operators In, NotIn, Exists, DoesNotExist, as the API documents them for
    ``scopeSelector``); other scopes are taken to count the job's pods, which errs towards
    the smaller bound.
    """
    expressions = ((quota.get("spec") or {}).get("scopeSelector") or {}).get(
        "matchExpressions"
    ) or []
    for expression in expressions:
        if expression.get("scopeName") != "PriorityClass":
            continue
        values = expression.get("values") or []
        operator = expression.get("operator")
        matched = {
            "In": priority_class in values,
            "NotIn": priority_class is not None and priority_class not in values,
            "Exists": priority_class is not None,
            "DoesNotExist": priority_class is None,
        }.get(str(operator), True)
        if not matched:
            return False
    return True


def _quota_hard(
    stack: Stack, namespace: str, priority_class: str | None = None
) -> dict[str, tuple[str, Decimal]]:
    """Resource -> (quota name, hard amount) of the quotas that count a pod of the class."""
    hard: dict[str, tuple[str, Decimal]] = {}
    for quota in stack.view.of_kind("ResourceQuota", namespace):
        if not quota_applies(quota, priority_class):
            continue
        for key, value in ((quota.get("spec") or {}).get("hard") or {}).items():
            resource = str(key).removeprefix("requests.")
            hard[resource] = (name_of(quota), quantity(value))
    return hard


def _quota_bound(
    stack: Stack,
    namespace: str,
    totals: Callable[[int], dict[str, Decimal]],
    priority_class: str | None = None,
    standing: list[StandingGang] = [],  # noqa: B006  # read only
    *,
    requested_only: bool = False,
) -> Bound | None:
    hard = _quota_hard(stack, namespace, priority_class)
    if requested_only:
        # One pod's admission checks only the resources it uses: CheckRequest drops the zeros
        # of the pod's usage, masks it to the quota's hard resources (requestedUsage) and
        # compares only those of the new usage with hard (maskedNewUsage), so a CPU pod starts
        # in a namespace whose GPUs are all held, and so does one that asks for 0 GPUs
        # (kubernetes/apiserver v0.35.0, the staging copy of Kubernetes 1.35,
        # pkg/admission/plugin/resourcequota/controller.go, CheckRequest).
        hard = {r: held for r, held in hard.items() if totals(1).get(r)}
    if not hard:
        return None
    holders = [g for g in standing if g.namespace == namespace]
    used = _summed(g.charged for g in holders)

    def with_used(n: int) -> dict[str, Decimal]:
        wanted = totals(n)
        return {r: wanted.get(r, Decimal(0)) + used.get(r, Decimal(0)) for r in hard}

    def holds(n: int) -> bool:
        wanted = with_used(n)
        return all(wanted[r] <= amount for r, (_, amount) in hard.items())

    def describe(best: int) -> str:
        over = with_used(best + 1)
        binding = [
            f"{r} {amount}"
            + (
                f" ({used[r]} held by {', '.join(g.label() for g in holders)})"
                if used.get(r)
                else ""
            )
            for r, (_, amount) in sorted(hard.items())
            if over[r] > amount
        ]
        names = sorted({name for name, _ in hard.values()})
        return f"ResourceQuota {', '.join(names)} in {namespace} allows " + ", ".join(binding)

    return Bound(holds, describe)


def _queue_bounds(
    stack: Stack,
    queue: volcano.QueueShape,
    totals: Callable[[int], dict[str, Decimal]],
    *,
    pods_first: bool = True,
    standing: list[StandingGang] = [],  # noqa: B006  # read only
) -> list[Bound]:
    """The capacity plugin's bound on a gang, one per resource of its PodGroup's minResources.

    Standing gangs (:class:`StandingGang`) are allocated in their queues all the time: a gang
    of the same queue gets its capability less theirs.

    Args:
        stack: the stack.
        queue: the gang's queue.
        totals: the gang's summed requests (its PodGroup's minResources) for ``numNodes`` n.
        pods_first: whether the gang's pods exist before the PodGroup is Inqueue (JobSet
            creates them at once, so Karpenter adds the gang's nodes and they count in the
            cluster's total); false for the legacy Training Operator, which waits for Inqueue
            (kubeflow/trainer v1.9.4 pkg/controller.v1/control/podgroup_control.go), so only
            the nodes that exist now count.
        standing: the standing gangs other than this one. Default none.
    """
    hierarchy = bool(volcano.capacity_hierarchy(stack.scheduler or {}))
    mates = [g for g in standing if g.queue == queue.name]
    # A standing gang's nodes add to the cluster's total what it allocates itself: the root
    # queue has no more room for others than without it, and its queue has that much less.
    allocated = _summed(g.queued for g in mates)
    bounds = []
    for resource in volcano.compared_resources(totals(1)):
        guarantees = sum(
            (q.guarantee.get(resource, Decimal(0)) for q in stack.queues.values()), Decimal(0)
        )
        held = stack.held_by_slurm(resource)
        taken = allocated.get(resource, Decimal(0))
        warm = stack.warm_total(resource)

        def cold_cap(
            n: int, resource: str = resource, guarantees: Decimal = guarantees, held: Decimal = held
        ) -> Decimal | None:
            # On a scaled-to-zero pool Karpenter adds the gang's nodes (once its pods exist):
            # total is them plus what Slurm's nodes hold.
            total = (totals(n).get(resource, Decimal(0)) if pods_first else Decimal(0)) + held
            if not volcano.root_admits(resource, total=total, hierarchy=hierarchy):
                return Decimal(0)
            return volcano.real_capability(
                queue, resource, total=total, all_guarantees=guarantees, hierarchy=hierarchy
            )

        def warm_cap(
            resource: str = resource, guarantees: Decimal = guarantees, warm: Decimal = warm
        ) -> Decimal | None:
            return volcano.real_capability(
                queue, resource, total=warm, all_guarantees=guarantees, hierarchy=hierarchy
            )

        def holds(
            n: int,
            resource: str = resource,
            cold_cap: Any = cold_cap,
            warm_cap: Any = warm_cap,
            taken: Decimal = taken,
        ) -> bool:
            wanted = totals(n).get(resource, Decimal(0))
            if not wanted:
                return True
            caps = [c for c in (cold_cap(n), warm_cap()) if c is not None]
            return all(wanted + taken <= c for c in caps)

        def describe(
            best: int,
            resource: str = resource,
            cold_cap: Any = cold_cap,
            guarantees: Decimal = guarantees,
            taken: Decimal = taken,
        ) -> str:
            capability = queue.capability.get(resource)
            cold = cold_cap(best + 1)
            holders = f", of which {taken} held by {', '.join(g.label() for g in mates)}"
            holding = holders if taken else ""
            if hierarchy and not pods_first and cold == 0:
                return (
                    f"queue {queue.name}: on a cold pool no node reports {resource}, so the "
                    "root queue admits none of it (capacity plugin, enableHierarchy) and the "
                    "PodGroup stays Pending"
                )
            if hierarchy:
                return f"queue {queue.name}: capability {capability} {resource}{holding}"
            return (
                f"queue {queue.name} (capacity plugin, flat queues): admits {cold} {resource}"
                f"{holding} "
                f"for a gang of {best + 1} nodes: what the nodes that exist hold, less every "
                f"queue's guarantee ({guarantees}), plus its own "
                f"({queue.guarantee.get(resource, Decimal(0))}); on a scaled-to-zero pool "
                "Karpenter's new nodes never make room"
            )

        bounds.append(Bound(holds, describe))
    return bounds


def _team_rbac_problems(stack: Stack, namespace: str, runtime: Runtime) -> Iterator[str]:
    groups = rbac.groups_of_namespace(stack.view, namespace)
    if not groups:
        yield f"no group is bound to a role in {namespace}: nobody can submit"
        return
    runtime_resource = (
        "trainingruntimes" if runtime.kind == "TrainingRuntime" else ("clustertrainingruntimes")
    )
    checks = [
        ("create", "trainjobs", namespace, "create the TrainJob"),
        ("get", runtime_resource, runtime.namespace, f"read the runtime {runtime.name}"),
        (
            "list",
            "clustertrainingruntimes",
            None,
            "list ClusterTrainingRuntimes (the Kubeflow SDK's list_runtimes() fails on a 403)",
        ),
        ("list", "trainingruntimes", namespace, "list the namespace's runtimes (Kubeflow SDK)"),
    ]
    for group in groups:
        for verb, resource, where, what in checks:
            if not rbac.allowed(
                stack.view,
                ("Group", group),
                verb,
                "trainer.kubeflow.org",
                resource,
                namespace=where,
                name=runtime.name,
            ):
                yield f"group {group} may not {what} (403)"


def _pool_of(pod: Mapping[str, Any]) -> str | None:
    value = (pod.get("nodeSelector") or {}).get(POOL_LABEL)
    return None if value is None else str(value)


def _slurm_pool_names(stack: Stack) -> dict[str, str]:
    """Kubernetes NodePool -> the NodePool that holds its pool's nodes for Slurm."""
    found = {}
    for shape in stack.pools:
        if RESERVED_FOR_LABEL in shape.labels:
            for pool_name in shape.labels.get(POOL_LABEL, set()):
                for other in stack.pools:
                    if other is not shape and pool_name in other.labels.get(POOL_LABEL, set()):
                        found[other.name] = shape.name
    return found


def _shared_with_slurm(stack: Stack, candidates: list[NodePoolShape]) -> list[str]:
    """NodePools a gang's pods and slurmd pods can both take nodes from."""
    slurm = {p.name for _, pod, _ in stack.slurm_pods() for p in candidate_pools(pod, stack.pools)}
    return sorted({p.name for p in candidates} & slurm)


def _expected_processes(pools: list[NodePoolShape]) -> int | None:
    for pool in pools:
        for instance in pool.instance_types:
            if instance.accelerator_resource != GPU_RESOURCE:
                return instance.neuron_cores
    return None


def borrowed_capacity_notes(
    stack: Stack, queue_name: str, wanted: Mapping[str, Decimal]
) -> list[str]:
    """A note per accelerator of which a gang wants more than its queue's deserved share.

    Beyond ``deserved`` the gang runs on capacity it borrowed from other queues, which Volcano's
    capacity plugin lets a queue below its own share reclaim (volcano-sh/volcano v1.15.1
    pkg/scheduler/plugins/capacity/capacity.go, AddReclaimableFn).

    Args:
        stack: the stack.
        queue_name: the gang's queue.
        wanted: the gang's summed requests (a TrainJob's pods, a Ray PodGroup's minResources).
    """
    shares = stack.queues.get(queue_name)
    notes = []
    for resource in ACCELERATORS:
        deserved = shares.deserved.get(resource) if shares else None
        amount = wanted.get(resource, Decimal(0))
        if deserved is not None and amount > deserved:
            notes.append(
                f"beyond {deserved} {resource} (queue {queue_name}'s deserved share) a gang "
                "runs on borrowed capacity: a queue below its own share can reclaim its "
                "pods, and one evicted worker fails the whole job"
            )
    return notes


def evaluate_runtime(
    stack: Stack, team: str, namespace: str, manifest: Mapping[str, Any], *, admin: bool = False
) -> PathReport:
    """The report for one team submitting TrainJobs in ``namespace`` to one runtime.

    Args:
        stack: the stack.
        team: the team (``platform`` for the platform's own runtimes).
        namespace: where the TrainJobs are created.
        manifest: the runtime.
        admin: submitted by a cluster admin (the fabric test), not a team's group: no team
            RBAC to check. Default False.
    """
    runtime = Runtime.parse(dict(manifest))
    blocking: list[str] = []
    notes: list[str] = []
    defaults = _limit_range_defaults(stack.view, namespace)
    trainer_job = runtime.trainer_job
    pool_name = _pool_of(trainer_job.pod) if trainer_job else None

    blocking += list(trainer.admission_problems(stack.view, runtime, stack.manager_reads))
    if not admin:
        blocking += list(_team_rbac_problems(stack, namespace, runtime))
    blocking += list(trainer.runtime_webhook_problems(runtime))
    blocking += list(trainer.unresolved_mounts(runtime))
    blocking += list(trainer.dependency_deadlocks(runtime))
    blocking += list(trainer.unganged_pods(runtime))
    if (problem := trainer.sdk_problem(runtime)) is not None:
        blocking.append(problem)
    if runtime.framework == "mpi":
        for job in runtime.jobs:
            root = trainer.runs_as_root(job.pod)
            if root:
                blocking.append(
                    f"replicated job {job.name} runs {', '.join(root)} as root: "
                    "OpenMPI's mpirun refuses root and the SSH keys are mounted for "
                    "mpiuser (uid 1000)"
                )

    def gang(n: int) -> list[tuple[Decimal, int]]:
        return [(Decimal(0), count) for _, count in runtime.gang_pods(n)]

    def totals(n: int) -> dict[str, Decimal]:
        summed: dict[str, Decimal] = {}
        for job, count in runtime.gang_pods(n):
            for resource, amount in trainer.pod_requests(job.pod, defaults).items():
                summed[resource] = summed.get(resource, Decimal(0)) + amount * count
        return summed

    bounds: list[Bound] = []
    fitting: list[NodePoolShape] = []
    for job in runtime.jobs:
        requests = trainer.pod_requests(job.pod, defaults)
        placed = stack.placed(job.pod, namespace)
        job_fitting, problems = _fit_problems(stack, placed, requests, f"replicated job {job.name}")
        blocking += problems
        blocking += [
            f"replicated job {job.name}: {problem}"
            for problem in stack.storage_problems(namespace, job.pod, [p.name for p in job_fitting])
        ]
        if job is trainer_job:
            fitting = job_fitting
            shared = _shared_with_slurm(stack, candidate_pools(placed, stack.pools))
            if shared:
                blocking.append(
                    f"slurmd pods (default scheduler) and this runtime's gangs (Volcano) both take "
                    f"nodes of NodePool {', '.join(shared)}: the two schedulers race for them"
                )
    if fitting and trainer_job is not None:
        requests = trainer.pod_requests(trainer_job.pod, defaults)

        def per_node(pool: NodePoolShape) -> int:
            return min(
                karpenter.pods_per_node(requests, pool.allocatable(t, simulated=True))
                for t in pool.instance_types
            )

        bounds.append(
            _karpenter_bound(fitting, gang, per_node, _slurm_pool_names(stack), stack.standing)
        )

    processes = trainer.torch_processes(runtime)
    expected = _expected_processes(fitting)
    if expected is not None and processes not in (None, "auto") and processes != expected:
        blocking.append(
            f"torch starts {processes} process(es) per node on a node with "
            f"{expected} NeuronCores (Trainer counts only GPUs, else CPUs): set "
            "numProcPerNode, or request one CPU per NeuronCore"
        )

    if runtime.gang:
        queue_name = runtime.annotations.get(volcano.QUEUE_ANNOTATION) or volcano.DEFAULT_QUEUE
        if stack.scheduler is None:
            blocking.append("Volcano is not installed: the PodGroup never schedules")
        elif queue_name not in stack.queues:
            blocking.append(f"queue {queue_name} does not exist: the PodGroup stays Pending")
        else:
            queue = stack.queues[queue_name]
            bounds += _queue_bounds(stack, queue, totals, standing=stack.standing)
    priority = trainer_job.pod.get("priorityClassName") if trainer_job is not None else None
    quota = _quota_bound(stack, namespace, totals, priority, stack.standing)
    if quota is not None:
        bounds.append(quota)

    upper = min(MAX_GANG_NODES, sum(p.node_limit() for p in fitting)) if fitting else 0
    best = upper
    for bound in bounds:
        best = min(best, _largest(bound.holds, upper))
    binding = [b.describe(best) for b in bounds if not b.holds(best + 1)]
    if best and runtime.gang:
        queue_name = runtime.annotations.get(volcano.QUEUE_ANNOTATION) or volcano.DEFAULT_QUEUE
        notes += borrowed_capacity_notes(stack, queue_name, totals(best))
    # An MPI gang of numNodes 1 is still a launcher and a worker (mpi.go), which the bounds
    # count: best is 0 when two nodes cannot be had.
    runnable = not blocking and best >= 1
    if runtime.framework == "mpi" and not best and not blocking:
        notes.append("an MPI job takes at least two nodes: the launcher and one worker")
    reasons = blocking + [f"at most {best} node(s): {text}" for text in binding] + notes
    return PathReport(
        "trainjob",
        team,
        namespace,
        runtime.name,
        pool_name,
        best if not blocking else 0,
        runnable,
        reasons,
    )


def evaluate_partitions(stack: Stack, *, job_hours: int | None = None) -> Iterator[PathReport]:
    """One report per Slurm partition: each node set's own, then the chart's partitions.

    Args:
        stack: the stack's decisions.
        job_hours: a job's time limit to check against the partitions' and teams' limits,
            hours. Default: none.
    """
    per_set: dict[str, tuple[int, int, list[str], str | None]] = {}
    notes: dict[str, list[str]] = {}
    window = slurm.window_minutes(stack.view)
    teams = slurm.team_qos(stack.view)
    gang_pools: set[str] = set()
    for runtime in stack.view.objects:
        if runtime.get("kind") in ("TrainingRuntime", "ClusterTrainingRuntime"):
            for job in Runtime.parse(runtime).jobs:
                gang_pools |= {p.name for p in candidate_pools(job.pod, stack.pools)}
    for node_set, pod, _ in stack.slurm_pods():
        name = name_of(node_set)
        most, warm = stack.node_set_bounds(node_set)
        requests = requests_of(pod["containers"][0])
        fitting, problems = _fit_problems(stack, pod, requests, f"slurmd of node set {name}")
        reasons = list(problems)
        reasons += [
            f"slurmd of node set {name}: {problem}"
            for problem in stack.storage_problems(
                namespace_of(node_set), pod, [p.name for p in fitting]
            )
        ]
        shared = sorted({p.name for p in candidate_pools(pod, stack.pools)} & gang_pools)
        if shared:
            reasons.append(
                f"slurmd pods (default scheduler) and Volcano gangs both take nodes of "
                f"NodePool {', '.join(shared)}: the two schedulers race for them"
            )
        limit = sum(p.node_limit() for p in fitting)
        nodes = min(most, limit) if fitting else 0
        if fitting and most > limit:
            reasons.append(f"node set {name} grows to {most} nodes but the NodePools allow {limit}")
        node = slurm.node_of(pod, fitting[0].instance_types[0]) if fitting else None
        blocking, notes[name] = slurm.limits_reasons(
            slurm.partition_settings(node_set),
            nodes=nodes,
            window=window,
            node=node,
            teams=teams,
            job_hours=job_hours,
        )
        reasons += blocking
        per_set[name] = (nodes, min(warm, nodes), reasons, _pool_of(pod))
    for name, (nodes, warm, reasons, pool) in per_set.items():
        partition_reasons = list(reasons) or [
            f"cold: up to {nodes} node(s), the node set's share of the pool, once the autoscaler "
            "has asked for them and Karpenter has launched them",
            f"warm: {warm} node(s) at once (kept while idle)",
            *notes[name],
        ]
        yield PathReport(
            "slurm-partition",
            "*",
            namespace_of_node_set(stack, name),
            name,
            pool,
            nodes,
            not reasons and nodes >= 1,
            partition_reasons,
        )
    values = stack.view.values("slurm") or {}
    for partition, settings in sorted((values.get("partitions") or {}).items()):
        if not (settings or {}).get("enabled", True):
            continue
        members = list((settings or {}).get("nodesets") or [])
        names = list(per_set) if "ALL" in members else [m for m in members if m in per_set]
        nodes = sum(per_set[n][0] for n in names)
        blocked = [r for n in names for r in per_set[n][2]]
        reasons = blocked or [f"spans node sets {', '.join(names)}: {nodes} nodes together"]
        pools = sorted({str(per_set[n][3]) for n in names})
        if len(pools) > 1:
            reasons.append(
                f"a job here can span pools {', '.join(pools)} (different placement "
                "groups and fabrics)"
            )
        yield PathReport(
            "slurm-partition",
            "*",
            namespace_of_node_set(stack, names[0]) if names else None,
            str(partition),
            ",".join(pools) or None,
            nodes,
            not blocked and nodes >= 1,
            reasons,
        )


def evaluate_logins(stack: Stack) -> Iterator[PathReport]:
    """One report per Slurm login set of the ``slurm`` release: do its pods' volumes mount.

    The login pod is where users reach ``/fsx`` and ``/models`` from Slurm; it takes the claims
    of Slurm's namespace (``loginsets.<name>.podSpec.volumes``: SlinkyProject/slurm-operator
    v1.2.1 helm/slurm/values.yaml) on the NodePools its selector names.
    """
    release = stack.view.releases.get("slurm")
    if release is None:
        return
    namespace = str(release.get("namespace") or "slurm")
    for name, login in sorted(((release.get("values") or {}).get("loginsets") or {}).items()):
        if not (login or {}).get("enabled", True):
            continue
        pod = dict((login or {}).get("podSpec") or {})
        placed = stack.placed(pod, namespace)
        pools = [p.name for p in candidate_pools(placed, stack.pools)]
        pools = pools or sorted(_unsized_pools(stack, placed))
        reasons = stack.storage_problems(namespace, pod, pools)
        if not pools:
            reasons.append(
                f"login set {name}: no NodePool takes its pods (selector, affinity, its volumes' "
                "node affinity or tolerations)"
            )
        runnable = not reasons
        if runnable:
            reasons.append(f"login pods on NodePool {', '.join(pools)}, their claims bound")
        yield PathReport("slurm-login", "*", namespace, str(name), _pool_of(pod),
                         1 if runnable else 0, runnable, reasons)  # fmt: skip


def namespace_of_node_set(stack: Stack, name: str) -> str | None:
    """The namespace of a NodeSet."""
    node_set = next((n for n in stack.node_sets if name_of(n) == name), None)
    return None if node_set is None else namespace_of(node_set)


def team_namespaces(view: StackView) -> dict[str, str]:
    """Namespace -> team, for namespaces labelled as a team's."""
    return {
        name_of(ns): labels_of(ns)[TEAM_LABEL]
        for ns in view.of_kind("Namespace")
        if TEAM_LABEL in labels_of(ns)
    }


def evaluate_jobs(
    view: StackView, *, job_hours: int | None = None, config: PlatformConfig | None = None
) -> list[PathReport]:
    """Every path the stack promises.

    Each team's runtimes (its own TrainingRuntimes and every ClusterTrainingRuntime), its
    Katib trials on them, its RayJobs per pool and its RayClusters and RayJobs in the view,
    its notebook profiles where the stack runs JupyterHub, then each Slurm partition.

    Args:
        view: the synthesized stack.
        job_hours: a Slurm job's time limit to check against the partitions' MaxTime and the
            teams' MaxWall, hours. Default: none.
        config: the configuration the stack was synthesized from, which the RayJob paths are
            built from (the team's gid, directories, pools). Default None: no RayJob paths
            but the Ray objects in the view.
    """
    stack = Stack(view, config)
    reports = []
    cluster_runtimes = list(view.of_kind("ClusterTrainingRuntime"))
    namespaces = team_namespaces(view)
    for namespace, team in sorted(namespaces.items()):
        team_reports: list[PathReport] = []
        manifests = [*view.of_kind("TrainingRuntime", namespace), *cluster_runtimes]
        for manifest in manifests:
            team_reports.append(evaluate_runtime(stack, team, namespace, manifest))
        offered = {name_of(m) for m in manifests}
        team_reports += list(unoffered_runtimes(stack, team, namespace, offered))
        if legacy_operator_gangs(view):
            for pool, instance in sorted(accelerated_pools(stack).items()):
                report = evaluate_legacy(stack, team, namespace, pool, instance)
                # A pool the team has no runtime on is one its queue or quota never holds a
                # node of: reported, not promised.
                report.offered = any(
                    f"{framework}-{pool}" in offered
                    for framework in RUNTIME_IMAGE_KEYS[instance.accelerator]
                )
                team_reports.append(report)
        reports += team_reports
        reports += list(katib_trial_paths(stack, namespace, team, team_reports))
        if config is not None:
            reports += list(ray_job_paths(stack, config, team))
        reports += list(ray_object_paths(stack, namespace, team))
        reports += list(notebook_paths(stack, namespace, team))
    reports += list(fabric_test_paths(stack))
    reports += list(evaluate_partitions(stack, job_hours=job_hours))
    reports += list(evaluate_logins(stack))
    return reports


def fabric_test_paths(stack: Stack) -> Iterator[PathReport]:
    """One report per fabric runtime (components/fabric_test.py): can its 2-node gang start.

    Evaluated as a team's runtime is (admission, the pool's nodes, the platform queue, the
    namespace's quota), submitted by an admin; runnable only where the gang gets
    :data:`components.fabric_test.FABRIC_NODES` nodes.

    Args:
        stack: the stack.
    """
    for manifest in stack.view.of_kind("TrainingRuntime", FABRIC_NAMESPACE):
        report = evaluate_runtime(stack, PLATFORM_QUEUE, FABRIC_NAMESPACE, manifest, admin=True)
        report.kind = "fabric-test"
        queue = stack.queues.get(PLATFORM_QUEUE)
        if queue is not None and not any(queue.deserved.values()):
            report.reasons.append(
                f"queue {PLATFORM_QUEUE} deserves nothing: the test runs on capacity the team "
                "queues lend, and a team below its deserved share reclaims it"
            )
        if report.runnable and report.max_nodes < FABRIC_NODES:
            report.runnable = False
            report.reasons.append(
                f"the fabric test takes {FABRIC_NODES} nodes; at most {report.max_nodes} start"
            )
        yield report


def all_runnable(reports: list[PathReport]) -> bool:
    """Whether every path the stack offers is runnable (left-out pairs are reported only)."""
    return all(report.runnable for report in reports if report.offered)


def team_queue(stack: Stack, team: str) -> volcano.QueueShape | None:
    """The team's queue: the one named after it, as its runtimes name it."""
    return stack.queues.get(team)


def accelerated_pools(stack: Stack) -> dict[str, InstanceType]:
    """Pool name -> its accelerated instance type, for the pools Volcano's gangs may take.

    A pool's Slurm NodePool (``trainingplatform.io/reserved-for``) is left out: its nodes are
    Slurm's.
    """
    found: dict[str, InstanceType] = {}
    for shape in stack.pools:
        if RESERVED_FOR_LABEL in shape.labels:
            continue
        instance = next((t for t in shape.instance_types if t.accelerators), None)
        for pool in sorted(shape.labels.get(POOL_LABEL, set())):
            if instance is not None:
                found.setdefault(pool, instance)
    return found


def unoffered_runtimes(
    stack: Stack, team: str, namespace: str, offered: set[str]
) -> Iterator[PathReport]:
    """A not-runnable report for each runtime a member might try but the stack left out.

    Every (framework, pool) the platform generates runtimes of (components.trainer
    ``runtime_frameworks``: ``<framework>-<pool>``) that ``namespace`` has no runtime of, with
    what its queue and quota allow against one node (two for MPI: a launcher and a worker).

    Args:
        stack: the stack.
        team: the team.
        namespace: the team's namespace.
        offered: names of the runtimes the team has (its own and the cluster's).
    """
    queue = team_queue(stack, team)
    hard = _quota_hard(stack, namespace)
    for pool, instance in sorted(accelerated_pools(stack).items()):
        resource = instance.accelerator_resource
        for framework in RUNTIME_IMAGE_KEYS[instance.accelerator]:
            name = f"{framework}-{pool}"
            if name in offered:
                continue
            nodes = 2 if framework == "mpi" else 1
            wanted = Decimal(instance.accelerators * nodes)
            short = []
            capability = None if queue is None else queue.capability.get(resource)
            if queue is None:
                short.append(f"there is no queue {team}")
            elif capability is not None and capability < wanted:
                short.append(f"queue {queue.name}'s capability is {capability} {resource}")
            if resource in hard and hard[resource][1] < wanted:
                quota, amount = hard[resource]
                short.append(f"ResourceQuota {quota} in {namespace} allows {amount} {resource}")
            why = " and ".join(short) or "the stack generates no such runtime for the team"
            yield PathReport(
                "trainjob",
                team,
                namespace,
                name,
                pool,
                0,
                False,
                [
                    f"no runtime {name} in {namespace}: {why}, less than {nodes} node(s) of "
                    f"{instance.accelerators} {resource} ({instance.name}); Volcano's capacity "
                    "plugin would never enqueue such a gang, so the platform offers no runtime "
                    "and a TrainJob naming it finds none"
                ],
                offered=False,
            )


def legacy_operator_gangs(view: StackView) -> bool:
    """Whether the stack runs the legacy Training Operator with Volcano as its gang scheduler.

    Offline the operator is its kustomization (``trainer.legacyTrainingOperator``), which the
    program always renders with ``--gang-scheduler-name=volcano`` (components/trainer.py
    ``with_gang_scheduler``); a rendered Deployment counts when it carries the flag.
    """
    if TRAINING_OPERATOR_KUSTOMIZATION in view.kustomizations:
        return True
    return any(
        LEGACY_GANG_FLAG in (container.get("args") or [])
        for deployment in view.of_kind("Deployment")
        if name_of(deployment) == LEGACY_OPERATOR
        for container in ((deployment.get("spec") or {}).get("template") or {})
        .get("spec", {})
        .get("containers", [])
    )


def legacy_min_resources_enforced(view: StackView) -> bool:
    """Whether team namespaces refuse a legacy job without cpu/memory-only ``minResources``.

    The policy and its Deny binding both exist (components/tenancy.py
    ``legacy_min_resources_policy``).
    """
    policies = {name_of(p) for p in view.of_kind("ValidatingAdmissionPolicy")}
    bindings = {
        str((b.get("spec") or {}).get("policyName"))
        for b in view.of_kind("ValidatingAdmissionPolicyBinding")
        if "Deny" in ((b.get("spec") or {}).get("validationActions") or [])
    }
    return LEGACY_POLICY in policies and LEGACY_POLICY in bindings


def legacy_worker(pool: str, instance: InstanceType, efa: int) -> dict[str, Any]:
    """The worker pod of the documented PyTorchJob (docs/how-to/migrate-a-pytorchjob.md).

    One whole node: the pool's node selector, a toleration of its accelerator taint, every
    accelerator and EFA interface of the node.

    Args:
        pool: the pool name.
        instance: the pool's instance type.
        efa: EFA interfaces its nodes attach (0: none).
    """
    resource = instance.accelerator_resource
    amounts = {resource: str(instance.accelerators), **({EFA_RESOURCE: str(efa)} if efa else {})}
    return {
        "schedulerName": volcano.SCHEDULER_NAME,
        "nodeSelector": {POOL_LABEL: pool},
        "tolerations": [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "pytorch", "resources": {"limits": amounts, "requests": amounts}}],
    }


def evaluate_legacy(
    stack: Stack, team: str, namespace: str, pool: str, instance: InstanceType
) -> PathReport:
    """The report for a team's legacy PyTorchJob on ``pool`` (Training Operator v1.9.4).

    Modelled on kubeflow/trainer v1.9.4: the operator makes the job's PodGroup with
    ``minMember`` every replica and ``minResources`` the job's
    ``runPolicy.schedulingPolicy.minResources`` when set, else the gang's summed requests
    (pkg/controller.v1/common/job.go, ReconcileJobs: ``if minResources == nil { minResources =
    jc.calcPGMinResources(minMember, replicas) }``), and creates no pod while the PodGroup has
    no phase or is Pending ("Delay pods creation until PodGroup status is Inqueue";
    pkg/controller.v1/control/podgroup_control.go, DelayPodCreationDueToPodGroup). So unlike a
    TrainJob's, its pods cannot make Karpenter launch nodes before Volcano enqueues it: the
    queue check runs against the nodes that exist, and under ``enableHierarchy`` ``root``
    knows no resource only the cold pool's nodes report (volcano v1.15.1 capacity.go). With
    the platform's policy every such job states cpu/memory-only ``minResources``, which
    Volcano enqueues at once; the gang then forms like a TrainJob's.

    Args:
        stack: the stack.
        team: the team.
        namespace: the team's namespace.
        pool: the pool the job's workers select.
        instance: the pool's accelerated instance type.
    """
    candidates = [shape for shape in stack.pools if pool in shape.labels.get(POOL_LABEL, set())]
    efa = max((shape.efa_interfaces for shape in candidates), default=0)
    pod = legacy_worker(pool, instance, efa)
    defaults = _limit_range_defaults(stack.view, namespace)
    requests = trainer.pod_requests(pod, defaults)
    enforced = legacy_min_resources_enforced(stack.view)
    blocking: list[str] = []
    notes: list[str] = []

    def totals(n: int) -> dict[str, Decimal]:
        return {resource: amount * n for resource, amount in requests.items()}

    placed = stack.placed(pod, namespace)
    fitting, problems = _fit_problems(stack, placed, requests, f"PyTorchJob worker on {pool}")
    blocking += problems
    bounds: list[Bound] = []
    if fitting:
        bounds.append(_pods_bound(stack, fitting, requests, stack.standing))
    queue = team_queue(stack, team)
    if stack.scheduler is None:
        blocking.append("Volcano is not installed: the PodGroup never schedules")
    elif queue is None:
        blocking.append(f"queue {team} does not exist: the PodGroup stays Pending")
    else:
        bounds += _queue_bounds(stack, queue, totals, pods_first=enforced, standing=stack.standing)
    quota = _quota_bound(stack, namespace, totals, standing=stack.standing)
    if quota is not None:
        bounds.append(quota)
    upper = min(MAX_GANG_NODES, sum(p.node_limit() for p in fitting)) if fitting else 0
    best = upper
    for bound in bounds:
        best = min(best, _largest(bound.holds, upper))
    binding = [b.describe(best) for b in bounds if not b.holds(best + 1)]
    if enforced:
        notes.append(
            "spec.runPolicy.schedulingPolicy.minResources names only cpu and memory (policy "
            f"{LEGACY_POLICY}): Volcano enqueues the PodGroup at once, the operator creates "
            "the pods, and Karpenter launches the pool's nodes for them"
        )
    elif not best and not blocking:
        blocking.append(
            "never starts on a cold pool: the Training Operator creates no pod until Volcano "
            "enqueues the PodGroup, whose minResources carry every accelerator and EFA "
            "interface of the gang, and no node reports them yet, so Karpenter never "
            "launches one (set spec.runPolicy.schedulingPolicy.minResources: {})"
        )
    reasons = blocking + [f"at most {best} node(s): {text}" for text in binding] + notes
    return PathReport(
        "legacy-job",
        team,
        namespace,
        f"pytorchjob-{pool}",
        pool,
        best if not blocking else 0,
        not blocking and best >= 1,
        reasons,
    )


# --- Ray (KubeRay 1.7.0 with Volcano) and Katib trials -----------------------------------------

RAY_JOB_NAME: Final = "raytrain"
"""The RayJob each team x pool path builds is ``raytrain-<pool>``."""
RAY_ENTRYPOINT: Final = "python train.py"
RAY_WRITES: Final = {"RayJob": "rayjobs", "RayCluster": "rayclusters"}
EXPERIMENTS: Final = ("kubeflow.org", "experiments")
PYTORCHJOB_TRIAL: Final = "PyTorchJob.v1.kubeflow.org"
"""The legacy kind a trial on a legacy-job path is (components/katib.py, LEGACY_TRIALS)."""


def _ray_rbac_problems(stack: Stack, namespace: str, kind: str) -> Iterator[str]:
    """Groups of the namespace that may not create the Ray object there (403)."""
    groups = rbac.groups_of_namespace(stack.view, namespace)
    if not groups:
        yield f"no group is bound to a role in {namespace}: nobody can submit"
    for group in groups:
        if not rbac.allowed(
            stack.view, ("Group", group), "create", "ray.io", RAY_WRITES[kind], namespace=namespace
        ):
            yield f"group {group} may not create {RAY_WRITES[kind]} in {namespace} (403)"


def _unsized_pools(stack: Stack, pod: Mapping[str, Any]) -> set[str]:
    """NodePools that take ``pod`` but admit no instance type the catalog sizes.

    The general pools choose by instance category, so :func:`_fit_problems` cannot judge them.
    """
    return {
        pool.name
        for pool in stack.pools
        if not pool.instance_types
        and not untolerated(pod.get("tolerations") or [], pool.taints)
        and selector_holds(pod.get("nodeSelector") or {}, pool.labels)
        and required_affinity_holds(pod.get("affinity"), pool.labels)
    }


def evaluate_ray(
    stack: Stack,
    team: str,
    namespace: str,
    obj: Mapping[str, Any],
    *,
    scalable: bool,
) -> PathReport:
    """The report for a RayJob or RayCluster of ``team``: does its gang form, how many workers.

    The operator must build its PodGroup (:func:`synth.jobs.kuberay.operator_problems`), the
    team's members must be allowed to create it, the queue-ownership and Ray-gang admission
    policies must admit it (their CEL, :mod:`synth.jobs.admission`), every pod must fit a
    NodePool (daemonsets included), and the PodGroup's minResources must fit the team's queue
    and quota, as a TrainJob's gang must. The gang is one worker group of whole nodes
    (:func:`components.kuberay.worker_group_spec`); its size is the largest number of workers
    every bound allows (``scalable``) or the object's own (a RayCluster or RayJob in the view).

    Args:
        stack: the stack.
        team: the team.
        namespace: the team's namespace.
        obj: the RayJob or RayCluster.
        scalable: report the most workers the gang can have (a path the platform offers);
            false for an object in the view, whose own first worker group's size must fit
            (its report says the most the bounds allow).
    """
    kind = str(obj.get("kind"))
    others = stack.standing_other_than(obj)
    blocking: list[str] = list(kuberay.operator_problems(stack.view))
    blocking += list(_ray_rbac_problems(stack, namespace, kind))
    blocking += admission.refusals(stack.view, [QUEUE_POLICY, RAY_GANG_POLICY], obj, namespace)
    group = kuberay.pod_group(obj)
    if group is None and kind == "RayJob":
        blocking.append(
            "a RayJob without spec.rayClusterSpec runs on an existing RayCluster: KubeRay "
            "builds it no PodGroup and, with Volcano as batch scheduler, never submits it"
        )
    defaults = _limit_range_defaults(stack.view, namespace)
    workers = (kuberay.cluster_spec(obj).get("workerGroupSpecs") or [{}])[0]
    size = int(workers.get("replicas", 0)) * int(workers.get("numOfHosts", 1))
    worker_pod = dict((workers.get("template") or {}).get("spec") or {})
    pool_name = _pool_of(worker_pod)
    fitting: list[NodePoolShape] = []
    unsized: set[str] = set()
    for role, pod, _count in kuberay.pods(obj):
        placed = stack.placed(pod, namespace)
        pools, problems = _fit_problems(
            stack, placed, trainer.pod_requests(pod, defaults), f"{kind} {role}"
        )
        general = _unsized_pools(stack, placed) if not pools else set()
        blocking += [
            f"{kind} {role}: {problem}"
            for problem in stack.storage_problems(
                namespace, pod, [p.name for p in pools] or sorted(general)
            )
        ]
        if role.startswith("worker group"):
            fitting = pools
        elif general:
            unsized |= general
            continue
        blocking += problems

    def scaled(n: int) -> Mapping[str, Any]:
        # The first worker group grown or shrunk to n (an object in the view keeps its others).
        return kuberay.with_workers(obj, 0, n) if worker_pod else obj

    def totals(n: int) -> dict[str, Decimal]:
        shape = kuberay.pod_group(scaled(n))
        return dict(shape.min_resources) if shape is not None else {}

    def quota_totals(n: int) -> dict[str, Decimal]:
        # Quota admission counts pods one by one, LimitRange defaults filled in.
        summed: dict[str, Decimal] = {}
        for _, pod, count in kuberay.pods(scaled(n)):
            for resource, amount in trainer.pod_requests(pod, defaults).items():
                summed[resource] = summed.get(resource, Decimal(0)) + amount * count
        return summed

    bounds: list[Bound] = []
    if fitting:
        requests = trainer.pod_requests(worker_pod, defaults)
        bounds.append(_pods_bound(stack, fitting, requests, others))
        shared = _shared_with_slurm(stack, candidate_pools(worker_pod, stack.pools))
        if shared:
            blocking.append(
                f"slurmd pods (default scheduler) and Ray workers (Volcano) both take nodes of "
                f"NodePool {', '.join(shared)}: the two schedulers race for them"
            )
    queue_name = (group.queue if group is not None else None) or volcano.DEFAULT_QUEUE
    if group is not None:
        if stack.scheduler is None:
            blocking.append("Volcano is not installed: the PodGroup never schedules")
        elif queue_name not in stack.queues:
            blocking.append(f"queue {queue_name} does not exist: the PodGroup stays Pending")
        else:
            bounds += _queue_bounds(stack, stack.queues[queue_name], totals, standing=others)
    quota = _quota_bound(
        stack, namespace, quota_totals, worker_pod.get("priorityClassName"), others
    )
    if quota is not None:
        bounds.append(quota)
    upper = min(MAX_GANG_NODES, sum(p.node_limit() for p in fitting)) if fitting else 0
    best = upper
    for bound in bounds:
        best = min(best, _largest(bound.holds, upper))
    binding = [b.describe(best) for b in bounds if not b.holds(best + 1)]
    reasons = list(blocking)
    if scalable:
        reasons += [f"at most {best} worker(s): {text}" for text in binding]
    elif not blocking and best < size:
        bounds_text = "; ".join(b.describe(best) for b in bounds if not b.holds(size))
        reasons.append(
            f"its gang of {size} worker(s) never forms (at most {best}): {bounds_text}; "
            "Volcano keeps the PodGroup Pending"
        )
    formed = kuberay.pod_group(scaled(max(best, 1)) if scalable else obj)
    if formed is not None and not blocking:
        reasons.append(
            f"PodGroup {formed.name} in queue {queue_name}: minMember {formed.min_member} "
            "(the head and every worker; a RayJob's submitter joins minResources only)"
        )
    if group is not None and best and not blocking:
        reasons += borrowed_capacity_notes(stack, queue_name, totals(best if scalable else size))
    if unsized and not blocking:
        reasons.append(
            f"{'the head and submitter go' if kind == 'RayJob' else 'the head goes'} to "
            f"NodePool{'s' if len(unsized) > 1 else ''} "
            f"{', '.join(sorted(unsized))}, whose instance types (by category) the model does "
            "not size: taken to fit"
        )
    runnable = not blocking and best >= 1 and (scalable or best >= size)
    return PathReport(
        kind.lower(),
        team,
        namespace,
        name_of(obj),
        pool_name,
        (best if scalable else size) if runnable else 0,
        runnable,
        reasons,
    )


def ray_job_paths(stack: Stack, config: PlatformConfig, team_name: str) -> Iterator[PathReport]:
    """A RayJob path per pool the team holds a node of, where KubeRay is installed.

    The RayJob docs/how-to/run-raytrain.md submits (:func:`components.kuberay.ray_job`): the
    team's gid, directories and checkpoint location where the pool mounts the file system,
    the stack's Ray image of the pool (``ray.images``).

    Args:
        stack: the stack.
        config: the validated configuration the stack was synthesized from.
        team_name: the team (its namespace is named after it).
    """
    if stack.view.values(kuberay.RELEASE) is None:
        return
    lustre = config.storage.lustre
    checkpoints = checkpoint_location(config)
    mounted_pools = lustre_pools(config)
    for team in (t for t in config.teams if t.name == team_name):
        pools = {pool.name: pool for pool, _ in team_runtimes(team, config.node_pools)}
        for _, pool in sorted(pools.items()):
            mounted = lustre is not None and team.shared_file_system and pool.name in mounted_pools
            job = ray_job(
                f"{RAY_JOB_NAME}-{pool.name}", pool, team=team.name,
                image=ray_image(config.ray.images, pool),
                workers=1, entrypoint=RAY_ENTRYPOINT, checkpoints=checkpoints if mounted else None,
                directories=team_directories(lustre, team) if lustre and mounted else None,
                group_id=team.gid if lustre is not None or config.model_store.enabled else None,
                models=config.model_store.enabled,
                publishes_models=team.name in config.model_store.publishers,
            )  # fmt: skip
            yield evaluate_ray(stack, team.name, team.name, job, scalable=True)


def ray_object_paths(stack: Stack, namespace: str, team: str) -> Iterator[PathReport]:
    """A path per RayCluster and RayJob already in the view in the team's namespace.

    The cluster a RayJob made is its RayJob's (KubeRay builds it no PodGroup of its own).
    """
    for kind in ("RayCluster", "RayJob"):
        for obj in stack.view.of_kind(kind, namespace):
            if labels_of(obj).get(kuberay.ORIGIN_KIND_LABEL) == "RayJob":
                continue
            yield evaluate_ray(stack, team, namespace, obj, scalable=False)


CHART_START_TIMEOUT: Final = 300
"""The chart's ``singleuser.startTimeout`` (jupyterhub/zero-to-jupyterhub-k8s 4.4.0
jupyterhub/values.yaml), where neither the values nor the profile set one."""
NOTEBOOK_IMAGE_PULL_SECONDS: Final = 600
"""An estimate of a notebook image's pull on a fresh node: several GB (the CUDA or Neuron
training image with JupyterHub on it)."""
NOTEBOOK_NODE_LAUNCH_SECONDS: Final = {"general": 300, "accelerator": 900, "efa": 1500}
"""An estimate of the wait for a node a server needs, by kind: a general node; an accelerator
node (its device plugin, and the acceptance checks where the stack runs them); an EFA node
taken whole (its EFA plugin and huge pages besides)."""
MEMORY_TRAITS: Final = ("mem_guarantee", "mem_limit")


def notebook_trait_problems(override: Mapping[str, Any]) -> list[str]:
    """What JupyterHub's traits refuse in a profile's ``kubespawner_override``.

    KubeSpawner sets each override on itself (kubespawner 7.0.0 kubespawner/spawner.py,
    ``_apply_overrides``), so a value the trait refuses fails the spawn; ``mem_guarantee`` and
    ``mem_limit`` are JupyterHub's ``ByteSpecification`` (:func:`components.notebooks.
    byte_specification_bytes`).

    Args:
        override: a profile's ``kubespawner_override``.
    """
    problems = []
    for trait in MEMORY_TRAITS:
        value = override.get(trait)
        if value is None:
            continue
        try:
            byte_specification_bytes(value)
        except ValueError:
            problems.append(
                f"{trait} {value!r} is not a memory JupyterHub takes (bytes, or a number with "
                "K, M, G or T): the hub refuses the start"
            )
    return problems


def notebook_wait_seconds(spec: Mapping[str, Any]) -> int:
    """An estimate of the longest start of a server's pod: a new node's launch and the pull.

    Args:
        spec: the server pod's spec.
    """
    (container,) = spec["containers"]
    # A resource requested at 0 asks for no device (nor a node that has one).
    requests = {
        resource
        for resource, amount in (container["resources"].get("requests") or {}).items()
        if quantity(amount) > 0
    }
    if EFA_RESOURCE in requests:
        kind = "efa"
    elif GPU_RESOURCE in requests or NEURON_RESOURCE in requests:
        kind = "accelerator"
    else:
        kind = "general"
    return NOTEBOOK_NODE_LAUNCH_SECONDS[kind] + NOTEBOOK_IMAGE_PULL_SECONDS


def notebook_start_timeout(view: StackView, override: Mapping[str, Any]) -> int:
    """Seconds the hub waits for a profile's server: the profile's, the values', the chart's.

    Args:
        view: the stack.
        override: the profile's ``kubespawner_override``.
    """
    if override.get("start_timeout") is not None:
        return int(override["start_timeout"])
    values = view.values(NOTEBOOKS_RELEASE) or {}
    chart = (values.get("singleuser") or {}).get("startTimeout")
    return int(chart) if chart is not None else CHART_START_TIMEOUT


def notebook_pod_of(override: Mapping[str, Any]) -> dict[str, Any]:
    """The pod KubeSpawner creates from a profile's ``kubespawner_override``.

    The inverse of :func:`components.notebooks.kubespawner_override`, trait by trait as
    KubeSpawner builds the pod (jupyterhub/kubespawner 7.0.0 kubespawner/objects.py,
    ``make_pod``): the selector, tolerations, scheduler, priority, the pod's and container's
    security contexts, guarantees as requests and limits as limits, volumes and mounts.

    Args:
        override: a profile's ``kubespawner_override``, as the hub's values hold it.
    """

    def memory(trait: str) -> str | None:
        # KubeSpawner writes the trait's bytes into the pod; a refused value starts no pod
        # (notebook_trait_problems says so).
        try:
            value = override.get(trait)
            return None if value is None else str(byte_specification_bytes(value))
        except ValueError:
            return None

    requests = {
        "memory": memory("mem_guarantee"),
        **dict(override.get("extra_resource_guarantees") or {}),
    }
    limits = {
        "memory": memory("mem_limit"),
        **dict(override.get("extra_resource_limits") or {}),
    }
    if override.get("cpu_guarantee") is not None:
        requests["cpu"] = str(override["cpu_guarantee"])
    if override.get("cpu_limit") is not None:
        limits["cpu"] = str(override["cpu_limit"])
    context = {
        **dict(override.get("pod_security_context") or {}),
        "runAsUser": override.get("uid"),
        "runAsGroup": override.get("gid"),
        "fsGroup": override.get("fs_gid"),
    }
    if override.get("supplemental_gids"):
        context["supplementalGroups"] = list(override["supplemental_gids"])
    container = {
        "name": "notebook",
        "image": override.get("image"),
        "ports": [{"name": "notebook-port", "containerPort": NOTEBOOK_PORT}],
        "env": [{"name": k, "value": v} for k, v in (override.get("environment") or {}).items()],
        "resources": {
            "requests": {k: v for k, v in requests.items() if v is not None},
            "limits": {k: v for k, v in limits.items() if v is not None},
        },
        "securityContext": dict(override.get("container_security_context") or {}),
        "volumeMounts": list(override.get("volume_mounts") or []),
    }
    spec: dict[str, Any] = {
        "schedulerName": override.get("scheduler_name") or "default-scheduler",
        "securityContext": context,
        "serviceAccountName": override.get("service_account") or "default",
        "automountServiceAccountToken": bool(override.get("automount_service_account_token")),
        "containers": [container],
        "volumes": list(override.get("volumes") or []),
    }
    for key, trait in (("nodeSelector", "node_selector"), ("tolerations", "tolerations")):
        if override.get(trait):
            spec[key] = override[trait]
    if override.get("priority_class_name"):
        spec["priorityClassName"] = override["priority_class_name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "jupyter-user",
            "namespace": override.get("namespace"),
            "labels": dict(NOTEBOOK_POD_LABELS),
            "annotations": dict(override.get("extra_annotations") or {}),
        },
        "spec": spec,
    }


def hub_profiles(view: StackView, team: str) -> list[Mapping[str, Any]]:
    """The team's profiles as the hub spawns them: the jupyterhub release's values.

    ``custom.teamProfiles`` (:data:`components.notebooks.PROFILE_CONFIG`), which the hub's
    ``extraConfig`` turns into KubeSpawner's ``profile_list`` for the team's members; none
    where the stack runs no JupyterHub.
    """
    values = view.values(NOTEBOOKS_RELEASE)
    if values is None:
        return []
    teams = (values.get("custom") or {}).get(PROFILE_CONFIG) or []
    return [p for entry in teams if entry.get("team") == team for p in entry.get("profiles") or []]


def _hub_subject(view: StackView) -> rbac.Subject:
    """The hub's ServiceAccount: ``hub`` in the release's namespace.

    jupyterhub/zero-to-jupyterhub-k8s 4.4.0 jupyterhub/templates/hub/serviceaccount.yaml, named
    by ``jupyterhub.hub-serviceaccount.fullname``.
    """
    release = view.releases.get(NOTEBOOKS_RELEASE) or {}
    return ("ServiceAccount", str(release.get("namespace") or NOTEBOOKS_NAMESPACE), "hub")


def evaluate_notebook(
    stack: Stack, team: str, namespace: str, profile: Mapping[str, Any]
) -> PathReport:
    """Can one of the team's users start a server of ``profile``, and on which pool.

    One server is one pod, not a gang: it must fit an instance type of a NodePool that takes
    it (DaemonSets included), the team's quota and queue must hold it besides the standing
    gangs, the tenant-pods, Lustre-boundary and queue admission policies must admit it (their
    CEL) and the hub's ServiceAccount must be allowed to create pods in the namespace. Its
    ``max_nodes`` is 1 when it starts.

    Args:
        stack: the stack.
        team: the team.
        namespace: the namespace the profile spawns in.
        profile: the profile's entry in the hub's values (:func:`hub_profiles`).
    """
    slug = str(profile.get("slug"))
    override = profile.get("kubespawner_override") or {}
    pod = notebook_pod_of(override)
    spec = pod["spec"]
    pod_namespace = str(pod["metadata"].get("namespace") or namespace)
    others = stack.standing_other_than(None)
    blocking: list[str] = notebook_trait_problems(override)
    timeout, wait = notebook_start_timeout(stack.view, override), notebook_wait_seconds(spec)
    if timeout < wait:
        blocking.append(
            f"the hub gives the server {timeout} s to start, but a new node's launch and the "
            f"image's pull take about {wait} s: the first start on a fresh node times out"
        )
    if not rbac.allowed(stack.view, _hub_subject(stack.view), "create", "", "pods",
                        namespace=pod_namespace):  # fmt: skip
        blocking.append(
            f"the hub's ServiceAccount may not create pods in {pod_namespace} (403): "
            "KubeSpawner never starts the server"
        )
    blocking += admission.refusals(
        stack.view, [TENANT_PODS_POLICY, LUSTRE_BOUNDARY_POLICY, QUEUE_POLICY], pod, pod_namespace
    )
    defaults = _limit_range_defaults(stack.view, pod_namespace)
    requests = trainer.pod_requests(spec, defaults)
    placed = stack.placed(spec, pod_namespace)
    fitting, problems = _fit_problems(stack, placed, requests, f"notebook {slug}")
    unsized: set[str] = set()
    if not fitting:
        unsized = _unsized_pools(stack, placed)
        if not unsized:
            blocking += problems
    blocking += stack.storage_problems(
        pod_namespace, spec, [p.name for p in fitting] or sorted(unsized)
    )

    def totals(n: int) -> dict[str, Decimal]:
        return {r: amount * n for r, amount in requests.items()}

    bounds: list[Bound] = []
    if fitting:
        bounds.append(_pods_bound(stack, fitting, requests, others))
    if spec.get("schedulerName") == volcano.SCHEDULER_NAME:
        queue_name = str(
            pod["metadata"]["annotations"].get(QUEUE_ANNOTATION) or volcano.DEFAULT_QUEUE
        )
        if stack.scheduler is None:
            blocking.append("Volcano is not installed: the server's pod never schedules")
        elif queue_name not in stack.queues:
            blocking.append(f"queue {queue_name} does not exist: the server stays Pending")
        else:
            bounds += _queue_bounds(stack, stack.queues[queue_name], totals, standing=others)
    quota = _quota_bound(
        stack, pod_namespace, totals, spec.get("priorityClassName"), others, requested_only=True
    )
    if quota is not None:
        bounds.append(quota)
    upper = MAX_GANG_NODES
    best = upper
    for bound in bounds:
        best = min(best, _largest(bound.holds, upper))
    reasons = list(blocking)
    if best < 1:
        reasons += [f"no server starts: {b.describe(0)}" for b in bounds if not b.holds(1)]
    runnable = not blocking and best >= 1
    pool = _pool_of(spec)
    if runnable:
        where = ", ".join(p.name for p in fitting) or ", ".join(sorted(unsized))
        limited = [b.describe(best) for b in bounds if not b.holds(best + 1)]
        reasons.append(
            f"one pod (not a gang) on NodePool {where}"
            + (f"; at most {best} such server(s) at once: {'; '.join(limited)}" if limited else "")
        )
        if unsized and not fitting:
            reasons.append(
                f"NodePool {', '.join(sorted(unsized))}: instance types chosen by category, "
                "which the model does not size: taken to fit"
            )
    return PathReport("notebook", team, pod_namespace, slug, pool, 1 if runnable else 0,
                      runnable, reasons)  # fmt: skip


def notebook_paths(stack: Stack, namespace: str, team: str) -> Iterator[PathReport]:
    """A path per notebook profile of the team, where the stack runs JupyterHub."""
    for profile in hub_profiles(stack.view, team):
        yield evaluate_notebook(stack, team, namespace, profile)


def katib_trial_resources(view: StackView) -> list[str] | None:
    """``init.controller.trialResources`` of katib-config; None where Katib is not installed.

    kubeflow/katib v0.19.0 pkg/apis/config/v1beta1/types.go, ControllerConfig.
    """
    config_map = view.named("ConfigMap", KATIB_CONFIG_MAP, KATIB_NAMESPACE)
    if config_map is None:
        return None
    data = yaml.safe_load(str((config_map.get("data") or {}).get(KATIB_CONFIG_KEY) or "")) or {}
    controller = (data.get("init") or {}).get("controller") or {}
    return [str(kind) for kind in controller.get("trialResources") or []]


KATIB_PRIMARY_JOB: Final = "node"
"""The replicated job whose index-0 pod Katib takes as a TrainJob trial's primary pod: the
default ``primaryPodLabels`` of a TrainJob trial template (kubeflow/katib v0.19.0
pkg/apis/controller/experiments/v1beta1/constants.go, DefaultTrainJobPrimaryPodLabels:
``jobset.sigs.k8s.io/replicatedjob-name: node``, ``batch.kubernetes.io/job-completion-index:
0``; experiment_defaults.go sets them)."""


def katib_primary_pod_problem(runtime: Runtime) -> str | None:
    """Why a TrainJob trial on ``runtime`` reports no metrics, or None.

    Katib's pod webhook injects the metrics collector into the primary pod only, and the StdOut
    collector wraps that pod's primary container's command to read its output (kubeflow/katib
    v0.19.0 pkg/webhook/v1beta1/pod/inject_webhook.go, isPrimaryPod and wrapWorkerContainer).
    Judged from the runtime's shape: the primary pod must exist and run the training itself,
    not serve SSH to a launcher that does (the MPI runtimes: node pods run sshd, mpirun on the
    launcher gathers the ranks' output).

    Args:
        runtime: the TrainJob path's runtime.
    """
    node = next((j for j in runtime.jobs if j.name == KATIB_PRIMARY_JOB), None)
    where = (
        "Katib's primary pod of a TrainJob trial is replicated job node's pod of index 0 "
        "(kubeflow/katib v0.19.0 pkg/apis/controller/experiments/v1beta1/constants.go, "
        "DefaultTrainJobPrimaryPodLabels)"
    )
    if node is None:
        return f"{where}, and the runtime has no replicated job node: no pod gets a collector"
    command = [str(part) for part in ((node.trainer_container or {}).get("command") or [])]
    serves_ssh = any(part.rsplit("/", 1)[-1] == "sshd" for part in command)
    trainer_job = runtime.trainer_job
    if not serves_ssh and trainer_job is node:
        return None
    runs = "runs sshd" if serves_ssh else "is not the trainer step"
    training = f"replicated job {trainer_job.name}" if trainer_job is not None else "another pod"
    return (
        f"{where}, which here {runs}: the ranks' output reaches {training}, so the StdOut "
        "collector wrapping the primary container's command (pkg/webhook/v1beta1/pod/"
        "inject_webhook.go) reads no metrics"
        + (
            ", and the wrapped sshd never exits on its own: the trial ends only when the "
            "JobSet deletes the pod, with nothing reported"
            if serves_ssh
            else ""
        )
        + "; the platform offers no Katib search on this runtime"
    )


KATIB_COLLECTOR_DEFAULTS: Final = {
    "cpu": Decimal("0.05"),
    "memory": 10 * MIB,
    "ephemeral-storage": 500 * MIB,
}
"""What Katib requests for a metrics collector where katib-config sets nothing (kubeflow/katib
v0.19.0 pkg/apis/config/v1beta1/defaults.go, DefaultCPURequest, DefaultMemRequest,
DefaultDiskRequest, setResourceRequirements)."""


def katib_collector_requests(view: StackView, kind: str = "StdOut") -> dict[str, Decimal]:
    """The requests of the metrics collector Katib's webhook adds to a trial's primary pod.

    The ``kind`` entry of katib-config's ``runtime.metricsCollectors`` (StdOut: Katib's default,
    kubeflow/katib v0.19.0 pkg/apis/controller/experiments/v1beta1/experiment_defaults.go),
    each request it leaves unset filled with :data:`KATIB_COLLECTOR_DEFAULTS`.

    Args:
        view: the stack.
        kind: the collector kind. Default StdOut.
    """
    config_map = view.named("ConfigMap", KATIB_CONFIG_MAP, KATIB_NAMESPACE)
    data: dict[str, Any] = {}
    if config_map is not None:
        data = yaml.safe_load(str((config_map.get("data") or {}).get(KATIB_CONFIG_KEY) or ""))
    collectors = ((data or {}).get("runtime") or {}).get("metricsCollectors") or []
    entry: dict[str, Any] = next((c for c in collectors if c.get("kind") == kind), {})
    requests = ((entry.get("resources") or {}).get("requests")) or {}
    found = {str(r): quantity(v) for r, v in requests.items()}
    return {r: found.get(r) or default for r, default in KATIB_COLLECTOR_DEFAULTS.items()}


def _collector_bound(
    stack: Stack, namespace: str, runtime: Runtime, path: PathReport
) -> tuple[int, list[str]]:
    """The most nodes a trial gets once the collector joins its primary pod, and why fewer.

    The primary pod (:data:`KATIB_PRIMARY_JOB`'s first) with the collector's requests must
    still fit an instance type of its NodePools, DaemonSets' overhead included, as Karpenter
    and the kubelet judge it (CPU, memory and devices: the model sizes no node's disk), and
    the gang plus the collector must fit the namespace's ResourceQuota.

    Args:
        stack: the stack.
        namespace: the team's namespace.
        runtime: the trial's runtime (its ``node`` job exists: :func:`katib_primary_pod_problem`).
        path: the TrainJob path the trial rests on (runnable).
    """
    defaults = _limit_range_defaults(stack.view, namespace)
    collector = katib_collector_requests(stack.view)
    node = next(j for j in runtime.jobs if j.name == KATIB_PRIMARY_JOB)

    def with_collector(requests: Mapping[str, Decimal]) -> dict[str, Decimal]:
        return {
            r: requests.get(r, Decimal(0)) + collector.get(r, Decimal(0))
            for r in {*requests, *collector}
        }

    # The model sizes no node's disk (NodeAllocatable has no ephemeral storage), as for every
    # other pod: the collector's is left to the node's root volume (EC2NodeClass).
    primary = {
        r: amount
        for r, amount in with_collector(trainer.pod_requests(node.pod, defaults)).items()
        if r != "ephemeral-storage"
    }
    what = "a trial's primary pod with Katib's metrics collector"
    _, problems = _fit_problems(stack, stack.placed(node.pod, namespace), primary, what)
    if problems:
        return 0, problems

    def totals(n: int) -> dict[str, Decimal]:
        summed: dict[str, Decimal] = {}
        for job, count in runtime.gang_pods(n):
            for resource, amount in trainer.pod_requests(job.pod, defaults).items():
                summed[resource] = summed.get(resource, Decimal(0)) + amount * count
        return with_collector(summed)

    trainer_job = runtime.trainer_job or node
    quota = _quota_bound(
        stack, namespace, totals, trainer_job.pod.get("priorityClassName"), stack.standing
    )
    if quota is None or quota.holds(path.max_nodes):
        return path.max_nodes, []
    best = _largest(quota.holds, path.max_nodes)
    return best, [f"at most {best} node(s) with the collector's requests: {quota.describe(best)}"]


def katib_trial_paths(
    stack: Stack, namespace: str, team: str, paths: list[PathReport]
) -> Iterator[PathReport]:
    """A ``katib-trial`` path per TrainJob path of the team (and legacy PyTorchJob path).

    A trial is a TrainJob on one of the team's runtimes: Katib's trial controller watches only
    the kinds katib-config lists in ``trialResources`` (kubeflow/katib v0.19.0
    pkg/controller.v1beta1/trial/trial_controller.go, add), the team's members must be allowed
    to create Experiments, Katib's pod webhook must inject the metrics collector in the
    namespace (its label), and the trial runs as the TrainJob path it rests on would (its
    runnable and node count are that path's). A runtime whose primary pod gathers no metrics
    (:func:`katib_primary_pod_problem`: the MPI runtimes) gets a trial path that is not
    offered, with the reason. A team neither allowed Experiments nor labelled has no Katib: no
    paths.

    Args:
        stack: the stack.
        namespace: the team's namespace.
        team: the team.
        paths: the team's TrainJob and legacy PyTorchJob paths.
    """
    kinds = katib_trial_resources(stack.view)
    if kinds is None:
        return
    groups = rbac.groups_of_namespace(stack.view, namespace)
    cannot = [
        f"group {group} may not create experiments.kubeflow.org in {namespace} (403)"
        for group in groups
        if not rbac.allowed(
            stack.view, ("Group", group), "create", *EXPERIMENTS, namespace=namespace
        )
    ]
    ns = stack.view.named("Namespace", namespace) or {}
    injected = all(labels_of(ns).get(k) == v for k, v in METRICS_COLLECTOR_INJECTION.items())
    if cannot and not injected:
        return  # the team has no Katib: nothing to promise
    if not injected:
        cannot.append(
            f"namespace {namespace} lacks the label "
            + ", ".join(f"{k}={v}" for k, v in METRICS_COLLECTOR_INJECTION.items())
            + ": Katib's pod webhook injects no metrics collector (kubeflow/katib v0.19.0 "
            "manifests/v1beta1/components/webhook/webhooks.yaml), so no trial reports its metrics"
        )
    runtimes = {
        name_of(manifest): Runtime.parse(manifest)
        for manifest in [
            *stack.view.of_kind("ClusterTrainingRuntime"),
            *stack.view.of_kind("TrainingRuntime", namespace),
        ]
    }
    for path in paths:
        runtime = runtimes.get(path.runtime) if path.kind == "trainjob" else None
        if runtime is not None and (problem := katib_primary_pod_problem(runtime)) is not None:
            yield PathReport(
                "katib-trial", team, namespace, path.runtime, path.pool, 0, False, [problem],
                offered=False,
            )  # fmt: skip
            continue
        if path.kind == "trainjob":
            kind = TRAINJOB_TRIAL
        elif path.kind == "legacy-job":
            kind = PYTORCHJOB_TRIAL
        else:
            continue
        blocking = list(cannot)
        if kind not in kinds:
            blocking.append(
                f"katib-config's trialResources lists {', '.join(kinds) or 'nothing'}, not "
                f"{kind}: Katib's controller never creates such a trial"
            )
        label = path.runtime if path.kind == "trainjob" else f"v1:{path.runtime}"
        if not path.runnable:
            blocking.append(f"its trials are {label} jobs, and that path is not runnable")
        nodes, bound = path.max_nodes, list[str]()
        if runtime is not None and not blocking:
            nodes, bound = _collector_bound(stack, namespace, runtime, path)
            if not nodes:
                blocking += bound
        reasons = [f"each trial is a {kind} on {label}: it runs as that path does", *bound]
        if runtime is not None and not blocking and not bound:
            collector = katib_collector_requests(stack.view)
            reasons.append(
                f"its primary pod with Katib's metrics collector "
                f"({collector['cpu'] * 1000:.0f}m CPU, "
                f"{collector['memory'] / MIB}Mi memory) still fits its NodePool's nodes, "
                "DaemonSets included, and the namespace's quota; the collector's "
                f"{collector['ephemeral-storage'] / MIB}Mi of ephemeral storage is left to the "
                "node's root volume, which the model does not size"
            )
        yield PathReport(
            "katib-trial",
            team,
            namespace,
            path.runtime,
            path.pool,
            nodes if not blocking else 0,
            not blocking,
            blocking or reasons,
            offered=path.offered,
        )
