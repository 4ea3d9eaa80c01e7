"""The Lustre boundary: no team pod speaks Lustre itself, only through its node's client.

Pods share their node's security groups (the VPC CNI gives a pod a secondary address of the
node's interface), so every pod of a Lustre client node reaches the file servers on 988 and
1018-1023. The servers trust what a client says: its NID is its address, and the uid and
groups of each request are the client's claim, with no Kerberos or shared key on FSx for
Lustre. What LNet checks is the source port: its acceptor refuses a connection from a port at
or above 1024 unless ``accept=all`` (Lustre Operations Manual, "LNet options", ``accept``:
``secure``, the default, takes connections from privileged ports only). The kernel client
connects from a port below 1024 (lnet ``lnet_connect``, from 1023 down), which needs
CAP_NET_BIND_SERVICE or ``net.ipv4.ip_unprivileged_port_start`` lowered in the pod's network
namespace. A pod that could do either could write its own LNet client and claim any uid and
gid, past the subdirectory its claim mounts, on every team's directories.

So every team pod keeps both closed:

* the nodes' containerd no longer lowers the sysctl for every pod
  (:data:`components.user_data.CONTAINERD_PRIVILEGED_PORTS`);
* :func:`lustre_boundary_policy` refuses, in team namespaces, a pod or pod template that sets
  the sysctl below 1024 (Pod Security ``baseline`` allows it as a "safe" sysctl), uses the host
  network, or has a container (init and ephemeral ones too) that keeps CAP_NET_BIND_SERVICE:
  one that adds it, or does not drop it (``ALL`` or ``NET_BIND_SERVICE``). The container
  runtime's default set has it, and ``baseline`` lets a container add it.

Security groups for pods would give pods their own groups but take a trunk interface from each
node, and are not supported with EFA's instance types as pools use them; they are not used.
"""

from __future__ import annotations

from typing import Any, Final

from components.tenancy import (
    LEGACY_JOBS,
    RAY_AUTOSCALERS,
    RAY_TEMPLATE_RESOURCES,
    every_pod_spec,
    pod_spec_variables,
    team_spec_policy,
    writes,
)

LUSTRE_BOUNDARY_POLICY: Final = "trainingplatform-lustre-boundary"
PRIVILEGED_PORT_LIMIT: Final = 1024
"""The kernel's default ``ip_unprivileged_port_start``: ports below it need
CAP_NET_BIND_SERVICE, and LNet's acceptor trusts only connections from them."""
UNPRIVILEGED_PORT_SYSCTL: Final = "net.ipv4.ip_unprivileged_port_start"
KEEPS_BIND: Final = "(?i)^(CAP_)?(NET_BIND_SERVICE|ALL)$"
"""Capability names in ``add`` that give a container CAP_NET_BIND_SERVICE (containerd prefixes
``CAP_`` and upper-cases a name)."""
DROPS_BIND: Final = "(?i)^(ALL|NET_BIND_SERVICE)$"
"""Capability names in ``drop`` that take it away, in any case: containerd upper-cases a dropped
name before it compares (``ALL`` too), so ``drop: [all]`` drops every capability."""


def _container_keeps_bind(container: str, *, patch: bool) -> str:
    """CEL: the container ``container`` keeps CAP_NET_BIND_SERVICE.

    In a TrainJob's ``runtimePatches`` a container merges into the runtime's, whose containers
    drop every capability: there only what the patch says is judged (an ``add`` with it, a
    ``drop`` without it).
    """
    context = f"{container}.securityContext"
    caps = f"{context}.capabilities"
    has_caps = f"has({container}.securityContext) && has({context}.capabilities)"
    adds = f"({has_caps} && has({caps}.add) && {caps}.add.exists(a, a.matches('{KEEPS_BIND}')))"
    drops = f"({has_caps} && has({caps}.drop) && {caps}.drop.exists(d, d.matches('{DROPS_BIND}')))"
    if patch:
        states_drop = f"({has_caps} && has({caps}.drop))"
        return f"({adds} || ({states_drop} && !{drops}))"
    return f"({adds} || !{drops})"


