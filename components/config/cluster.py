"""Config section ``platform.cluster``: control plane, endpoint, system nodes (cluster.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from components import versions
from components.catalog import cpu_architecture
from components.config.base import (
    CONFIG_KEY,
    MISSING,
    ConfigProblem,
    InstanceType,
    Ipv4Cidr,
    PrincipalArn,
    RetentionDays,
    StrictModel,
    duplicates,
    matching,
)
from components.config.network import client_network_problems

if TYPE_CHECKING:
    from components.config.platform import PlatformConfig


def version_as_text(value: Any) -> Any:
    """Refuse a version YAML read as a number: an unquoted 1.30 arrives as 1.3."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise PydanticCustomError(
            "version_number",
            "a quoted Kubernetes minor version, one of {versions}: YAML reads an unquoted version "
            "as a number, and 1.30 becomes 1.3",
            {"versions": ", ".join(f'"{v}"' for v in versions.SUPPORTED_KUBERNETES_VERSIONS)},
        )
    return value


KubernetesVersion = Annotated[str, BeforeValidator(version_as_text)]


TransitGatewayId = Annotated[
    str, AfterValidator(matching(r"tgw-[0-9a-f]{8,17}", "a transit gateway id, tgw-<hex>"))
]


class DeployPathConfig(StrictModel):
    """Where `pulumi up` and kubectl reach a private API endpoint from."""

    cidrs: list[Ipv4Cidr] = Field(
        default_factory=list,
        description="Networks deployments come from: a VPN, a peered network, the subnet of a "
        "CI runner in the VPC (then the VPC's CIDR). The cluster security group admits HTTPS "
        "(443) from each. Default: none.",
    )
    transit_gateway_id: TransitGatewayId | None = Field(
        default=None,
        description="Transit gateway that carries those networks to the VPC: the stack attaches "
        "the VPC's private subnets to it and routes the networks through it. Only for a VPC the "
        "stack creates. Default: none (the routes exist already, e.g. a Client VPN endpoint in "
        "the VPC or a peering the network team owns).",
    )


class EndpointAccessConfig(StrictModel):
    """Who can reach the Kubernetes API server."""

    private_access: bool = Field(
        default=True, description="API reachable from inside the VPC. Default: true."
    )
    public_access: bool = Field(
        default=False,
        description="API reachable from the internet, only from `publicAccessCidrs`. "
        "Default: false.",
    )
    public_access_cidrs: list[Ipv4Cidr] = Field(
        default_factory=list,
        description="Networks allowed to reach the public endpoint; required when "
        "`publicAccess` is true, forbidden otherwise. Default: none.",
    )
    deploy_from: DeployPathConfig = Field(
        default_factory=DeployPathConfig,
        description="Where deployments reach the private endpoint from; required (cidrs) when "
        "the endpoint is private only, since every Kubernetes resource of the stack is applied "
        "through it. Default: none.",
    )


class SystemNodeGroupConfig(StrictModel):
    """The small managed node group that runs controllers (tainted CriticalAddonsOnly)."""

    instance_types: list[InstanceType] = Field(
        default_factory=lambda: ["m7i.xlarge"],
        min_length=1,
        max_length=20,
        description="Instance types, most preferred first; EKS takes at most 20. "
        "Default: [m7i.xlarge].",
    )
    min_size: int = Field(
        default=2,
        ge=2,
        description="Fewest nodes; at least 2 so controllers survive a zone. Default: 2.",
    )
    desired_size: int = Field(
        default=2, ge=2, description="Nodes at creation (min <= desired <= max). Default: 2."
    )
    max_size: int = Field(default=4, ge=2, le=100, description="Most nodes. Default: 4.")
    root_volume_size_gib: int = Field(
        default=50,
        alias="rootVolumeSizeGiB",
        ge=20,
        le=16384,
        description="Encrypted gp3 root volume, GiB. Default: 50.",
    )


