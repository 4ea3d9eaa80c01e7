"""The tenant boundary as pure builders: Pod Security, hardened pods, NetworkPolicies, queues.

Everything here is native Kubernetes (Pod Security admission, NetworkPolicy as the VPC CNI's
network policy agent enforces it, ValidatingAdmissionPolicy in CEL): no new controller.

NetworkPolicies act on the kernel's packet path. EFA traffic (libfabric's SRD, NCCL and the
Neuron collectives over it) bypasses the kernel and is never seen by them: between EFA
interfaces, the security group of the pools' nodes is the only boundary, and it admits every
node of the stack. Isolation of a team's collective traffic is therefore by placement (whole
nodes per job) and by the NCCL/Neuron bootstrap, which runs over TCP and is policed here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

POD_SECURITY_PREFIX: Final = "pod-security.kubernetes.io"
TEAM_POD_SECURITY: Final = "baseline"
"""Team namespaces enforce ``baseline``: no privileged or host-namespace pods, no hostPath, no
capability beyond its short list (which has no IPC_LOCK). ``restricted`` is warned about and
audited: it also requires non-root pods, which the PyTorch and JAX images are not."""
TEAM_POD_SECURITY_ADVICE: Final = "restricted"

BASELINE_CAPABILITIES: Final = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
"""Capabilities Pod Security ``baseline`` lets a container add (Pod Security Standards,
"Capabilities"); anything else is refused at admission in a team namespace."""


def pod_security_labels(enforce: str, *, kubernetes_version: str, advise: str) -> dict[str, str]:
    """Namespace labels that enforce one Pod Security level and warn and audit another.

    Args:
        enforce: level refused at admission (``privileged``, ``baseline`` or ``restricted``).
        kubernetes_version: the cluster's minor version, e.g. ``1.35``: the levels are pinned
            to it so a control-plane upgrade changes no rule until the stack says so.
        advise: level whose violations are returned as warnings and written to the audit log.
    """
    version = f"v{kubernetes_version}"
    labels = {
        f"{POD_SECURITY_PREFIX}/enforce": enforce,
        f"{POD_SECURITY_PREFIX}/enforce-version": version,
    }
    for mode in ("warn", "audit"):
        labels[f"{POD_SECURITY_PREFIX}/{mode}"] = advise
        labels[f"{POD_SECURITY_PREFIX}/{mode}-version"] = version
    return labels


RUNTIME_DEFAULT_SECCOMP: Final = {"type": "RuntimeDefault"}


def hardened_container_context() -> dict[str, Any]:
    """A training container's security context: no privilege escalation, no capabilities.

    Dropping every capability costs EFA and NCCL nothing. libfabric registers its buffers
    with ``ibv_reg_mr``, which pins pages against the process's RLIMIT_MEMLOCK rather than
    needing CAP_IPC_LOCK, and the EFA pools raise that limit for every container through
    containerd's base runtime spec (:func:`components.user_data.efa_node_config`). NCCL
    shares GPU memory between a pod's processes by file descriptors over Unix sockets and
    ``/dev/shm`` is the pod's own memory volume; the device plugins hand over the GPU, Neuron
    and EFA device files: none of it needs a capability. The MPI workers' sshd runs as the
    image's non-root user with its own config, so it needs none either.
    """
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def hardened_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with seccomp ``RuntimeDefault`` and every container hardened.

    A copy; the pod's own security context (its user, group, fsGroup) is kept.
    """
    hardened = dict(pod)
    hardened["securityContext"] = {
        **pod.get("securityContext", {}),
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }
    for key in ("initContainers", "containers"):
        if key in pod:
            hardened[key] = [
                {**container, "securityContext": {**container.get("securityContext", {}),
                                                  **hardened_container_context()}}
                for container in pod[key]
            ]  # fmt: skip
    return hardened


