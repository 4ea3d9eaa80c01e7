"""The fabric test on demand: a 2-node collective over EFA per accelerator pool, ready to run.

Acceptance checks one node at a time (docs/concepts/node-acceptance.md); the path between nodes,
EFA, is measured by this test. Each accelerator pool with EFA gets a ``TrainingRuntime``
``fabric-<pool>`` in the platform namespace :data:`NAMESPACE`: Trainer's MPI runtime as the
teams' MPI runtimes are built (:func:`components.trainer.mpi_replicated_jobs`: workers serving
SSH, the launcher as node 0, whole-node pods from the shared pod-on-pool builder), running the
vendor's acceptance image. An admin starts a run by creating a two-line TrainJob that names the
runtime (docs/how-to/run-a-fabric-test.md); every run is a new TrainJob, so the test can be
repeated as often as wanted while the runtime stays as the stack made it.

Why a runtime and not a Volcano Job or a suspended Job: MPI jobs on this platform go through
Trainer's MPI plugin (hostfile, SSH keys, the launcher-as-node hostfile entry: kubeflow/trainer
v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go), whose runtimes ``python -m synth jobs``
already models; a Volcano Job would bring a second MPI mechanism (its ``ssh`` and ``svc``
plugins) that nothing here checks, and a suspended Job runs once.

Scheduling: the gang goes to the platform's own Volcano queue
(:data:`components.scheduling.PLATFORM_QUEUE`), which deserves and guarantees nothing, so every
pod it holds is borrowed and a team queue below its deserved share reclaims it; its capability
is two nodes of the largest fabric pool per accelerator, so at most one fabric test's worth of
nodes is ever taken from teams. The pods tolerate the pool's taints and never the acceptance
taint: a fabric test lands only on nodes that passed acceptance.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from acceptance.floors import NO_FIGURE, Check, Floor, load_floors
from components import software
from components.catalog import GPU_RESOURCE
from components.config import NodePoolConfig
from components.config.acceptance import AcceptanceConfig
from components.node_pools import POOL_LABEL
from components.scheduling import LOW_PRIORITY_CLASS, PLATFORM_QUEUE, QUEUE_ANNOTATION
from components.tenancy import (
    DEFAULT_DENY_POLICY,
    SAME_NAMESPACE_POLICY,
    TEAM_POD_SECURITY,
    TEAM_POD_SECURITY_ADVICE,
    from_namespace,
    network_policy,
    pod_security_labels,
)
from components.trainer import (
    FRAMEWORK_LABEL,
    MPI_SSH_PATH,
    RUNTIME_API,
    RUNTIME_KIND,
    RUNTIME_NUM_NODES,
    fabric_variables,
    mpi_replicated_jobs,
    pod_spec,
)
from components.workloads import processes_per_node

NAMESPACE: Final = "fabric-test"
"""The platform's namespace of fabric tests: no team's, so no team's queue policy applies."""
SERVICE_ACCOUNT: Final = "fabric-test"
"""The fabric pods' account: no token, no role (they talk to each other, not to the API)."""
RUNTIME_PREFIX: Final = "fabric-"
PURPOSE_LABEL: Final = "trainingplatform.io/purpose"
PURPOSE: Final = "fabric-test"
FABRIC_NODES: Final = 2
"""Nodes one fabric test spans: the launcher (node 0) and one worker, the published figures'
shape (aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md)."""
NCCL_LARGEST: Final = "16G"
"""all_reduce_perf's largest message: where the published p5 figure under Slurm was taken."""
NCCOM_LARGEST: Final = "4GB"
"""nccom-test's largest message (its ``-e``), well past where bus bandwidth levels off."""
NCCOM_ROOT_PORT: Final = 45654
"""Port of the first host's rendezvous (``NEURON_RT_ROOT_COMM_ID``, the Neuron docs' example)."""
RESULT_FILE: Final = "/tmp/fabric-test.txt"
IMAGE_RECIPE: Final = "acceptance"
"""The recipe of the image the fabric pods run (images/acceptance/Dockerfile)."""
MPI_ALL_REDUCE_PERF_ARG: Final = "MPI_ALL_REDUCE_PERF"
"""The recipe's ``ARG`` that says where its MPI build of all_reduce_perf is installed: the one
place that path is written (:func:`mpi_all_reduce_perf`)."""
OPEN_MPI_HOME_ARG: Final = "OPEN_MPI_HOME"
"""The recipe's ``ARG`` naming where the EFA installer's Open MPI 4 is (:func:`mpirun`)."""
NCCL_NET_ENVIRONMENT: Final = {"NCCL_NET_PLUGIN": "ofi", "NCCL_NET": "Libfabric"}
"""NCCL over EFA, with no fallback. ``NCCL_NET_PLUGIN=ofi`` loads ``libnccl-net-ofi.so`` (the
aws-ofi-nccl plugin of the image's EFA installer: aws/aws-ofi-nccl v1.18.0 src/Makefile.am), and
``NCCL_NET=Libfabric``, the plugin's network name (src/nccl_ofi_interface_nvidia.cpp), makes a
plugin that fails to load or start an error instead of a silent run over TCP sockets, whose
bandwidth would be taken for the fabric's."""
CHECKS: Final[dict[str, Check]] = {"nvidia": "nccl-all-reduce", "neuron": "nccom-all-reduce"}


