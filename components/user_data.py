"""Node user data: the MIME multi-part documents EC2 instances boot with.

One builder for every node the platform describes: the Karpenter pools' EC2NodeClasses (huge
pages, the EFA container limits through nodeadm) and the Lustre admin client (its layout
script). Pure text builders that import nothing of the project, so pools, storage and Slurm can
all use them.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

USER_DATA_BOUNDARY: Final = "//"
USER_DATA_LIMIT_BYTES: Final = 16384
"""EC2 refuses user data above 16 KB (RunInstances, UserData)."""
SHELL_SCRIPT_PART: Final = 'text/x-shellscript; charset="us-ascii"'
"""Content type of a part cloud-init runs as a shell script."""
CLOUD_CONFIG_PART: Final = "text/cloud-config"
"""Content type of a part cloud-init reads as its configuration."""
NODE_CONFIG_PART: Final = "application/node.eks.aws"
"""Content type of a part nodeadm reads as a NodeConfig."""


def hugepages_script(gib: int) -> str:
    """Shell that reserves ``gib`` GiB of 2 MiB huge pages at boot.

    A cloud-init shell part: it runs before ``nodeadm-run.service`` starts the kubelet
    (amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service:
    ``After=... cloud-final.service``), and the kubelet reports only pages reserved before it
    starts. No AL2023 variant reserves huge pages itself, and nodeadm's NodeConfig has no field
    for them.

    Args:
        gib: huge pages to reserve, in GiB.
    """
    pages = gib * 1024 // 2
    return "\n".join(
        [
            "#!/bin/bash",
            f"pages={pages}",
            'echo "vm.nr_hugepages = ${pages}" > /etc/sysctl.d/90-training-platform-hugepages.conf',
            "sysctl -q -w vm.nr_hugepages=${pages}",
            'if [ "$(cat /proc/sys/vm/nr_hugepages)" -lt "${pages}" ]; then',
            "  echo 1 > /proc/sys/vm/compact_memory",
            "  sysctl -q -w vm.nr_hugepages=${pages}",
            "fi",
            'echo "training-platform: $(grep HugePages_Total /proc/meminfo), wanted ${pages}" '
            "> /dev/console",
        ]
    )


UNLIMITED_RLIMIT: Final = 10**18
"""As good as unlimited (bytes of locked memory), and not RLIM_INFINITY (2^64 - 1) on purpose:
nodeadm merges the base spec through ``map[string]interface{}`` JSON (amazon-eks-ami
nodeadm/internal/util/merge.go), so every number passes through a float64 and is written back
in Go's shortest form. 2^64 - 1 comes out as 18446744073709552000, which no uint64 holds, and
containerd then fails to load the spec: the node never gets Ready. 10^18 is a float64 exactly
and is written back as the same digits."""
CONTAINER_RLIMITS: Final = (
    {"type": "RLIMIT_MEMLOCK", "soft": UNLIMITED_RLIMIT, "hard": UNLIMITED_RLIMIT},
    {"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576},
)
"""Every container's limits on an EFA node. libfabric's EFA provider registers (pins) its
buffers against RLIMIT_MEMLOCK, and a memory registration beyond it fails NCCL's start. The
AMI's base spec states only the open-files limit, leaving memlock to whatever containerd's
service runs with; stating it unlimited here makes it the node's, whatever the AMI release, and
lets a container pin without CAP_IPC_LOCK (team namespaces drop every capability:
components/tenancy.py). The list replaces the AMI's, so its open-files limit is restated."""


