"""Katib, standalone: hyperparameter search whose trials are TrainJobs in the teams' namespaces.

Katib ships no Helm chart. The stack applies the release's kustomize components at
:data:`~components.versions.KATIB_VERSION` (CRDs, controller, DB manager, UI, webhooks), as the
legacy Training Operator is applied, rewritten on the way in by :func:`katib_object` (Katib's
own namespace, the system nodes, the pinned images). What it owns itself, and so synthesis and
the tests see, is the rest of the standalone install: the namespace, ``katib-config``
(:func:`katib_config`), the webhook certificate's Secret, the MySQL database on a retained,
encrypted volume, and the UI's Service as ``cluster.uiExposure`` says.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml

from components import versions
from components.cluster import (
    SYSTEM_NODE_SELECTOR,
    SYSTEM_TOLERATION,
    encrypted_gp3_class,
    storage_class,
)
from components.config import KatibConfig, UiExposureConfig
from components.tenancy import (
    RUNTIME_DEFAULT_SECCOMP,
    ControllerIngress,
    hardened_container_context,
    pod_security_labels,
)
from components.web_uis import ui_service

NAMESPACE: Final = "katib"
"""Katib's own namespace. The release's manifests say ``kubeflow``, which the legacy Training
Operator's overlay creates too (kubeflow/trainer v1.9.4 manifests/overlays/standalone/
namespace.yaml): two owners of one Namespace would fail the second create, or delete it under
the other when one is switched off."""
UPSTREAM_NAMESPACE: Final = "kubeflow"
COMPONENTS: Final = ("crd", "controller", "db-manager", "ui", "webhook")
"""The release's components the stack applies: the katib-standalone install's, less the
namespace and MySQL, which the stack makes itself (kubeflow/katib v0.19.0
manifests/v1beta1/installs/katib-standalone/kustomization.yaml)."""
CONFIG_MAP: Final = "katib-config"
CONFIG_KEY: Final = "katib-config.yaml"
"""The ConfigMap the controller mounts and reads its settings from at start (kubeflow/katib
v0.19.0 manifests/v1beta1/components/controller/controller.yaml)."""
CONTROLLER: Final = "katib-controller"
"""The controller's Deployment (kubeflow/katib v0.19.0
manifests/v1beta1/components/controller/controller.yaml)."""
POD_WEBHOOK: Final = "mutator.pod.katib.kubeflow.org"
"""Katib's pod webhook: every pod created in a namespace labelled
:data:`METRICS_COLLECTOR_INJECTION` (no objectSelector), served by the controller's single pod
(kubeflow/katib v0.19.0 manifests/v1beta1/components/webhook/webhooks.yaml)."""
POD_WEBHOOK_FAILURE_POLICY: Final = "Ignore"
"""The pod webhook's ``failurePolicy``. The release sets none, so ``Fail`` applies: with the
controller down (a crash, a node drain, a restart for a new katib-config) no pod could be created
in a team namespace that searches, Ray's and every TrainJob's included. ``Ignore`` lets them
through; the cost is a trial's primary pod created in that window, which runs without its
metrics collector and reports nothing."""
INIT_CONFIG_ANNOTATION: Final = "trainingplatform.io/katib-init-config-sha256"
"""The controller's pod-template annotation: :func:`init_config_digest`. The controller reads
katib-config's ``init`` section once, at start (kubeflow/katib v0.19.0
cmd/katib-controller/v1beta1/main.go, GetInitConfigData), and its trial controller watches only
the ``trialResources`` kinds it parsed then; a changed digest rolls the Deployment, so a change
(``trainer.legacyTrainingOperator`` switched on, say) takes effect."""
WEBHOOK_CERT_SECRET: Final = "katib-webhook-cert"
TRAINJOB_TRIAL: Final = "TrainJob.v1alpha1.trainer.kubeflow.org"
LEGACY_TRIALS: Final = (
    "TFJob.v1.kubeflow.org",
    "PyTorchJob.v1.kubeflow.org",
    "MPIJob.v1.kubeflow.org",
    "XGBoostJob.v1.kubeflow.org",
)
"""The legacy Training Operator's kinds the standalone katib-config lists (kubeflow/katib v0.19.0
manifests/v1beta1/installs/katib-standalone/katib-config.yaml); its ``Job.v1.batch`` is left
out: a plain Job is neither queued nor gang-scheduled."""
METRICS_COLLECTOR_INJECTION: Final = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
"""The namespace label Katib's pod webhook selects: only in a namespace with it does a trial's
primary pod get its metrics collector (kubeflow/katib v0.19.0
manifests/v1beta1/components/webhook/webhooks.yaml, ``mutator.pod.katib.kubeflow.org``)."""
COMPONENT_LABEL: Final = "katib.kubeflow.org/component"
SUGGESTION_PORT: Final = 6789
"""The port of a Suggestion's algorithm service (kubeflow/katib v0.19.0
pkg/controller.v1beta1/consts/const.go, DefaultSuggestionPort). Early stopping's 6788 is not
used: ``katib-config`` configures no early stopping."""
SUGGESTION_LABEL: Final = "katib.kubeflow.org/suggestion"
"""The label the controller gives every Suggestion's pod (kubeflow/katib v0.19.0
pkg/controller.v1beta1/util/labels.go, SuggestionLabels; consts/const.go,
LabelSuggestionName)."""
CONTROLLER_POD_LABELS: Final = {COMPONENT_LABEL: "controller"}
"""The controller pod's label (kubeflow/katib v0.19.0
manifests/v1beta1/components/controller/controller.yaml, spec.template.metadata.labels)."""
CONTROLLER_INGRESS: Final = ControllerIngress(
    name="allow-katib-controller",
    pods={"matchExpressions": [{"key": SUGGESTION_LABEL, "operator": "Exists"}]},
    namespace=NAMESPACE,
    controller={"matchLabels": dict(CONTROLLER_POD_LABELS)},
    ports=(SUGGESTION_PORT,),
    why="Katib's controller asks a Suggestion's algorithm service for trials over gRPC, at "
    "<suggestion>.<namespace>:6789 (kubeflow/katib v0.19.0 pkg/controller.v1beta1/util/"
    "suggestion.go, GetAlgorithmEndpoint; suggestion/suggestionclient/suggestionclient.go)",
)
"""The controller's way into team namespaces (:func:`components.tenancy.team_network_policies`)."""
MYSQL: Final = "katib-mysql"
"""The database's Deployment, claim and Service (the DB manager connects to this host)."""
MYSQL_SECRET: Final = "katib-mysql-secrets"
MYSQL_PASSWORD_KEY: Final = "MYSQL_ROOT_PASSWORD"
"""The Secret and key the DB manager reads its password from (kubeflow/katib v0.19.0
manifests/v1beta1/components/db-manager/db-manager.yaml)."""
MYSQL_PORT: Final = 3306
MYSQL_UID: Final = 999
"""The ``mysql`` user of the image, as which the release's Deployment runs it."""
STORAGE_CLASS: Final = "katib-retained"
"""Encrypted gp3 of the database's volume, ``Retain`` in every stack (issue 42: the DB on a
retained, encrypted volume); :data:`DATABASE_RECLAIM_POLICY`."""
DATABASE_RECLAIM_POLICY: Final = "Retain"
"""The database's volume outlives its claim wherever Katib runs, not only where
``protectStatefulResources`` is true: dev and staging, the stacks that run Katib, keep every
trial's observation log across a switch-off or a destroy too; docs/how-to/tear-down.md says how
to delete the volume deliberately."""
UI_PORT: Final = 8080
UI_ACCESS_SERVICE: Final = "katib-ui-access"
"""The UI's Service as ``cluster.uiExposure`` says (the release's own ``katib-ui`` stays
ClusterIP): ``kubectl port-forward -n katib svc/katib-ui-access 8080:80``, or its load balancer."""
UI_SELECTOR: Final = {COMPONENT_LABEL: "ui"}


