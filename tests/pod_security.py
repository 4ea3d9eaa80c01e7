"""Pod Security admission's verdict on a pod spec, for the levels the platform's namespaces enforce.

No maintained Python implementation exists (the upstream one is Go, k8s.io/pod-security-admission
policy/check_*.go); this is the subset of its checks that can refuse a pod the platform makes,
each from the Kubernetes Pod Security Standards page
(https://kubernetes.io/docs/concepts/security/pod-security-standards/), whose control names
the messages quote. A level's checks include the lower level's.

Baseline: "Host Namespaces", "Privileged Containers", "Capabilities", "HostPath Volumes",
"Host Ports", "Seccomp" (Unconfined refused). Restricted adds "Volume Types", "Privilege
Escalation", "Running as Non-root", "Running as Non-root user", "Seccomp" (set to RuntimeDefault
or Localhost) and "Capabilities" (drop ALL, add at most NET_BIND_SERVICE). Not modelled, as no
pod of the platform sets them: AppArmor, SELinux, /proc mount type, sysctls, Windows HostProcess.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from components.tenancy import BASELINE_CAPABILITIES

LEVELS: Final = ("privileged", "baseline", "restricted")
RESTRICTED_VOLUME_TYPES: Final = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
     "projected", "secret"}
)  # fmt: skip
"""Restricted, "Volume Types": the only volume sources allowed."""
RESTRICTED_CAPABILITIES: Final = frozenset({"NET_BIND_SERVICE"})
"""Restricted, "Capabilities": the only capability a container may add."""
ALLOWED_SECCOMP: Final = frozenset({"RuntimeDefault", "Localhost"})


def _containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key) or []


def _baseline(pod: Mapping[str, Any]) -> list[str]:
    problems = [
        f'"Host Namespaces": {key} is true'
        for key in ("hostNetwork", "hostPID", "hostIPC")
        if pod.get(key)
    ]
    problems += [
        f'"HostPath Volumes": volume {v.get("name")} is a hostPath'
        for v in pod.get("volumes") or []
        if "hostPath" in v
    ]
    pod_seccomp = ((pod.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    if pod_seccomp == "Unconfined":
        problems.append('"Seccomp": the pod is Unconfined')
    for container in _containers(pod):
        name = container.get("name")
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            problems.append(f'"Privileged Containers": {name} is privileged')
        added = set((context.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            problems.append(f'"Capabilities": {name} adds {sorted(added)}')
        problems += [
            f'"Host Ports": {name} uses host port {port["hostPort"]}'
            for port in container.get("ports") or []
            if port.get("hostPort")
        ]
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f'"Seccomp": {name} is Unconfined')
    return problems


def _restricted(pod: Mapping[str, Any]) -> list[str]:
    pod_context = pod.get("securityContext") or {}
    problems = [
        f'"Volume Types": volume {v.get("name")} is not one of the allowed types'
        for v in pod.get("volumes") or []
        if not set(v) - {"name"} <= RESTRICTED_VOLUME_TYPES
    ]
    if pod_context.get("runAsUser") == 0:
        problems.append('"Running as Non-root user": the pod runs as user 0')
    for container in _containers(pod):
        name = container.get("name")
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f'"Privilege Escalation": {name} does not set it false')
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            problems.append(f'"Running as Non-root": {name} does not set runAsNonRoot')
        if context.get("runAsUser") == 0:
            problems.append(f'"Running as Non-root user": {name} runs as user 0')
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get(
            "type"
        )
        if seccomp not in ALLOWED_SECCOMP:
            problems.append(f'"Seccomp": {name} sets neither RuntimeDefault nor Localhost')
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            problems.append(f'"Capabilities": {name} does not drop ALL')
        added = set(capabilities.get("add") or []) - RESTRICTED_CAPABILITIES
        if added:
            problems.append(f'"Capabilities": {name} adds {sorted(added)} (restricted)')
    return problems


def refusals(pod: Mapping[str, Any], level: str) -> list[str]:
    """Why Pod Security admission at ``level`` refuses a pod with spec ``pod``; empty: admitted.

    Args:
        pod: a pod spec (a workload's ``spec.template.spec``).
        level: ``privileged``, ``baseline`` or ``restricted`` (a namespace's
            ``pod-security.kubernetes.io/enforce``).

    Raises:
        ValueError: when ``level`` is none of :data:`LEVELS`.
    """
    if level not in LEVELS:
        raise ValueError(f"Pod Security level {level!r} is none of {', '.join(LEVELS)}")
    if level == "privileged":
        return []
    problems = _baseline(pod)
    if level == "restricted":
        problems += _restricted(pod)
    return problems
