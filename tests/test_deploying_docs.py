"""The pages of a real deployment stay true to the code: versions, placeholders, targets,
protection (how-to/deploy.md, how-to/private-endpoint.md, upgrades/, how-to/tear-down.md)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from components import versions
from synth.engine import ResourceRecord
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT, load_stack, project_settings, stack_names
from tests import docs_pages
from tests.docs_pages import README

DEPLOY = "how-to/deploy.md"
PAGES = (DEPLOY, "how-to/private-endpoint.md", "upgrades/index.md", "upgrades/0.1.0.md",
         "how-to/tear-down.md")  # fmt: skip
"""The pages split from what was docs/deploying.md, read together."""
STACK_DIR = REPOSITORY_ROOT / "stacks"
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def _text() -> str:
    return "\n".join(docs_pages.page(name) for name in PAGES)


_section = docs_pages.section


def _table_rows(section: str) -> list[list[str]]:
    """Cells of every body row of the Markdown tables in ``section``."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [row for row in rows if row[0] not in {"Key", "Type", "Tool"}]


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def real_urns(records: list[ResourceRecord]) -> dict[str, ResourceRecord]:
    """Every record by the URN the real engine gives it.

    The engine qualifies a resource's type with the types of all its component ancestors
    (the root stack excluded); rebuilt here from the parent links, independently of the
    recording monitor's make_urn, which must agree (test below).
    """
    project, _ = project_settings(REPOSITORY_ROOT)
    by_mock = {record.urn: record for record in records}
    found = {}
    for record in records:
        chain: list[str] = []
        current: ResourceRecord | None = record
        while current is not None and current.type != ROOT_STACK_TYPE:
            chain.append(current.type)
            current = by_mock.get(current.parent) if current.parent else None
        stack = record.urn.split("::", 1)[0].removeprefix("urn:pulumi:")
        urn = f"urn:pulumi:{stack}::{project}::{'$'.join(reversed(chain))}::{record.name}"
        found[urn] = record
    return found


# ------------------------------------------------------------------------------- the README


def test_readme_section_is_short_and_points_here() -> None:
    readme = README.read_text()
    assert readme.count("\n## Deploy for real\n") == 1
    body = _section(readme, "## Deploy for real")
    lines = [line for line in body.splitlines() if line.strip()]
    assert 3 <= len(lines) <= 20, lines
    assert "(docs/how-to/deploy.md)" in body
    assert "### " not in body, "the subsections live on the pages"
    (commands,) = docs_pages.fenced(body, "bash")
    assert len(commands.splitlines()) == 5, "deploy for real in five commands"
    assert all(line.startswith("pulumi ") for line in commands.splitlines())
    # What the pages cover, in the README's words, is on the pages.
    text = _text()
    for heading in (
        "## Prerequisites",
        "## What a first real `up` needs",
        "## Bootstrap order",
        "# Upgrading",
        "# Tear down",
    ):
        assert f"\n{heading}\n" in f"\n{text}", heading
    for page in PAGES:
        if not page.startswith("upgrades/0"):
            assert f"(docs/{page})" in readme, page


# ---------------------------------------------------------------------------- tool versions


def _prerequisite(tool: str) -> list[str]:
    rows = _table_rows(_section(_text(), "## Prerequisites"))
    (row,) = [row for row in rows if row[0] == tool]
    return row


def test_pulumi_cli_version_is_the_sdk_pin() -> None:
    # The page names the pin, not its number: the dependency bot moves the number, and the
    # generated bill of materials (rewritten in the bot's pull request) shows it.
    requirements = (REPOSITORY_ROOT / "requirements.txt").read_text()
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", requirements, flags=re.MULTILINE))
    row = _prerequisite("Pulumi CLI")
    assert "`pulumi` release of `requirements.txt`" in row[1]
    assert "bill-of-materials.md#the-programs-python-packages" in row[2]
    assert not re.search(r"\d+\.\d+\.\d+", " ".join(row)), row
    assert not re.search(r"Pulumi CLI\D{0,8}\d+\.\d+\.\d+", _text())
    materials = docs_pages.page("reference/bill-of-materials.md")
    for package in ("pulumi", "pulumi-aws", "pulumi-eks", "pulumi-kubernetes", "pulumi-random"):
        assert f"| `{package}` | `{pins[package]}` |" in materials, package