def fabric_pools(pools: list[NodePoolConfig]) -> list[NodePoolConfig]:
    """The accelerator pools that attach EFA: each gets a fabric test.

    Args:
        pools: the stack's accelerator pools.
    """
    return [pool for pool in pools if pool.uses_efa and pool.instance.efa_interfaces]


def runtime_name(pool: NodePoolConfig) -> str:
    """The fabric runtime of a pool, e.g. ``fabric-p5``."""
    return f"{RUNTIME_PREFIX}{pool.name}"


def tested_pools(
    pools: list[NodePoolConfig],
    acceptance: AcceptanceConfig,
    *,
    slurm_nodes: dict[str, int] | None = None,
) -> list[tuple[NodePoolConfig, str]]:
    """(pool, image) of every pool that gets a fabric runtime.

    A pool with EFA, its vendor's acceptance image named, and room for the test's two nodes
    outside its Slurm share (a runtime whose gang can never start is not offered, as a team
    gets no MPI runtime on a pool it cannot hold two nodes of).

    Args:
        pools: the stack's accelerator pools.
        acceptance: the acceptance settings (``images``, per vendor).
        slurm_nodes: pool name -> nodes its Slurm node set holds
            (:func:`components.config.slurm_held_nodes`). Default: none.
    """
    held = slurm_nodes or {}
    return [
        (pool, image)
        for pool in fabric_pools(pools)
        if pool.max_nodes - held.get(pool.name, 0) >= FABRIC_NODES
        and (image := fabric_image(acceptance, pool)) is not None
    ]


def platform_queue_capability(pools: list[NodePoolConfig]) -> dict[str, int]:
    """What the platform queue may hold: two nodes' accelerators of the largest fabric pool.

    Per accelerator resource, so a GPU fabric test and a Trainium one can run side by side but
    two of the same kind cannot, and teams never lend more than one test's nodes to it.

    Args:
        pools: the pools with a fabric runtime (:func:`tested_pools`).
    """
    capability: dict[str, int] = {}
    for pool in pools:
        resource = pool.instance.accelerator_resource
        amount = FABRIC_NODES * pool.instance.accelerators
        capability[resource] = max(capability.get(resource, 0), amount)
    return capability


def pool_floor(pool: NodePoolConfig, *, nodes: int = FABRIC_NODES) -> Floor:
    """The floor a fabric test is held to: the pool's measured baseline, else the shipped one.

    The pool's ``acceptance.baselines`` entry of its sizing type, check and node count replaces
    the entry of acceptance/baselines.json, as the acceptance agent's settings do; a type with
    neither has the floor 0 (:data:`acceptance.floors.NO_FIGURE`).

    Args:
        pool: the pool.
        nodes: nodes of the run (2: this test). Default 2.
    """
    instance = pool.instance
    check = CHECKS[instance.accelerator]
    for baseline in pool.acceptance.baselines:
        if (baseline.instance_type, baseline.check, baseline.nodes) == (
            instance.name,
            check,
            nodes,
        ):
            return Floor(
                instance.name, check, nodes, baseline.floor_gbps, baseline.of, baseline.source,
                baseline.size_bytes,
            )  # fmt: skip
    shipped = load_floors().get((instance.name, check, nodes))
    if shipped is not None:
        return shipped
    return Floor(instance.name, check, nodes, 0.0, "no entry in the baselines file", NO_FIGURE)


