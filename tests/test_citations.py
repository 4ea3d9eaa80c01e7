"""Citations a reader can follow: links to upstream files name the version the platform pins.

Code and tests cite the upstream file a rule mirrors as a link at a tag (or a commit). When a pin
in components/versions.py or requirements.txt moves, these links stop matching and this test
lists them: the cited files are the ones to re-read before the bump lands.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import tokenize
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import pytest

from components import versions
from synth.stackfile import REPOSITORY_ROOT

LINK: Final = re.compile(
    r"https://(?:github\.com/(?P<repo>[\w.-]+/[\w.-]+)/(?:blob|tree|raw)/"
    r"|raw\.githubusercontent\.com/(?P<raw>[\w.-]+/[\w.-]+)/)"
    r"(?P<ref>[\w.-]+)/(?P<path>[^\s)\"'`>]+)"
)
"""A link to one upstream file at a ref: github.com's blob/tree/raw pages and raw content."""

COMMIT: Final = re.compile(r"[0-9a-f]{40}")


def _addon_versions(field: str) -> set[str]:
    """The upstream release of an EKS add-on we pin, for every supported minor (v1.7.0-eksbuild.1
    is the driver's 1.7.0)."""
    return {
        getattr(addons, field).split("-", 1)[0].removeprefix("v")
        for addons in versions.EKS_ADDONS.values()
    }


def _requirement_in(file: str, name: str) -> str:
    """The version ``file`` pins ``name`` to."""
    for line in (REPOSITORY_ROOT / file).read_text().splitlines():
        if line.lower().startswith(f"{name.lower()}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{file} pins no {name}")


PINNED_RELEASES: Final[dict[str, Callable[[], set[str]]]] = {
    "slurm-operator": lambda: {versions.SLINKY_VERSION},
    "slinky": lambda: {versions.SLINKY_VERSION},
    "karpenter-provider-aws": lambda: {versions.KARPENTER_VERSION},
    "kubernetes-sigs/karpenter": lambda: {versions.KARPENTER_VERSION},
    "karpenter": lambda: {versions.KARPENTER_VERSION},
    "kubeflow/trainer": lambda: {
        versions.TRAINER_VERSION,
        versions.TRAINING_OPERATOR_VERSION.removeprefix("v"),
    },
    "kubeflow-trainer": lambda: {versions.TRAINER_VERSION},
    "kubeflow/katib": lambda: {versions.KATIB_VERSION.removeprefix("v")},
    "katib": lambda: {versions.KATIB_VERSION.removeprefix("v")},
    "trainer": lambda: {versions.TRAINER_VERSION},
    "jobset": lambda: {versions.JOBSET_VERSION},
    "kubernetes-sigs/jobset": lambda: {versions.JOBSET_VERSION},
    "slinkyproject/slurm-operator": lambda: {versions.SLINKY_VERSION},
    "volcano-sh/volcano": lambda: {versions.VOLCANO_CHART.version},
    "ray-project/kuberay": lambda: {versions.KUBERAY_VERSION},
    "kuberay": lambda: {versions.KUBERAY_VERSION},
    "kubernetes-sigs/aws-fsx-csi-driver": lambda: _addon_versions("aws_fsx_csi_driver"),
    "kubernetes-sigs/aws-ebs-csi-driver": lambda: _addon_versions("aws_ebs_csi_driver"),
    "aws/eks-node-monitoring-agent": lambda: _addon_versions("eks_node_monitoring_agent"),
    "aws-neuron/neuron-helm-charts": lambda: {versions.NEURON_CHART.version},
    "aws/karpenter-provider-aws": lambda: {versions.KARPENTER_VERSION},
    "nvidia/k8s-device-plugin": lambda: {versions.NVIDIA_DEVICE_PLUGIN_CHART.version},
    "mariadb-operator/mariadb-operator": lambda: {versions.MARIADB_OPERATOR_VERSION},
    "boto/botocore": lambda: {_requirement_in("requirements.txt", "botocore")},
    "pulumi/pulumi-kubernetes": lambda: {_requirement_in("requirements.txt", "pulumi-kubernetes")},
    "pulumi/pulumi-aws": lambda: {_requirement_in("requirements.txt", "pulumi-aws")},
    "pulumi/pulumi-eks": lambda: {_requirement_in("requirements.txt", "pulumi-eks")},
    "aws-fsx-csi-driver": lambda: _addon_versions("aws_fsx_csi_driver"),
    "aws-ebs-csi-driver": lambda: _addon_versions("aws_ebs_csi_driver"),
    "volcano": lambda: {versions.VOLCANO_CHART.version},
    "mariadb-operator": lambda: {versions.MARIADB_OPERATOR_VERSION},
    "nvidia-device-plugin": lambda: {versions.NVIDIA_DEVICE_PLUGIN_CHART.version},
    "aws-efa-k8s-device-plugin": lambda: {versions.EFA_DEVICE_PLUGIN_CHART.version.lstrip("v")},
    "neuron-helm-chart": lambda: {versions.NEURON_CHART.version},
    "neuron-helm-charts": lambda: {versions.NEURON_CHART.version},
    "cert-manager": lambda: {versions.CERT_MANAGER_CHART.version.lstrip("v")},
    "keda": lambda: {versions.KEDA_CHART.version},
    "grafana/grafana": lambda: {versions.GRAFANA_VERSION},
    "pulumi-policy": lambda: {_requirement_in("requirements.txt", "pulumi-policy")},
    "pulumi-aws": lambda: {_requirement_in("requirements.txt", "pulumi-aws")},
    "pulumi-eks": lambda: {_requirement_in("requirements.txt", "pulumi-eks")},
    "pulumi-kubernetes": lambda: {_requirement_in("requirements.txt", "pulumi-kubernetes")},
    "kubeflow/sdk": lambda: {_requirement_in("requirements-dev.txt", "kubeflow")},
    "jupyterhub/zero-to-jupyterhub-k8s": lambda: {versions.JUPYTERHUB_CHART.version},
    "zero-to-jupyterhub-k8s": lambda: {versions.JUPYTERHUB_CHART.version},
    "jupyterhub/kubespawner": lambda: {versions.JUPYTERHUB_KUBESPAWNER_VERSION},
    "kubespawner": lambda: {versions.JUPYTERHUB_KUBESPAWNER_VERSION},
    "jupyterhub/oauthenticator": lambda: {versions.JUPYTERHUB_OAUTHENTICATOR_VERSION},
    "oauthenticator": lambda: {versions.JUPYTERHUB_OAUTHENTICATOR_VERSION},
    # JupyterHub itself, or its chart by the chart's name
    "jupyterhub": lambda: {versions.NOTEBOOK_JUPYTERHUB_VERSION, versions.JUPYTERHUB_CHART.version},
}
"""Upstream projects (lower case: a short name, or a GitHub owner/repo) and the releases our
pins give each (a function, read when the test runs). Prose cites them by name and release
(``slurm-operator v1.2.1 internal/builder/...``); links, by owner/repo and tag."""