def trial_resources(legacy_training_operator: bool) -> list[str]:
    """``init.controller.trialResources``: the kinds a trial template may be.

    TrainJob only, plus the legacy Training Operator's kinds where it runs. The controller
    watches each listed kind whose CRD exists and skips the others with a log line (kubeflow/katib
    v0.19.0 pkg/controller.v1beta1/trial/trial_controller.go, ``add``), so a listed kind without
    its operator would be accepted and never run.

    Args:
        legacy_training_operator: ``trainer.legacyTrainingOperator``.
    """
    return [TRAINJOB_TRIAL, *(LEGACY_TRIALS if legacy_training_operator else ())]


TEAM_POD_REQUESTS: Final = {"cpu": "50m", "memory": "32Mi"}
"""What Katib's containers in team namespaces (the metrics collector, suggestions) request. Katib
fills what is unset with its defaults (kubeflow/katib v0.19.0 pkg/apis/config/v1beta1/
defaults.go: 50m CPU, 10Mi memory), and 10Mi is below the team LimitRange's minimum
(:data:`components.teams.CONTAINER_MIN_MEMORY`): every trial's primary pod and every suggestion
pod would be refused. Limits stay Katib's defaults (500m CPU, 100Mi memory)."""
TEAM_CONTAINER_CONTEXT: Final = {
    **hardened_container_context(),
    "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
}
"""A suggestion container's security context: every capability dropped, as the Lustre boundary
policy requires of every container in a team namespace (a suggestion config is a container,
kubeflow/katib v0.19.0 pkg/apis/config/v1beta1/types.go, SuggestionConfig)."""