class UiExposureConfig(StrictModel):
    """How people reach the web UIs the platform runs (Katib's, later notebooks' and Grafana)."""

    mode: Literal["portForward", "internalLoadBalancer"] = Field(
        default="portForward",
        description="`portForward`: each UI has a ClusterIP Service only, reached with "
        "`kubectl port-forward` by whoever the cluster's RBAC lets do so. "
        "`internalLoadBalancer`: an internal NLB in the private subnets, open only to "
        "`clientCidrs`. Default: portForward.",
    )
    client_cidrs: list[Ipv4Cidr] = Field(
        default_factory=list,
        description="Networks that may reach the UIs' load balancers (their source ranges): "
        "private ones outside the VPC's CIDR, routed back to from the VPC, checked as "
        "slurm.login.allowedCidrs are. Required with internalLoadBalancer (an empty list "
        "would leave it open to every source), refused with portForward. Default: none.",
    )


class ClusterConfig(StrictModel):
    """The EKS control plane and its system node group."""

    kubernetes_version: KubernetesVersion = Field(
        default=versions.DEFAULT_KUBERNETES_VERSION,
        description="EKS Kubernetes minor version; one the bill of materials pins add-ons "
        f"for ({', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}). "
        f"Default: {versions.DEFAULT_KUBERNETES_VERSION}.",
    )
    endpoint: EndpointAccessConfig = Field(
        default_factory=EndpointAccessConfig,
        description="API server endpoint access. Default: private only.",
    )
    deployer_principal_arn: PrincipalArn = Field(
        description="The IAM role (or user) that runs `pulumi up` when the cluster is created, "
        "with its path (`aws iam get-role --role-name <name>` shows it; an "
        "assumed-role session ARN names the role after `assumed-role/`). EKS gives the "
        "cluster's creator cluster admin itself (pulumi-eks turns on "
        "bootstrapClusterCreatorAdminPermissions), so it must not be in adminPrincipalArns "
        "too. Required.",
    )
    admin_principal_arns: list[PrincipalArn] = Field(
        min_length=1,
        description="Further IAM roles or users given cluster-admin through EKS access entries "
        "(authentication mode API); not the deployer. Required, at least one.",
    )
    log_retention_days: RetentionDays = Field(
        default=90,
        description="Days CloudWatch keeps control-plane logs (api, audit, authenticator). "
        "Default: 90.",
    )
    system_node_group: SystemNodeGroupConfig = Field(
        default_factory=SystemNodeGroupConfig,
        description="Controller nodes. Default: 2 to 4 m7i.xlarge.",
    )
    ui_exposure: UiExposureConfig = Field(
        default_factory=UiExposureConfig,
        description="How people reach the cluster's web UIs (Katib's). Default: port-forward only.",
    )


def cluster_problems(cluster: ClusterConfig) -> Iterator[ConfigProblem]:
    """Cross-field problems of ``platform.cluster``."""
    base = f"{CONFIG_KEY}.cluster"
    if cluster.kubernetes_version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        yield ConfigProblem(
            f"{base}.kubernetesVersion",
            cluster.kubernetes_version,
            "one of " + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS),
        )
    endpoint = cluster.endpoint
    if not endpoint.private_access and not endpoint.public_access:
        yield ConfigProblem(
            f"{base}.endpoint.privateAccess", False, "true when publicAccess is false"
        )
    if endpoint.public_access and not endpoint.public_access_cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.publicAccessCidrs",
            [],
            "at least one CIDR when publicAccess is true (the API is never open to everyone "
            "by default)",
        )
    for index, cidr in enumerate(endpoint.public_access_cidrs):
        if _not_internet_routable(ipaddress.IPv4Network(cidr)):
            yield ConfigProblem(
                f"{base}.endpoint.publicAccessCidrs[{index}]",
                cidr,
                "a public network: EKS refuses reserved ranges there (private, shared, "
                "loopback, link-local, multicast); reach the private endpoint from those "
                "through deployFrom",
            )
    if not endpoint.public_access and endpoint.public_access_cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.publicAccessCidrs",
            endpoint.public_access_cidrs,
            "none while publicAccess is false",
        )
    identities = [principal_identity(arn) for arn in cluster.admin_principal_arns]
    if len(set(identities)) < len(identities):
        yield ConfigProblem(
            f"{base}.adminPrincipalArns",
            cluster.admin_principal_arns,
            "each principal once (a role under two paths or in two cases is one principal, "
            "and a second access entry for it fails with 409)",
        )
    deployer = principal_identity(cluster.deployer_principal_arn)
    for index, arn in enumerate(cluster.admin_principal_arns):
        if principal_identity(arn) == deployer:
            yield ConfigProblem(
                f"{base}.adminPrincipalArns[{index}]",
                arn,
                "a principal other than the deployer (cluster.deployerPrincipalArn): EKS already "
                "gives the cluster's creator an access entry, and a second one for it fails "
                "with 409 ResourceInUseException (pulumi/pulumi-eks#2373)",
            )
    if not endpoint.public_access and not endpoint.deploy_from.cidrs:
        yield ConfigProblem(
            f"{base}.endpoint.deployFrom.cidrs",
            MISSING,
            "the networks `pulumi up` runs from (a VPN, a peered network, or the VPC's CIDR for "
            "a runner inside it) when the endpoint is private only: without a way in, every "
            "Kubernetes resource of the stack times out (docs/how-to/private-endpoint.md)",
        )
    group = cluster.system_node_group
    if group.min_size > group.max_size:
        yield ConfigProblem(
            f"{base}.systemNodeGroup.minSize",
            group.min_size,
            f"at most maxSize ({group.max_size})",
        )
    elif not group.min_size <= group.desired_size <= group.max_size:
        yield ConfigProblem(
            f"{base}.systemNodeGroup.desiredSize",
            group.desired_size,
            f"between minSize ({group.min_size}) and maxSize ({group.max_size})",
        )
    if duplicates(group.instance_types):
        yield ConfigProblem(
            f"{base}.systemNodeGroup.instanceTypes", group.instance_types, "each type once"
        )
    if len({cpu_architecture(t) for t in group.instance_types}) > 1:
        yield ConfigProblem(
            f"{base}.systemNodeGroup.instanceTypes",
            group.instance_types,
            "types of one CPU architecture (all x86_64 or all arm64): one AMI type serves them",
        )


