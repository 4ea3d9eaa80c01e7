"""Which metrics exist: per exporter the platform scrapes, the names it exports at our pins.

Every rule expression and dashboard query may name only these (tests walk them with
tests/promql.py). Each list was compiled by reading the exporter's source
at the release the platform installs, and cites the files it comes from as "project tag path";
re-read them when the pin moves. A name here is what a query selects: a histogram ``x`` is
queried as ``x_bucket``, ``x_sum`` and ``x_count``, a summary as ``x``, ``x_sum`` and
``x_count``, and a counter whose name lacks ``_total`` may also appear as ``x_total`` when the
target answers in OpenMetrics (:meth:`Metric.series`).

Stdlib only, like names.py: the lists are data, and the DCGM exporter's counters file is
rendered from :data:`DCGM_COUNTERS` here so the sources lane and the tests read one list.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

from components import metric_names as names

MetricType = Literal["counter", "gauge", "histogram", "summary", "info"]
"""How the exporter declares a metric (``# TYPE``); ``info`` is a gauge of value 1 whose labels
carry the information (client_python's ``Info``, exposed as ``<name>_info``)."""

METRIC_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A legacy Prometheus metric name: what every exporter here writes."""


@dataclass(frozen=True)
class Metric:
    """One metric family an exporter writes."""

    name: str
    """The family's name as the exporter declares it (``# TYPE <name> ...``)."""
    type: MetricType
    """The family's type, which decides the series names a query may select."""

    def __post_init__(self) -> None:
        if not METRIC_NAME.fullmatch(self.name):
            raise ValueError(f"metric name {self.name!r} is not a Prometheus metric name")
        if self.type not in get_args(MetricType):
            raise ValueError(
                f"metric {self.name!r}: type {self.type!r} is not one of {get_args(MetricType)}"
            )

    def series(self, openmetrics: bool = True) -> frozenset[str]:
        """The names a query can select for this family.

        A classic histogram is stored as ``<name>_bucket``, ``<name>_sum`` and
        ``<name>_count``; a summary as ``<name>`` (its quantiles), ``<name>_sum`` and
        ``<name>_count``. A counter is stored under its name, and a counter whose name does
        not end in ``_total`` also as ``<name>_total`` when the target negotiates OpenMetrics
        (client_golang and client_python append the suffix there), so both are accepted.

        Args:
            openmetrics: whether the exporter may answer in OpenMetrics (default True); one
                that writes its own text format never renames a counter.
        """
        if self.type == "histogram":
            return frozenset(f"{self.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        if self.type == "summary":
            return frozenset({self.name, f"{self.name}_sum", f"{self.name}_count"})
        if openmetrics and self.type == "counter" and not self.name.endswith("_total"):
            return frozenset({self.name, f"{self.name}_total"})
        return frozenset({self.name})


def _typed(type_: MetricType, listed: str) -> tuple[Metric, ...]:
    """Metrics of one type from a whitespace-separated list (how the catalogue is written)."""
    return tuple(Metric(name, type_) for name in listed.split())


@dataclass(frozen=True)
class Exporter:
    """What one exporter at our pin writes, and where that was read."""

    name: str
    """The exporter (or program) as the docs call it."""
    release: str
    """The release whose source the list was compiled from."""
    sources: tuple[str, ...]
    """The upstream files read, each as "project tag path"."""
    metrics: tuple[Metric, ...]
    """Every metric family the list admits."""
    labels: tuple[str, ...] = ()
    """Labels the exporter adds to its series, where dashboards group by them."""
    note: str = ""
    """What the list leaves out, or where it could not be verified at the pin."""
    openmetrics: bool = True
    """Whether the exporter may answer in OpenMetrics, which suffixes counters ``_total``."""

    def names(self) -> frozenset[str]:
        """Every series name a query may select from this exporter (:meth:`Metric.series`)."""
        return frozenset().union(*(metric.series(self.openmetrics) for metric in self.metrics))


# --- DCGM ----------------------------------------------------------------------------------

DCGM_EXPORTER_RELEASE: Final = "4.5.3-4.8.2"
"""dcgm-exporter's release in the dcgm-exporter chart 4.8.2 (values.yaml ``image.tag``
``4.5.3-4.8.2-distroless``): DCGM 4.5.3 and exporter 4.8.2 (NVIDIA/dcgm-exporter
4.5.3-4.8.2 hack/VERSION, ``NEW_DCGM_VERSION=4.5.3``)."""

DCGM_PROMETHEUS_TYPES: Final = ("gauge", "counter", "histogram", "summary", "label")
"""The types dcgm-exporter's counters file accepts (NVIDIA/dcgm-exporter 4.5.3-4.8.2
internal/pkg/counters/variables.go ``promMetricType``); ``label`` turns a field into a label
of the other metrics instead of a metric."""


@dataclass(frozen=True)
class DcgmCounter:
    """One line of dcgm-exporter's counters file: a DCGM field and how to export it."""

    field: str
    """The DCGM field identifier (``DCGM_FI_...``), which is also the metric's name."""
    type: str
    """Prometheus type, one of :data:`DCGM_PROMETHEUS_TYPES`."""
    help: str
    """The metric's ``# HELP`` text."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"DCGM_FI_[A-Z0-9_]+", self.field):
            raise ValueError(f"DCGM counter {self.field!r}: not a DCGM field identifier")
        if self.type not in DCGM_PROMETHEUS_TYPES:
            raise ValueError(
                f"DCGM counter {self.field}: type {self.type!r} is not one of "
                f"{DCGM_PROMETHEUS_TYPES}"
            )
        # The file is read by Go's encoding/csv without quoting or TrimLeadingSpace
        # (internal/pkg/counters/counter_config.go ReadCSVFile): a comma or quote in the help
        # would split or break the record.
        if (
            not self.help
            or any(char in self.help for char in ',"\n\r')
            or self.help != self.help.strip()
        ):
            raise ValueError(
                f"DCGM counter {self.field}: help {self.help!r} must be one line of text "
                "without commas, quotes or surrounding spaces"
            )


DCGM_COUNTERS: Final[tuple[DcgmCounter, ...]] = (
    # Utilisation: the coarse per-GPU figure, then the profiling (DCP) ratios, which tell a
    # busy tensor pipe from a GPU merely holding a context.
    DcgmCounter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    DcgmCounter(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."
    ),
    DcgmCounter(
        "DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio of cycles an SM has at least 1 warp assigned."
    ),
    DcgmCounter(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles any tensor pipe is active."
    ),
    DcgmCounter(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    # Memory.
    DcgmCounter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    DcgmCounter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    # Power and temperature.
    DcgmCounter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    DcgmCounter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    DcgmCounter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    # Errors: the last XID, volatile ECC (since the driver loaded), row remapping.
    DcgmCounter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    DcgmCounter(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
    ),
    DcgmCounter(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
    ),
    DcgmCounter(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors.",
    ),
    DcgmCounter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    # Interconnects (DCP): bytes per second over NVLink and PCIe, headers included; gauges,
    # as the exporter's own counters files declare the PCIe pair.
    DcgmCounter(
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "Rate of data transmitted over NVLink (headers and payload) in bytes per second.",
    ),
    DcgmCounter(
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "Rate of data received over NVLink (headers and payload) in bytes per second.",
    ),
    DcgmCounter(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "Rate of data transmitted over the PCIe bus (headers and payload) in bytes per second.",
    ),
    DcgmCounter(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "Rate of data received over the PCIe bus (headers and payload) in bytes per second.",
    ),
    # A label on every metric rather than a metric: which driver the node runs.
    DcgmCounter("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)
"""The DCGM fields the platform asks dcgm-exporter for (rendered into its counters file by
:func:`dcgm_counters_csv`). Every field is in DCGM's field table at 4.5.3 (NVIDIA/DCGM v4.5.3
dcgmlib/dcgm_fields.h; the test holds the table); the types and help follow the exporter's
own files where they list the field (NVIDIA/dcgm-exporter 4.5.3-4.8.2
etc/default-counters.csv, etc/dcp-metrics-included.csv). The ``DCGM_FI_PROF_*`` fields need
profiling support (datacenter GPUs since Volta); the exporter skips them elsewhere."""

DCGM_LABELS: Final = (
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "Hostname",
    "DCGM_FI_DRIVER_VERSION",
    "pod",
    "namespace",
    "container",
)
"""Labels of every GPU metric: the GPU's index, UUID, bus id, device and model and the node's
name (NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/rendermetrics/render_metrics.go, the GPU
template), each ``label`` field of the counters file, and, with the Kubernetes mapping on
(the chart always sets ``DCGM_EXPORTER_KUBERNETES=true``: NVIDIA/dcgm-exporter 4.5.3-4.8.2
deployment/templates/daemonset.yaml), the pod that holds the GPU
(internal/pkg/transformation/const.go and kubernetes.go: ``pod``, ``namespace``,
``container``)."""


def dcgm_counters_csv(counters: tuple[DcgmCounter, ...] = DCGM_COUNTERS) -> str:
    """Render dcgm-exporter's counters file (``-f``, or the ConfigMap its ``-m`` names).

    The format: one ``field, type, help`` record a line, ``#`` starting a comment; the
    exporter reads it with Go's encoding/csv (``Comment = '#'``), trims the spaces around
    each field and wants exactly three (NVIDIA/dcgm-exporter 4.5.3-4.8.2
    internal/pkg/counters/counter_config.go ``ReadCSVFile``, ``ExtractCounters``).

    Args:
        counters: the fields to export (default :data:`DCGM_COUNTERS`).
    """
    lines = [
        "# Format: DCGM field, Prometheus metric type, help message",
        "# Rendered by components/observability/metric_catalog.py (DCGM_COUNTERS).",
    ]
    lines += [f"{counter.field}, {counter.type}, {counter.help}" for counter in counters]
    return "\n".join(lines) + "\n"


def read_dcgm_counters_csv(text: str) -> tuple[DcgmCounter, ...]:
    """Read a counters file as dcgm-exporter does, refusing what it would refuse.

    Mirrors NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/counters/counter_config.go: Go's
    csv reader with ``#`` comments and no other options, every record trimmed of spaces and
    of exactly three fields, the type one the exporter knows.

    Args:
        text: the file's content.

    Raises:
        ValueError: naming the line that the exporter would refuse.
    """
    counters = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            (record,) = csv.reader(io.StringIO(line), strict=True)
        except csv.Error as error:
            raise ValueError(f"DCGM counters line {number} ({line!r}): {error}") from error
        fields = [field.strip(" ") for field in record]
        if len(fields) != 3:
            raise ValueError(
                f"DCGM counters line {number} ({line!r}): expected 3 fields, got {len(fields)}"
            )
        counters.append(DcgmCounter(*fields))
    return tuple(counters)


_DCGM_METRIC_TYPES: Final[dict[str, MetricType]] = {
    "gauge": "gauge",
    "counter": "counter",
    "histogram": "histogram",
    "summary": "summary",
}
"""A counters-file type as a metric's (``label`` makes no metric)."""

DCGM_EXPORTER: Final = Exporter(
    name="dcgm-exporter",
    release=DCGM_EXPORTER_RELEASE,
    sources=(
        "NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/rendermetrics/render_metrics.go",
        "NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/counters/counter_config.go",
        "NVIDIA/DCGM v4.5.3 dcgmlib/dcgm_fields.h",
    ),
    metrics=tuple(
        Metric(counter.field, _DCGM_METRIC_TYPES[counter.type])
        for counter in DCGM_COUNTERS
        if counter.type != "label"
    ),
    labels=DCGM_LABELS,
    note="Exactly the fields of DCGM_COUNTERS: the exporter writes each field under its own "
    "name and nothing the counters file does not list (the DCGM_EXP_* fields included).",
    # It renders its own text format from a template (render_metrics.go), never OpenMetrics.
    openmetrics=False,
)
"""dcgm-exporter with the platform's counters file."""

# --- kube-state-metrics ----------------------------------------------------------------------

KUBE_STATE_METRICS: Final = Exporter(
    name="kube-state-metrics",
    release="v2.20.0",
    sources=(
        "prometheus-community/helm-charts kube-prometheus-stack-88.5.3 "
        "charts/kube-prometheus-stack/Chart.yaml (kube-state-metrics chart 8.4.0)",
        "prometheus-community/helm-charts kube-state-metrics-8.4.0 "
        "charts/kube-state-metrics/Chart.yaml (appVersion 2.20.0)",
        "kubernetes/kube-state-metrics v2.20.0 docs/metrics/**/*-metrics.md (every table)",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            kube_pod_container_status_restarts_total
            kube_pod_init_container_status_restarts_total
            """,
        ),
        *_typed(
            "gauge",
            """
            kube_certificatesigningrequest_annotations
            kube_certificatesigningrequest_cert_length kube_certificatesigningrequest_condition
            kube_certificatesigningrequest_created kube_certificatesigningrequest_labels
            kube_clusterrole_annotations kube_clusterrole_created kube_clusterrole_info
            kube_clusterrole_labels kube_clusterrole_metadata_resource_version
            kube_clusterrolebinding_annotations kube_clusterrolebinding_created
            kube_clusterrolebinding_info kube_clusterrolebinding_labels
            kube_clusterrolebinding_metadata_resource_version kube_configmap_annotations
            kube_configmap_created kube_configmap_info kube_configmap_labels
            kube_configmap_metadata_resource_version kube_cronjob_annotations
            kube_cronjob_created kube_cronjob_info kube_cronjob_labels
            kube_cronjob_metadata_resource_version kube_cronjob_next_schedule_time
            kube_cronjob_schedule_invalid kube_cronjob_spec_failed_job_history_limit
            kube_cronjob_spec_starting_deadline_seconds
            kube_cronjob_spec_successful_job_history_limit kube_cronjob_spec_suspend
            kube_cronjob_status_active kube_cronjob_status_last_schedule_time
            kube_cronjob_status_last_successful_time kube_daemonset_annotations
            kube_daemonset_created kube_daemonset_deletion_timestamp kube_daemonset_labels
            kube_daemonset_metadata_generation kube_daemonset_status_current_number_scheduled
            kube_daemonset_status_desired_number_scheduled
            kube_daemonset_status_number_available kube_daemonset_status_number_misscheduled
            kube_daemonset_status_number_ready kube_daemonset_status_number_unavailable
            kube_daemonset_status_observed_generation
            kube_daemonset_status_updated_number_scheduled kube_deployment_annotations
            kube_deployment_created kube_deployment_deletion_timestamp kube_deployment_labels
            kube_deployment_metadata_generation kube_deployment_owner
            kube_deployment_spec_paused kube_deployment_spec_replicas
            kube_deployment_spec_strategy_rollingupdate_max_surge
            kube_deployment_spec_strategy_rollingupdate_max_unavailable
            kube_deployment_status_condition kube_deployment_status_observed_generation
            kube_deployment_status_replicas kube_deployment_status_replicas_available
            kube_deployment_status_replicas_ready kube_deployment_status_replicas_unavailable
            kube_deployment_status_replicas_updated kube_deployment_status_terminating_replicas
            kube_endpoint_address kube_endpoint_annotations kube_endpoint_created
            kube_endpoint_info kube_endpoint_labels kube_endpoint_ports
            kube_endpointslice_annotations kube_endpointslice_created
            kube_endpointslice_endpoints kube_endpointslice_endpoints_hints
            kube_endpointslice_info kube_endpointslice_labels kube_endpointslice_ports
            kube_horizontalpodautoscaler_annotations kube_horizontalpodautoscaler_created
            kube_horizontalpodautoscaler_deletion_timestamp kube_horizontalpodautoscaler_info
            kube_horizontalpodautoscaler_labels kube_horizontalpodautoscaler_metadata_generation
            kube_horizontalpodautoscaler_spec_behavior_scale_down_tolerance
            kube_horizontalpodautoscaler_spec_behavior_scale_up_tolerance
            kube_horizontalpodautoscaler_spec_max_replicas
            kube_horizontalpodautoscaler_spec_min_replicas
            kube_horizontalpodautoscaler_spec_target_metric
            kube_horizontalpodautoscaler_status_condition
            kube_horizontalpodautoscaler_status_current_replicas
            kube_horizontalpodautoscaler_status_desired_replicas
            kube_horizontalpodautoscaler_status_target_metric kube_ingress_annotations
            kube_ingress_created kube_ingress_info kube_ingress_labels
            kube_ingress_metadata_resource_version kube_ingress_path kube_ingress_tls
            kube_ingressclass_annotations kube_ingressclass_created kube_ingressclass_info
            kube_ingressclass_labels kube_job_annotations kube_job_complete kube_job_created
            kube_job_failed kube_job_info kube_job_labels kube_job_owner
            kube_job_spec_active_deadline_seconds kube_job_spec_completions
            kube_job_spec_parallelism kube_job_status_active kube_job_status_completion_time
            kube_job_status_failed kube_job_status_ready kube_job_status_start_time
            kube_job_status_succeeded kube_job_status_suspended kube_lease_owner
            kube_lease_renew_time kube_limitrange kube_limitrange_created
            kube_mutatingadmissionpolicy_created kube_mutatingadmissionpolicy_info
            kube_mutatingadmissionpolicybinding_created kube_mutatingadmissionpolicybinding_info
            kube_mutatingwebhookconfiguration_created kube_mutatingwebhookconfiguration_info
            kube_mutatingwebhookconfiguration_metadata_resource_version
            kube_mutatingwebhookconfiguration_webhook_clientconfig_service
            kube_namespace_annotations kube_namespace_created kube_namespace_labels
            kube_namespace_status_condition kube_namespace_status_phase
            kube_networkpolicy_annotations kube_networkpolicy_created kube_networkpolicy_labels
            kube_networkpolicy_spec_egress_rules kube_networkpolicy_spec_ingress_rules
            kube_node_annotations kube_node_created kube_node_deletion_timestamp kube_node_info
            kube_node_labels kube_node_role kube_node_spec_pod_cidrs kube_node_spec_taint
            kube_node_spec_unschedulable kube_node_status_addresses kube_node_status_allocatable
            kube_node_status_capacity kube_node_status_condition
            kube_persistentvolume_access_mode kube_persistentvolume_annotations
            kube_persistentvolume_capacity_bytes kube_persistentvolume_claim_ref
            kube_persistentvolume_created kube_persistentvolume_csi_attributes
            kube_persistentvolume_deletion_timestamp kube_persistentvolume_info
            kube_persistentvolume_labels kube_persistentvolume_status_phase
            kube_persistentvolume_volume_mode kube_persistentvolumeclaim_access_mode
            kube_persistentvolumeclaim_annotations kube_persistentvolumeclaim_created
            kube_persistentvolumeclaim_deletion_timestamp kube_persistentvolumeclaim_info
            kube_persistentvolumeclaim_labels
            kube_persistentvolumeclaim_resource_requests_storage_bytes
            kube_persistentvolumeclaim_status_condition kube_persistentvolumeclaim_status_phase
            kube_pod_annotations kube_pod_completion_time kube_pod_container_info
            kube_pod_container_resource_limits kube_pod_container_resource_requests
            kube_pod_container_state_started kube_pod_container_status_last_terminated_exitcode
            kube_pod_container_status_last_terminated_reason
            kube_pod_container_status_last_terminated_timestamp kube_pod_container_status_ready
            kube_pod_container_status_running kube_pod_container_status_terminated
            kube_pod_container_status_terminated_reason kube_pod_container_status_waiting
            kube_pod_container_status_waiting_reason kube_pod_created
            kube_pod_deletion_timestamp kube_pod_info kube_pod_init_container_info
            kube_pod_init_container_resource_limits kube_pod_init_container_resource_requests
            kube_pod_init_container_state_started
            kube_pod_init_container_status_last_terminated_exitcode
            kube_pod_init_container_status_last_terminated_reason
            kube_pod_init_container_status_last_terminated_timestamp
            kube_pod_init_container_status_ready kube_pod_init_container_status_running
            kube_pod_init_container_status_terminated
            kube_pod_init_container_status_terminated_reason
            kube_pod_init_container_status_waiting kube_pod_init_container_status_waiting_reason
            kube_pod_ips kube_pod_labels kube_pod_nodeselectors kube_pod_overhead_cpu_cores
            kube_pod_overhead_memory_bytes kube_pod_owner kube_pod_resourceclaim_info
            kube_pod_restart_policy kube_pod_runtimeclass_name_info kube_pod_scheduler
            kube_pod_service_account kube_pod_spec_volumes_persistentvolumeclaims_info
            kube_pod_spec_volumes_persistentvolumeclaims_readonly kube_pod_start_time
            kube_pod_status_container_ready_time kube_pod_status_disruption_reason
            kube_pod_status_initialized_time kube_pod_status_phase kube_pod_status_qos_class
            kube_pod_status_ready kube_pod_status_ready_time kube_pod_status_reason
            kube_pod_status_scheduled kube_pod_status_scheduled_time
            kube_pod_status_unschedulable kube_pod_status_unscheduled_time kube_pod_tolerations
            kube_poddisruptionbudget_annotations kube_poddisruptionbudget_created
            kube_poddisruptionbudget_deletion_timestamp kube_poddisruptionbudget_labels
            kube_poddisruptionbudget_status_current_healthy
            kube_poddisruptionbudget_status_desired_healthy
            kube_poddisruptionbudget_status_expected_pods
            kube_poddisruptionbudget_status_observed_generation
            kube_poddisruptionbudget_status_pod_disruptions_allowed kube_replicaset_annotations
            kube_replicaset_created kube_replicaset_labels kube_replicaset_metadata_generation
            kube_replicaset_owner kube_replicaset_spec_replicas
            kube_replicaset_status_fully_labeled_replicas
            kube_replicaset_status_observed_generation kube_replicaset_status_ready_replicas
            kube_replicaset_status_replicas kube_replicaset_status_terminating_replicas
            kube_replicationcontroller_created kube_replicationcontroller_metadata_generation
            kube_replicationcontroller_owner kube_replicationcontroller_spec_replicas
            kube_replicationcontroller_status_available_replicas
            kube_replicationcontroller_status_fully_labeled_replicas
            kube_replicationcontroller_status_observed_generation
            kube_replicationcontroller_status_ready_replicas
            kube_replicationcontroller_status_replicas kube_resourcequota
            kube_resourcequota_annotations kube_resourcequota_created kube_resourcequota_labels
            kube_role_annotations kube_role_created kube_role_info kube_role_labels
            kube_role_metadata_resource_version kube_rolebinding_annotations
            kube_rolebinding_created kube_rolebinding_info kube_rolebinding_labels
            kube_rolebinding_metadata_resource_version kube_secret_annotations
            kube_secret_created kube_secret_info kube_secret_labels
            kube_secret_metadata_resource_version kube_secret_owner kube_secret_type
            kube_service_annotations kube_service_created kube_service_deletion_timestamp
            kube_service_info kube_service_labels kube_service_spec_external_ip
            kube_service_spec_type kube_service_status_load_balancer_ingress
            kube_serviceaccount_annotations kube_serviceaccount_created
            kube_serviceaccount_deleted kube_serviceaccount_image_pull_secret
            kube_serviceaccount_info kube_serviceaccount_labels kube_serviceaccount_secret
            kube_statefulset_annotations kube_statefulset_created
            kube_statefulset_deletion_timestamp kube_statefulset_labels
            kube_statefulset_metadata_generation kube_statefulset_ordinals_start
            kube_statefulset_persistentvolumeclaim_retention_policy kube_statefulset_replicas
            kube_statefulset_status_current_revision kube_statefulset_status_observed_generation
            kube_statefulset_status_replicas kube_statefulset_status_replicas_available
            kube_statefulset_status_replicas_current kube_statefulset_status_replicas_ready
            kube_statefulset_status_replicas_updated kube_statefulset_status_update_revision
            kube_storageclass_annotations kube_storageclass_created kube_storageclass_info
            kube_storageclass_labels kube_validatingadmissionpolicy_created
            kube_validatingadmissionpolicy_info kube_validatingadmissionpolicybinding_created
            kube_validatingadmissionpolicybinding_info
            kube_validatingadmissionpolicybinding_validation_action
            kube_validatingwebhookconfiguration_created kube_validatingwebhookconfiguration_info
            kube_validatingwebhookconfiguration_metadata_resource_version
            kube_validatingwebhookconfiguration_webhook_clientconfig_service
            kube_volumeattachment_created kube_volumeattachment_info
            kube_volumeattachment_labels kube_volumeattachment_spec_source_persistentvolume
            kube_volumeattachment_status_attached
            kube_volumeattachment_status_attachment_metadata
            """,
        ),
    ),
    labels=("namespace", "pod", "node", "container", "uid"),
    note="Every metric the resource pages document, opt-in ones included (an opt-in metric "
    "exists only where the stack turns it on). Custom resource state metrics are the "
    "platform's own (platform_metrics).",
)
"""kube-state-metrics, the version kube-prometheus-stack 88.5.3 installs."""

# --- node_exporter ---------------------------------------------------------------------------

NODE_EXPORTER: Final = Exporter(
    name="node_exporter",
    release="v1.12.1",
    sources=(
        "prometheus-community/helm-charts prometheus-node-exporter-4.56.1 "
        "charts/prometheus-node-exporter/Chart.yaml (appVersion 1.12.1)",
        "prometheus/node_exporter v1.12.1 collector/cpu_linux.go, cpu_common.go",
        "prometheus/node_exporter v1.12.1 collector/meminfo.go, meminfo_linux.go",
        "prometheus/node_exporter v1.12.1 collector/filesystem_common.go",
        "prometheus/node_exporter v1.12.1 collector/netdev_common.go, netdev_linux.go",
        "prometheus/node_exporter v1.12.1 collector/pressure_linux.go",
        "prometheus/node_exporter v1.12.1 collector/loadavg.go, uname.go, stat_linux.go, time.go",
        "prometheus/node_exporter v1.12.1 collector/diskstats_common.go, diskstats_linux.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            node_context_switches_total node_cpu_guest_seconds_total node_cpu_seconds_total
            node_disk_io_time_seconds_total node_disk_read_bytes_total
            node_disk_read_time_seconds_total node_disk_reads_completed_total
            node_disk_write_time_seconds_total node_disk_writes_completed_total
            node_disk_written_bytes_total node_network_receive_bytes_total
            node_network_receive_dropped_total node_network_receive_errors_total
            node_network_receive_packets_total node_network_transmit_bytes_total
            node_network_transmit_dropped_total node_network_transmit_errors_total
            node_network_transmit_packets_total node_pressure_cpu_waiting_seconds_total
            node_pressure_io_stalled_seconds_total node_pressure_io_waiting_seconds_total
            node_pressure_irq_stalled_seconds_total node_pressure_memory_stalled_seconds_total
            node_pressure_memory_waiting_seconds_total
            """,
        ),
        *_typed(
            "gauge",
            """
            node_boot_time_seconds node_disk_io_now node_filesystem_avail_bytes
            node_filesystem_device_error node_filesystem_files node_filesystem_files_free
            node_filesystem_free_bytes node_filesystem_mount_info node_filesystem_readonly
            node_filesystem_size_bytes node_load1 node_load15 node_load5
            node_memory_Active_anon_bytes node_memory_Active_bytes node_memory_Active_file_bytes
            node_memory_AnonHugePages_bytes node_memory_AnonPages_bytes
            node_memory_Buffers_bytes node_memory_Cached_bytes node_memory_CommitLimit_bytes
            node_memory_Committed_AS_bytes node_memory_Dirty_bytes
            node_memory_HardwareCorrupted_bytes node_memory_HugePages_Free
            node_memory_HugePages_Rsvd node_memory_HugePages_Surp node_memory_HugePages_Total
            node_memory_Hugepagesize_bytes node_memory_Inactive_anon_bytes
            node_memory_Inactive_bytes node_memory_Inactive_file_bytes
            node_memory_KernelStack_bytes node_memory_Mapped_bytes
            node_memory_MemAvailable_bytes node_memory_MemFree_bytes node_memory_MemTotal_bytes
            node_memory_Mlocked_bytes node_memory_PageTables_bytes
            node_memory_SReclaimable_bytes node_memory_SUnreclaim_bytes node_memory_Shmem_bytes
            node_memory_Slab_bytes node_memory_SwapCached_bytes node_memory_SwapFree_bytes
            node_memory_SwapTotal_bytes node_memory_Unevictable_bytes
            node_memory_Writeback_bytes node_procs_blocked node_procs_running node_time_seconds
            node_uname_info
            """,
        ),
    ),
    labels=("cpu", "mode", "device", "mountpoint", "fstype"),
    note="Only collectors on by default (each registers with defaultEnabled) and only the "
    "metrics dashboards and alerts use: CPU, memory, file systems, network devices, "
    "pressure, load, disks, boot time. node_memory_* keeps the /proc/meminfo field's "
    "spelling (node_memory_MemAvailable_bytes). The infiniband collector does not read "
    "EFA's counters; the EFA exporter does.",
)
"""node_exporter, the version the prometheus-node-exporter chart 4.56.1 pins."""

# --- cAdvisor (the kubelet's /metrics/cadvisor) ---------------------------------------------

CADVISOR: Final = Exporter(
    name="cAdvisor (kubelet)",
    release="v0.52.0 to v0.57.0",
    sources=(
        "google/cadvisor v0.52.0 ... v0.57.0 metrics/prometheus.go: every name below is "
        "in each release, so it holds whichever one the kubelet of 1.33, 1.34 or 1.35 vendors",
        "prometheus-community/helm-charts kube-prometheus-stack-88.5.3 "
        "charts/kube-prometheus-stack/values.yaml kubelet.serviceMonitor"
        ".cAdvisorMetricRelabelings (drops none of them)",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            container_cpu_cfs_periods_total container_cpu_cfs_throttled_periods_total
            container_cpu_usage_seconds_total container_fs_reads_bytes_total
            container_fs_writes_bytes_total container_network_receive_bytes_total
            container_network_receive_packets_dropped_total
            container_network_receive_packets_total container_network_transmit_bytes_total
            container_network_transmit_packets_dropped_total
            container_network_transmit_packets_total container_oom_events_total
            """,
        ),
        *_typed(
            "gauge",
            """
            container_memory_cache container_memory_rss container_memory_usage_bytes
            container_memory_working_set_bytes
            """,
        ),
    ),
    note="Only the per-container CPU, memory, file system, network and OOM series the "
    "dashboards use. The cadvisor release each kubelet vendors was not read (the kubernetes "
    "repository is not mirrored), hence the range; nor was the kubelet's metric set, which "
    "has included these groups for years.",
)
"""The kubelet's cAdvisor metrics, which kube-prometheus-stack scrapes by default."""

# --- Karpenter --------------------------------------------------------------------------------

KARPENTER: Final = Exporter(
    name="karpenter",
    release="v1.14.1",
    sources=(
        "aws/karpenter-provider-aws v1.14.1 go.mod (sigs.k8s.io/karpenter at 6e7eab7a0f48, "
        "the core's v1.14.1 tag)",
        "kubernetes-sigs/karpenter v1.14.1 pkg/metrics/metrics.go, constants.go",
        "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/**/metrics.go, "
        "pkg/controllers/metrics/{node,nodepool,pod}/controller.go",
        "kubernetes-sigs/karpenter v1.14.1 pkg/cloudprovider/metrics/cloudprovider.go, "
        "pkg/operator/operator.go, pkg/state/cost/cost.go",
        "aws/karpenter-provider-aws v1.14.1 pkg/batcher/metrics.go, "
        "pkg/controllers/interruption/metrics.go, pkg/controllers/metrics/metrics.go, "
        "pkg/providers/{instance,instancetype,launchtemplate}/metrics.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            karpenter_cloudprovider_errors_total karpenter_consolidation_moves_total
            karpenter_nodeclaims_created_total karpenter_nodeclaims_disrupted_total
            karpenter_nodeclaims_terminated_total karpenter_nodeclaims_unhealthy_disrupted_total
            karpenter_nodepools_cost_tracker_errors_total karpenter_nodes_created_total
            karpenter_nodes_drained_total karpenter_nodes_terminated_total
            karpenter_pods_drained_total karpenter_pods_eviction_requests_total
            karpenter_voluntary_disruption_consolidation_timeouts_total
            karpenter_voluntary_disruption_decisions_by_nodepool_total
            karpenter_voluntary_disruption_decisions_total
            karpenter_voluntary_disruption_failed_validations_total
            karpenter_voluntary_disruption_queue_failures_total
            """,
        ),
        *_typed(
            "gauge",
            """
            karpenter_build_info karpenter_cluster_state_node_count
            karpenter_cluster_state_synced karpenter_cluster_state_unsynced_time_seconds
            karpenter_cluster_utilization_percent karpenter_nodepools_allowed_disruptions
            karpenter_nodepools_cost_total karpenter_nodepools_limit
            karpenter_nodepools_nodes_consuming_budgets karpenter_nodepools_usage
            karpenter_nodes_allocatable karpenter_nodes_current_lifetime_seconds
            karpenter_nodes_system_overhead karpenter_nodes_total_daemon_limits
            karpenter_nodes_total_daemon_requests karpenter_nodes_total_pod_limits
            karpenter_nodes_total_pod_requests
            karpenter_pods_provisioning_scheduling_undecided_time_seconds
            karpenter_pods_provisioning_unbound_time_seconds
            karpenter_pods_provisioning_unstarted_time_seconds karpenter_pods_state
            karpenter_pods_unbound_time_seconds karpenter_pods_unstarted_time_seconds
            karpenter_scheduler_ignored_pods_count
            karpenter_scheduler_pending_pods_by_effective_zone_count
            karpenter_scheduler_queue_depth karpenter_scheduler_unfinished_work_seconds
            karpenter_scheduler_unschedulable_pods_count
            karpenter_voluntary_disruption_eligible_nodes
            """,
        ),
        *_typed(
            "histogram",
            """
            karpenter_cloudprovider_duration_seconds karpenter_consolidation_score
            karpenter_nodeclaims_instance_termination_duration_seconds
            karpenter_nodeclaims_termination_duration_seconds
            karpenter_nodes_lifetime_duration_seconds karpenter_pods_bound_duration_seconds
            karpenter_pods_provisioning_bound_duration_seconds
            karpenter_pods_provisioning_startup_duration_seconds
            karpenter_pods_scheduling_decision_duration_seconds
            karpenter_scheduler_scheduling_duration_seconds
            karpenter_voluntary_disruption_decision_evaluation_duration_seconds
            """,
        ),
        *_typed(
            "summary",
            """
            karpenter_nodes_termination_duration_seconds karpenter_pods_startup_duration_seconds
            """,
        ),
        *_typed(
            "counter",
            """
            karpenter_cloudprovider_instance_launch_failures_total
            karpenter_cloudprovider_instance_termination_failures_total
            karpenter_interruption_deleted_messages_total
            karpenter_interruption_instance_status_unhealthy_total
            karpenter_interruption_received_messages_total
            """,
        ),
        *_typed(
            "gauge",
            """
            karpenter_cloudprovider_instance_type_cpu_cores
            karpenter_cloudprovider_instance_type_memory_bytes
            karpenter_cloudprovider_instance_type_offering_available
            karpenter_cloudprovider_instance_type_offering_price_estimate
            karpenter_ec2nodeclasses_userdata_bytes
            """,
        ),
        *_typed(
            "histogram",
            """
            karpenter_cloudprovider_batcher_batch_size
            karpenter_cloudprovider_batcher_batch_time_seconds
            karpenter_interruption_message_queue_duration_seconds
            """,
        ),
    ),
    labels=("nodepool", "capacity_type", "zone", "reason", "resource_type"),
    note="Core and AWS provider; controller-runtime's metrics come with it (CONTROLLER_RUNTIME).",
)
"""Karpenter, core and AWS provider at 1.14.1."""

# --- controller-runtime (Karpenter, Trainer, JobSet, KEDA) ------------------------------------

CONTROLLER_RUNTIME: Final = Exporter(
    name="controller-runtime",
    release="v0.24.1",
    sources=(
        "kubeflow/trainer v2.3.0 go.mod (controller-runtime v0.24.1); kubernetes-sigs/jobset "
        "v0.12.0 go.mod (v0.24.0); kubernetes-sigs/karpenter v1.14.1 go.mod (v0.23.1); "
        "kedacore/keda v2.20.2 go.mod (v0.23.3): the same metric names in each",
        "kubernetes-sigs/controller-runtime v0.24.1 pkg/internal/controller/metrics/metrics.go",
        "kubernetes-sigs/controller-runtime v0.24.1 pkg/metrics/workqueue.go, "
        "pkg/internal/metrics/workqueue.go",
        "kubernetes-sigs/controller-runtime v0.24.1 pkg/metrics/leaderelection.go, "
        "client_go_adapter.go, pkg/webhook/**/metrics.go, pkg/certwatcher/metrics/metrics.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            certwatcher_read_certificate_errors_total certwatcher_read_certificate_total
            controller_runtime_conversion_webhook_panics_total
            controller_runtime_reconcile_errors_total controller_runtime_reconcile_panics_total
            controller_runtime_reconcile_timeouts_total controller_runtime_reconcile_total
            controller_runtime_terminal_reconcile_errors_total
            controller_runtime_webhook_panics_total controller_runtime_webhook_requests_total
            leader_election_slowpath_total rest_client_requests_total workqueue_adds_total
            workqueue_retries_total
            """,
        ),
        *_typed(
            "gauge",
            """
            controller_runtime_active_workers controller_runtime_max_concurrent_reconciles
            controller_runtime_webhook_requests_in_flight leader_election_master_status
            workqueue_depth workqueue_longest_running_processor_seconds
            workqueue_unfinished_work_seconds
            """,
        ),
        *_typed(
            "histogram",
            """
            controller_runtime_reconcile_time_seconds controller_runtime_webhook_latency_seconds
            workqueue_queue_duration_seconds workqueue_work_duration_seconds
            """,
        ),
    ),
    labels=("controller", "name", "result"),
    note="The metrics every controller-runtime manager registers (label controller or name "
    "tells the controllers apart; job tells the programs apart).",
)
"""controller-runtime's standard metrics, the same at every version these controllers use."""

# --- Volcano ----------------------------------------------------------------------------------

VOLCANO: Final = Exporter(
    name="volcano",
    release="v1.15.1",
    sources=(
        "volcano-sh/volcano v1.15.1 pkg/scheduler/metrics/metrics.go, queue.go, job.go, "
        "namespace.go",
        "volcano-sh/volcano v1.15.1 pkg/controllers/metrics/queue.go, job.go",
        "volcano-sh/volcano v1.15.1 pkg/controllers/job/state/metrics.go, "
        "pkg/controllers/jobflow/state/metrics.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            volcano_job_completed_phase_count volcano_job_failed_phase_count
            volcano_job_retry_counts volcano_jobflow_failed_phase_count
            volcano_jobflow_succeed_phase_count volcano_schedule_attempts_total
            volcano_total_preemption_attempts
            """,
        ),
        *_typed(
            "gauge",
            """
            volcano_e2e_job_scheduling_duration volcano_e2e_job_scheduling_last_time
            volcano_e2e_job_scheduling_start_time volcano_goroutines volcano_job_share
            volcano_namespace_share volcano_namespace_weight volcano_namespace_weighted_share
            volcano_pod_preemption_victims volcano_queue_allocated_memory_bytes
            volcano_queue_allocated_milli_cpu volcano_queue_allocated_scalar_resources
            volcano_queue_capacity_memory_bytes volcano_queue_capacity_milli_cpu
            volcano_queue_capacity_scalar_resources volcano_queue_deserved_memory_bytes
            volcano_queue_deserved_milli_cpu volcano_queue_deserved_scalar_resources
            volcano_queue_overused volcano_queue_pod_group_completed_count
            volcano_queue_pod_group_inqueue_count volcano_queue_pod_group_pending_count
            volcano_queue_pod_group_running_count volcano_queue_pod_group_unknown_count
            volcano_queue_real_capacity_memory_bytes volcano_queue_real_capacity_milli_cpu
            volcano_queue_real_capacity_scalar_resources volcano_queue_request_memory_bytes
            volcano_queue_request_milli_cpu volcano_queue_request_scalar_resources
            volcano_queue_share volcano_queue_weight volcano_unschedule_job_count
            volcano_unschedule_task_count
            """,
        ),
        *_typed(
            "histogram",
            """
            volcano_action_scheduling_latency_milliseconds
            volcano_controller_job_to_pod_creation_latency_milliseconds
            volcano_e2e_job_scheduling_latency_milliseconds
            volcano_e2e_scheduling_latency_milliseconds
            volcano_open_session_duration_milliseconds
            volcano_plugin_scheduling_latency_milliseconds
            volcano_scheduling_stage_duration_milliseconds
            volcano_task_scheduling_latency_milliseconds
            """,
        ),
    ),
    labels=("queue_name", "resource"),
    note="Scheduler and controller. No queue guarantee metric exists at 1.15.1: a "
    "dashboard reads a queue's guarantee from its spec (kube-state-metrics custom "
    "resource state) or from config.",
)
"""Volcano's scheduler and controller manager at 1.15.1."""

# --- KEDA -------------------------------------------------------------------------------------

KEDA: Final = Exporter(
    name="keda",
    release="v2.20.2",
    sources=(
        "kedacore/keda v2.20.2 pkg/metricscollector/prommetrics.go",
        "kedacore/keda v2.20.2 pkg/metricscollector/webhook/webhook_prommetrics.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            keda_cloudeventsource_events_emitted_total keda_scaled_job_errors_total
            keda_scaled_object_errors_total keda_scaler_detail_errors_total
            keda_scaler_empty_upstream_responses_total keda_scaler_http_requests_total
            keda_webhook_scaled_object_validation_errors_total
            keda_webhook_scaled_object_validations_total
            """,
        ),
        *_typed(
            "gauge",
            """
            keda_build_info keda_cloudeventsource_events_queued
            keda_internal_scale_loop_latency_seconds keda_resource_registered_total
            keda_scaled_object_paused keda_scaler_active keda_scaler_metrics_latency_seconds
            keda_scaler_metrics_value keda_trigger_registered_total
            """,
        ),
        *_typed(
            "histogram",
            """
            keda_scaler_http_request_duration_seconds
            """,
        ),
    ),
    labels=("namespace", "scaledObject", "scaler", "metric", "triggerIndex"),
    note="The operator's own metrics (chart 2.20.2, appVersion 2.20.2).",
)
"""KEDA's operator at the chart's appVersion."""

# --- Trainer and JobSet -----------------------------------------------------------------------

JOBSET: Final = Exporter(
    name="jobset",
    release="v0.12.0",
    sources=(
        "kubernetes-sigs/jobset v0.12.0 pkg/metrics/metrics.go",
        "kubernetes-sigs/jobset v0.12.0 pkg/constants/constants.go (JobSetSubsystemName)",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            jobset_completed_total jobset_failed_total
            """,
        ),
    ),
    labels=("jobset_name", "namespace"),
    note="Its own two counters; the rest is controller-runtime's.",
)
"""JobSet's controller at 0.12.0."""

TRAINER: Final = Exporter(
    name="kubeflow-trainer",
    release="v2.3.0",
    sources=("kubeflow/trainer v2.3.0 pkg/, cmd/ (no metric of its own is registered)",),
    metrics=(),
    note="Trainer 2.3.0 registers no metric of its own: only controller-runtime's.",
)
"""Kubeflow Trainer's controller at 2.3.0: controller-runtime's metrics only."""

# --- Slurm ------------------------------------------------------------------------------------

SLURM: Final = Exporter(
    name="slurmctld (metrics/openmetrics)",
    release="slurm-26-05-3-1",
    sources=("SchedMD/slurm slurm-26-05-3-1 src/plugins/metrics/openmetrics/openmetrics.c",),
    metrics=(
        *_typed(
            "gauge",
            """
            slurm_account_jobs slurm_account_jobs_bootfail slurm_account_jobs_cancelled
            slurm_account_jobs_completed slurm_account_jobs_completing
            slurm_account_jobs_configuring slurm_account_jobs_cpus_alloc
            slurm_account_jobs_deadline slurm_account_jobs_expediting slurm_account_jobs_failed
            slurm_account_jobs_fed_requeued slurm_account_jobs_finished
            slurm_account_jobs_gpus_alloc slurm_account_jobs_hold
            slurm_account_jobs_memory_alloc slurm_account_jobs_node_failed
            slurm_account_jobs_nodes_alloc slurm_account_jobs_outofmemory
            slurm_account_jobs_pending slurm_account_jobs_powerup_node
            slurm_account_jobs_preempted slurm_account_jobs_requeued slurm_account_jobs_resizing
            slurm_account_jobs_revoked slurm_account_jobs_running slurm_account_jobs_signaling
            slurm_account_jobs_stageout slurm_account_jobs_started slurm_account_jobs_suspended
            slurm_account_jobs_timeout slurm_agent_cnt slurm_agent_queue_size
            slurm_agent_thread_cnt slurm_backfilled_het_jobs slurm_backfilled_jobs
            slurm_bf_active slurm_bf_cycle_cnt slurm_bf_cycle_last slurm_bf_cycle_max
            slurm_bf_cycle_tot slurm_bf_depth_mean slurm_bf_depth_tot slurm_bf_depth_try_tot
            slurm_bf_exit_end slurm_bf_exit_max_job_start slurm_bf_exit_max_job_test
            slurm_bf_exit_state_changed slurm_bf_exit_table_limit slurm_bf_exit_timeout
            slurm_bf_last_depth slurm_bf_last_depth_try slurm_bf_mean_cycle
            slurm_bf_mean_table_sz slurm_bf_queue_len slurm_bf_queue_len_mean
            slurm_bf_queue_len_tot slurm_bf_table_size slurm_bf_table_size_tot
            slurm_bf_try_depth_mean slurm_bf_when_last_cycle slurm_jobs slurm_jobs_bootfail
            slurm_jobs_cancelled slurm_jobs_completed slurm_jobs_completing
            slurm_jobs_configuring slurm_jobs_cpus_alloc slurm_jobs_deadline
            slurm_jobs_expediting slurm_jobs_failed slurm_jobs_fed_requeued slurm_jobs_finished
            slurm_jobs_gpus_alloc slurm_jobs_hold slurm_jobs_memory_alloc slurm_jobs_node_failed
            slurm_jobs_nodes_alloc slurm_jobs_outofmemory slurm_jobs_pending
            slurm_jobs_powerup_node slurm_jobs_preempted slurm_jobs_requeued slurm_jobs_resizing
            slurm_jobs_revoked slurm_jobs_running slurm_jobs_signaling slurm_jobs_stageout
            slurm_jobs_started slurm_jobs_suspended slurm_jobs_timeout
            slurm_last_backfilled_jobs slurm_last_proc_req_start slurm_node_cpus
            slurm_node_cpus_alloc slurm_node_cpus_effective slurm_node_cpus_idle slurm_node_gpus
            slurm_node_gpus_alloc slurm_node_memory_alloc_bytes slurm_node_memory_bytes
            slurm_node_memory_effective_bytes slurm_node_memory_free_bytes slurm_nodes
            slurm_nodes_alloc slurm_nodes_blocked slurm_nodes_cloud slurm_nodes_completing
            slurm_nodes_down slurm_nodes_drain slurm_nodes_drained slurm_nodes_draining
            slurm_nodes_dyn_future slurm_nodes_dyn_normal slurm_nodes_external slurm_nodes_fail
            slurm_nodes_future slurm_nodes_idle slurm_nodes_invalid_reg slurm_nodes_maint
            slurm_nodes_mixed slurm_nodes_noresp slurm_nodes_planned slurm_nodes_power_down
            slurm_nodes_power_up slurm_nodes_powered_down slurm_nodes_powering_up
            slurm_nodes_reboot_issued slurm_nodes_reboot_req slurm_nodes_resv
            slurm_nodes_unknown slurm_partition_cpus slurm_partition_gpus slurm_partition_jobs
            slurm_partition_jobs_bootfail slurm_partition_jobs_cancelled
            slurm_partition_jobs_completed slurm_partition_jobs_completing
            slurm_partition_jobs_configuring slurm_partition_jobs_cpus_alloc
            slurm_partition_jobs_deadline slurm_partition_jobs_expediting
            slurm_partition_jobs_failed slurm_partition_jobs_fed_requeued
            slurm_partition_jobs_finished slurm_partition_jobs_gpus_alloc
            slurm_partition_jobs_hold slurm_partition_jobs_max_job_nodes
            slurm_partition_jobs_max_job_nodes_nohold slurm_partition_jobs_memory_alloc
            slurm_partition_jobs_min_job_nodes slurm_partition_jobs_min_job_nodes_nohold
            slurm_partition_jobs_node_failed slurm_partition_jobs_outofmemory
            slurm_partition_jobs_pending slurm_partition_jobs_powerup_node
            slurm_partition_jobs_preempted slurm_partition_jobs_requeued
            slurm_partition_jobs_resizing slurm_partition_jobs_revoked
            slurm_partition_jobs_running slurm_partition_jobs_signaling
            slurm_partition_jobs_stageout slurm_partition_jobs_started
            slurm_partition_jobs_suspended slurm_partition_jobs_timeout
            slurm_partition_jobs_wait_part_node_limit slurm_partition_nodes
            slurm_partition_nodes_alloc slurm_partition_nodes_blocked slurm_partition_nodes_cg
            slurm_partition_nodes_cloud slurm_partition_nodes_cpus_alloc
            slurm_partition_nodes_cpus_efctv slurm_partition_nodes_cpus_idle
            slurm_partition_nodes_down slurm_partition_nodes_drain slurm_partition_nodes_drained
            slurm_partition_nodes_draining slurm_partition_nodes_dyn_future
            slurm_partition_nodes_dyn_normal slurm_partition_nodes_external
            slurm_partition_nodes_fail slurm_partition_nodes_future slurm_partition_nodes_idle
            slurm_partition_nodes_invalid_reg slurm_partition_nodes_maint
            slurm_partition_nodes_mem_alloc slurm_partition_nodes_mem_avail
            slurm_partition_nodes_mem_free slurm_partition_nodes_mem_tot
            slurm_partition_nodes_mixed slurm_partition_nodes_no_resp
            slurm_partition_nodes_planned slurm_partition_nodes_power_down
            slurm_partition_nodes_power_up slurm_partition_nodes_powered_down
            slurm_partition_nodes_powering_down slurm_partition_nodes_powering_up
            slurm_partition_nodes_reboot_issued slurm_partition_nodes_reboot_requested
            slurm_partition_nodes_resv slurm_partition_nodes_unknown slurm_partitions
            slurm_sched_exit_end slurm_sched_exit_lic slurm_sched_exit_max_depth
            slurm_sched_exit_max_job_start slurm_sched_exit_rpc_cnt slurm_sched_exit_timeout
            slurm_sched_mean_cycle slurm_sched_mean_depth_cycle slurm_sched_stats_timestamp
            slurm_schedule_cycle_cnt slurm_schedule_cycle_depth slurm_schedule_cycle_last
            slurm_schedule_cycle_max slurm_schedule_cycle_tot slurm_schedule_queue_len
            slurm_sdiag_job_states_ts slurm_sdiag_jobs_canceled slurm_sdiag_jobs_completed
            slurm_sdiag_jobs_failed slurm_sdiag_jobs_pending slurm_sdiag_jobs_running
            slurm_sdiag_jobs_started slurm_sdiag_jobs_submitted slurm_sdiag_latency
            slurm_server_thread_cnt slurm_slurmdbd_queue_size slurm_user_jobs
            slurm_user_jobs_bootfail slurm_user_jobs_cancelled slurm_user_jobs_completed
            slurm_user_jobs_completing slurm_user_jobs_configuring slurm_user_jobs_cpus_alloc
            slurm_user_jobs_deadline slurm_user_jobs_expediting slurm_user_jobs_failed
            slurm_user_jobs_fed_requeued slurm_user_jobs_finished slurm_user_jobs_gpus_alloc
            slurm_user_jobs_hold slurm_user_jobs_memory_alloc slurm_user_jobs_node_failed
            slurm_user_jobs_nodes_alloc slurm_user_jobs_outofmemory slurm_user_jobs_pending
            slurm_user_jobs_powerup_node slurm_user_jobs_preempted slurm_user_jobs_requeued
            slurm_user_jobs_resizing slurm_user_jobs_revoked slurm_user_jobs_running
            slurm_user_jobs_signaling slurm_user_jobs_stageout slurm_user_jobs_started
            slurm_user_jobs_suspended slurm_user_jobs_timeout
            """,
        ),
    ),
    labels=("partition", "node", "username", "account"),
    note="Every metric the plugin adds: nodes, partitions, jobs, jobs per user and account, "
    "scheduler statistics; all gauges, written on every scrape (zeros included).",
)
"""slurmctld's own OpenMetrics (``MetricsType=metrics/openmetrics``), Slurm 26.05."""

# --- neuron-monitor ---------------------------------------------------------------------------

NEURON_MONITOR: Final = Exporter(
    name="neuron-monitor-prometheus.py",
    release="Neuron SDK 2.31.1",
    sources=(
        "aws-neuron/aws-neuron-sdk v2.31.1 src/examples/neuron-monitor/"
        "neuron-monitor-grafana.json (the bridge's metrics the SDK's dashboard queries)",
        "aws-neuron/aws-neuron-sdk v2.31.1 tools/neuron-sys-tools/"
        "neuron-monitor-user-guide.rst (the bridge and its metric groups)",
        "/opt/aws/neuron/bin/neuron-monitor-prometheus.py as aws-neuronx-tools installs it "
        "(NOT in the SDK repository: the names marked below were read from the script)",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            execution_status_total
            """,
        ),
        *_typed(
            "gauge",
            """
            execution_latency_seconds neuron_runtime_memory_used_bytes
            neuron_runtime_vcpu_usage_ratio neuroncore_utilization_ratio
            system_memory_total_bytes system_memory_used_bytes system_vcpu_count
            system_vcpu_usage_ratio
            """,
        ),
        *_typed(
            "info",
            """
            instance_info
            """,
        ),
        *_typed(
            "counter",
            """
            execution_errors_total hardware_ecc_events_total
            """,
        ),
        *_typed(
            "gauge",
            """
            neuroncore_memory_usage_constants neuroncore_memory_usage_model_code
            neuroncore_memory_usage_model_shared_scratchpad
            neuroncore_memory_usage_runtime_memory neuroncore_memory_usage_tensors
            system_swap_total_bytes system_swap_used_bytes
            """,
        ),
        *_typed(
            "info",
            """
            neuron_hardware_info
            """,
        ),
    ),
    labels=("instance_id", "instance_type", "availability_zone", "neuroncore", "runtime_tag"),
    note="UNVERIFIED AT THE PIN: neuron_hardware_info, execution_errors_total, "
    "hardware_ecc_events_total, neuroncore_memory_usage_* and system_swap_* come from the "
    "bridge script, which ships in the aws-neuronx-tools package and not in the SDK's "
    "repository; re-read the script in the image at a Neuron bump. The rest is queried by "
    "the SDK's own dashboard at 2.31.1.",
)
"""The Prometheus bridge of neuron-monitor (``neuron-monitor | neuron-monitor-prometheus.py``)."""

# --- Prometheus -------------------------------------------------------------------------------

PROMETHEUS: Final = Exporter(
    name="prometheus",
    release="v3.14.0",
    sources=(
        "prometheus-community/helm-charts kube-prometheus-stack-88.5.3 "
        "charts/kube-prometheus-stack/values.yaml (prometheus image v3.14.0)",
        "prometheus/prometheus v3.14.0 scrape/scrape.go (the synthetic scrape series)",
        "prometheus/prometheus v3.14.0 rules/alerting.go (ALERTS, ALERTS_FOR_STATE)",
        "prometheus/prometheus v3.14.0 rules/group.go, notifier/metric.go, notifier/manager.go",
    ),
    metrics=(
        *_typed(
            "counter",
            """
            prometheus_notifications_dropped_total prometheus_notifications_errors_total
            prometheus_notifications_sent_total prometheus_rule_evaluation_failures_total
            prometheus_rule_evaluations_total prometheus_rule_group_iterations_missed_total
            """,
        ),
        *_typed(
            "gauge",
            """
            ALERTS ALERTS_FOR_STATE prometheus_notifications_alertmanagers_discovered
            prometheus_notifications_queue_capacity prometheus_notifications_queue_length
            prometheus_rule_group_interval_seconds prometheus_rule_group_last_duration_seconds
            prometheus_rule_group_last_evaluation_timestamp_seconds scrape_duration_seconds
            scrape_samples_post_metric_relabeling scrape_samples_scraped scrape_series_added up
            """,
        ),
    ),
    labels=("job", "instance", "alertname", "alertstate"),
    note="The series Prometheus writes itself for every target and alert, and its rule and "
    "notification health. The Prometheus Operator's own metrics are left out: no rule "
    "uses them (and prometheus-operator v0.93.1 is not in the mirrors to read).",
)
"""Prometheus itself, as kube-prometheus-stack 88.5.3 runs it."""

# --- AWS CloudWatch ---------------------------------------------------------------------------

FSX_LUSTRE_CLOUDWATCH_METRICS: Final = frozenset(
    {
        "DataReadBytes",
        "DataWriteBytes",
        "DataReadOperations",
        "DataWriteOperations",
        "MetadataOperations",
        "ClientConnections",
        "FreeDataStorageCapacity",
    }
)
"""FSx for Lustre's CloudWatch metrics that the storage dashboard and alarms use (namespace
``AWS/FSx``, dimension ``FileSystemId``), as the FSx for Lustre user guide lists them
("Amazon FSx for Lustre metrics and dimensions",
https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html); botocore has no list of
metric names. Not PromQL: the CloudWatch data source queries them by namespace and name."""

# --- The platform's own ------------------------------------------------------------------------


def platform_metrics() -> Exporter:
    """The metrics the platform's own programs and configuration export, from names.py.

    The first-step gauge and a Slurm job's submit and start times (the runtimes' metrics
    port), the two timestamps and the PodGroup's minMember and minResources the
    kube-state-metrics custom resource state writes for the ledger and the gang alert, a
    TrainJob's suspension and conditions it writes for the gang alert, and the EFA exporter's
    metrics.
    Built from :mod:`components.metric_names` each time, so a name added there needs no line
    in the tests.
    """
    return Exporter(
        name="training platform",
        release="this repository",
        sources=("components/metric_names.py", "efa_exporter/"),
        metrics=(
            Metric(names.FIRST_STEP_METRIC, "gauge"),
            # The Slurm TaskProlog's file (components/first_step.py), served beside the first step.
            Metric(names.SLURM_JOB_SUBMIT_METRIC, "gauge"),
            Metric(names.SLURM_JOB_START_METRIC, "gauge"),
            Metric(names.PODGROUP_CREATED_METRIC, "gauge"),
            Metric(names.PODGROUP_MIN_MEMBER_METRIC, "gauge"),
            Metric(names.PODGROUP_MIN_RESOURCES_METRIC, "gauge"),
            Metric(names.PODGROUP_PHASE_METRIC, "gauge"),  # a state set: one series per phase
            Metric(names.NODECLAIM_CONDITION_METRIC, "gauge"),
            Metric(names.TRAINJOB_SUSPENDED_METRIC, "gauge"),
            Metric(names.TRAINJOB_CONDITION_METRIC, "gauge"),
            # The EFA exporter: a name ending in _total is a counter (prometheus_client's
            # exposition of CounterMetricFamily), the rest are gauges.
            *(
                Metric(name, "counter" if name.endswith("_total") else "gauge")
                for name in names.EFA_METRICS
            ),
        ),
    )


EXPORTERS: Final[tuple[Exporter, ...]] = (
    DCGM_EXPORTER,
    KUBE_STATE_METRICS,
    NODE_EXPORTER,
    CADVISOR,
    KARPENTER,
    CONTROLLER_RUNTIME,
    VOLCANO,
    KEDA,
    JOBSET,
    TRAINER,
    SLURM,
    NEURON_MONITOR,
    PROMETHEUS,
)
"""Every third-party exporter the metrics stack scrapes, as catalogued above."""


def known_metrics() -> frozenset[str]:
    """Every series name a rule or dashboard may select: all exporters' and the platform's.

    Recording rules' outputs are not in it; the tests' ``unknown_metrics`` (tests/promql.py)
    takes them apart, from the rules themselves.
    """
    return frozenset().union(*(exporter.names() for exporter in (*EXPORTERS, platform_metrics())))