_SUGGESTIONS: Final = (
    ("random", "suggestion-hyperopt"),
    ("tpe", "suggestion-hyperopt"),
    ("grid", "suggestion-optuna"),
    ("hyperband", "suggestion-hyperband"),
    ("bayesianoptimization", "suggestion-skopt"),
    ("cmaes", "suggestion-goptuna"),
    ("sobol", "suggestion-goptuna"),
    ("multivariate-tpe", "suggestion-optuna"),
)
"""Algorithm -> image of the standalone katib-config's suggestions, less ENAS and DARTS (neural
architecture search, whose trials are plain Jobs) and PBT (its suggestion needs a
ReadWriteMany claim that no class of the stack provides). No early stopping: its container has
no security context to set (EarlyStoppingConfig), so the Lustre boundary policy would refuse
the suggestion Deployment of an experiment that asks for it; without a config, Katib refuses
such an experiment itself."""


def katib_config(legacy_training_operator: bool) -> dict[str, Any]:
    """The KatibConfig the controller reads: the standalone one, trials limited to TrainJob.

    As kubeflow/katib v0.19.0 manifests/v1beta1/installs/katib-standalone/katib-config.yaml,
    with :func:`trial_resources`, every image at :data:`~components.versions.KATIB_VERSION`,
    the sidecar hardened as the primary container (``injectSecurityContext``), suggestions
    hardened and every container of a team namespace requesting :data:`TEAM_POD_REQUESTS`.

    Args:
        legacy_training_operator: ``trainer.legacyTrainingOperator``: also list its kinds.
    """
    file_collector = versions.katib_image("file-metrics-collector")
    requests = {"requests": dict(TEAM_POD_REQUESTS)}
    return {
        "apiVersion": "config.kubeflow.org/v1beta1",
        "kind": "KatibConfig",
        "init": {
            "certGenerator": {"enable": True},
            "controller": {
                "webhookPort": 8443,
                "trialResources": trial_resources(legacy_training_operator),
                # The metrics collector sidecar gets the primary container's security context
                # (kubeflow/katib v0.19.0 pkg/webhook/v1beta1/pod/inject_webhook.go); without
                # it the sidecar keeps every default capability, NET_BIND_SERVICE among them,
                # and the Lustre boundary policy refuses every trial's primary pod.
                "injectSecurityContext": True,
            },
        },
        "runtime": {
            "metricsCollectors": [
                {"kind": "StdOut", "image": file_collector, "resources": requests},
                {"kind": "File", "image": file_collector, "resources": requests},
                {
                    "kind": "TensorFlowEvent",
                    "image": versions.katib_image("tfevent-metrics-collector"),
                    "resources": {**requests, "limits": {"memory": "1Gi"}},
                },
            ],
            "suggestions": [
                {
                    "algorithmName": algorithm,
                    "image": versions.katib_image(image),
                    "resources": requests,
                    "securityContext": dict(TEAM_CONTAINER_CONTEXT),
                }
                for algorithm, image in _SUGGESTIONS
            ],
        },
    }


