"""The bill of materials: every pinned version the platform installs, in one place.

Config validation reads the supported Kubernetes versions from here, components read the add-on
versions from here, and tests check the pins (no ``latest``, no ranges). Sources for each pin are
noted beside it so a reviewer can recheck them before bumping.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Final


@dataclass(frozen=True)
class EksAddonVersions:
    """EKS managed add-on versions validated for one Kubernetes minor version.

    kube-proxy and CoreDNS track the control plane's minor version, so they are pinned per minor;
    the others are pinned per minor as well, each its own literal, so that the dependency bot
    (``renovate.json``, the ``aws-eks-addon`` datasource filtered by the minor) proposes only
    builds EKS publishes for that minor. Each field is named after its add-on, ``-`` written
    ``_``: the bot's manager derives the add-on name from the field name.
    """

    vpc_cni: str
    """``vpc-cni`` add-on; must be >= v1.18.5 for Karpenter's explicit EFA ``networkInterfaces``."""
    kube_proxy: str
    """``kube-proxy`` add-on; its minor must equal the cluster's."""
    coredns: str
    """``coredns`` add-on."""
    eks_pod_identity_agent: str
    """``eks-pod-identity-agent`` add-on (EKS Pod Identity for controllers)."""
    aws_ebs_csi_driver: str
    """``aws-ebs-csi-driver`` add-on (gp3 volumes, through Pod Identity)."""
    aws_fsx_csi_driver: str
    """``aws-fsx-csi-driver`` add-on (FSx for Lustre mounts, through Pod Identity). The EKS
    hybrid-nodes guide names v1.7.0-eksbuild.1 as the first build it supports."""
    aws_efs_csi_driver: str
    """``aws-efs-csi-driver`` add-on (the EFS model store's mounts, through Pod Identity):
    kubernetes-sigs/aws-efs-csi-driver v3.4.1, the newest upstream release (CHANGELOG-3.x.md);
    the dependency bot replaces the build with the one EKS publishes for each minor."""
    eks_node_monitoring_agent: str
    """``eks-node-monitoring-agent`` add-on: sets the node conditions Karpenter's node repair
    acts on (``AcceleratedHardwareReady`` and the others). aws/eks-node-monitoring-agent v1.7.0
    charts/eks-node-monitoring-agent/values.yaml tags its image v1.7.0-eksbuild.1; the
    dependency bot replaces the build with the one EKS publishes for each minor."""

    def by_addon_name(self) -> dict[str, str]:
        """Add-on name as EKS spells it (``eks-pod-identity-agent``) -> its pinned version."""
        return {name.replace("_", "-"): version for name, version in vars(self).items()}


# Versions as published by `aws eks describe-addon-versions --kubernetes-version <minor>` (late
# 2026). One literal per add-on and minor: the bot rewrites each in place.
EKS_ADDONS: Final[dict[str, EksAddonVersions]] = {
    "1.33": EksAddonVersions(
        vpc_cni="v1.20.2-eksbuild.1",
        kube_proxy="v1.33.3-eksbuild.6",
        coredns="v1.12.4-eksbuild.1",
        eks_pod_identity_agent="v1.3.10-eksbuild.2",
        aws_ebs_csi_driver="v1.54.0-eksbuild.1",
        aws_fsx_csi_driver="v1.7.0-eksbuild.1",
        aws_efs_csi_driver="v3.4.1-eksbuild.1",
        eks_node_monitoring_agent="v1.7.0-eksbuild.1",
    ),
    "1.34": EksAddonVersions(
        vpc_cni="v1.20.4-eksbuild.2",
        kube_proxy="v1.34.0-eksbuild.2",
        coredns="v1.12.3-eksbuild.1",
        eks_pod_identity_agent="v1.3.10-eksbuild.2",
        aws_ebs_csi_driver="v1.54.0-eksbuild.1",
        aws_fsx_csi_driver="v1.7.0-eksbuild.1",
        aws_efs_csi_driver="v3.4.1-eksbuild.1",
        eks_node_monitoring_agent="v1.7.0-eksbuild.1",
    ),
    "1.35": EksAddonVersions(
        vpc_cni="v1.21.1-eksbuild.3",
        kube_proxy="v1.35.0-eksbuild.2",
        coredns="v1.13.2-eksbuild.1",
        eks_pod_identity_agent="v1.3.10-eksbuild.2",
        aws_ebs_csi_driver="v1.54.0-eksbuild.1",
        aws_fsx_csi_driver="v1.7.0-eksbuild.1",
        aws_efs_csi_driver="v3.4.1-eksbuild.1",
        eks_node_monitoring_agent="v1.7.0-eksbuild.1",
    ),
}
"""Add-on pins per supported Kubernetes minor. Its keys are the supported Kubernetes versions:
Kubeflow Trainer 2.3 needs >= 1.31 and Volcano 1.15 supports <= 1.35."""