DEFAULT_DENY_POLICY: Final = "default-deny-ingress"
SAME_NAMESPACE_POLICY: Final = "allow-same-namespace"
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace: a selector on it cannot be forged by a label."""


def network_policy(
    name: str,
    namespace: str,
    *,
    pods: dict[str, Any],
    ingress: list[dict[str, Any]],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A NetworkPolicy manifest that limits ingress to the pods ``pods`` selects.

    Args:
        name: its name.
        namespace: its namespace.
        pods: label selector of the pods it isolates (``{}``: every pod of the namespace).
        ingress: the rules of what may reach them; empty: nothing (a deny).
        labels: labels of the policy object. Default: none.
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {"podSelector": pods, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def from_namespace(namespace: str, pods: dict[str, Any] | None = None) -> dict[str, Any]:
    """A NetworkPolicy peer: the pods of ``namespace`` (those ``pods`` selects, or all)."""
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}
    if pods is not None:
        peer["podSelector"] = pods
    return peer


def tcp(*ports: int) -> list[dict[str, Any]]:
    """NetworkPolicy ports: each TCP port."""
    return [{"protocol": "TCP", "port": port} for port in ports]


@dataclass(frozen=True)
class ControllerIngress:
    """A platform controller that connects to pods in team namespaces, and to which of them.

    Args:
        name: the NetworkPolicy's name in each team namespace (``allow-<controller>``).
        pods: label selector of the team pods it connects to (never ``{}``).
        namespace: the controller's namespace.
        controller: label selector of the controller's pods there (never ``{}``).
        ports: the TCP ports it connects to.
        why: who connects and what for, with the upstream source, for the docs.
    """

    name: str
    pods: dict[str, Any]
    namespace: str
    controller: dict[str, Any]
    ports: tuple[int, ...]
    why: str


def team_network_policies(
    team: str, *, labels: dict[str, str], controllers: Sequence[ControllerIngress] = ()
) -> list[dict[str, Any]]:
    """A team namespace's ingress: its own pods, and the platform controllers that call them.

    Every pod is isolated (the deny selects them all); the second policy admits traffic from
    any pod of the same namespace, which a job's workers need among themselves (rendezvous,
    NCCL's TCP bootstrap, MPI's SSH, a trial's metrics collector and Ray's workers to the
    head). Trainer, JobSet, Volcano and Karpenter act through the API server, webhooks are
    served from their own namespaces, and no metrics scraper is installed yet (one that is must
    be admitted here, by namespace and pod). Some controllers do connect to team pods, each
    admitted by one policy only where it is installed (``controllers``), from its namespace AND
    its pods' labels, to the pods it calls AND the ports it calls only:

    * the KubeRay operator, to a Ray head's dashboard (8265): it submits, follows and stops a
      RayJob's job, and reads a RayService's applications, through the dashboard's HTTP API
      (:data:`components.kuberay.OPERATOR_INGRESS`);
    * Katib's controller, to a Suggestion's pod (6789): it asks the algorithm service for
      trials over gRPC (:data:`components.katib.CONTROLLER_INGRESS`);
    * JupyterHub's proxy and hub, to a notebook server's port (8888): the proxy forwards the
      user's browser, the hub waits for the server to answer
      (:data:`components.notebooks.PROXY_INGRESS`, :data:`components.notebooks.HUB_INGRESS`).

    The policies admit ingress only: what team pods send out is not limited here (notebook
    servers' egress to instance metadata is denied by a policy of their own,
    :func:`components.notebooks.metadata_egress_policy`). Katib's
    metrics collector (a sidecar in a trial's primary pod) pushes to ``katib-db-manager`` in
    Katib's namespace, which has no NetworkPolicy (the release's manifests carry none and the
    stack adds none there), so nothing stands in its way. The kubelet's probes come from the
    node itself, which the VPC CNI's agent admits whatever the policies say.

    Args:
        team: the team's namespace.
        labels: labels of the policy objects (the team label).
        controllers: the controllers the stack runs that connect to team pods. Default: none.
    """
    return [
        network_policy(DEFAULT_DENY_POLICY, team, pods={}, ingress=[], labels=labels),
        network_policy(
            SAME_NAMESPACE_POLICY,
            team,
            pods={},
            ingress=[{"from": [{"podSelector": {}}]}],
            labels=labels,
        ),
        *(
            network_policy(
                controller.name,
                team,
                pods=controller.pods,
                ingress=[
                    {
                        "from": [from_namespace(controller.namespace, controller.controller)],
                        "ports": tcp(*controller.ports),
                    }
                ],
                labels=labels,
            )
            for controller in controllers
        ),
    ]


CREATED_OR_SPEC_CHANGED: Final = {
    "name": "created-or-spec-changed",
    "expression": "request.operation == 'CREATE' || "
    "!has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec",
}
"""A policy's match condition that judges a create, and an update only when the spec changes:
controllers rewrite status with full updates (Volcano's PodGroups have no status
subresource), and an object admitted before a policy keeps its status."""

QUEUE_POLICY: Final = "trainingplatform-team-queues"
LEGACY_JOBS: Final = ("pytorchjobs", "tfjobs", "mpijobs", "jaxjobs", "xgboostjobs", "paddlejobs")
"""The legacy Training Operator's job kinds (kubeflow.org/v1), each with ``spec.runPolicy``."""
LEGACY_REPLICA_SPECS: Final = (
    "pytorchReplicaSpecs", "tfReplicaSpecs", "mpiReplicaSpecs", "jaxReplicaSpecs",
    "xgbReplicaSpecs", "paddleReplicaSpecs",
)  # fmt: skip
"""The legacy jobs' replica-spec maps (kubeflow/training-operator v1.9.4 CRDs), role -> spec."""
TEMPLATE_KINDS: Final = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job")
"""Kinds whose pods come from ``spec.template``."""
POD_SPECS: Final = "podSpecs"
"""The variable of :func:`pod_spec_variables` that lists an object's pod specs."""
PATCH_SPECS: Final = "patchSpecs"
"""The variable of :func:`pod_spec_variables` that lists a TrainJob's patched pod specs."""