def init_config_digest(config: Mapping[str, Any]) -> str:
    """SHA-256 of a KatibConfig's ``init`` section: what the controller reads only at start.

    The ``runtime`` section (metrics collectors, suggestions) is left out: the controller and
    its webhook read it from the ConfigMap whenever they need it (kubeflow/katib v0.19.0
    pkg/util/v1beta1/katibconfig/config.go, fromConfigMap), so a change there needs no restart,
    and a restart takes the pod webhook away while the new pod starts.

    Args:
        config: the KatibConfig (:func:`katib_config`).
    """
    canonical = json.dumps(config.get("init") or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by several entries in full each time, without YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def katib_config_map(legacy_training_operator: bool) -> dict[str, Any]:
    """The ``katib-config`` ConfigMap (:func:`katib_config` as YAML under its file name).

    Args:
        legacy_training_operator: ``trainer.legacyTrainingOperator``.
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
        "data": {
            CONFIG_KEY: yaml.dump(
                katib_config(legacy_training_operator), Dumper=_PlainDumper, sort_keys=False
            )
        },
    }


def system_pod(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A pod spec on the system nodes: their selector merged in, their toleration added.

    Args:
        spec: the pod spec (not changed).
    """
    placed = copy.deepcopy(dict(spec))
    placed["nodeSelector"] = {**(placed.get("nodeSelector") or {}), **SYSTEM_NODE_SELECTOR}
    tolerations = [t for t in placed.get("tolerations") or [] if t != SYSTEM_TOLERATION]
    placed["tolerations"] = [*tolerations, dict(SYSTEM_TOLERATION)]
    return placed


_RELEASE_IMAGES: Final = "ghcr.io/kubeflow/katib/"


def _pinned(image: str) -> str:
    """A release image at the pinned tag (the components name them untagged)."""
    if not image.startswith(_RELEASE_IMAGES):
        return image
    name = image.removeprefix(_RELEASE_IMAGES).split("@", 1)[0].split(":", 1)[0]
    return versions.katib_image(name)


def katib_object(
    resource_type: str, props: Mapping[str, Any], *, init_digest: str | None = None
) -> dict[str, Any] | None:
    """A release object as the stack applies it, or None to leave it as it is.

    * objects of the ``kubeflow`` namespace go to :data:`NAMESPACE`, and so do the references
      to it: binding subjects, the webhooks' service, and the pod webhook's match condition
      that spares the controller's own requests;
    * Deployments run on the system nodes, their release images at the pinned tag (the
      components name them untagged; the install's ``images`` would tag them);
    * the controller's pod template carries :data:`INIT_CONFIG_ANNOTATION`;
    * the pod webhook fails open (:data:`POD_WEBHOOK_FAILURE_POLICY`).

    Args:
        resource_type: the Pulumi type of the object (``kubernetes:apps/v1:Deployment``).
        props: its properties as the kustomization renders them.
        init_digest: :func:`init_config_digest` of the stack's katib-config. Default None:
            no annotation (the shapes the tests give).
    """
    changed = copy.deepcopy(dict(props))
    metadata = changed.get("metadata") or {}
    touched = False
    if metadata.get("namespace") == UPSTREAM_NAMESPACE:
        metadata["namespace"] = NAMESPACE
        touched = True
    for subject in changed.get("subjects") or []:
        if subject.get("namespace") == UPSTREAM_NAMESPACE:
            subject["namespace"] = NAMESPACE
            touched = True
    upstream_account = f"system:serviceaccount:{UPSTREAM_NAMESPACE}:"
    for webhook in changed.get("webhooks") or []:
        if webhook.get("name") == POD_WEBHOOK:
            webhook["failurePolicy"] = POD_WEBHOOK_FAILURE_POLICY
            touched = True
        service = (webhook.get("clientConfig") or {}).get("service") or {}
        if service.get("namespace") == UPSTREAM_NAMESPACE:
            service["namespace"] = NAMESPACE
            touched = True
        for condition in webhook.get("matchConditions") or []:
            if upstream_account in condition.get("expression", ""):
                condition["expression"] = condition["expression"].replace(
                    upstream_account, f"system:serviceaccount:{NAMESPACE}:"
                )
                touched = True
    if resource_type == "kubernetes:apps/v1:Deployment":
        template = changed["spec"]["template"]
        template["spec"] = system_pod(template["spec"])
        for container in template["spec"].get("containers") or []:
            container["image"] = _pinned(container["image"])
        if init_digest is not None and metadata.get("name") == CONTROLLER:
            template_metadata = template.setdefault("metadata", {})
            annotations = template_metadata.setdefault("annotations", {})
            annotations[INIT_CONFIG_ANNOTATION] = init_digest
        touched = True
    return changed if touched else None


def katib_transform(
    init_digest: str,
) -> Callable[[pulumi.ResourceTransformArgs], pulumi.ResourceTransformResult | None]:
    """The transform of the release's kustomizations: :func:`katib_object` on each object.

    Args:
        init_digest: :func:`init_config_digest` of the stack's katib-config.
    """

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        props = katib_object(args.type_, dict(args.props), init_digest=init_digest)
        return None if props is None else pulumi.ResourceTransformResult(props, args.opts)

    return transform


def mysql_claim(storage_gib: int) -> dict[str, Any]:
    """The database's claim: encrypted gp3 of :data:`STORAGE_CLASS`.

    Args:
        storage_gib: ``katib.databaseStorageGiB``.
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": MYSQL, "namespace": NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": f"{storage_gib}Gi"}},
        },
    }


def mysql_deployment() -> dict[str, Any]:
    """Katib's MySQL: the release's Deployment, on the system nodes, its image pinned.

    As kubeflow/katib v0.19.0 manifests/v1beta1/components/mysql/mysql.yaml (its probes, its
    data directory, the ``mysql`` user), with :data:`~components.versions.KATIB_MYSQL_IMAGE`,
    requests and a memory limit, and ``Recreate``: the volume is ReadWriteOnce.
    """
    password = {"secretKeyRef": {"name": MYSQL_SECRET, "key": MYSQL_PASSWORD_KEY}}
    probe = "mysqladmin ping -u root -p${MYSQL_ROOT_PASSWORD}"
    labels = {COMPONENT_LABEL: "mysql"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": MYSQL, "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": system_pod(
                    {
                        # MySQL never calls the Kubernetes API.
                        "automountServiceAccountToken": False,
                        "securityContext": {
                            "fsGroup": MYSQL_UID,
                            "fsGroupChangePolicy": "OnRootMismatch",
                            "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
                        },
                        "containers": [
                            {
                                "name": MYSQL,
                                "image": versions.KATIB_MYSQL_IMAGE,
                                "args": ["--datadir", "/var/lib/mysql/datadir"],
                                "env": [
                                    {"name": MYSQL_PASSWORD_KEY, "valueFrom": password},
                                    {"name": "MYSQL_DATABASE", "value": "katib"},
                                ],
                                "ports": [{"name": "dbapi", "containerPort": MYSQL_PORT}],
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "1Gi"},
                                    "limits": {"memory": "1Gi"},
                                },
                                "readinessProbe": {
                                    "exec": {
                                        "command": [
                                            "/bin/bash",
                                            "-c",
                                            "mysql -D ${MYSQL_DATABASE} -u root "
                                            "-p${MYSQL_ROOT_PASSWORD} -e 'SELECT 1'",
                                        ]
                                    },
                                    "initialDelaySeconds": 10,
                                    "periodSeconds": 5,
                                    "failureThreshold": 10,
                                },
                                "livenessProbe": {
                                    "exec": {"command": ["/bin/bash", "-c", probe]},
                                    "initialDelaySeconds": 10,
                                    "periodSeconds": 5,
                                    "failureThreshold": 10,
                                },
                                "startupProbe": {
                                    "exec": {"command": ["/bin/bash", "-c", probe]},
                                    "periodSeconds": 15,
                                    "failureThreshold": 60,
                                },
                                "volumeMounts": [{"name": MYSQL, "mountPath": "/var/lib/mysql"}],
                                "securityContext": {
                                    **hardened_container_context(),
                                    "runAsNonRoot": True,
                                    "runAsUser": MYSQL_UID,
                                    "runAsGroup": MYSQL_UID,
                                    "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
                                },
                            }
                        ],
                        "volumes": [{"name": MYSQL, "persistentVolumeClaim": {"claimName": MYSQL}}],
                    }
                ),
            },
        },
    }


def mysql_service() -> dict[str, Any]:
    """The database's Service, as the release's.

    kubeflow/katib v0.19.0 manifests/v1beta1/components/mysql/service.yaml.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": MYSQL, "namespace": NAMESPACE, "labels": {COMPONENT_LABEL: "mysql"}},
        "spec": {
            "type": "ClusterIP",
            "ports": [{"name": "dbapi", "port": MYSQL_PORT, "protocol": "TCP"}],
            "selector": {COMPONENT_LABEL: "mysql"},
        },
    }