CONTAINERD_PRIVILEGED_PORTS: Final = (
    "[plugins.'io.containerd.cri.v1.runtime']\nenable_unprivileged_ports = false\n"
)
"""containerd config merged into every node's: pods keep the kernel's privileged ports.

containerd 2 sets ``net.ipv4.ip_unprivileged_port_start=0`` in every pod's network namespace
unless the pod sets it (its CRI ``enable_unprivileged_ports`` defaults to true:
containerd ``internal/cri/config/config_unix.go``, DefaultRuntimeConfig), and the AL2023 AMI's
template for containerd 2 leaves it so (amazon-eks-ami ``nodeadm/internal/containerd/
config2.template.toml``). Any process of any pod could then bind a source port below 1024,
which is all the Lustre servers ask of a client before trusting the ids it claims
(docs/concepts/tenancy.md, "The Lustre boundary"). Off, a pod's namespace starts at the
kernel's 1024, and only CAP_NET_BIND_SERVICE binds below it, which team pods drop
(:mod:`components.lustre_boundary`). The key is the CRI runtime plugin's in containerd's config
version 3, the one the AMI writes for containerd 2; nodeadm merges ``containerd.config`` over
its template (amazon-eks-ami doc/usage/al2023.md)."""


def node_config(*, efa: bool) -> dict[str, Any]:
    """The nodeadm NodeConfig of a node: privileged ports kept, and EFA's memlock limit.

    Every node gets :data:`CONTAINERD_PRIVILEGED_PORTS`. An EFA node also gets
    ``containerd.baseRuntimeSpec``, merged over the AMI's base OCI spec (amazon-eks-ami
    doc/usage/al2023.md, "Modifying container RLIMITs"), which raises the memlock limit of
    every container. nodeadm merges this NodeConfig with the one Karpenter puts before the
    custom parts (karpenter-provider-aws v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go,
    Script), which sets no containerd field.

    Args:
        efa: the node has EFA interfaces.
    """
    containerd: dict[str, Any] = {"config": CONTAINERD_PRIVILEGED_PORTS}
    if efa:
        containerd["baseRuntimeSpec"] = {"process": {"rlimits": list(CONTAINER_RLIMITS)}}
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"containerd": containerd},
    }


def efa_node_config() -> dict[str, Any]:
    """The NodeConfig of an EFA node (:func:`node_config`)."""
    return node_config(efa=True)


BOTTLEROCKET_PRIVILEGED_PORTS: Final = (
    '[settings.container-runtime]\n"enable-unprivileged-ports" = false\n'
)
"""A Bottlerocket node's user data (TOML settings, which Karpenter merges with its own): the
same as :data:`CONTAINERD_PRIVILEGED_PORTS`, through Bottlerocket's
``settings.container-runtime.enable-unprivileged-ports``."""


BOTTLEROCKET_ALIAS_PREFIX: Final = "bottlerocket@"
"""How an EC2NodeClass AMI alias names Bottlerocket (``bottlerocket@latest``), whose user data is
TOML settings rather than MIME parts."""


def node_user_data(*, efa: bool, hugepages_gib: int, bottlerocket: bool = False) -> str:
    """A node's user data: a MIME multi-part document (AL2023) or TOML settings (Bottlerocket).

    Every AL2023 node gets :func:`node_config`; nodes with huge pages get
    :func:`hugepages_script`. Karpenter adds its own NodeConfig part to these. A Bottlerocket
    node gets :data:`BOTTLEROCKET_PRIVILEGED_PORTS` only (config refuses huge pages there).

    Args:
        efa: the node has EFA interfaces.
        hugepages_gib: huge pages to reserve, in GiB (0: none).
        bottlerocket: the node runs Bottlerocket, whose user data Karpenter reads as TOML.
            Default False (AL2023).
    """
    if bottlerocket:
        return BOTTLEROCKET_PRIVILEGED_PORTS
    parts: list[tuple[str, str]] = [(NODE_CONFIG_PART, yaml.safe_dump(node_config(efa=efa)))]
    if hugepages_gib:
        parts.append((SHELL_SCRIPT_PART, hugepages_script(hugepages_gib)))
    return multipart_user_data(parts)


def multipart_user_data(parts: list[tuple[str, str]]) -> str:
    """A MIME multi-part user data document, which cloud-init and nodeadm read part by part.

    Args:
        parts: (content type, body) of each part, in order.
    """
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"']
    for content_type, body in parts:
        lines += ["", f"--{USER_DATA_BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip()]
    lines += [f"--{USER_DATA_BOUNDARY}--", ""]
    return "\n".join(lines)