RAY_TEMPLATE_RESOURCES: Final = ("rayclusters", "rayjobs", "rayservices")
"""KubeRay's kinds whose pod templates the template-reading policies judge (ray.io/v1): a bad
template is refused when the object is written, not when the operator's pods fail."""
RAY_AUTOSCALERS: Final = "rayAutoscalers"
"""The variable of :func:`pod_spec_variables` that lists a Ray object's ``autoscalerOptions``
where it turns on the in-tree autoscaler (one entry, ``{}`` when it sets no options)."""


def _ray_cluster_specs(cluster: str) -> str:
    """CEL: the pod specs of a RayClusterSpec at ``cluster``: its head's and its worker groups'."""
    head = f"{cluster}.headGroupSpec"
    return (
        f"((has({cluster}.headGroupSpec) && has({head}.template) && has({head}.template.spec) ? "
        f"[{head}.template.spec] : []) + (has({cluster}.workerGroupSpecs) ? "
        f"{cluster}.workerGroupSpecs.filter(g, has(g.template) && has(g.template.spec))"
        ".map(g, g.template.spec) : []))"
    )


def _template_spec(path: str) -> str:
    """CEL: ``[<path>.template.spec]`` where the object at ``path`` has one, else ``[]``."""
    return (
        f"(has({path}) && has({path}.template) && has({path}.template.spec) ? "
        f"[{path}.template.spec] : [])"
    )


