"""RBAC as the API server authorizes it: may this subject do this verb on this resource?

Roles and bindings are the stack's own, plus the ClusterRoles the charts bind to their
controllers (kubernetes pkg/registry/rbac/validation/rule.go: a binding grants its role's
rules; a RoleBinding only inside its namespace; ``*`` matches everything; resourceNames narrow a
rule to named objects).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from synth.jobs.view import StackView, name_of, namespace_of

TRAINER_RELEASE: Final = "kubeflow-trainer"
TRAINER_CHART: Final = "kubeflow-trainer"
TRAINER_CHART_MANAGER_RULES: Final[list[dict[str, list[str]]]] = [
    {
        "apiGroups": [""],
        "resources": ["configmaps", "secrets"],
        "verbs": ["create", "get", "list", "patch", "update", "watch"],
    },
    {"apiGroups": [""], "resources": ["limitranges"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update", "watch"],
    },
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "verbs": ["get", "list", "update", "watch"],
    },
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["create", "get", "list", "update"],
    },
    {
        "apiGroups": ["jobset.x-k8s.io"],
        "resources": ["jobsets"],
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    },
    {
        "apiGroups": ["node.k8s.io"],
        "resources": ["runtimeclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.volcano.sh", "scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["create", "get", "list", "patch", "update", "watch"],
    },
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": ["clustertrainingruntimes", "trainingruntimes", "trainjobs"],
        "verbs": ["get", "list", "patch", "update", "watch"],
    },
    {
        "apiGroups": ["trainer.kubeflow.org"],
        "resources": [
            "clustertrainingruntimes/finalizers",
            "trainingruntimes/finalizers",
            "trainjobs/finalizers",
            "trainjobs/status",
        ],
        "verbs": ["get", "patch", "update"],
    },
]
"""The manager ClusterRole of chart kubeflow-trainer 2.3.0 (templates/rbac/clusterrole.yaml),
bound to its ServiceAccount by the chart: no priorityclasses (kubeflow/trainer#3918)."""

Subject = tuple[str, ...]
"""("Group", name), ("User", name) or ("ServiceAccount", namespace, name)."""


@dataclass(frozen=True)
class Grant:
    """One role's rules, where they apply (None: cluster-wide) and to whom."""

    rules: list[Mapping[str, Any]]
    namespace: str | None
    subjects: list[Subject]


def trainer_manager(view: StackView) -> Subject:
    """Trainer's manager ServiceAccount, as the chart names it from the release.

    ``<fullname>-controller-manager`` in the release namespace, the fullname being
    ``fullnameOverride``, else the release name when it holds the chart name, else
    ``<release>-<chart>`` (chart 2.3.0 templates/_helpers.tpl, templates/manager/_helpers.tpl).
    """
    release = view.releases.get(TRAINER_RELEASE) or {}
    values = release.get("values") or {}
    name = str(release.get("release", TRAINER_RELEASE))
    fullname = str(values.get("fullnameOverride") or "") or (
        name if TRAINER_CHART in name else f"{name}-{TRAINER_CHART}"
    )
    return ("ServiceAccount", str(release.get("namespace")), f"{fullname}-controller-manager")


def _subjects(binding: Mapping[str, Any]) -> list[Subject]:
    found: list[Subject] = []
    for subject in binding.get("subjects") or []:
        kind = str(subject.get("kind"))
        if kind == "ServiceAccount":
            found.append(
                (
                    kind,
                    str(subject.get("namespace") or namespace_of(binding)),
                    str(subject.get("name")),
                )
            )
        else:
            found.append((kind, str(subject.get("name"))))
    return found


def grants(view: StackView) -> Iterator[Grant]:
    """Every grant of the stack's bindings, and the charts' bindings of their controllers."""
    cluster_roles = {name_of(r): list(r.get("rules") or []) for r in view.of_kind("ClusterRole")}
    roles = {
        (namespace_of(r), name_of(r)): list(r.get("rules") or []) for r in view.of_kind("Role")
    }
    for binding in view.of_kind("ClusterRoleBinding"):
        ref = binding.get("roleRef") or {}
        yield Grant(cluster_roles.get(str(ref.get("name")), []), None, _subjects(binding))
    for binding in view.of_kind("RoleBinding"):
        ref = binding.get("roleRef") or {}
        namespace = namespace_of(binding)
        if ref.get("kind") == "Role":
            rules = roles.get((namespace, str(ref.get("name"))), [])
        else:
            rules = cluster_roles.get(str(ref.get("name")), [])
        yield Grant(rules, namespace, _subjects(binding))
    if view.values(TRAINER_RELEASE) is not None:
        yield Grant(list(TRAINER_CHART_MANAGER_RULES), None, [trainer_manager(view)])


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def allowed(
    view: StackView,
    subject: Subject,
    verb: str,
    group: str,
    resource: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
) -> bool:
    """Whether ``subject`` may ``verb`` the ``resource`` of API ``group`` (in ``namespace``)."""
    for grant in grants(view):
        if subject not in grant.subjects:
            continue
        if grant.namespace is not None and grant.namespace != namespace:
            continue
        for rule in grant.rules:
            names = list(rule.get("resourceNames") or [])
            if (
                _matches(list(rule.get("verbs") or []), verb)
                and _matches(list(rule.get("apiGroups") or []), group)
                and _matches(list(rule.get("resources") or []), resource)
                and (not names or (name is not None and name in names))
            ):
                return True
    return False


def groups_of_namespace(view: StackView, namespace: str) -> list[str]:
    """The groups bound to a role in ``namespace``: the people who work there."""
    groups = {
        subject[1]
        for binding in view.of_kind("RoleBinding", namespace)
        for subject in _subjects(binding)
        if subject[0] == "Group"
    }
    return sorted(groups)