TAGGED_WITHOUT_V: Final = frozenset(
    {
        "boto/botocore",
        "jupyterhub/zero-to-jupyterhub-k8s",
        "jupyterhub/kubespawner",
        "jupyterhub/oauthenticator",
    }
)
"""Repositories whose release tags are the bare version (1.44.8); the others prefix a v."""


def pinned_tags(repo: str) -> set[str] | None:
    """The tags of the releases we pin of GitHub repository ``repo``; None when none is known.

    Args:
        repo: owner/name as a link writes it (any case).
    """
    releases = PINNED_RELEASES.get(repo.lower())
    if releases is None:
        return None
    prefix = "" if repo.lower() in TAGGED_WITHOUT_V else "v"
    return {f"{prefix}{release}" for release in releases()}


def _cited_files() -> list[Path]:
    """Every tracked Python file (code, tests, CI tooling) and Markdown page (README, docs)."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py", "*.md"],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [REPOSITORY_ROOT / name for name in listed if (REPOSITORY_ROOT / name).is_file()]


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of the comments and docstrings of a Python source: where citations live.

    String values (a test's sample URL, a download address the code fetches) are not citations.
    A docstring here is any string statement: a module's, class's or function's, or the one
    below an attribute.
    """
    lines = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            lines += [
                (node.lineno + offset, text)
                for offset, text in enumerate(node.value.value.splitlines())
            ]
    return lines


RELEASE_NOTES: Final = re.compile(r"docs/upgrades/\d+\.\d+\.\d+\.md")
"""A released version's upgrade notes: what that release shipped, cited as it was then."""