def mpi_all_reduce_perf() -> str:
    """Where the acceptance image installs its MPI build of all_reduce_perf.

    Read from the recipe's :data:`MPI_ALL_REDUCE_PERF_ARG`, so the launcher's command and the
    image cannot name two paths. It is off PATH: the node check's ``all_reduce_perf`` (one
    process, no MPI) is the one PATH finds.
    """
    return software.recipe_pins(IMAGE_RECIPE)[MPI_ALL_REDUCE_PERF_ARG]


def mpirun() -> str:
    """The acceptance image's ``mpirun``, by its absolute path (the recipe's ``OPEN_MPI_HOME``).

    Open MPI 4 takes an absolute path as ``--prefix`` of that installation (mpirun(1), "invoking
    mpirun via an absolute path name is equivalent to specifying the --prefix option"), and sets
    PATH and the library path from it where it starts ``orted`` on the worker, whose sshd
    passes on no environment.
    """
    return f"{software.recipe_pins(IMAGE_RECIPE)[OPEN_MPI_HOME_ARG]}/bin/mpirun"


def _forwarded(pool: NodePoolConfig, extra: Iterable[str]) -> list[str]:
    """The variables the ranks on the worker need from the launcher: sshd passes on none."""
    variables = fabric_variables(pool, team=None, checkpoints=None)
    return ["PATH", "LD_LIBRARY_PATH", *variables, *extra]


def _report_command(pool: NodePoolConfig, floor: Floor) -> str:
    # The run is held to the floor at the size the floor was taken at (the published p5 and
    # p4de figures: 2 GiB), which the run's sizes (8 B doubling to the largest) include.
    at_size = "" if floor.size_bytes is None else f" --floor-size-bytes {floor.size_bytes}"
    return (
        f"python -m acceptance baseline --check {floor.check} "
        f"--instance-type {pool.instance.name} --nodes {FABRIC_NODES} --output {RESULT_FILE} "
        f"--floor-gbps {floor.floor_gbps:g} --floor-source {_quoted(floor.source)}{at_size}"
    )


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def nccl_script(pool: NodePoolConfig, floor: Floor) -> str:
    """The launcher's shell on a GPU pool: all_reduce_perf across both nodes, then the report.

    The image's Open MPI (:func:`mpirun`) starts one rank per GPU (``-g 1``, ``--np`` every
    GPU of both nodes) of the image's MPI build of
    all_reduce_perf (:func:`mpi_all_reduce_perf`) over the hostfile Trainer writes and names in
    ``OMPI_MCA_orte_default_hostfile`` (kubeflow/trainer v2.3.0 pkg/constants/constants.go).
    NCCL goes over EFA or fails (:data:`NCCL_NET_ENVIRONMENT`). Ranks on the worker start under
    its sshd, which passes on none of the container's environment, so ``-x`` forwards PATH,
    the library path and NCCL's and libfabric's variables (the pod's,
    :func:`components.trainer.fabric_variables`).

    Args:
        pool: a GPU pool with EFA.
        floor: the pool's two-node floor (:func:`pool_floor`).
    """
    ranks = FABRIC_NODES * pool.instance.accelerators
    forwarded = " ".join(f"-x {name}" for name in _forwarded(pool, NCCL_NET_ENVIRONMENT))
    return "\n".join(
        [
            "set -eo pipefail",
            *(f"export {name}={value}" for name, value in NCCL_NET_ENVIRONMENT.items()),
            f"{mpirun()} --np {ranks} --bind-to none {forwarded} "
            f"{mpi_all_reduce_perf()} -b 8 -e {NCCL_LARGEST} -f 2 -g 1 | tee {RESULT_FILE}",
            _report_command(pool, floor),
        ]
    )