def pod_spec_variables() -> list[dict[str, str]]:
    """ValidatingAdmissionPolicy variables: every pod spec an object makes pods from.

    ``podSpecs`` lists a Pod's own spec, or the pod templates' specs of a Deployment,
    StatefulSet, ReplicaSet, DaemonSet, Job (``spec.template``), CronJob
    (``spec.jobTemplate.spec.template``), JobSet (``replicatedJobs[].template.spec.template``),
    Volcano Job (``tasks[].template``), legacy Training Operator job (each
    ``<framework>ReplicaSpecs[role].template``) and Ray object (the head's and every worker
    group's ``template`` of a RayCluster's spec, a RayJob's ``rayClusterSpec`` and a
    RayService's ``rayClusterConfig``, and a RayJob's ``submitterPodTemplate``, as
    :func:`components.kuberay.ray_pod_templates` walks them); any other kind has none.
    ``rayAutoscalers`` (:data:`RAY_AUTOSCALERS`) lists a Ray object's ``autoscalerOptions``
    where ``enableInTreeAutoscaling`` is on: KubeRay adds the autoscaler's container to the
    head pod with that security context, or none (kuberay v1.7.0
    ray-operator/controllers/ray/common/pod.go, BuildAutoscalerContainer and
    mergeAutoscalerOverrides). ``patchSpecs`` lists,
    per entry of a TrainJob's ``runtimePatches``, the pod specs of its
    ``trainingRuntimeSpec.template.spec.replicatedJobs[]`` (kubeflow/trainer v2.3.0 API); these
    merge into the runtime's, so a rule may judge them by what they state only. A template
    without a spec is skipped: the API server's validation refuses it before admission.
    """
    job_set = (
        "(has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(j, "
        "has(j.template) && has(j.template.spec) && has(j.template.spec.template) && "
        "has(j.template.spec.template.spec)).map(j, j.template.spec.template.spec) : [])"
    )
    legacy = " + ".join(
        f"(has(object.spec.{field}) ? object.spec.{field}.filter(r, "
        f"has(object.spec.{field}[r].template) && has(object.spec.{field}[r].template.spec))"
        f".map(r, object.spec.{field}[r].template.spec) : [])"
        for field in LEGACY_REPLICA_SPECS
    )
    volcano = (
        "(has(object.spec.tasks) ? object.spec.tasks.filter(t, has(t.template) && "
        "has(t.template.spec)).map(t, t.template.spec) : [])"
    )
    patch_jobs = "p.trainingRuntimeSpec.template.spec.replicatedJobs"
    patches = (
        "(has(object.spec.runtimePatches) ? object.spec.runtimePatches.filter(p, "
        "has(p.trainingRuntimeSpec) && has(p.trainingRuntimeSpec.template) && "
        f"has(p.trainingRuntimeSpec.template.spec) && has({patch_jobs}))"
        f".map(p, {patch_jobs}.filter(j, has(j.template) && has(j.template.spec) && "
        "has(j.template.spec.template) && has(j.template.spec.template.spec))"
        ".map(j, j.template.spec.template.spec)) : [])"
    )
    kinds = "[" + ", ".join(f"'{kind}'" for kind in TEMPLATE_KINDS) + "]"
    submitter = "object.spec.submitterPodTemplate"
    ray = (
        f"object.kind == 'RayCluster' ? {_ray_cluster_specs('object.spec')} : "
        "object.kind == 'RayJob' ? ((has(object.spec.rayClusterSpec) ? "
        f"{_ray_cluster_specs('object.spec.rayClusterSpec')} : []) + "
        f"(has({submitter}) && has({submitter}.spec) ? [{submitter}.spec] : [])) : "
        "object.kind == 'RayService' && has(object.spec.rayClusterConfig) ? "
        f"{_ray_cluster_specs('object.spec.rayClusterConfig')} : []"
    )
    cluster = (
        "(object.kind == 'RayCluster' ? object.spec : object.kind == 'RayJob' && "
        "has(object.spec.rayClusterSpec) ? object.spec.rayClusterSpec : "
        "object.kind == 'RayService' && has(object.spec.rayClusterConfig) ? "
        "object.spec.rayClusterConfig : {})"
    )
    autoscaler = (
        f"object.apiVersion.startsWith('ray.io/') && has({cluster}.enableInTreeAutoscaling) && "
        f"{cluster}.enableInTreeAutoscaling ? [has({cluster}.autoscalerOptions) ? "
        f"{cluster}.autoscalerOptions : {{}}] : []"
    )
    pod_specs = (
        "object.kind == 'Pod' ? [object.spec] : "
        # a Volcano Job is a Job too, with tasks instead of a template
        f"object.apiVersion.startsWith('batch.volcano.sh/') ? {volcano} : "
        f"object.kind in {kinds} ? {_template_spec('object.spec')} : "
        "object.kind == 'CronJob' ? (has(object.spec.jobTemplate) && "
        f"has(object.spec.jobTemplate.spec) ? {_template_spec('object.spec.jobTemplate.spec')} "
        ": []) : "
        f"object.kind == 'JobSet' ? {job_set} : "
        f"object.apiVersion.startsWith('kubeflow.org/') ? ({legacy}) : "
        f"object.apiVersion.startsWith('ray.io/') ? ({ray}) : []"
    )
    return [
        {"name": POD_SPECS, "expression": pod_specs},
        {"name": PATCH_SPECS, "expression": f"object.kind == 'TrainJob' ? {patches} : []"},
        {"name": RAY_AUTOSCALERS, "expression": autoscaler},
    ]