SUPPORTED_KUBERNETES_VERSIONS: Final[tuple[str, ...]] = tuple(EKS_ADDONS)
DEFAULT_KUBERNETES_VERSION: Final = "1.35"


@dataclass(frozen=True)
class EksSupportWindow:
    """When EKS supports one Kubernetes minor version."""

    released: date
    """Available on EKS from this day."""
    standard_support_ends: date
    """Last day of standard support; extended support (billed per cluster-hour) follows."""
    extended_support_ends: date
    """Last day of extended support; EKS then upgrades the control plane itself."""


EKS_SUPPORT_CALENDAR: Final[dict[str, EksSupportWindow]] = {
    # EKS user guide, "Understand the Kubernetes version lifecycle on EKS":
    # https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html
    "1.33": EksSupportWindow(date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": EksSupportWindow(date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": EksSupportWindow(date(2026, 1, 28), date(2027, 3, 27), date(2028, 3, 27)),
}
"""EKS's support calendar for every minor the bill of materials pins add-ons for; the
``eks-version-in-standard-support`` policy reads it."""

MINIMUM_VPC_CNI_VERSION: Final = (1, 18, 5)
"""Oldest VPC CNI that supports Karpenter's explicit EFA network interface layout."""


def addon_semver(version: str) -> tuple[int, int, int]:
    """Parse an EKS add-on version such as ``v1.20.4-eksbuild.2`` into ``(1, 20, 4)``."""
    core = version.removeprefix("v").split("-", 1)[0]
    major, minor, patch = (int(part) for part in core.split("."))
    return major, minor, patch


@dataclass(frozen=True)
class HelmChart:
    """One upstream Helm chart at a pinned version.

    Each chart's version is its own literal, even where one upstream release ships several
    charts (Karpenter's two, Slinky's three): the dependency bot rewrites literals, and its
    group for that project moves them in one pull request (``renovate.json``).
    """

    chart: str
    """Chart name in ``repository``, or a full ``oci://`` reference."""
    version: str
    """Exact chart version (never a range, ``latest`` or a branch)."""
    repository: str | None
    """HTTPS chart repository; None for OCI charts."""

    @property
    def name(self) -> str:
        """The chart's own name, the last part of an ``oci://`` reference."""
        return self.chart.rsplit("/", maxsplit=1)[-1]


KARPENTER_CRD_CHART: Final = HelmChart(
    chart="oci://public.ecr.aws/karpenter/karpenter-crd",
    version="1.14.1",
    repository=None,
)
# Karpenter >= 1.11 for placementGroupSelector and networkInterfaces.
KARPENTER_CHART: Final = HelmChart(
    chart="oci://public.ecr.aws/karpenter/karpenter",
    version="1.14.1",
    repository=None,
)
KARPENTER_VERSION: Final = KARPENTER_CHART.version
"""Karpenter's release: the version of its chart (the CRD chart's must equal it)."""

NVIDIA_DEVICE_PLUGIN_CHART: Final = HelmChart(
    chart="nvidia-device-plugin",
    version="0.20.0",
    repository="https://nvidia.github.io/k8s-device-plugin",
)
# The chart's own version string carries a leading "v" (image v0.5.20).
EFA_DEVICE_PLUGIN_CHART: Final = HelmChart(
    chart="aws-efa-k8s-device-plugin",
    version="v0.5.30",
    repository="https://aws.github.io/eks-charts",
)
NEURON_CHART: Final = HelmChart(
    chart="oci://public.ecr.aws/neuron/neuron-helm-chart",
    version="1.9.0",
    repository=None,
)

# NVIDIA's GPU metrics exporter (tag 4.5.3-4.8.2: DCGM 4.5.3, exporter 4.8.2). Its chart runs on
# every node and tolerates no GPU taint by default (deployment/values.yaml at that tag), so
# components/observability/sources.py places it on the GPU pools.
DCGM_EXPORTER_CHART: Final = HelmChart(
    chart="dcgm-exporter",
    version="4.8.2",
    repository="https://nvidia.github.io/dcgm-exporter/helm-charts",
)
NEURON_MONITOR_IMAGE: Final = "public.ecr.aws/neuron/neuron-monitor:1.3.0"
"""neuron-monitor with its Prometheus bridge (port 8000), the image the Neuron SDK documents for
Kubernetes (aws-neuron/aws-neuron-sdk v2.32.0 src/k8/k8s-neuron-monitor-daemonset.yml); the
Neuron chart 1.9.0 installs no monitor. By tag: its digest could not be read where it was
pinned (no registry access); the dependency bot's first run adds it in place.

Trn2: neuron-monitor supports Trn2 from aws-neuronx-tools 2.20.204.0 (Neuron 2.21.0,
2024-12-20; aws-neuron/aws-neuron-sdk v2.32.0 release-notes/components/dev-tools.rst: "Added
support for Trn2 instance types", and per logical NeuronCore), and its user guide says it
"fully supports the newly launched Trn2 instances"
(tools/neuron-sys-tools/neuron-monitor-user-guide.rst, from v2.21.0 to v2.32.0). This tag is the one the SDK's
Kubernetes guide names from v2.22.0 (2025-04-03, after Trn2's support) to v2.32.0
(2026-08-17, the newest release read): the SDK names no later image to move to. The SDK does
not say which aws-neuronx-tools the image carries, so Trn2 support inside it follows from
those dates, not from a statement; the sample DaemonSet's instance list (trn1, inf1, inf2) is
not ours, the pools place it."""

# Tagged 2026-07-30; the chart repository index last seen offline listed 1.15.0, so confirm
# `helm search repo volcano-sh/volcano --version 1.15.1` before the first deployment.
VOLCANO_CHART: Final = HelmChart(
    chart="volcano",
    version="1.15.1",
    repository="https://volcano-sh.github.io/helm-charts",
)

TRAINER_CHART: Final = HelmChart(
    chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
    version="2.3.0",
    repository=None,
)
TRAINER_VERSION: Final = TRAINER_CHART.version
"""Kubeflow Trainer's release: its chart's version (its runtime images are tagged ``v`` + it)."""

# JobSet, the API Trainer's TrainJobs run as: the version kubeflow-trainer 2.3.0's Chart.yaml
# names as its ``jobset`` dependency (which the platform installs as its own release instead).
JOBSET_CHART: Final = HelmChart(
    chart="oci://registry.k8s.io/jobset/charts/jobset",
    version="0.12.0",
    repository=None,
)
JOBSET_VERSION: Final = JOBSET_CHART.version
"""JobSet's release: its chart's version."""
JOBSET_CRDS_URL: Final = (
    "https://raw.githubusercontent.com/kubernetes-sigs/jobset/"
    f"v{JOBSET_VERSION}/charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml"
)
"""The JobSet CRD at the chart's tag (derived, not a pin of its own: it moves with the chart).
The chart keeps it under ``crds/``, which Helm installs once and never upgrades, so the stack
applies this file itself (server-side) and a bump upgrades it."""

# KubeRay's operator (RayCluster, RayJob, RayService), gang-scheduled through Volcano.
KUBERAY_OPERATOR_CHART: Final = HelmChart(
    chart="kuberay-operator",
    version="1.7.0",
    repository="https://ray-project.github.io/kuberay-helm/",
)
KUBERAY_VERSION: Final = KUBERAY_OPERATOR_CHART.version
"""KubeRay's release: its operator chart's version (its git tag is ``v`` + it)."""
KUBERAY_CRD_KINDS: Final = ("rayclusters", "rayjobs", "rayservices", "raycronjobs")
"""The CRDs of the chart's ``crds/`` directory (ray-project/kuberay v1.7.0
helm-chart/kuberay-operator/crds/ray.io_<kind>.yaml)."""
KUBERAY_CRDS_URLS: Final = tuple(
    "https://raw.githubusercontent.com/ray-project/kuberay/"
    f"v{KUBERAY_VERSION}/helm-chart/kuberay-operator/crds/ray.io_{kind}.yaml"
    for kind in KUBERAY_CRD_KINDS
)
"""The chart's CRDs at its tag (derived, not pins of their own: they move with the chart). Helm
installs ``crds/`` once and never upgrades it, so the stack applies these itself (server-side)
and a bump upgrades them, as it does JobSet's (:data:`JOBSET_CRDS_URL`)."""

RAY_IMAGE: Final = "rayproject/ray:2.52.0-py312-gpu"
"""Ray's own GPU image (CUDA and Ray, no PyTorch: a job brings torch in its ``runtime_env``;
``ray.images.gpu`` names an images/ray-cuda build, which has it, on EFA pools): Ray 2.52.0,
the release KubeRay 1.7.0's samples run (ray-project/kuberay v1.7.0
ray-operator/config/samples/ray-job.sample.yaml). Still by tag, for the bot to add its digest."""
RAY_VERSION: Final = RAY_IMAGE.split(":", 1)[1].split("-", 1)[0]
"""The Ray release of :data:`RAY_IMAGE`: a cluster's ``rayVersion`` (derived, so the two never
differ)."""

TRAINING_OPERATOR_VERSION: Final = "v1.9.4"
"""The legacy Training Operator (v1): a tag on kubeflow/trainer's release-1.9 branch (the bot
keeps it below v2, Trainer's own releases)."""
TRAINING_OPERATOR_KUSTOMIZATION: Final = (
    "https://github.com/kubeflow/trainer.git/manifests/overlays/standalone"
    f"?ref={TRAINING_OPERATOR_VERSION}"
)
"""The legacy Training Operator has no Helm chart: its standalone kustomize overlay, at
:data:`TRAINING_OPERATOR_VERSION`."""

KATIB_VERSION: Final = "v0.19.0"
"""Katib (standalone): a tag of kubeflow/katib. It ships no Helm chart; the stack applies the
release's kustomize components at this tag (:func:`katib_kustomization`) and runs the images of
this release (:func:`katib_image`), so this is the one pin of both."""
KATIB_MANIFESTS: Final = "https://github.com/kubeflow/katib.git/manifests/v1beta1/components"
"""Where Katib's release manifests are: one kustomize component per directory (kubeflow/katib
v0.19.0 manifests/v1beta1/installs/katib-standalone/kustomization.yaml lists them)."""


def katib_kustomization(component: str) -> str:
    """The remote kustomization of one Katib component at :data:`KATIB_VERSION`.

    Args:
        component: a directory of ``manifests/v1beta1/components`` (``crd``, ``controller``,
            ``db-manager``, ``ui``, ``webhook``).
    """
    return f"{KATIB_MANIFESTS}/{component}?ref={KATIB_VERSION}"


def katib_image(name: str) -> str:
    """A Katib image of the pinned release, e.g. ``katib-controller`` or ``suggestion-optuna``.

    The release tags every image it builds with its version (kubeflow/katib v0.19.0
    manifests/v1beta1/installs/katib-standalone/kustomization.yaml ``images`` and
    katib-config.yaml), so the images move with :data:`KATIB_VERSION`.

    Args:
        name: the image's name under ``ghcr.io/kubeflow/katib``.
    """
    return f"ghcr.io/kubeflow/katib/{name}:{KATIB_VERSION}"


KATIB_MYSQL_IMAGE: Final = "docker.io/library/mysql:8.0.29"
"""Katib's database server: the image of the standalone manifests' MySQL (kubeflow/katib v0.19.0
manifests/v1beta1/components/mysql/mysql.yaml, ``mysql:8.0.29``), pinned apart from Katib so a
Katib upgrade never upgrades the database."""

# Default training images of GPU pools (config can pin others): the images of Trainer's own
# runtimes at v2.3.0. What each carries is in components/software.py; Trainium has no default
# (images/training-neuron builds it). Every image the platform chooses is one literal,
# ``repository:tag`` or ``repository:tag@sha256:...``, on one line: the dependency bot
# (``renovate.json``) adds or refreshes the digest in place and keeps the tag for people. The ones
# still by tag wait for its first run (policies/scan-waivers.yaml, CKV_K8S_43, names the rule).
DEFAULT_TORCH_IMAGE: Final = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime@sha256:db80a41f8428644cebcb3d75b0b62df334ab6c0e75785951eb25f48bfbd42407"
DEFAULT_MPI_IMAGE: Final = "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"
"""Trainer's DeepSpeed runtime image, tagged with Trainer's release (``v`` + its chart's)."""
DEFAULT_JAX_IMAGE: Final = "nvcr.io/nvidia/jax:25.10-py3"

# JupyterHub (zero-to-jupyterhub-k8s): the chart's hub image runs JupyterHub 5.5.0 with
# jupyterhub-kubespawner 7.0.0 and oauthenticator 17.4.0 (jupyterhub/zero-to-jupyterhub-k8s 4.4.0
# images/hub/requirements.txt).
JUPYTERHUB_CHART: Final = HelmChart(
    chart="jupyterhub",
    version="4.4.0",
    repository="https://hub.jupyter.org/helm-chart/",
)
JUPYTERHUB_KUBESPAWNER_VERSION: Final = "7.0.0"
"""KubeSpawner in the chart's hub image (not a pin of its own: it moves with the chart); the
release whose source the notebook builders follow (components/notebooks.py)."""
JUPYTERHUB_OAUTHENTICATOR_VERSION: Final = "17.4.0"
"""OAuthenticator in the chart's hub image (moves with the chart, as KubeSpawner does)."""
NOTEBOOK_JUPYTERHUB_VERSION: Final = "5.5.0"
"""JupyterHub in the notebook images (``jupyterhub-singleuser``): the hub's own release, as the
chart's sample user image pins it
(https://github.com/jupyterhub/zero-to-jupyterhub-k8s/blob/4.4.0/images/singleuser-sample/requirements.txt);
a server and its hub must share a major release."""
NOTEBOOK_JUPYTERLAB_VERSION: Final = "4.5.8"
"""JupyterLab in the notebook images, as the chart's sample user image pins it (same file)."""
NOTEBOOK_CUDA_BASE_IMAGE: Final = DEFAULT_TORCH_IMAGE
"""What images/notebook builds the CUDA notebook image on: the PyTorch runtime's image, so a
notebook loads the CUDA, NCCL and PyTorch its team's jobs run (derived, not a pin of its own).
The Neuron notebook image builds on the images/training-neuron build (its Neuron SDK)."""

NEURON_CUSTOM_SCHEDULER_IMAGES: Final[dict[str, str]] = {
    "1.33": "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.33.13-eks-1-33-34",
    "1.34": "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.34.7-eks-1-34-18",
    "1.35": "registry.k8s.io/kube-scheduler:v1.35.0",
}
"""kube-scheduler image the Neuron chart's second scheduler runs, per cluster minor: the chart's
default (1.31) is outside the supported skew of these control planes. The bot moves each within
its minor (patch releases only)."""

DEFAULT_AMI_ALIAS: Final = "al2023@v20260714"
"""EKS-optimized AL2023 release Karpenter nodes boot from; Karpenter picks the NVIDIA or Neuron
variant per instance type. Pinned: ``@latest`` would roll every node on each AMI release. The
newest release whose package list (amazon-eks-ami CHANGELOG.md) could be read; its drivers are
in components/software.py, which accelerator pools' releases must be recorded in."""

_EKS_DEFAULT_REGISTRY: Final = "602401143452"
EKS_IMAGE_REGISTRY_ACCOUNTS: Final[dict[str, str]] = {
    **{
        region: _EKS_DEFAULT_REGISTRY
        for region in (
            "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
            "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
            "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
            "ap-southeast-1", "ap-southeast-2",
        )
    },
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-7": "121268973566",
}  # fmt: skip
"""Account of the EKS image registry (EFA device plugin and other EKS images) per region, from
the EKS user guide's "container image registries for Amazon EKS add-ons". Its keys are the
regions the platform supports: all in the ``aws`` partition, whose ARNs the program builds."""

# Published chart versions carry the tag's "v". Slinky's operator webhook takes its serving
# certificate from cert-manager.
CERT_MANAGER_CHART: Final = HelmChart(
    chart="oci://quay.io/jetstack/charts/cert-manager",
    version="v1.21.1",
    repository=None,
)

# KEDA scales each Slurm node set through its scale subresource (slurm-operator v1.2.1
# docs/usage/autoscaling.md); its CRDs (ScaledObject) come with the chart.
KEDA_CHART: Final = HelmChart(
    chart="keda",
    version="2.20.2",
    repository="https://kedacore.github.io/charts",
)
# The fleet's metrics stack (components/observability): the Prometheus Operator, Prometheus,
# Alertmanager, and the subcharts its Chart.yaml pins at 88.5.3, kube-state-metrics 8.4.0 and
# grafana 12.11.1 (Grafana 13.2.0); KEDA's Slurm triggers query the same Prometheus.
PROMETHEUS_STACK_CHART: Final = HelmChart(
    chart="kube-prometheus-stack",
    version="88.5.3",
    repository="https://prometheus-community.github.io/helm-charts",
)
GRAFANA_IMAGE: Final = "docker.io/grafana/grafana:13.2.0"
"""Grafana in the metrics stack, set in the grafana subchart's values (``image``) instead of
left to the chart: the appVersion of the grafana subchart 12.11.1 that kube-prometheus-stack
88.5.3 pins (grafana-community/helm-charts grafana-12.11.1 charts/grafana/Chart.yaml), in the
chart's registry and repository (charts/grafana/values.yaml line 108, ``image``). Ours, so the
dependency bot pins its digest; a chart bump re-reads the appVersion it moves to."""
GRAFANA_VERSION: Final = GRAFANA_IMAGE.split("@", 1)[0].rsplit(":", 1)[1]
"""The Grafana release of :data:`GRAFANA_IMAGE` (derived, so the two never differ). Grafana's
source is cited at its tag, v13.2.0."""
GRAFANA_SIDECAR_IMAGE: Final = "quay.io/kiwigrid/k8s-sidecar:2.10.1"
"""Grafana's dashboard and datasource sidecars: the k8s-sidecar the grafana chart 12.11.1
runs (grafana-community/helm-charts grafana-12.11.1 charts/grafana/values.yaml line 1041,
``sidecar.image``), set in our values so the dependency bot pins its digest."""
KUBE_STATE_METRICS_IMAGE: Final = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0"
"""kube-state-metrics in the metrics stack: ``v`` + the appVersion of the kube-state-metrics
subchart 8.4.0 that kube-prometheus-stack 88.5.3 pins (prometheus-community/helm-charts
kube-state-metrics-8.4.0 charts/kube-state-metrics/Chart.yaml; values.yaml line 3, ``image``,
and templates/_helpers.tpl ``kube-state-metrics.image``), set in our values so the dependency
bot pins its digest. Its metrics' names are the ones the recording rules read."""
GRAFANA_ORGS_IMAGE: Final = "docker.io/curlimages/curl:8.21.0"
"""The container that creates Grafana's team organisations against Grafana's HTTP API
(components/observability/grafana_orgs.py): the curl image the grafana chart 12.11.1 itself
runs to download dashboards (grafana-community/helm-charts grafana-12.11.1
charts/grafana/values.yaml, ``downloadDashboardsImage``)."""
FIRST_STEP_EXPORTER_IMAGE: Final = "quay.io/prometheus/node-exporter:v1.12.1@sha256:1b4e4438faca4dd7e001dd445d161a4a2091b0fededa84093b3a8dfeae1f1be0"
"""The first-step exporter in training pods (components/first_step.py): node_exporter
v1.12.1, the release kube-prometheus-stack 88.5.3's node-exporter subchart 4.56.1 runs (its
appVersion; charts/prometheus-node-exporter/values.yaml, ``image``), by the digest of its
multi-platform index: the one the project pushes under this tag to quay.io, Docker Hub and
GHCR alike, as independent public deployments pin it (no registry could be read here; the
dependency bot re-resolves the tag and corrects the digest in place if it ever differs).
quay.io, not Docker Hub: every node of a cold gang pulls it at once, and Docker Hub limits
anonymous pulls per address."""

SLURM_OPERATOR_CRDS_CHART: Final = HelmChart(
    chart="oci://ghcr.io/slinkyproject/charts/slurm-operator-crds",
    version="1.2.1",
    repository=None,
)
SLURM_OPERATOR_CHART: Final = HelmChart(
    chart="oci://ghcr.io/slinkyproject/charts/slurm-operator",
    version="1.2.1",
    repository=None,
)
SLURM_CHART: Final = HelmChart(
    chart="oci://ghcr.io/slinkyproject/charts/slurm",
    version="1.2.1",
    repository=None,
)
SLINKY_VERSION: Final = SLURM_OPERATOR_CHART.version
"""Slinky's release: the slurm-operator chart's version (its CRD and slurm charts' equal it)."""

SLINKY_IMAGES: Final[dict[str, str]] = {
    "slurmctld": "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04",
    "slurmrestd": "ghcr.io/slinkyproject/slurmrestd:26.05-ubuntu26.04",
    "slurmdbd": "ghcr.io/slinkyproject/slurmdbd:26.05-ubuntu26.04",
    "login": "ghcr.io/slinkyproject/login:26.05-ubuntu26.04",
}
"""Slinky's Slurm images (the slurm chart 1.2.1's Slurm 26.05 release), by component. One Slurm
release for all of them, and a slurmd image built for the node sets (images/slurmd) starts from
the same release; the bot's Slinky group moves them together."""

SIDECAR_IMAGE: Final = "docker.io/library/alpine:3.22.1@sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1"
"""The slurm chart's log and init sidecars (which default to ``alpine:latest``) and the node
sets' log sidecar: Alpine 3.22.1 by the digest of its multi-platform index, the tag kept for
people (the chart takes an image as a string: slurm-operator v1.2.1 helm/slurm/templates/
_helpers.tpl, ``slurm.format-image``)."""

MARIADB_OPERATOR_CRDS_CHART: Final = HelmChart(
    chart="oci://ghcr.io/mariadb-operator/charts/mariadb-operator-crds",
    version="26.6.0",
    repository=None,
)
MARIADB_OPERATOR_CHART: Final = HelmChart(
    chart="oci://ghcr.io/mariadb-operator/charts/mariadb-operator",
    version="26.6.0",
    repository=None,
)
MARIADB_OPERATOR_VERSION: Final = MARIADB_OPERATOR_CHART.version
"""mariadb-operator's release: its chart's version (the CRD chart's equals it)."""
MARIADB_IMAGE: Final = "docker.io/library/mariadb:11.8.8"
"""The accounting database server: the operator's own default (``config.mariadbImage`` of
mariadb-operator 26.6.0), pinned here so an operator upgrade does not upgrade the database."""
