"""Write ci/reference.lock.json from a reference directory and its SOURCES.md files.

Run once (and again when reference data is added): ``python -m ci.make_lock ../shared``. The
upstream location of every file comes from the table below, transcribed from
``crds/SOURCES.md``, ``charts/SOURCES.md`` and ``aws/SOURCES.md``; each entry's repository and
commit, and each file's sha256, are checked against those SOURCES.md files before anything is
written. After that the lock is the source of truth: ``scripts/fetch-reference`` reads only it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ci.reference import DEFAULT_BASE_URL, LOCK_PATH, LockedFile, dump_lock, sha256_of

AREAS: Final = ("crds", "charts", "aws")
"""Top-level directories of the reference data; each has its own SOURCES.md."""
EMPTY_SHA256: Final = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@dataclass(frozen=True)
class Source:
    """Where the files of one local reference directory come from upstream."""

    local: str
    """Directory under the reference root, e.g. ``crds/karpenter/v1.14.1``."""
    repo: str
    """GitHub ``owner/name``."""
    commit: str
    """The full commit the files were copied at (the tag's commit where there is a tag)."""
    upstream: str
    """Directory in the repository that holds the files under their local names."""
    renames: Mapping[str, str] = field(default_factory=dict)
    """Local name (or local prefix ending in ``/``) -> path from the repository root."""

    def upstream_path(self, relative: str) -> str:
        """The path in the repository of the file at ``relative`` under :attr:`local`.

        Args:
            relative: the file's path relative to :attr:`local`, with forward slashes.
        """
        for local_name in sorted(self.renames, key=len, reverse=True):
            if relative == local_name:
                return self.renames[local_name]
            if local_name.endswith("/") and relative.startswith(local_name):
                return self.renames[local_name] + relative.removeprefix(local_name)
        return f"{self.upstream.rstrip('/')}/{relative}"


KARPENTER: Final = ("aws/karpenter-provider-aws", "bde00654cd316fddb3dccfba3f5ac07039865429")
TRAINER: Final = ("kubeflow/trainer", "658725bdae5c7e3a0854d93ac6ff492e109a22ab")
JOBSET: Final = ("kubernetes-sigs/jobset", "f22e565ac3cc3265c7c45ef67ecffdc689af5d77")
VOLCANO: Final = ("volcano-sh/volcano", "0a56ed331897f5455916a44d3075671376d731d6")
SLINKY: Final = ("SlinkyProject/slurm-operator", "87313dac23e95f5632439e99c9fe9e325ece1bcd")
MARIADB: Final = ("mariadb-operator/mariadb-operator", "b2f76016ff71926414367f5347010766a7a1c257")
KUBERAY: Final = ("ray-project/kuberay", "59d663aeec13760646da3db9c1cf8cfe883e30b7")
CERT_MANAGER: Final = "cert-manager/cert-manager"
PROMETHEUS: Final = ("prometheus-community/helm-charts", "ea930baeebeba39f56d6b44e351f23b2a072a600")
KEDA_CRDS: Final = ("kedacore/keda", "68a5b5028f35b22d50597c69819ab32c4e92f21a")
PROMETHEUS_CRDS: Final = "charts/kube-prometheus-stack/charts/crds/crds"
KATIB_CRDS: Final = "manifests/v1beta1/components/crd"
VOLCANO_CHART: Final = "installer/helm/chart/volcano"

SOURCES: Final[tuple[Source, ...]] = (
    # crds/SOURCES.md
    Source("crds/karpenter/v1.14.1", *KARPENTER, "pkg/apis/crds"),
    Source("crds/kubeflow-trainer/v2.3.0", *TRAINER, "manifests/base/crds"),
    Source("crds/jobset/v0.12.0", *JOBSET, "config/components/crd/bases"),
    Source(
        "crds/kubeflow-training-operator/v1.9.4",
        "kubeflow/trainer",
        "4445c12aa62e4345b0c2c6ac9b215a70eca46ed7",
        "manifests/base/crds",
    ),
    Source(
        "crds/volcano/v1.15.1",
        *VOLCANO,
        f"{VOLCANO_CHART}/crd/bases",
        renames={
            name: f"{VOLCANO_CHART}/charts/jobflow/crd/bases/{name}"
            for name in ("flow.volcano.sh_jobflows.yaml", "flow.volcano.sh_jobtemplates.yaml")
        },
    ),
    Source("crds/slinky-slurm-operator/v1.2.1", *SLINKY, "config/crd/bases"),
    Source("crds/mariadb-operator/v26.6.0", *MARIADB, "config/crd/bases"),
    Source("crds/kuberay/v1.7.0", *KUBERAY, "ray-operator/config/crd/bases"),
    Source(
        "crds/mpi-operator/v0.8.0",
        "kubeflow/mpi-operator",
        "101db144e019e1de65aaded07745e9d805c2852a",
        "manifests/base",
    ),
    Source(
        "crds/cert-manager/v1.20.3",
        CERT_MANAGER,
        "1e1d16d1744e6d9c80e464e58e8d9ab1caed222b",
        "deploy/crds",
    ),
    Source(
        "crds/prometheus-operator/v0.93.1",
        *PROMETHEUS,
        PROMETHEUS_CRDS,
        renames={
            f"monitoring.coreos.com_{kind}.yaml": f"{PROMETHEUS_CRDS}/crd-{kind}.yaml"
            for kind in ("servicemonitors", "podmonitors", "prometheusrules")
        },
    ),
    Source(
        "crds/katib/v0.19.0",
        "kubeflow/katib",
        "578e60f1ce83dbb5e7151026a3bdc4de233947fc",
        KATIB_CRDS,
        renames={
            "kubeflow.org_experiments.yaml": f"{KATIB_CRDS}/experiment.yaml",
            "kubeflow.org_suggestions.yaml": f"{KATIB_CRDS}/suggestion.yaml",
            "kubeflow.org_trials.yaml": f"{KATIB_CRDS}/trial.yaml",
            "openapi/pkg_apis_v1beta1_swagger.json": "pkg/apis/v1beta1/swagger.json",
        },
    ),
    Source("crds/keda/v2.20.2", *KEDA_CRDS, "config/crd/bases"),
    # charts/SOURCES.md
    Source("charts/karpenter/1.14.1", *KARPENTER, "charts/karpenter"),
    Source("charts/karpenter-crd/1.14.1", *KARPENTER, "charts/karpenter-crd"),
    Source("charts/volcano/1.15.1", *VOLCANO, VOLCANO_CHART),
    Source(
        "charts/kubeflow-trainer/2.3.0",
        *TRAINER,
        "charts/kubeflow-trainer",
        renames={
            "manifests-base-runtimes/": "manifests/base/runtimes/",
            "templates-rbac/": "charts/kubeflow-trainer/templates/rbac/",
        },
    ),
    Source("charts/jobset/0.12.0", *JOBSET, "charts/jobset"),
    Source("charts/slurm-operator/1.2.1", *SLINKY, "helm/slurm-operator"),
    Source("charts/slurm-operator-crds/1.2.1", *SLINKY, "helm/slurm-operator-crds"),
    Source("charts/slurm/1.2.1", *SLINKY, "helm/slurm"),
    Source(
        "charts/nvidia-device-plugin/0.20.0",
        "NVIDIA/k8s-device-plugin",
        "1b826acc6af3079d8923bac395c3124b8861a9a6",
        "deployments/helm/nvidia-device-plugin",
    ),
    Source(
        "charts/aws-efa-k8s-device-plugin/0.5.30",
        "aws/eks-charts",
        "5239609242f3430be50fb0b714a24d3ef2b47983",
        "stable/aws-efa-k8s-device-plugin",
    ),
    Source(
        "charts/neuron-helm-chart/1.9.0",
        "aws-neuron/neuron-helm-charts",
        "b77a6f90bb00dc0ee57d21e35e275b05e26b79c1",
        "charts/neuron-helm-chart",
    ),
    Source(
        "charts/cert-manager/v1.20.3",
        CERT_MANAGER,
        "1e1d16d1744e6d9c80e464e58e8d9ab1caed222b",
        "deploy/charts/cert-manager",
    ),
    Source(
        "charts/cert-manager/v1.21.1",
        CERT_MANAGER,
        "24e33194fb39488eff2bbf10c6dc640f407cad44",
        "deploy/charts/cert-manager",
    ),
    Source("charts/mariadb-operator/26.6.0", *MARIADB, "deploy/charts/mariadb-operator"),
    Source("charts/mariadb-operator-crds/26.6.0", *MARIADB, "deploy/charts/mariadb-operator-crds"),
    Source("charts/mariadb-cluster/26.6.0", *MARIADB, "deploy/charts/mariadb-cluster"),
    Source(
        "charts/dcgm-exporter/4.8.2",
        "NVIDIA/dcgm-exporter",
        "691c92762eb551313c825f6efe4ceeee20982801",
        "deployment",
    ),
    Source(
        "charts/aws-fsx-csi-driver/1.17.0",
        "kubernetes-sigs/aws-fsx-csi-driver",
        "5b227125add708cd0b87c76abe1a4c074e71dfc5",
        "charts/aws-fsx-csi-driver",
    ),
    Source("charts/kube-prometheus-stack/88.5.3", *PROMETHEUS, "charts/kube-prometheus-stack"),
    Source("charts/kuberay-operator/1.7.0", *KUBERAY, "helm-chart/kuberay-operator"),
    Source(
        "charts/jupyterhub/4.4.0",
        "jupyterhub/zero-to-jupyterhub-k8s",
        "5c5f5df751588a68a7781ead01d0f62e88e2e72f",
        "jupyterhub",
    ),
    Source(
        "charts/keda/2.20.2",
        "kedacore/charts",
        "cbb9bb8ce0809dc9048f72302f7c09765d66ed56",
        "keda",
    ),
    # aws/SOURCES.md (tag v1.14.1; its commit is the one crds/SOURCES.md gives for that tag)
    Source(
        "aws",
        *KARPENTER,
        "",
        renames={
            "karpenter-v1.14.1-cloudformation.yaml": "website/content/en/docs/getting-started/"
            "getting-started-with-karpenter/cloudformation.yaml"
        },
    ),
)


class LockProblem(Exception):
    """The reference directory, the table and the SOURCES.md files disagree."""


def reference_files(root: Path) -> Iterator[str]:
    """Every upstream file under ``root``'s areas, as a relative path (SOURCES.md excluded).

    Args:
        root: the reference directory (holding ``crds/``, ``charts/``, ``aws/``).
    """
    for area in AREAS:
        for path in sorted((root / area).rglob("*")):
            if path.is_file() and path.name != "SOURCES.md":
                yield path.relative_to(root).as_posix()


def _source_of(relative: str) -> Source:
    owners = [
        source
        for source in SOURCES
        if relative.startswith(f"{source.local}/")
        and (source.local != "aws" or relative.removeprefix("aws/") in source.renames)
    ]
    if len(owners) != 1:
        raise LockProblem(f"{relative}: {len(owners)} entries of the table claim it (need one)")
    return owners[0]


def build_lock(root: Path) -> list[LockedFile]:
    """One lock entry per upstream file under ``root``, checked against its SOURCES.md.

    Args:
        root: the reference directory to describe.

    Raises:
        LockProblem: a file no table entry claims, or a repository, commit or sha256 its
            SOURCES.md does not name.
    """
    sources_text = {area: (root / area / "SOURCES.md").read_text() for area in AREAS}
    every_source = "\n".join(sources_text.values())
    entries: list[LockedFile] = []
    for relative in reference_files(root):
        source = _source_of(relative)
        area_text = sources_text[relative.split("/", 1)[0]]
        digest = sha256_of(root / relative)
        if f"https://github.com/{source.repo}" not in area_text:
            raise LockProblem(f"{relative}: repository {source.repo} is not in its SOURCES.md")
        if source.commit not in every_source:
            raise LockProblem(f"{relative}: commit {source.commit} is in no SOURCES.md")
        if digest not in area_text and digest != EMPTY_SHA256:
            raise LockProblem(f"{relative}: sha256 {digest} is not in its SOURCES.md")
        upstream = source.upstream_path(relative.removeprefix(f"{source.local}/"))
        url = f"{DEFAULT_BASE_URL}/{source.repo}/{source.commit}/{upstream}"
        entries.append(LockedFile(path=relative, url=url, sha256=digest))
    return entries


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m ci.make_lock [REFERENCE_DIR] [--lock FILE]``.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(prog="python -m ci.make_lock", description=__doc__)
    parser.add_argument("reference_dir", type=Path, nargs="?", default=Path("../shared"))
    parser.add_argument("--lock", type=Path, default=LOCK_PATH, help="file to write")
    args = parser.parse_args(argv)
    try:
        entries = build_lock(args.reference_dir.resolve())
    except LockProblem as exc:
        print(f"make_lock: {exc}", file=sys.stderr)
        return 1
    args.lock.write_text(dump_lock(entries))
    print(f"wrote {len(entries)} entries to {args.lock}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