def test_python_version_is_the_projects() -> None:
    project = tomllib.loads((REPOSITORY_ROOT / "pyproject.toml").read_text())
    minimum = project["project"]["requires-python"].removeprefix(">=")
    row = _prerequisite("Python")
    assert _ticked(row[1]) == [minimum]
    assert f'`requires-python = ">={minimum}"`' in row[2]


def test_kubectl_is_within_one_minor_of_every_stacks_kubernetes() -> None:
    stack_versions = {
        str(load_stack(stack).platform["cluster"].get(
            "kubernetesVersion", versions.DEFAULT_KUBERNETES_VERSION))
        for stack in stack_names()
    }  # fmt: skip
    assert stack_versions == {versions.DEFAULT_KUBERNETES_VERSION}, (
        "stacks run different minors: say which kubectl fits which stack"
    )
    major, minor = (int(part) for part in versions.DEFAULT_KUBERNETES_VERSION.split("."))
    row = _prerequisite("kubectl")
    assert _ticked(row[1]) == [f"{major}.{minor + offset}" for offset in (-1, 0, 1)]
    assert f"Kubernetes `{versions.DEFAULT_KUBERNETES_VERSION}`" in row[2]
    assert "`DEFAULT_KUBERNETES_VERSION`" in row[2]


def test_upgrade_section_states_the_pinned_minor_and_its_support() -> None:
    section = _section(_text(), "## Kubernetes minor")
    version = versions.DEFAULT_KUBERNETES_VERSION
    ends = versions.EKS_SUPPORT_CALENDAR[version].standard_support_ends.isoformat()
    assert f"Every stack runs Kubernetes {version}, in EKS standard support until {ends}." in (
        " ".join(section.split())
    )


def test_helm_is_not_a_prerequisite_because_releases_embed_it() -> None:
    row = _prerequisite("Helm")
    assert row[1] == "not needed"
    assert "kubernetes:helm.sh/v3:Release" in row[2]
    assert "k8s.helm.v3.Release(" in (REPOSITORY_ROOT / "components" / "helm.py").read_text()


def test_aws_cli_is_there_for_the_kubeconfigs_exec_auth() -> None:
    row = _prerequisite("AWS CLI")
    assert row[1] == "v2" and "`aws eks get-token`" in row[2]


# ----------------------------------------------------------------------------- placeholders


def documented_stacks() -> list[str]:
    """The stacks the page has a placeholder table for: the shipped examples.

    An environment added later (how-to/add-an-environment.md) replaces the examples with its
    own values, so the page need not list it; every table must still name a stack file.
    """
    page = docs_pages.page(DEPLOY)
    return [stack for stack in stack_names() if f"#### `stacks/Pulumi.{stack}.yaml`" in page]


def test_every_placeholder_table_names_a_stack_file() -> None:
    tables = re.findall(r"^#### `stacks/Pulumi\.([a-z0-9-]+)\.yaml`", docs_pages.page(DEPLOY), re.M)
    assert tables, "the page has no placeholder table"
    assert sorted(tables) == documented_stacks(), "a table names no stack file"


def _stack_table(stack: str) -> list[list[str]]:
    section = _section(_text(), f"#### `stacks/Pulumi.{stack}.yaml`")
    rows = _table_rows(section)
    assert rows and all(len(row) == 3 for row in rows), stack
    return rows


def _images(platform: dict[str, Any]) -> list[str]:
    found = list((platform.get("trainer") or {}).get("images", {}).values())
    slurm = platform.get("slurm") or {}
    found += list((slurm.get("images") or {}).values())
    found += [node_set["image"] for node_set in slurm.get("nodeSets", []) if "image" in node_set]
    return found


