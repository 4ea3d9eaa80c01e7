"""The tenant boundary: Pod Security, hardened runtimes, NetworkPolicies, queues, job tokens."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import StackValidationArgs, StackValidationPolicy

from components import first_step, katib, kuberay, notebooks
from components.teams import JOB_SERVICE_ACCOUNT, TEAM_LABEL
from components.tenancy import POD_SECURITY_PREFIX, ControllerIngress, from_namespace, tcp

from .common import MANDATORY, ReportViolation, ResourceValidationArgs, decoded, resource_policy
from .trainer import training_pods

NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ADDON = "aws:eks/addon:Addon"
ADMISSION_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
ADMISSION_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
LEVELS = ("privileged", "baseline", "restricted")
TEAM_LEVELS = ("baseline", "restricted")
GANGS = {("scheduling.volcano.sh", "podgroups"), ("batch.volcano.sh", "jobs")}


def _metadata(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return props.get("metadata") or {}


def _labels(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return _metadata(props).get("labels") or {}


def _check_pod_security(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NAMESPACE:
        return
    labels = _labels(args.props)
    name = _metadata(args.props).get("name")
    enforce = labels.get(f"{POD_SECURITY_PREFIX}/enforce")
    if enforce not in LEVELS:
        report(
            f"namespace {name} enforces no Pod Security level (label "
            f"{POD_SECURITY_PREFIX}/enforce): say which of {', '.join(LEVELS)} it gets",
            None,
        )
        return
    if TEAM_LABEL not in labels:
        return
    if enforce not in TEAM_LEVELS:
        report(
            f"team namespace {name} enforces {enforce}: a member could run a privileged or "
            "host-network pod (node root, the node's IAM role); enforce baseline or restricted",
            None,
        )
    version = labels.get(f"{POD_SECURITY_PREFIX}/enforce-version")
    if not version or version == "latest":
        report(
            f"team namespace {name} does not pin enforce-version: a control-plane upgrade "
            "would change what is refused without a change to the stack",
            None,
        )
    for mode in ("warn", "audit"):
        if labels.get(f"{POD_SECURITY_PREFIX}/{mode}") != "restricted":
            report(f"team namespace {name} does not {mode} restricted", None)


def _containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        yield from pod.get(key) or []


def _check_runtime_hardened(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for owner, pod in training_pods(args.resource_type, args.props):
        pod_seccomp = ((pod.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
        for container in _containers(pod):
            where = f"{owner}, container {container.get('name')}"
            context = container.get("securityContext") or {}
            if context.get("allowPrivilegeEscalation") is not False:
                report(f"{where}: allowPrivilegeEscalation is not false", None)
            if context.get("privileged"):
                report(f"{where}: runs privileged", None)
            if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
                report(f"{where}: does not drop every capability (capabilities.drop: [ALL])", None)
            seccomp = (context.get("seccompProfile") or {}).get("type") or pod_seccomp
            if seccomp not in ("RuntimeDefault", "Localhost"):
                report(f"{where}: no seccomp profile (RuntimeDefault)", None)


def _check_network_policy_agent(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != ADDON or args.props.get("addonName") != "vpc-cni":
        return
    values = decoded(args.props.get("configurationValues")) or {}
    enabled = values.get("enableNetworkPolicy") if isinstance(values, Mapping) else None
    if str(enabled).lower() != "true":
        report(
            "the VPC CNI add-on does not set enableNetworkPolicy: every NetworkPolicy of the "
            "stack is stored and never enforced",
            None,
        )


def _team_namespaces(resources: list[Any]) -> list[str]:
    return [
        str(_metadata(r.props).get("name"))
        for r in resources
        if r.resource_type == NAMESPACE and TEAM_LABEL in _labels(r.props)
    ]


def _denies_all_ingress(spec: Mapping[str, Any]) -> bool:
    return (
        spec.get("podSelector") in ({}, None)
        and "Ingress" in (spec.get("policyTypes") or ["Ingress"])
        and not spec.get("ingress")
    )


CONTROLLERS: tuple[ControllerIngress, ...] = (
    kuberay.OPERATOR_INGRESS,
    katib.CONTROLLER_INGRESS,
    notebooks.PROXY_INGRESS,
    notebooks.HUB_INGRESS,
    first_step.PROMETHEUS_INGRESS,
)
"""The platform controllers a team namespace may admit: each from its namespace AND pods, to the
pods it calls AND its ports, and to nothing else."""


def _plain(value: Any) -> Any:
    """``value`` as plain dicts and lists.

    The engine hands policies read-only proxies, which do not compare equal to the dicts and
    lists they stand for once nested.
    """
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or (
        hasattr(value, "__iter__") and hasattr(value, "__len__") and not isinstance(value, str)
    ):
        return [_plain(item) for item in value]
    return value


def _controller_rule(spec: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    """Whether an ingress rule admits exactly one of :data:`CONTROLLERS`, as it should be."""
    spec, rule = _plain(spec), _plain(rule)
    return any(
        spec.get("podSelector") == controller.pods
        and list(rule.get("from") or []) == [from_namespace(controller.namespace,
                                                             controller.controller)]
        and list(rule.get("ports") or []) == tcp(*controller.ports)
        for controller in CONTROLLERS
    )  # fmt: skip


def _check_namespaces_isolated(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    policies = [r.props for r in resources if r.resource_type == NETWORK_POLICY]
    for namespace in _team_namespaces(resources):
        own = [p for p in policies if _metadata(p).get("namespace") == namespace]
        if not any(_denies_all_ingress(p.get("spec") or {}) for p in own):
            report(
                f"team namespace {namespace} has no default-deny NetworkPolicy (podSelector {{}}, "
                "no ingress rule): every pod in the cluster can reach its pods",
                None,
            )
        for policy in own:
            spec = policy.get("spec") or {}
            for rule in spec.get("ingress") or []:
                if _controller_rule(spec, rule):
                    continue
                for peer in rule.get("from") or []:
                    if "namespaceSelector" in peer or "ipBlock" in peer:
                        report(
                            f"NetworkPolicy {_metadata(policy).get('name')} in team namespace "
                            f"{namespace} admits pods or addresses outside it",
                            None,
                        )


def _gang_rules(spec: Mapping[str, Any]) -> set[tuple[str, str]]:
    found = set()
    for rule in (spec.get("matchConstraints") or {}).get("resourceRules") or []:
        operations = set(rule.get("operations") or [])
        if not {"CREATE", "UPDATE"} <= operations and "*" not in operations:
            continue
        found |= {(g, r) for g in rule.get("apiGroups") or [] for r in rule.get("resources") or []}
    return found


def _check_queue_ownership(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    if not _team_namespaces(resources):
        return
    enforced = {
        str((r.props.get("spec") or {}).get("policyName"))
        for r in resources
        if r.resource_type == ADMISSION_BINDING
        and "Deny" in ((r.props.get("spec") or {}).get("validationActions") or [])
    }
    for policy in resources:
        if policy.resource_type != ADMISSION_POLICY:
            continue
        spec = policy.props.get("spec") or {}
        uses_team = any(TEAM_LABEL in str(v.get("expression")) for v in spec.get("variables") or [])
        if (
            uses_team
            and _gang_rules(spec) >= GANGS
            and spec.get("failurePolicy", "Fail") == "Fail"
            and _metadata(policy.props).get("name") in enforced
        ):
            return
    report(
        "no ValidatingAdmissionPolicy bound with Deny refuses PodGroups and Volcano Jobs that "
        f"name another team's queue (by the namespace's {TEAM_LABEL} label): any team member "
        "can queue work in any team's share",
        None,
    )


def _check_job_token(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SERVICE_ACCOUNT:
        return
    metadata = _metadata(args.props)
    if metadata.get("name") != JOB_SERVICE_ACCOUNT:
        return
    if args.props.get("automountServiceAccountToken") is not False:
        report(
            f"ServiceAccount {JOB_SERVICE_ACCOUNT} in {metadata.get('namespace')} mounts an API "
            "token into every job pod, which none of them uses",
            None,
        )


POLICIES = [
    resource_policy(
        "namespaces-pod-security",
        "Every namespace the stack creates says which Pod Security level it enforces; team "
        "namespaces enforce baseline (or restricted) pinned to a version, and warn and audit "
        "restricted.",
        _check_pod_security,
    ),
    resource_policy(
        "runtimes-hardened",
        "Every container of every training runtime, and of every Ray head, worker group and "
        "RayJob submitter, runs without privilege escalation, with every capability dropped "
        "and the runtime's default seccomp profile.",
        _check_runtime_hardened,
    ),
    resource_policy(
        "network-policies-enforced",
        "The VPC CNI add-on runs its network policy agent (enableNetworkPolicy), without which "
        "NetworkPolicies are never enforced.",
        _check_network_policy_agent,
    ),
    StackValidationPolicy(
        name="namespaces-network-policy",
        description="Each team namespace denies ingress by default and admits nothing from "
        "outside itself but the platform controllers that call its pods (the KubeRay operator "
        "to Ray heads' dashboards, Katib's controller to suggestions, Prometheus to training "
        "pods' first-step exporters), each by namespace and "
        "pods, to those pods and ports only.",
        validate=_check_namespaces_isolated,
        enforcement_level=MANDATORY,
    ),
    StackValidationPolicy(
        name="queue-ownership-enforced",
        description="Where teams exist, a ValidatingAdmissionPolicy (failurePolicy Fail, bound "
        "with Deny) checks the queue of every PodGroup and Volcano Job against the namespace's "
        "team.",
        validate=_check_queue_ownership,
        enforcement_level=MANDATORY,
    ),
    resource_policy(
        "job-service-account-no-token",
        "The ServiceAccount team jobs run as does not automount an API token.",
        _check_job_token,
    ),
]