def nccom_script(pool: NodePoolConfig, floor: Floor) -> str:
    """The launcher's shell on a Trainium pool: nccom-test across both nodes, then the report.

    nccom-test's MPI mode takes the hosts (one a line, ``--hosts-file``) and the first host's
    address and a free port in ``NEURON_RT_ROOT_COMM_ID``, and starts ``neuron-bench`` on each
    host through Open MPI over SSH (Neuron documentation, NCCOM-TEST user guide, "MPI
    Execution": aws-neuron/aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst). The hosts
    are the first column of Trainer's hostfile; ``-r`` is every NeuronCore of both nodes.
    nccom-test writes the ``mpirun`` line itself (the image's Open MPI, first on PATH), so the
    variables the ranks need from the launcher go through Open MPI's own list of variables to
    forward, ``OMPI_MCA_mca_base_env_list`` (what ``-x`` sets; ``;`` between names); its
    ``orted`` on the worker is found through the prefix the EFA installer builds into its Open
    MPI (``--enable-orterun-prefix-by-default``, installer changelog 1.19.0).

    Args:
        pool: a Trainium pool with EFA.
        floor: the pool's two-node floor (:func:`pool_floor`).
    """
    ranks = FABRIC_NODES * pool.instance.neuron_cores
    forwarded = ";".join(_forwarded(pool, ["NEURON_RT_ROOT_COMM_ID"]))
    return "\n".join(
        [
            "set -eo pipefail",
            f"export OMPI_MCA_mca_base_env_list='{forwarded}'",
            "awk '{print $1}' /etc/mpi/hostfile > /tmp/hosts",
            "first=$(getent hosts \"$(head -n 1 /tmp/hosts)\" | awk '{print $1; exit}')",
            f'export NEURON_RT_ROOT_COMM_ID="${{first}}:{NCCOM_ROOT_PORT}"',
            f"nccom-test -r {ranks} -N {FABRIC_NODES} -b 8 -e {NCCOM_LARGEST} -f 2 -d fp32 "
            f"--non-interactive allr --hosts-file /tmp/hosts | tee {RESULT_FILE}",
            _report_command(pool, floor),
        ]
    )


def fabric_runtime_spec(pool: NodePoolConfig, *, image: str) -> dict[str, Any]:
    """The TrainingRuntime spec of a pool's fabric test.

    The teams' MPI shape (:func:`components.trainer.mpi_replicated_jobs`) on the pool's whole
    nodes (:func:`components.trainer.pod_spec`: every accelerator, EFA interface and huge
    page; the pool's taints tolerated, the acceptance taint not), in the platform queue at the
    lowest training priority, under its own account, no restart (a failed run is read, not
    retried).

    Args:
        pool: an accelerator pool with EFA.
        image: the vendor's acceptance image (``platform.acceptance.images``): the test tools,
            Open MPI and an sshd for ``mpiuser`` as Trainer's MPI runtime images have.
    """
    floor = pool_floor(pool)
    gpu = pool.instance.accelerator_resource == GPU_RESOURCE
    script = nccl_script(pool, floor) if gpu else nccom_script(pool, floor)
    pod = pod_spec(pool, image=image, checkpoints=None)
    pod.update(
        serviceAccountName=SERVICE_ACCOUNT,
        priorityClassName=LOW_PRIORITY_CLASS,
    )
    jobs = mpi_replicated_jobs(pod, image)
    for job in jobs:
        if job["name"] == "launcher":
            container = job["template"]["spec"]["template"]["spec"]["containers"][0]
            container["command"] = ["/bin/bash", "-c", script]
    return {
        "mlPolicy": {
            # The launcher's Job keeps the runtime's count and the workers take the TrainJob's
            # numNodes less one (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/mpi/
            # mpi.go, EnforceMLPolicy): 1 here and numNodes 2 in the TrainJob (or none: the
            # worker job's one replica) make the two nodes.
            "numNodes": RUNTIME_NUM_NODES,
            "mpi": {
                "numProcPerNode": processes_per_node(pool),
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": MPI_SSH_PATH,
                "runLauncherAsNode": True,
            },
        },
        "podGroupPolicy": {"volcano": {}},
        "template": {
            "metadata": {"annotations": {QUEUE_ANNOTATION: PLATFORM_QUEUE}},
            "spec": {
                "network": {"publishNotReadyAddresses": True},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "replicatedJobs": jobs,
                "failurePolicy": {"maxRestarts": 0},
            },
        },
    }