def _placeholders(stack: str) -> set[str]:
    """The values of a stack file that stand for something of the deployer's."""
    text = (STACK_DIR / f"Pulumi.{stack}.yaml").read_text()
    platform = load_stack(stack).platform
    network, cluster = platform["network"], platform["cluster"]
    endpoint = cluster.get("endpoint", {})
    deploy_from = endpoint.get("deployFrom", {})
    tags = platform["tags"]
    slurm = platform.get("slurm") or {}
    login = slurm.get("login") or {}
    values = {
        str(platform["accountId"]),
        platform["region"],
        network["vpcCidr"],
        network["trainingZone"],
        *network["availabilityZones"],
        *endpoint.get("publicAccessCidrs", []),
        *deploy_from.get("cidrs", []),
        *([deploy_from["transitGatewayId"]] if "transitGatewayId" in deploy_from else []),
        cluster["deployerPrincipalArn"],
        *cluster["adminPrincipalArns"],
        tags["owner"],
        tags["costCenter"],
        *tags.get("extra", {}).values(),
        *(reservation for pool in platform.get("nodePools", [])
          for reservation in pool.get("capacityReservationIds", [])),
        *(group for team in platform.get("teams", [])
          for group in team.get("adminGroups", []) + team.get("memberGroups", [])),
        *(key.split()[-1] for key in login.get("sshAuthorizedKeys", [])),
        *login.get("allowedCidrs", []),
        # An image by its repository and tag (the registry is the account's).
        *(image.split("@")[0].rsplit("/", 1)[-1] for image in _images(platform)),
    }  # fmt: skip
    # Whatever looks like an account id or an ARN anywhere in the file, comments included.
    values |= set(re.findall(r"\barn:aws:[^\s\"',\]]+", text))
    values |= {match for match in re.findall(r"\b\d{12}\b", text)}
    return values


@pytest.mark.parametrize("stack", documented_stacks())
def test_every_example_value_in_the_table_is_still_in_the_stack_file(stack: str) -> None:
    text = (STACK_DIR / f"Pulumi.{stack}.yaml").read_text()
    for key, example, _ in _stack_table(stack):
        for value in _ticked(example):
            if value.startswith("@sha256"):
                assert "@sha256:" in text, (stack, key)
                continue
            assert value in text, f"{stack}: {key}: `{value}` is no longer in the stack file"


@pytest.mark.parametrize("stack", documented_stacks())
def test_every_placeholder_of_the_stack_file_is_in_its_table(stack: str) -> None:
    listed = {value for row in _stack_table(stack) for value in _ticked(row[1])}
    missing = sorted(_placeholders(stack) - listed)
    assert not missing, f"stacks/Pulumi.{stack}.yaml: not in the docs' table: {missing}"


@pytest.mark.parametrize("stack", documented_stacks())
def test_the_table_names_each_buckets_derived_name(
    stack: str, synthesized: dict[str, StackResult]
) -> None:
    names = [
        record.inputs["bucket"]
        for record in synthesized[stack].records
        if record.type == "aws:s3/bucket:Bucket"
    ]
    assert names
    replacements = " ".join(row[2] for row in _stack_table(stack))
    for name in names:
        assert f"`{name}`" in replacements, (stack, name)


# ------------------------------------------------------------------ targets, URNs and names


def test_synthesized_urns_are_the_engines(synthesized: dict[str, StackResult]) -> None:
    records = synthesized["prod"].records
    assert sorted(real_urns(records)) == sorted(record.urn for record in records)
    assert any(record.urn.count("$") >= 2 for record in records)  # nested components exist


def test_every_urn_on_the_page_is_a_real_urn_of_prod(synthesized: dict[str, StackResult]) -> None:
    urns = real_urns(synthesized["prod"].records)
    quoted = set(re.findall(r"urn:pulumi:[^\s'`\"]+", _text()))
    assert quoted
    unknown = sorted(quoted - set(urns))
    assert not unknown, f"not URNs of the synthesized prod stack: {unknown}"


def test_the_network_targets_are_the_network_with_what_it_needs(
    synthesized: dict[str, StackResult],
) -> None:
    """The first targeted `up` of prod: exactly the Network subtree, what it depends on, and
    the placement groups (reservations are bought into them before the full `up`)."""
    text = _text()
    marker = "<!-- targets:prod -->"
    block = text[text.index(marker) :].split("```", 2)[1]
    listed = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(listed) == len(set(listed))
    urns = real_urns(synthesized["prod"].records)
    by_mock = {record.urn: urn for urn, record in urns.items()}
    network = {urn for urn in urns if "$trainingplatform:index:Network" in urn
               or urn.endswith("trainingplatform:index:Network::network")}  # fmt: skip
    # Everything the network's resources depend on, outside the network, is targeted too.
    needed = set(network)
    for urn in network:
        record = urns[urn]
        for dependency in record.dependencies + [
            d for ds in record.property_dependencies.values() for d in ds
        ]:
            needed.add(by_mock[dependency])
    for urn, record in urns.items():
        if record.type in {
            "trainingplatform:index:TrainingPlatform",
            "pulumi:providers:aws",
            "trainingplatform:index:NodePools",
            "aws:ec2/placementGroup:PlacementGroup",
        } or (record.type == "aws:kms/alias:Alias" and record.name == "logs"):
            needed.add(urn)
    assert set(listed) == needed, (sorted(set(listed) - needed), sorted(needed - set(listed)))
    assert "$(sed 's/^/--target /' network-targets.txt)" in text