def _unreleased(source: str) -> list[tuple[int, str]]:
    """(line, text) of the changelog's ``[Unreleased]`` section: the released entries record
    what each release cited, and a bump must not rewrite history."""
    lines = list(enumerate(source.splitlines(), start=1))
    start = next(i for i, (_, text) in enumerate(lines) if text.startswith("## [Unreleased]"))
    end = next(
        (i for i, (_, text) in enumerate(lines) if i > start and text.startswith("## [")),
        len(lines),
    )
    return lines[start:end]


@functools.cache
def _prose_lines() -> tuple[tuple[str, str], ...]:
    """(file:line, text) of every line of prose: Markdown pages, Python comments and docstrings.

    Released history (the changelog's released entries, a released version's upgrade notes) is
    left out: it cites what that release pinned.
    """
    lines = []
    for path in _cited_files():
        source = path.read_text()
        name = path.relative_to(REPOSITORY_ROOT).as_posix()
        if RELEASE_NOTES.fullmatch(name):
            continue
        if name == "CHANGELOG.md":
            prose = _unreleased(source)
        elif path.suffix == ".md":
            prose = list(enumerate(source.splitlines(), start=1))
        else:
            prose = _prose(source)
        lines += [(f"{path.relative_to(REPOSITORY_ROOT)}:{number}", text) for number, text in prose]
    return tuple(lines)


def _citations() -> tuple[tuple[str, str, str, str], ...]:
    """(file:line, repository, ref, path) of every upstream link in docs, comments, docstrings."""
    return tuple(
        (where, match.group("repo") or match.group("raw"), match.group("ref"), match.group("path"))
        for where, text in _prose_lines()
        for match in LINK.finditer(text)
    )


def stale_citations(citations: Sequence[tuple[str, str, str, str]]) -> list[str]:
    """The citations whose ref is neither a commit nor the tag of the version we pin.

    Args:
        citations: (file:line, repository, ref, path) as :func:`_citations` finds them.

    """
    problems = []
    for where, repo, ref, path in citations:
        if "{" in ref or COMMIT.fullmatch(ref):
            continue  # a template (built from a pin in code) or an exact commit
        tags = pinned_tags(repo)
        if tags is None:
            problems.append(
                f"{where}: {repo} is cited but has no pin in PINNED_RELEASES "
                "(tests/test_citations.py)"
            )
            continue
        if ref not in tags:
            problems.append(
                f"{where}: {repo}/{path} cited at {ref}, but we pin {sorted(tags)}: re-read it"
            )
    return problems


TEXT_CITATION: Final = re.compile(
    r"(?i)(?<![\w/.-])("
    + "|".join(sorted(map(re.escape, PINNED_RELEASES), key=len, reverse=True))
    + r") v?(\d+\.\d+\.\d+)\b"
)
"""A citation written as text: a project's name, then its release."""


def stale_text_citations(lines: Sequence[tuple[str, str]]) -> list[str]:
    """The text citations whose release is not the one we pin.

    Args:
        lines: (file:line, text) of prose, as :func:`_prose_lines` reads it.

    """
    problems = []
    for where, text in lines:
        for match in TEXT_CITATION.finditer(text):
            project, release = match.group(1).lower(), match.group(2)
            pinned = PINNED_RELEASES[project]()
            if release not in pinned:
                problems.append(
                    f"{where}: cites {project} {release}, but we pin {sorted(pinned)}: re-read it"
                )
    return problems


def test_every_release_the_prose_cites_by_name_is_the_pinned_one() -> None:
    """Most citations name a file as text ("slurm-operator v1.2.1 internal/builder/..."); a bump
    of the pin lists every one of them to re-read, as it does for links."""
    lines = _prose_lines()
    cited = [line for line in lines if TEXT_CITATION.search(line[1])]
    assert len(cited) >= 50, "the code cites upstream releases by name"
    assert stale_text_citations(lines) == []


