"""JupyterHub: its exposure, its authenticator, its images and its profiles' pods.

Each policy reads the ``jupyterhub`` Helm release's values (the chart's keys: jupyterhub/
zero-to-jupyterhub-k8s 4.4.0 jupyterhub/values.yaml) and the profiles the platform writes under
``custom.teamProfiles`` (components/notebooks.py), whichever shape they arrive in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from components.notebooks import PROFILE_CONFIG
from components.scheduling import QUEUE_ANNOTATION, SCHEDULER_NAME

from .common import HELM_TYPES, ReportViolation, ResourceValidationArgs, decoded, resource_policy

CHART = "jupyterhub"
OPEN_AUTHENTICATORS = frozenset({"dummy", "null", "nullauthenticator", "allow-all"})
"""Authenticators that let anyone in (jupyterhub 5.5.0 entry points ``dummy`` and ``null``)."""
PINNED_TAG = re.compile(r":(?!latest$)(?!set-by-chartpress$)[\w][\w.-]*(@sha256:[0-9a-f]{64})?$")
ACCELERATOR_PREFIXES = ("nvidia.com/", "aws.amazon.com/neuron", "vpc.amazonaws.com/efa")


def _values(args: ResourceValidationArgs) -> Mapping[str, Any] | None:
    """The release's values, where it is the jupyterhub chart; None for anything else."""
    if args.resource_type not in HELM_TYPES:
        return None
    if str(args.props.get("chart", "")).rsplit("/", 1)[-1] != CHART:
        return None
    values = decoded(args.props.get("values")) or {}
    return values if isinstance(values, Mapping) else {}