def _pod_spec_open(spec: str, *, patch: bool) -> str:
    """CEL: the pod spec ``spec`` could bind a privileged port (or share the node's network)."""
    sysctl = (
        f"(has({spec}.securityContext) && has({spec}.securityContext.sysctls) && "
        f"{spec}.securityContext.sysctls.exists(s, "
        "s.name.matches('^net[./]ipv4[./]ip_unprivileged_port_start$') && "
        "(!has(s.value) || !string(s.value).matches('^[0-9]+$') || "
        f"int(string(s.value)) < {PRIVILEGED_PORT_LIMIT})))"
    )
    host = f"(has({spec}.hostNetwork) && {spec}.hostNetwork)"
    keeps = _container_keeps_bind("c", patch=patch)
    containers = " || ".join(
        f"(has({spec}.{field}) && {spec}.{field}.exists(c, {keeps}))"
        for field in ("containers", "initContainers", "ephemeralContainers")
    )
    return f"({sysctl} || {host} || {containers})"


def lustre_boundary_policy(*, team_label: str) -> dict[str, Any]:
    """ValidatingAdmissionPolicy spec: no team pod may bind a privileged port.

    Judged on CREATE and UPDATE in team namespaces: Pods (ephemeral containers come as an
    UPDATE of ``pods/ephemeralcontainers``), the pod templates of Deployments, StatefulSets,
    ReplicaSets, DaemonSets, Jobs, CronJobs, JobSets, legacy Training Operator jobs, Volcano
    Jobs and Ray objects (and the autoscaler container KubeRay adds to a Ray head), and the pod
    templates of a TrainJob's ``runtimePatches``. A pod made from a template
    is judged again as a Pod; the template is refused where its author sees the message. A pod
    spec is refused when it sets ``net.ipv4.ip_unprivileged_port_start`` below 1024, uses the
    host network, or has a container that adds CAP_NET_BIND_SERVICE or does not drop it
    (``capabilities.drop`` with ``ALL`` or ``NET_BIND_SERVICE``). The platform's runtimes drop
    ``ALL`` (:func:`components.tenancy.hardened_container_context`). Updates are judged only
    when the spec changes, so controllers writing status are never refused.

    Args:
        team_label: the namespace label of team namespaces.
    """
    rules = [
        writes("", "pods", "pods/ephemeralcontainers"),
        writes("apps", "deployments", "statefulsets", "replicasets", "daemonsets"),
        writes("batch", "jobs", "cronjobs"),
        writes("jobset.x-k8s.io", "jobsets"),
        writes("kubeflow.org", *LEGACY_JOBS),
        writes("batch.volcano.sh", "jobs"),
        writes("trainer.kubeflow.org", "trainjobs"),
        writes("ray.io", *RAY_TEMPLATE_RESOURCES),
    ]
    return {
        **team_spec_policy(team_label, rules),
        "variables": pod_spec_variables(),
        "validations": [
            {
                "expression": every_pod_spec(
                    lambda spec: f"!{_pod_spec_open(spec, patch=False)}",
                    patch=lambda spec: f"!{_pod_spec_open(spec, patch=True)}",
                ),
                "message": "a team pod may not bind a port below 1024, which the Lustre file "
                "servers take as a trusted client: every container (init and ephemeral ones "
                "too) must drop NET_BIND_SERVICE (securityContext.capabilities.drop: [ALL]) "
                "and not add it, the pod may not set net.ipv4.ip_unprivileged_port_start below "
                "1024 or use the host network (docs/concepts/tenancy.md, The Lustre boundary)",
                "reason": "Forbidden",
            },
            {
                # KubeRay adds the in-tree autoscaler's container to the head pod with
                # autoscalerOptions.securityContext, or none: the pod would be refused above.
                "expression": f"variables.{RAY_AUTOSCALERS}.all(a, "
                f"!{_container_keeps_bind('a', patch=False)})",
                "message": "enableInTreeAutoscaling adds the autoscaler's container to the Ray "
                "head pod: set autoscalerOptions.securityContext.capabilities.drop: [ALL] "
                "(and allowPrivilegeEscalation: false), or the head pod is refused as one "
                "that may bind a port below 1024",
                "reason": "Forbidden",
            },
        ],
    }