def ui_exposure_problems(config: PlatformConfig) -> Iterator[ConfigProblem]:
    """Problems of ``platform.cluster.uiExposure``: client networks with the load balancer only.

    Args:
        config: the parsed platform (the client networks are checked against its VPC and
            deploy path).
    """
    exposure = config.cluster.ui_exposure
    key = f"{CONFIG_KEY}.cluster.uiExposure"
    if exposure.mode == "internalLoadBalancer" and not exposure.client_cidrs:
        yield ConfigProblem(
            f"{key}.clientCidrs",
            MISSING,
            "at least one client network with mode internalLoadBalancer: an empty "
            "loadBalancerSourceRanges leaves the load balancer open to every source",
        )
    if exposure.mode == "portForward" and exposure.client_cidrs:
        yield ConfigProblem(
            f"{key}.clientCidrs",
            exposure.client_cidrs,
            "none with mode portForward (no load balancer takes them); set mode "
            "internalLoadBalancer to open the UIs to these networks",
        )
    yield from client_network_problems(
        config,
        f"{key}.clientCidrs",
        list(exposure.client_cidrs),
        reached="the web UIs' load balancer",
        stake="the UIs' own logins, where they have any, are all that stands between a "
        "source range and the experiments and dashboards they show",
        inside="the UIs through their load balancer",
    )


_NOT_ROUTED_ON_THE_INTERNET: Final = tuple(
    ipaddress.IPv4Network(cidr)
    for cidr in ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                 "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4")
)  # fmt: skip
"""Ranges no internet client comes from (RFC 6890): a public endpoint cannot admit them."""


def _not_internet_routable(network: ipaddress.IPv4Network) -> bool:
    return network.prefixlen > 0 and any(
        network.overlaps(reserved) for reserved in _NOT_ROUTED_ON_THE_INTERNET
    )


def principal_identity(arn: str) -> tuple[str, str, str]:
    """(account, kind, name) of an IAM principal ARN: a role is one role whatever its path.

    IAM role and user names are unique in an account regardless of path and of case
    (``Deployer`` and ``deployer`` cannot both exist), and an assumed-role session
    (``arn:aws:sts::<account>:assumed-role/<role>/<session>``) acts as its role.
    """
    parts = arn.split(":", 5)
    account, resource = parts[4], parts[5]
    kind, _, rest = resource.partition("/")
    if kind == "assumed-role":
        return account, "role", rest.split("/", 1)[0].lower()
    return account, kind, rest.rsplit("/", 1)[-1].lower()