def test_a_bump_flags_the_text_citations_too(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = [("x.py:1", "as slurm-operator v1.2.1 internal/builder/common/container.go merges")]
    assert stale_text_citations(sample) == []
    monkeypatch.setattr(versions, "SLINKY_VERSION", "1.3.0")
    assert stale_text_citations(sample) == [
        "x.py:1: cites slurm-operator 1.2.1, but we pin ['1.3.0']: re-read it"
    ]
    # A name inside another word or path is not a citation.
    assert stale_text_citations([("x.py:2", "my-volcano 9.9.9 and images/trainer 9.9.9")]) == []


def test_every_upstream_link_is_at_the_pinned_version() -> None:
    citations = _citations()
    assert len(citations) >= 5, "the code cites upstream files by link"
    assert stale_citations(citations) == []


def test_a_bump_flags_the_links_to_reread(monkeypatch: pytest.MonkeyPatch) -> None:
    karpenter = [c for c in _citations() if c[1] == "aws/karpenter-provider-aws"]
    assert karpenter, "Karpenter's files are cited"
    monkeypatch.setattr(versions, "KARPENTER_VERSION", "1.15.0")
    stale = stale_citations(karpenter)
    assert len(stale) == len(karpenter)
    assert "cited at v1.14.1, but we pin ['v1.15.0']: re-read it" in stale[0]


def test_links_to_unknown_repositories_and_moving_refs_are_refused() -> None:
    assert stale_citations([("x.py:1", "someone/else", "v1.0.0", "a.go")]) == [
        "x.py:1: someone/else is cited but has no pin in PINNED_RELEASES (tests/test_citations.py)"
    ]
    stale = stale_citations([("x.py:2", "kubeflow/trainer", "master", "pkg/a.go")])
    assert stale and "cited at master" in stale[0]
    commit = "0" * 40
    assert stale_citations([("x.py:3", "someone/else", commit, "a.go")]) == []


def test_citations_are_read_from_comments_and_docstrings_not_values() -> None:
    source = (
        '"""Mirrors https://github.com/a/b/blob/v1/x.go."""\n'
        "URL = 'https://github.com/c/d/blob/main/y.go'\n"
        "# see https://github.com/e/f/blob/v2/z.go\n"
        "X = 1\n"
        '"""The value: https://github.com/g/h/blob/v3/w.go"""\n'
    )
    cited = [(line, match.group("repo")) for line, text in _prose(source)
             for match in LINK.finditer(text)]  # fmt: skip
    assert sorted(cited) == [(1, "a/b"), (3, "e/f"), (5, "g/h")]


def test_the_link_pattern_reads_blob_and_raw_links() -> None:
    text = (
        "see https://github.com/volcano-sh/volcano/blob/v1.15.1/README.md and "
        "https://raw.githubusercontent.com/kubernetes-sigs/jobset/v0.12.0/config/a.yaml)"
    )
    assert [(m.group("repo") or m.group("raw"), m.group("ref")) for m in LINK.finditer(text)] == [
        ("volcano-sh/volcano", "v1.15.1"),
        ("kubernetes-sigs/jobset", "v0.12.0"),
    ]


OUTSIDE_REFERENCE: Final = re.compile(
    "REFERENCE" + r"(?:\.md)?\s*(?:\N{SECTION SIGN}|sections?\b|\d)", re.IGNORECASE
)
"""A pointer into REFERENCE.md, a file beside the checkout that the repository does not ship
(spelt with the section sign, "section N" or a bare number, across a line break too)."""


def test_no_citation_points_into_a_file_outside_the_repository() -> None:
    cited = [
        f"{path.relative_to(REPOSITORY_ROOT)}: {match.group(0)!r}"
        for path in _cited_files()
        for match in OUTSIDE_REFERENCE.finditer(path.read_text())
    ]
    assert cited == []
    prefix = "REFERENCE"  # apart from its sections, so that this file cites none itself
    for spelling in (f"{prefix} \N{SECTION SIGN}5", f"{prefix} section 7", f"{prefix}\n    6"):
        assert OUTSIDE_REFERENCE.search(spelling), spelling
    assert not OUTSIDE_REFERENCE.search("REFERENCE_ENV, the reference data")


def test_a_bump_leaves_released_history_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.1.0's changelog entry cites Karpenter 1.14.1 as shipped; the bot's Karpenter bump must
    # not have to rewrite it, while the unreleased section is still held to the pins.
    _prose_lines.cache_clear()
    monkeypatch.setattr(versions, "KARPENTER_VERSION", "1.15.0")
    stale = stale_text_citations(_prose_lines())
    _prose_lines.cache_clear()
    assert stale, "a bump flags nothing at all"
    assert not [line for line in stale if line.startswith(("CHANGELOG.md", "docs/upgrades/0."))]
    changelog = (REPOSITORY_ROOT / "CHANGELOG.md").read_text()
    assert "karpenter 1.14.1" in changelog.lower() or "Karpenter 1.14.1" in changelog