def fabric_image(acceptance: AcceptanceConfig, pool: NodePoolConfig) -> str | None:
    """The acceptance image of the pool's vendor, or None where the stack names none."""
    image: str | None = getattr(acceptance.images, pool.instance.accelerator)
    return image


def namespace_network_policies() -> list[dict[str, Any]]:
    """Ingress of the fabric namespace: nothing but its own pods (SSH, NCCL's bootstrap).

    EFA's own traffic goes through the EFA device, not the pod network, which policies see.
    """
    return [
        network_policy(DEFAULT_DENY_POLICY, NAMESPACE, pods={}, ingress=[]),
        network_policy(
            SAME_NAMESPACE_POLICY,
            NAMESPACE,
            pods={},
            ingress=[{"from": [from_namespace(NAMESPACE)]}],
        ),
    ]


class FabricTest(pulumi.ComponentResource):
    """The fabric namespace and one fabric runtime per accelerator pool with EFA."""

    def __init__(
        self,
        name: str,
        *,
        tested: list[tuple[NodePoolConfig, str]],
        kubernetes_version: str,
        trainer_ready: list[pulumi.Resource],
        kubernetes_provider: pulumi.ProviderResource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the namespace, its account and policies, and the runtimes.

        Args:
            name: prefix of child resource names.
            tested: (pool, acceptance image) of each pool that gets a runtime
                (:func:`tested_pools`); none: nothing is created.
            kubernetes_version: the cluster's minor version (the Pod Security labels' pin).
            trainer_ready: Trainer (its CRDs and webhooks), which the runtimes wait for.
            kubernetes_provider: provider of every object here.
            opts: resource options.
        """
        super().__init__("trainingplatform:index:FabricTest", name, None, opts)
        self.runtimes: dict[str, k8s.apiextensions.CustomResource] = {}
        if not tested:
            self.register_outputs({})
            return
        in_cluster = pulumi.ResourceOptions(parent=self, provider=kubernetes_provider)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": NAMESPACE,
                "labels": {
                    PURPOSE_LABEL: PURPOSE,
                    **pod_security_labels(
                        TEAM_POD_SECURITY,
                        kubernetes_version=kubernetes_version,
                        advise=TEAM_POD_SECURITY_ADVICE,
                    ),
                },
            },
            opts=in_cluster,
        )
        in_namespace = pulumi.ResourceOptions.merge(
            in_cluster, pulumi.ResourceOptions(depends_on=[namespace])
        )
        k8s.core.v1.ServiceAccount(
            f"{name}-account",
            metadata={"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
            automount_service_account_token=False,
            opts=in_namespace,
        )
        for policy in namespace_network_policies():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy['metadata']['name']}",
                metadata=typing.cast(Any, policy["metadata"]),
                spec=typing.cast(Any, policy["spec"]),
                opts=in_namespace,
            )
        after_trainer = pulumi.ResourceOptions.merge(
            in_namespace, pulumi.ResourceOptions(depends_on=[namespace, *trainer_ready])
        )
        for pool, image in tested:
            runtime = runtime_name(pool)
            self.runtimes[pool.name] = k8s.apiextensions.CustomResource(
                f"{name}-{runtime}",
                api_version=RUNTIME_API,
                kind=RUNTIME_KIND,
                metadata={
                    "name": runtime,
                    "namespace": NAMESPACE,
                    "labels": {
                        FRAMEWORK_LABEL: "mpi",
                        POOL_LABEL: pool.name,
                        PURPOSE_LABEL: PURPOSE,
                    },
                },
                spec=typing.cast(Any, fabric_runtime_spec(pool, image=image)),
                opts=after_trainer,
            )
        self.register_outputs({})