def _placeholder_pattern(name: str) -> re.Pattern[str]:
    parts = re.split(r"<[^>]+>", name)
    return re.compile(".+".join(re.escape(part) for part in parts) + r"\Z")


def test_every_type_and_name_the_page_points_at_exists_in_prod(
    synthesized: dict[str, StackResult],
) -> None:
    """A "`type` `name`" pair (placeholders such as ``<cluster>`` allowed) names a resource."""
    records = synthesized["prod"].records
    cluster = synthesized["prod"].config.name
    pairs = re.findall(r"`([a-z0-9]+:[\w./-]*:\w+)`\s+`([^`]+)`", _text())
    assert len(pairs) >= 3, pairs
    for resource_type, name in pairs:
        pattern = _placeholder_pattern(name.replace("<cluster>", cluster))
        found = [r for r in records if r.type == resource_type and pattern.match(r.name)]
        assert found, f"`{resource_type}` `{name}` is not in the synthesized prod stack"


def test_the_placement_groups_the_page_names_exist(synthesized: dict[str, StackResult]) -> None:
    groups = {
        record.inputs["name"]
        for record in synthesized["prod"].records
        if record.type == "aws:ec2/placementGroup:PlacementGroup"
    }
    named = set(
        re.findall(r"`(ml-training-prod-[a-z0-9]+)`", _section(_text(), "## Bootstrap order"))
    )
    assert named == groups, (named, groups)


# ---------------------------------------------------------------------------------- teardown


def test_every_protected_resource_of_prod_is_named_in_the_teardown_section(
    synthesized: dict[str, StackResult],
) -> None:
    assert synthesized["prod"].config.protect_stateful_resources
    section = _section(_text(), "## What `protectStatefulResources` protects")
    rows = {(row[0], row[1]) for row in _table_rows(section)}
    protected = {
        (f"`{record.type}`", f"`{record.name}`")
        for record in synthesized["prod"].records
        if record.protect
    }
    assert protected, "prod protects nothing?"
    assert protected - rows == set(), f"protected but not listed: {sorted(protected - rows)}"
    assert rows - protected == set(), f"listed but not protected: {sorted(rows - protected)}"


def test_nothing_is_protected_in_stacks_that_do_not_ask(
    synthesized: dict[str, StackResult],
) -> None:
    """The teardown section speaks of prod only: the other stacks protect nothing."""
    for stack, result in synthesized.items():
        if not result.config.protect_stateful_resources:
            assert not [r.name for r in result.records if r.protect], stack


def test_the_teardown_section_states_what_the_code_retains() -> None:
    section = " ".join(docs_pages.page("how-to/tear-down.md").split())
    components = REPOSITORY_ROOT / "components"
    iam = (components / "iam.py").read_text()
    storage = "\n".join(path.read_text() for path in sorted((components / "storage").glob("*.py")))
    window = re.search(r"deletion_window_in_days=(\d+)", iam)
    assert window and f"`deletion_window_in_days={window.group(1)}`" in section
    assert "force_destroy=False" in storage and "`force_destroy: false`" in section
    assert "skip_final_backup" not in storage and "sets no `skip_final_backup`" in section
    assert "delete_data_in_filesystem=False" in storage
    assert "`delete_data_in_filesystem: false`" in section
    trainer = (components / "trainer.py").read_text()
    assert "retain_on_delete=protect" in trainer
    assert "in prod, the `kubeflow-trainer` release, the JobSet CRD" in section
    assert "pulumi state unprotect" in section and "pulumi destroy" in section
    assert section.index("kubectl delete nodepools --all") < section.index(
        "**`pulumi destroy --stack <stack>`**"
    )
