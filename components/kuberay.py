"""KubeRay: its operator on the system nodes, Volcano as its batch scheduler.

With ``batchScheduler.name: volcano`` the chart starts the operator with
``--batch-scheduler=volcano`` (ray-project/kuberay v1.7.0
helm-chart/kuberay-operator/templates/deployment.yaml) and grants it PodGroups
(templates/_helpers.tpl). The operator then builds one Volcano PodGroup ``ray-<name>-pg`` per
RayCluster or RayJob, in the queue of the object's ``volcano.sh/queue-name`` label, and gives its
pods ``schedulerName: volcano`` (ray-operator/controllers/ray/batchscheduler/volcano/
volcano_scheduler.go); the tenant admission holds that label to the team's queue
(:func:`components.tenancy.queue_ownership_policy`). ``batchScheduler.enabled`` stays false: it is
the deprecated flag, and the operator refuses to start with both (ray-operator/apis/config/
v1alpha1/config_utils.go, ValidateBatchSchedulerConfig).

The CRDs are the stack's own resources, applied from the chart's ``crds/`` at its tag, as JobSet's
are (:data:`components.versions.KUBERAY_CRDS_URLS`): Helm installs a chart's ``crds/`` once and
never upgrades it, so with the chart's copy a version bump would run a new operator on old CRDs.
The RayCluster CRD is too large for client-side apply's last-applied annotation; the Kubernetes
provider applies server-side.
"""

from __future__ import annotations

from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.helm import release, with_system_placement
from components.scheduling import RAY_QUEUE_LABEL, SCHEDULER_NAME

NAMESPACE: Final = "kuberay-system"
RELEASE: Final = "kuberay-operator"
RAY_API: Final = "ray.io/v1"
QUEUE_LABEL: Final = RAY_QUEUE_LABEL


def operator_values() -> dict[str, Any]:
    """Values of the kuberay-operator chart: Volcano as batch scheduler, on the system nodes.

    Only ``batchScheduler.name`` is set (see the module's docstring for why not ``enabled``).
    The chart's defaults leave the operator without node selector or tolerations
    (helm-chart/kuberay-operator/values.yaml at v1.7.0), so it would wait for a Karpenter node
    while the atomic install times out.
    """
    return with_system_placement(
        versions.KUBERAY_OPERATOR_CHART,
        {"batchScheduler": {"enabled": False, "name": SCHEDULER_NAME}},
    )


class KubeRay(pulumi.ComponentResource):
    """The KubeRay operator and its CRDs."""

    def __init__(
        self,
        name: str,
        *,
        protect: bool,
        volcano_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Apply the CRDs, then install the operator after Volcano.

        Args:
            name: prefix of child resource names.
            protect: protect the CRDs and the release, and retain them on delete: the CRDs carry
                every RayCluster and RayJob. Unprotected (dev), switching Ray off uninstalls them.
            volcano_ready: Volcano must run first: the operator registers its PodGroup watch at
                start-up (volcano_scheduler.go, ConfigureReconciler).
            kubernetes_provider: provider of the CRDs and the release.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:KubeRay", name, None, opts)
        stateful = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, protect=protect, retain_on_delete=protect
        )
        self.crds = [
            k8s.yaml.v2.ConfigFile(
                f"{name}-crds-{kind}",
                file=url,
                opts=pulumi.ResourceOptions.merge(
                    stateful, pulumi.ResourceOptions(depends_on=volcano_ready)
                ),
            )
            for kind, url in zip(
                versions.KUBERAY_CRD_KINDS, versions.KUBERAY_CRDS_URLS, strict=True
            )
        ]
        self.operator = release(
            RELEASE,
            versions.KUBERAY_OPERATOR_CHART,
            namespace=NAMESPACE,
            values=operator_values(),
            create_namespace=True,
            skip_crds=True,
            opts=pulumi.ResourceOptions.merge(
                stateful, pulumi.ResourceOptions(depends_on=[*volcano_ready, *self.crds])
            ),
        )
        self.register_outputs({})