def every_pod_spec(
    rule: Callable[[str], str],
    *,
    pod: Callable[[str], str] | None = None,
    patch: Callable[[str], str] | None = None,
) -> str:
    """CEL: ``rule`` holds for every pod spec of the object (:func:`pod_spec_variables`).

    The policy must declare :func:`pod_spec_variables`. The rules are given the CEL of one pod
    spec (``ps``, a name none of them may use for its own comprehensions).

    Args:
        rule: the rule, given the CEL expression of a pod spec.
        pod: the rule for a Pod's own spec (a rule that needs the request, e.g. the
            operation). Default ``rule``.
        patch: the rule for the pod specs of a TrainJob's ``runtimePatches``, which state only
            what they change. Default ``rule``.
    """
    return (
        f"(object.kind == 'Pod' ? {(pod or rule)('object.spec')} : "
        f"variables.{POD_SPECS}.all(ps, {rule('ps')})) && "
        f"variables.{PATCH_SPECS}.all(pl, pl.all(ps, {(patch or rule)('ps')}))"
    )


POD_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""The annotation that puts a pod in an existing PodGroup (Trainer's and the legacy operator's
pods carry it); Volcano's controller makes a PodGroup only for a pod without it."""


RAY_KINDS: Final = ("rayclusters", "rayjobs")
"""The Ray kinds KubeRay builds a Volcano PodGroup for (ray.io/v1): a RayService's RayCluster is
a RayCluster too, and carries its labels (kuberay v1.7.0 ray-operator/controllers/ray/
rayservice_controller.go, constructRayClusterForRayService)."""