def _at(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values.get(key) if isinstance(values, Mapping) else None
    return values


def _profiles(values: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(slug, kubespawner_override) of every profile: the platform's and the chart's own list."""
    for team in _at(values, f"custom.{PROFILE_CONFIG}") or []:
        for profile in (team or {}).get("profiles") or []:
            yield str(profile.get("slug")), profile.get("kubespawner_override") or {}
    for profile in _at(values, "singleuser.profileList") or []:
        yield str(profile.get("slug")), profile.get("kubespawner_override") or {}


def _check_exposure(args: ResourceValidationArgs, report: ReportViolation) -> None:
    values = _values(args)
    if values is None:
        return
    for path in ("proxy.service.type", "hub.service.type"):
        kind = _at(values, path)
        if kind not in (None, "ClusterIP"):
            report(
                f"{path} is {kind}: the hub is reached as cluster.uiExposure says, through the "
                "platform's access Service, never a Service of the chart's",
                None,
            )
    for path in ("ingress.enabled", "httpRoute.enabled", "proxy.https.enabled"):
        if _at(values, path) is True:
            report(f"{path} is true: a route the exposure setting does not govern", None)
    if _at(values, "proxy.chp.networkPolicy.allowedIngressPorts"):
        report(
            "proxy.chp.networkPolicy.allowedIngressPorts opens the proxy to every source; only "
            "the exposure's client networks may reach it",
            None,
        )


def _check_authenticator(args: ResourceValidationArgs, report: ReportViolation) -> None:
    values = _values(args)
    if values is None:
        return
    config = _at(values, "hub.config") or {}
    # The chart's default is dummy: an unset class is the dummy authenticator.
    chosen = str(_at(config, "JupyterHub.authenticator_class") or "dummy").lower()
    allowed_open = args.get_config().get("allowDummyAuthenticator", False)
    if chosen in OPEN_AUTHENTICATORS and not allowed_open:
        report(f"authenticator {chosen!r} lets anyone in; use the OIDC authenticator", None)
    if chosen in ("generic-oauth", "genericoauthenticator"):
        oauth = config.get("GenericOAuthenticator") or {}
        if oauth.get("allow_all") is True or oauth.get("allow_existing_users") is True:
            report("GenericOAuthenticator admits users outside the teams' groups", None)
        if not oauth.get("allowed_groups") or oauth.get("manage_groups") is not True:
            report(
                "GenericOAuthenticator needs manage_groups and allowed_groups (the teams'): "
                "without them any account of the identity provider logs in",
                None,
            )
        if oauth.get("client_secret"):
            report("the OIDC client secret is in the chart's values; set it from a Secret", None)


def _check_images(args: ResourceValidationArgs, report: ReportViolation) -> None:
    values = _values(args)
    if values is None:
        return
    name, tag = _at(values, "singleuser.image.name"), _at(values, "singleuser.image.tag")
    images = [("singleuser.image", f"{name}:{tag}")]
    images += [(f"profile {slug}", str(o.get("image"))) for slug, o in _profiles(values)]
    for where, image in images:
        if not PINNED_TAG.search(image):
            report(f"{where} image {image!r} is not pinned to a release tag or digest", None)


def _check_profiles(args: ResourceValidationArgs, report: ReportViolation) -> None:
    values = _values(args)
    if values is None:
        return
    switches = {
        "scheduling.userScheduler.enabled": "a second scheduler for user pods",
        "scheduling.userPlaceholder.enabled": "pods that hold capacity without using it",
        "prePuller.hook.enabled": "an image puller DaemonSet",
        "prePuller.continuous.enabled": "an image puller DaemonSet",
        "singleuser.cloudMetadata.blockWithIptables": "a privileged init container",
    }
    for path, what in switches.items():
        if _at(values, path) is not False:
            report(f"{path} is not false: {what}", None)
    if _at(values, "singleuser.storage.type") != "none":
        report(
            "singleuser.storage.type is not none: a per-user EBS volume, bound to one zone", None
        )
    tolerations = _at(values, "scheduling.userPods.tolerations")
    # Unset is the chart's default, which tolerates its hub.jupyter.org/dedicated taint.
    if tolerations is None or list(tolerations):
        report(
            "scheduling.userPods.tolerations is not []: user pods tolerate the chart's taint", None
        )
    for slug, override in _profiles(values):
        if override.get("scheduler_name") != SCHEDULER_NAME:
            report(f"profile {slug} is not scheduled by Volcano ({SCHEDULER_NAME})", None)
        namespace = override.get("namespace")
        queue = (override.get("extra_annotations") or {}).get(QUEUE_ANNOTATION)
        if not namespace or queue != namespace:
            report(
                f"profile {slug} does not name its team's namespace and queue "
                f"({QUEUE_ANNOTATION}: {queue!r}, namespace {namespace!r})",
                None,
            )
        guarantees = override.get("extra_resource_guarantees") or {}
        limits = override.get("extra_resource_limits") or {}
        accelerated = {k for k in {*guarantees, *limits} if k.startswith(ACCELERATOR_PREFIXES)}
        for resource in sorted(accelerated):
            if str(guarantees.get(resource)) != str(limits.get(resource)):
                report(
                    f"profile {slug} requests {guarantees.get(resource)!r} {resource} but limits "
                    f"{limits.get(resource)!r}: the quota and the queue count the request",
                    None,
                )
        if override.get("automount_service_account_token") and not override.get("service_account"):
            report(f"profile {slug} mounts a token of no named service account", None)


POLICIES = [
    resource_policy(
        "notebooks-exposure",
        "JupyterHub has no public endpoint: the chart's Services stay ClusterIP, no Ingress, "
        "route or automatic HTTPS, and the proxy is open to no source by the chart's policy; "
        "people reach it as cluster.uiExposure says.",
        _check_exposure,
    ),
    resource_policy(
        "notebooks-authenticator",
        "JupyterHub logs people in through the OIDC authenticator with the teams' groups only "
        "(no dummy or open authenticator outside an environment that allows it), its client "
        "secret out of the values.",
        _check_authenticator,
        config={"allowDummyAuthenticator": {"type": "boolean", "default": False}},
    ),
    resource_policy(
        "notebooks-images-pinned",
        "Every notebook image (the default and each profile's) is pinned to a release tag or "
        "digest.",
        _check_images,
    ),
    resource_policy(
        "notebooks-profile-resources",
        "Notebook servers are the teams' workloads: Volcano with the team's namespace and "
        "queue, accelerator requests equal to limits; no user scheduler, placeholders, image "
        "pullers, per-user EBS, privileged metadata blocker or chart tolerations.",
        _check_profiles,
    ),
]