def ui_access_service(exposure: UiExposureConfig) -> dict[str, Any]:
    """The Katib UI's Service as ``cluster.uiExposure`` says (:func:`ui_service`).

    Args:
        exposure: the validated ``cluster.uiExposure``.
    """
    built = ui_service(exposure, selector=dict(UI_SELECTOR), port=80, target_port=UI_PORT)
    metadata: dict[str, Any] = {"name": UI_ACCESS_SERVICE, "namespace": NAMESPACE}
    if built["annotations"]:
        metadata["annotations"] = built["annotations"]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": built["spec"]}


def namespace_labels(kubernetes_version: str) -> dict[str, str]:
    """Katib's namespace: ``restricted`` Pod Security, which every release pod meets.

    Args:
        kubernetes_version: the cluster's minor, to which the levels are pinned.
    """
    return pod_security_labels(
        "restricted", kubernetes_version=kubernetes_version, advise="restricted"
    )


class Katib(pulumi.ComponentResource):
    """Katib's release manifests, its config, database and UI Service."""

    def __init__(
        self,
        name: str,
        *,
        katib: KatibConfig,
        legacy_training_operator: bool,
        ui_exposure: UiExposureConfig,
        kubernetes_version: str,
        protect: bool,
        volume_tags: Mapping[str, str],
        trainer: pulumi.Resource,
        cluster_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Install Katib after Trainer.

        Args:
            name: prefix of child resource names.
            katib: the validated ``katib`` section (enabled).
            legacy_training_operator: list the legacy kinds as trial resources.
            ui_exposure: ``cluster.uiExposure``, for the UI's Service.
            kubernetes_version: the cluster's minor (Pod Security levels).
            protect: protect and retain the database's namespace, claim, password and CRDs
                (``protectStatefulResources``). Its volume is retained in every stack
                (:data:`DATABASE_RECLAIM_POLICY`); the objects are not where unprotected, as
                policy ``retained-resources-protected`` requires (a retained object left
                unprotected would outlive a destroy unmanaged).
            volume_tags: tags of the database's EBS volume.
            trainer: Trainer (and the legacy operator): the controller watches only the
                trial kinds whose CRDs exist when it starts.
            cluster_ready: what every object waits for (the cluster, its system nodes).
            kubernetes_provider: the provider of every object.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:Katib", name, None, opts)
        in_cluster = pulumi.ResourceOptions(
            parent=self, provider=kubernetes_provider, depends_on=cluster_ready
        )
        stateful = pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(protect=protect, retain_on_delete=protect)
        )
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": NAMESPACE, "labels": namespace_labels(kubernetes_version)},
            opts=stateful,
        )
        after_namespace = pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(depends_on=[namespace])
        )
        config_map = katib_config_map(legacy_training_operator)
        settings = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata=config_map["metadata"],
            data=config_map["data"],
            opts=after_namespace,
        )
        # Empty: the controller's certificate generator writes it (init.certGenerator).
        certificate = k8s.core.v1.Secret(
            f"{name}-webhook-cert",
            metadata={"name": WEBHOOK_CERT_SECRET, "namespace": NAMESPACE},
            type="Opaque",
            opts=after_namespace,
        )
        password = random.RandomPassword(
            f"{name}-mysql-password",
            length=32,
            special=False,
            opts=pulumi.ResourceOptions(parent=self, protect=protect),
        )
        secret = k8s.core.v1.Secret(
            f"{name}-mysql-secret",
            metadata={"name": MYSQL_SECRET, "namespace": NAMESPACE},
            type="Opaque",
            string_data={MYSQL_PASSWORD_KEY: password.result},
            opts=pulumi.ResourceOptions.merge(
                stateful, pulumi.ResourceOptions(depends_on=[namespace])
            ),
        )
        volume_class = storage_class(
            f"{name}-{STORAGE_CLASS}",
            encrypted_gp3_class(
                STORAGE_CLASS,
                reclaim_policy=DATABASE_RECLAIM_POLICY,
                default=False,
                tags=volume_tags,
            ),
            in_cluster,
        )
        claim = mysql_claim(katib.database_storage_gib)
        volume = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-mysql",
            metadata=claim["metadata"],
            spec=claim["spec"],
            opts=pulumi.ResourceOptions.merge(
                stateful,
                # Bound only once the database's pod lands (WaitForFirstConsumer).
                pulumi.ResourceOptions(depends_on=[namespace, volume_class]),
            ),
        )
        deployment = mysql_deployment()
        database = k8s.apps.v1.Deployment(
            f"{name}-mysql",
            metadata=deployment["metadata"],
            spec=deployment["spec"],
            opts=pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(depends_on=[volume, secret])
            ),
        )
        service = mysql_service()
        database_service = k8s.core.v1.Service(
            f"{name}-mysql",
            metadata=service["metadata"],
            spec=service["spec"],
            opts=after_namespace,
        )
        ui = ui_access_service(ui_exposure)
        k8s.core.v1.Service(
            f"{name}-ui-access",
            metadata=ui["metadata"],
            spec=ui["spec"],
            opts=after_namespace,
        )
        transform = katib_transform(init_config_digest(katib_config(legacy_training_operator)))
        release: list[pulumi.Resource] = []
        for component in COMPONENTS:
            # The CRDs hold every Experiment, Trial and Suggestion.
            options = stateful if component == "crd" else in_cluster
            release.append(
                k8s.kustomize.v2.Directory(
                    f"{name}-{component}",
                    directory=versions.katib_kustomization(component),
                    opts=pulumi.ResourceOptions.merge(
                        options,
                        pulumi.ResourceOptions(
                            depends_on=[
                                namespace, trainer, settings, certificate, database,
                                database_service, *release,
                            ],
                            transforms=[transform],
                        ),
                    ),
                )
            )  # fmt: skip
        self.register_outputs({})