def queue_ownership_policy(
    *, team_label: str, queue_annotation: str, scheduler_name: str, ray_queue_label: str
) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: in a team's namespace, gangs go to the team's queue.

    The team comes from the namespace's ``team_label``, which the stack sets and team members
    cannot change (namespaces are cluster-scoped). The queue a request names is:

    * a Volcano PodGroup's or Job's ``spec.queue`` (what Trainer's volcano plugin and the
      legacy operator create for a job, and what ``vcctl``/Volcano users write). A job that
      names no queue has ``default`` by then: the CRDs default the field (volcano v1.15.1
      config/crd ``scheduling.volcano.sh_podgroups.yaml`` and ``batch.volcano.sh_jobs.yaml``,
      ``default: default``), and defaulting runs before admission. It is refused, with a
      message that names the team's queue;
    * for a TrainJob, the ``scheduling.volcano.sh/queue-name`` annotation of the last of its
      ``runtimePatches`` that sets one: Trainer merges the patches' template annotations over
      the runtime's, in order (kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go,
      newRuntimeInfo), and its volcano plugin gives the PodGroup that queue
      (pkg/runtime/framework/plugins/volcano/volcano.go, Build); the TrainJob's own
      annotations play no part. Refused on the TrainJob, where its author sees it, rather than
      on the PodGroup, where only Trainer's log would. One without such a patch passes: the
      team's runtimes name the team's queue;
    * a legacy Training Operator job's ``spec.runPolicy.schedulingPolicy.queue``: the operator
      gives its PodGroup that queue, or ``default`` when unset (kubeflow/training-operator
      v1.9 pkg/controller.v1/common/job.go, ReconcileJobs), so one without it is refused on the
      job with the message rather than on its PodGroup;
    * a pod's ``scheduling.volcano.sh/queue-name`` annotation. A pod Volcano schedules that
      names no queue and joins no PodGroup would get a PodGroup in ``default`` from Volcano's
      controller, which this policy then refuses where nobody sees it; the pod is refused
      instead, at once and with the message. Other pods (the default scheduler's, or members of
      a job's PodGroup) are not the queue's business and pass;
    * a RayCluster's or RayJob's ``volcano.sh/queue-name`` label: KubeRay gives the PodGroup it
      builds for the object that queue, and none (Volcano's ``default``) without the label
      (kuberay v1.7.0 ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go,
      createPodGroup). A label outside the spec: an update that changes only it is judged too.
      A RayCluster a RayJob makes copies the RayJob's labels (rayjob_controller.go,
      constructRayClusterForRayJob), so it passes where its RayJob did.

    Args:
        team_label: the namespace label that names the team (and its queue).
        queue_annotation: Volcano's queue annotation (``scheduling.volcano.sh/queue-name``).
        scheduler_name: Volcano's scheduler name (``volcano``).
        ray_queue_label: the label KubeRay reads the queue from (``volcano.sh/queue-name``).
    """
    team = f"namespaceObject.metadata.labels['{team_label}']"
    labels = "(has({0}.metadata.labels) ? {0}.metadata.labels : {{}})"
    ray_queue = (
        f"'{ray_queue_label}' in {labels.format('object')} ? "
        f"{labels.format('object')}['{ray_queue_label}'] : ''"
    )
    judged = {
        "name": "created-or-spec-or-ray-queue-changed",
        "expression": f"{CREATED_OR_SPEC_CHANGED['expression']} || "
        "(object.apiVersion.startsWith('ray.io/') && "
        f"{labels.format('object')} != {labels.format('oldObject')})",
    }
    annotations = "(has(object.metadata.annotations) ? object.metadata.annotations : {})"
    pod_queue = (
        f"'{queue_annotation}' in {annotations} ? {annotations}['{queue_annotation}'] : "
        f"(has(object.spec.schedulerName) && object.spec.schedulerName == '{scheduler_name}' "
        f"&& !('{POD_GROUP_ANNOTATION}' in {annotations}) ? '' : variables.team)"
    )
    patch_annotations = "p.trainingRuntimeSpec.template.metadata.annotations"
    patch_sets_queue = (
        "has(p.trainingRuntimeSpec) && has(p.trainingRuntimeSpec.template) && "
        "has(p.trainingRuntimeSpec.template.metadata) && "
        f"has({patch_annotations}) && '{queue_annotation}' in {patch_annotations}"
    )
    patched_queues = (
        "has(object.spec.runtimePatches) ? object.spec.runtimePatches"
        f".filter(p, {patch_sets_queue}).map(p, {patch_annotations}['{queue_annotation}']) : []"
    )
    legacy_queue = (
        "has(object.spec.runPolicy) && has(object.spec.runPolicy.schedulingPolicy) && "
        "has(object.spec.runPolicy.schedulingPolicy.queue) ? "
        "object.spec.runPolicy.schedulingPolicy.queue : ''"
    )
    gang_rule = {"operations": ["CREATE", "UPDATE"], "apiVersions": ["*"]}
    return {
        "failurePolicy": "Fail",
        # PodGroups have no status subresource: Volcano's scheduler and controllers write
        # status with a full update (volcano v1.15.1 pkg/scheduler/cache/cache.go), so an update
        # is checked only when the spec changes, and a PodGroup made before the policy keeps
        # its status.
        "matchConditions": [judged],
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": [
                {**gang_rule, "apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"]},
                {**gang_rule, "apiGroups": ["ray.io"], "resources": list(RAY_KINDS)},
                {**gang_rule, "apiGroups": ["batch.volcano.sh"], "resources": ["jobs"]},
                {**gang_rule, "apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"]},
                {**gang_rule, "apiGroups": ["kubeflow.org"], "resources": list(LEGACY_JOBS)},
                {
                    "operations": ["CREATE"],
                    "apiVersions": ["v1"],
                    "apiGroups": [""],
                    "resources": ["pods"],
                },
            ],
        },
        "variables": [
            {"name": "team", "expression": team},
            {
                "name": "patchedQueues",
                "expression": f"object.kind == 'TrainJob' ? ({patched_queues}) : []",
            },
            {
                "name": "queue",
                "expression": f"object.kind == 'Pod' ? ({pod_queue}) : "
                "object.kind == 'TrainJob' ? (size(variables.patchedQueues) == 0 ? "
                "variables.team : variables.patchedQueues[size(variables.patchedQueues) - 1]) : "
                f"object.apiVersion.startsWith('kubeflow.org/') ? ({legacy_queue}) : "
                f"object.apiVersion.startsWith('ray.io/') ? ({ray_queue}) : "
                "(has(object.spec.queue) ? object.spec.queue : '')",
            },
        ],
        "validations": [
            {
                "expression": "variables.queue == variables.team",
                "messageExpression": (
                    "'namespace ' + namespaceObject.metadata.name + ' belongs to team ' + "
                    "variables.team + ': its jobs go to Volcano queue ' + variables.team + "
                    "', not ' + (variables.queue == '' ? 'no queue' : variables.queue) + "
                    "' (set spec.queue, spec.runPolicy.schedulingPolicy.queue (legacy jobs), "
                    f"the annotation {queue_annotation}, or the label {ray_queue_label} (Ray), "
                    "to ' + variables.team + ')'"
                ),
                "reason": "Forbidden",
            }
        ],
    }


LEGACY_MIN_RESOURCES_POLICY: Final = "trainingplatform-legacy-min-resources"
LEGACY_MIN_RESOURCES_ALLOWED: Final = ("cpu", "memory")
"""What a legacy job's ``minResources`` may name: what Volcano's ``root`` queue always knows
(``api.InfiniteResource()``), so the PodGroup is enqueued before any node of its pool exists."""


def legacy_min_resources_policy(*, team_label: str) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: legacy v1 jobs in team namespaces set ``minResources``.

    With Volcano gang scheduling the Training Operator creates a job's pods only once its
    PodGroup is Inqueue (kubeflow/trainer v1.9.4 pkg/controller.v1/common/job.go, "Delay pods
    creation until PodGroup status is Inqueue"; pkg/controller.v1/control/podgroup_control.go,
    DelayPodCreationDueToPodGroup: ``len(volcanoPodGroup.Status.Phase) == 0 ||
    volcanoPodGroup.Status.Phase == volcanov1beta1.PodGroupPending``). Unless the job sets
    ``runPolicy.schedulingPolicy.minResources``, the operator fills the PodGroup's
    ``minResources`` with the gang's requests, every GPU and EFA interface included
    (``if minResources == nil { minResources = jc.calcPGMinResources(minMember, replicas) }``).
    Volcano's capacity plugin with ``enableHierarchy`` checks them against ``root`` too, which
    knows only the scalar resources some node reports (volcano v1.15.1
    pkg/scheduler/plugins/capacity/capacity.go, buildHierarchicalQueueAttrs and
    checkJobEnqueueableHierarchically): on a pool scaled to zero the PodGroup stays Pending, no
    pod is created and Karpenter never launches a node.

    A job that sets ``minResources`` gets it copied as it is (``if mr :=
    runPolicy.SchedulingPolicy.MinResources; mr != nil { minResources = ... }``), and one that
    names only cpu and memory (``{}`` in the documented shape) is enqueued at once; Volcano
    still binds the gang whole (minMember, gang plugin) once Karpenter's nodes are up, as it
    does for a TrainJob. This policy refuses a v1 job that leaves ``minResources`` unset or
    names anything else in it, with a message that says what to set.

    Args:
        team_label: the namespace label of team namespaces.
    """
    scheduling = "object.spec.runPolicy.schedulingPolicy"
    allowed = ", ".join(f"'{name}'" for name in LEGACY_MIN_RESOURCES_ALLOWED)
    return {
        **team_spec_policy(team_label, [writes("kubeflow.org", *LEGACY_JOBS)]),
        "variables": [
            {
                "name": "set",
                "expression": "has(object.spec.runPolicy) && "
                f"has(object.spec.runPolicy.schedulingPolicy) && has({scheduling}.minResources)",
            },
            {
                "name": "named",
                "expression": f"variables.set ? {scheduling}.minResources.filter(k, "
                f"!(k in [{allowed}])) : []",
            },
        ],
        "validations": [
            {
                "expression": "variables.set && size(variables.named) == 0",
                "messageExpression": (
                    "object.kind + ' ' + object.metadata.name + ': set "
                    "spec.runPolicy.schedulingPolicy.minResources: {} (or only cpu and "
                    "memory)' + (size(variables.named) > 0 ? ', not ' + variables.named[0] : "
                    "'') + '. Without it the Training Operator "
                    "asks Volcano for every GPU and EFA interface of the gang before it creates "
                    "a pod, and on a pool with no node yet Volcano never enqueues it, so "
                    "Karpenter never launches one'"
                ),
                "reason": "Invalid",
            }
        ],
    }


def team_namespaces(team_label: str) -> dict[str, Any]:
    """The namespace selector of every team namespace: those carrying ``team_label``.

    Args:
        team_label: the namespace label of team namespaces.
    """
    return {"matchExpressions": [{"key": team_label, "operator": "Exists"}]}


def writes(api_group: str, *resources: str, versions: tuple[str, ...] = ("*",)) -> dict[str, Any]:
    """A policy's resource rule: creates and updates of ``resources`` in ``api_group``.

    Args:
        api_group: the API group ("" for the core group).
        resources: the resources (and subresources) it matches.
        versions: the API versions it matches. Default: every one.
    """
    return {
        "operations": ["CREATE", "UPDATE"],
        "apiVersions": list(versions),
        "apiGroups": [api_group],
        "resources": list(resources),
    }


def team_spec_policy(team_label: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The frame of a policy that judges what team namespaces create and change.

    It fails closed, sees every team namespace, and judges an update only when the spec
    changes (:data:`CREATED_OR_SPEC_CHANGED`: controllers write status with full updates).

    Args:
        team_label: the namespace label of team namespaces.
        rules: its resource rules (:func:`writes`).
    """
    return {
        "failurePolicy": "Fail",
        "matchConditions": [dict(CREATED_OR_SPEC_CHANGED)],
        "matchConstraints": {
            "namespaceSelector": team_namespaces(team_label),
            "resourceRules": rules,
        },
    }


def team_namespace_binding(policy: str, *, team_label: str) -> dict[str, Any]:
    """The ValidatingAdmissionPolicyBinding that enforces ``policy`` in every team namespace.

    ``Deny`` refuses the request; the policy itself selects the namespaces by ``team_label``
    too. Every team-namespace policy (queues, pods, Services, writes, gang sizes, the Lustre
    boundary) is bound this way.

    Args:
        policy: the ValidatingAdmissionPolicy's name.
        team_label: the namespace label of team namespaces.
    """
    return {
        "policyName": policy,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": team_namespaces(team_label)},
    }
