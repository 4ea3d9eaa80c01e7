"""The bill of materials: every pinned version the platform installs, in one place.

Config validation reads the supported Kubernetes versions from here, components read the add-on
versions from here, and tests check the pins (no ``latest``, no ranges). Sources for each pin are
noted beside it so a reviewer can recheck them before bumping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class EksAddonVersions:
    """EKS managed add-on versions validated for one Kubernetes minor version.

    kube-proxy and CoreDNS track the control plane's minor version, so they are pinned per minor;
    the others are pinned per minor as well so that a version bump is one reviewed table row.
    """

    vpc_cni: str
    """``vpc-cni`` add-on; must be >= v1.18.5 for Karpenter's explicit EFA ``networkInterfaces``."""
    kube_proxy: str
    """``kube-proxy`` add-on; its minor must equal the cluster's."""
    coredns: str
    """``coredns`` add-on."""
    pod_identity_agent: str
    """``eks-pod-identity-agent`` add-on (EKS Pod Identity for controllers)."""
    ebs_csi_driver: str
    """``aws-ebs-csi-driver`` add-on (gp3 volumes, through Pod Identity)."""


# Versions as published by `aws eks describe-addon-versions` for each minor (late 2026).
_POD_IDENTITY_AGENT: Final = "v1.3.10-eksbuild.2"
_EBS_CSI_DRIVER: Final = "v1.54.0-eksbuild.1"

EKS_ADDONS: Final[dict[str, EksAddonVersions]] = {
    "1.33": EksAddonVersions(
        vpc_cni="v1.20.2-eksbuild.1",
        kube_proxy="v1.33.3-eksbuild.6",
        coredns="v1.12.4-eksbuild.1",
        pod_identity_agent=_POD_IDENTITY_AGENT,
        ebs_csi_driver=_EBS_CSI_DRIVER,
    ),
    "1.34": EksAddonVersions(
        vpc_cni="v1.20.4-eksbuild.2",
        kube_proxy="v1.34.0-eksbuild.2",
        coredns="v1.12.3-eksbuild.1",
        pod_identity_agent=_POD_IDENTITY_AGENT,
        ebs_csi_driver=_EBS_CSI_DRIVER,
    ),
    "1.35": EksAddonVersions(
        vpc_cni="v1.21.1-eksbuild.3",
        kube_proxy="v1.35.0-eksbuild.2",
        coredns="v1.13.2-eksbuild.1",
        pod_identity_agent=_POD_IDENTITY_AGENT,
        ebs_csi_driver=_EBS_CSI_DRIVER,
    ),
}
"""Add-on pins per supported Kubernetes minor. Its keys are the supported Kubernetes versions:
Kubeflow Trainer 2.3 needs >= 1.31 and Volcano 1.15 supports <= 1.35."""

SUPPORTED_KUBERNETES_VERSIONS: Final[tuple[str, ...]] = tuple(EKS_ADDONS)
DEFAULT_KUBERNETES_VERSION: Final = "1.34"

MINIMUM_VPC_CNI_VERSION: Final = (1, 18, 5)
"""Oldest VPC CNI that supports Karpenter's explicit EFA network interface layout."""


def addon_semver(version: str) -> tuple[int, int, int]:
    """Parse an EKS add-on version such as ``v1.20.4-eksbuild.2`` into ``(1, 20, 4)``."""
    core = version.removeprefix("v").split("-", 1)[0]
    major, minor, patch = (int(part) for part in core.split("."))
    return major, minor, patch
