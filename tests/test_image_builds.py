"""The images workflow builds every image a stack names, from pinned bases, with the tags config
knows them by (issue 21, point 7)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components import image_builds, software
from components.config import NotebookImagesConfig, parse_platform_config
from components.config.acceptance import AcceptanceImagesConfig
from components.config.observability import ObservabilityImagesConfig
from components.config.ray import RayImagesConfig
from components.config.slurm import SlurmImagesConfig
from components.config.trainer import RUNTIME_IMAGE_KEYS
from components.image_builds import ImageBuild, builds
from components.slurm import login_image
from synth.run import StackResult
from synth.stackfile import REPOSITORY_ROOT
from synth.yamlio import load_yaml
from tests.config_problems import assert_reported
from tests.conftest import stack_data
from tests.test_images import run_scripts

WORKFLOW = REPOSITORY_ROOT / ".github" / "workflows" / "images.yml"
SLURM_RECIPE = REPOSITORY_ROOT / "images" / "slurmd" / "Dockerfile"
DIGEST = "@sha256:" + "0123456789abcdef" * 4


def _stack_image_keys() -> set[str]:
    """Every stack key whose value is an image the platform's recipes build."""
    trainer = {
        f"trainer.images.{key}" for keys in RUNTIME_IMAGE_KEYS.values() for key in keys.values()
    }
    slurm = {
        f"slurm.images.{field.alias or name}"
        for name, field in SlurmImagesConfig.model_fields.items()
    }
    ray = {f"ray.images.{name}" for name in RayImagesConfig.model_fields}
    notebooks = {f"notebooks.images.{name}" for name in NotebookImagesConfig.model_fields}
    acceptance = {f"acceptance.images.{name}" for name in AcceptanceImagesConfig.model_fields}
    observability = {
        f"observability.images.{field.alias or name}"
        for name, field in ObservabilityImagesConfig.model_fields.items()
    }
    return trainer | slurm | ray | notebooks | acceptance | observability


def test_every_image_a_stack_names_is_built() -> None:
    planned = {build.config_key: build for build in builds()}
    assert set(planned) == _stack_image_keys()
    assert len({(b.repository, b.tag) for b in planned.values()}) == len(planned)


def test_each_build_carries_the_tag_config_knows_it_by() -> None:
    for build in builds():
        assert build.tag == software.built_tag(build.recipe, build.variant)
    login = next(b for b in builds() if b.config_key == "slurm.images.login")
    assert login.arguments == {"ROLE": "login", "ACCELERATOR": "gpu"}
    assert login.bases == {"LOGIN_IMAGE": software.recipe_pins("slurmd")["LOGIN_IMAGE"]}


def test_the_prod_stack_names_the_images_the_workflow_pushes() -> None:
    data = stack_data("prod")
    named = {f"trainer.images.{k}": v for k, v in data["trainer"]["images"].items()}
    named |= {f"slurm.images.{k}": v for k, v in data["slurm"]["images"].items()}
    planned = {build.config_key: build for build in builds()}
    for key, reference in named.items():
        name = reference.split("@", 1)[0]
        repository = name.rsplit("/", 1)[-1].split(":", 1)[0]
        assert (repository, software.reference_tag(reference)) == (
            planned[key].repository,
            planned[key].tag,
        ), key
        assert re.search(r"@sha256:[0-9a-f]{64}$", reference), key


def _pinned(build: ImageBuild) -> ImageBuild:
    return replace(
        build, bases={arg: ref.split("@", 1)[0] + DIGEST for arg, ref in build.bases.items()}
    )


def test_a_base_pinned_by_tag_alone_stops_the_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = [_pinned(b) for b in builds()]
    monkeypatch.setattr(image_builds, "builds", lambda: pinned)
    assert image_builds.main(["matrix"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert len(matrix["include"]) == len(pinned)
    floating = [*pinned[:-1], replace(pinned[-1], bases={"LOGIN_IMAGE": "x/login:26.05"})]
    monkeypatch.setattr(image_builds, "builds", lambda: floating)
    assert image_builds.main(["matrix"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "slurm-login: LOGIN_IMAGE=x/login:26.05" in captured.err


def test_the_plan_names_the_bases_the_bill_of_materials_pins() -> None:
    by_key = {build.config_key: build for build in builds()}
    for key, image in software.DEFAULT_IMAGES.items():
        assert by_key[f"trainer.images.{key}"].bases == {"BASE_IMAGE": image.name}
    assert by_key["trainer.images.neuron"].bases == {
        "BASE_IMAGE": software.recipe_pins("training-neuron")["BASE_IMAGE"]
    }
    for key in ("slurm.images.slurmdGpu", "slurm.images.slurmdNeuron"):
        assert by_key[key].bases == {"SLURMD_IMAGE": software.recipe_pins("slurmd")["SLURMD_IMAGE"]}
    floating = {base for build in builds() for base in build.floating_bases}
    # A digest pins a base; a tag alone does not (the torch default is pinned).
    assert not any("pytorch/pytorch" in base for base in floating)
    assert all("@sha256:" not in base for base in floating)


# -- the workflow -------------------------------------------------------------------------------


def _workflow() -> dict[str, Any]:
    document = load_yaml(WORKFLOW.read_text())
    assert isinstance(document, dict)
    return document


def test_the_workflow_plans_then_builds_every_entry_and_pushes_only_releases() -> None:
    workflow = _workflow()
    plan, build = workflow["jobs"]["plan"], workflow["jobs"]["build"]
    runs = [step.get("run", "") for step in plan["steps"]]
    assert any("python -m components.image_builds matrix" in run for run in runs)
    assert build["needs"] == "plan"
    assert "fromJSON(needs.plan.outputs.matrix)" in build["strategy"]["matrix"]
    used = set(re.findall(r"matrix\.([a-z_]+)", WORKFLOW.read_text()))
    entry = builds()[0].matrix_entry()
    assert used <= set(entry), used - set(entry)
    # Pushing is for release tags only; pull requests only build.
    script = next(s["run"] for s in build["steps"] if s.get("name", "").startswith("Build"))
    assert "output=(--push)" in script and 'if [[ "$GITHUB_REF" == refs/tags/v* ]]' in script
    # A tag already pushed is kept, not replaced by a rebuild's other bytes.
    assert script.index("imagetools inspect") < script.index("output=(--push)")
    login = next(s for s in build["steps"] if s.get("name") == "Log in to the registry")
    assert login["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert workflow["permissions"] == {"contents": "read"}
    assert build["permissions"]["packages"] == "write"
    assert "packages" not in plan.get("permissions", {})
    # Every download location a recipe takes is a variable the job passes.
    env = build["env"]
    for name in {name for b in builds() for name in b.downloads}:
        assert env[name] == f"${{{{ vars.{name} }}}}", name


def test_each_recipe_takes_the_download_arguments_the_plan_passes() -> None:
    recipes = {path.parent.name for path in (REPOSITORY_ROOT / "images").glob("*/Dockerfile")}
    assert {b.recipe for b in builds()} == recipes  # every recipe is built
    for recipe in recipes:
        text = (REPOSITORY_ROOT / "images" / recipe / "Dockerfile").read_text()
        declared = set(re.findall(r'^ARG ([A-Z_]+)=""$', text, flags=re.MULTILINE))
        assert set(software.recipe_downloads(recipe)) == declared, recipe
        passed = {name for b in builds() if b.recipe == recipe for name in b.downloads}
        # and those of the base it is built on in the same job (ray-neuron on training-neuron,
        # ray-cuda on training-cuda); a recipe with neither downloads nothing, which only the
        # EFA exporter's may (its one package comes from its requirements file, through pip)
        based = {n for b in builds() if b.recipe == recipe and b.base_build for n in b.downloads}
        assert declared or based or recipe == software.EFA_EXPORTER_RECIPE, recipe
        assert passed == declared | based, recipe
        # The named context only where the recipe copies from it (docker refuses an unknown one).
        contexts = {b.matrix_entry()["build_contexts"] for b in builds() if b.recipe == recipe}
        wanted = [c for c in image_builds.NAMED_CONTEXTS if f"--from={c.split('=')[0]} " in text]
        assert contexts == {" ".join(wanted)}, recipe
    # The GPU and login builds need no Neuron repository (a project without Trainium has none).
    for build in builds():
        neuron = build.arguments.get("ACCELERATOR") == "neuron" or build.repository in {
            "training-neuron",
            "ray-neuron",
            "notebook-neuron",
            "acceptance-neuron",
        }
        assert any(n.startswith("NEURON_") for n in build.downloads) == neuron, build.repository


def test_the_plan_steps_exit_status_reaches_the_job() -> None:
    (step,) = [s for s in _workflow()["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    plan = ".venv/bin/python -m components.image_builds matrix"
    assert plan in step["run"]

    def status(script: str) -> int:
        # GitHub runs a step's script with bash -e; the plan here refuses (exits 1).
        return subprocess.run(["bash", "-eo", "pipefail", "-c", script.replace(plan, "exit 1")],
                              env={"GITHUB_OUTPUT": "/dev/null"}, check=False,
                              timeout=30).returncode  # fmt: skip

    assert status(step["run"]) == 1
    assert status(f'echo "matrix=$({plan})" >> "$GITHUB_OUTPUT"') == 0  # what it must not be


# -- the recipe's login role ------------------------------------------------------------------


def _first_run() -> str:
    """The first RUN of the Slurm recipe, as Docker hands it to the shell."""
    return run_scripts("slurmd")[0]


@pytest.mark.parametrize(
    ("role", "accelerator", "refused"),
    [("slurmd", "gpu", False), ("slurmd", "neuron", False), ("login", "gpu", False),
     ("login", "neuron", True), ("sackd", "gpu", True)],
)  # fmt: skip
def test_the_recipe_builds_slurmd_and_a_gpu_login_only(
    role: str, accelerator: str, refused: bool
) -> None:
    env = {"PATH": "/usr/bin:/bin", "ROLE": role, "ACCELERATOR": accelerator,
           "EFA_INSTALLER_URL": "", "EFA_INSTALLER_VERSION": "1.47.0"}  # fmt: skip
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-euc", _first_run()],
        env=env, capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    # Past the role check, the next one stops it: no installer location was given.
    assert result.returncode == 1
    assert ("ROLE is slurmd, or login" in result.stderr) == refused, result.stderr
    assert ("EFA_INSTALLER_URL must name" in result.stderr) == (not refused), result.stderr


def test_login_shells_get_the_job_tools_first_on_their_path(tmp_path: Path) -> None:
    text = SLURM_RECIPE.read_text()
    run = re.search(r"^RUN (printf .*/etc/profile\.d/\S+)$", text, flags=re.MULTILINE)
    assert run, "the recipe writes a profile.d script"
    tools = software.recipe_pins("slurmd")["JOB_TOOLS_PATH"]
    script = run.group(1).replace("/etc/profile.d/", f"{tmp_path}/")
    subprocess.run(["bash", "-c", script], env={"JOB_TOOLS_PATH": tools, "PATH": "/usr/bin:/bin"},
                   check=True, timeout=30)  # fmt: skip
    (profile,) = tmp_path.iterdir()
    shown = subprocess.run(
        ["bash", "-c", f'PATH=/usr/bin:/bin; . "{profile}"; echo "$PATH"'],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert shown.stdout.strip() == f"{tools}:/usr/bin:/bin"


# -- config and the login pods ----------------------------------------------------------------


def test_a_login_image_must_be_the_recipes_current_login_build() -> None:
    data = stack_data("prod")
    stale = "registry.example.com/slurm-login:25.11-ubuntu24.04-efa1.47.0" + DIGEST
    data["slurm"]["images"]["login"] = stale
    assert_reported(data, "platform.slurm.images.login", stale, "ROLE=login, tagged :")
    data["slurm"]["images"].pop("login")
    assert parse_platform_config(data).slurm.images.login is None


def _login_pod(result: StackResult) -> dict[str, Any]:
    path = result.written.directory / "pods" / "Pod.slurm.slurm-login-login.yaml"
    pod: dict[str, Any] = load_yaml(path.read_text())
    return pod


def test_login_pods_run_the_stacks_login_build_else_slinkys_own(
    synthesized: dict[str, StackResult],
) -> None:
    for stack in ("prod", "dev"):
        pod = _login_pod(synthesized[stack])
        images = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        configured = stack_data(stack)["slurm"]["images"]["login"]
        # The chart renders repository@digest when there is one, the reference as written when
        # it is by tag (prod's is by digest; dev's example is by tag until a deployer pins it).
        name, _, digest = configured.partition("@")
        expected = f"{name.rsplit(':', 1)[0]}@{digest}" if digest else configured
        assert images["login"] == expected, stack
    # prod's directory sidecar, which lists the accounts, runs the same image.
    prod = {c["name"]: c["image"] for c in _login_pod(synthesized["prod"])["spec"]["containers"]}
    assert prod["accounts"] == prod["login"]
    data = stack_data("dev")
    data["slurm"]["images"].pop("login")
    assert login_image(parse_platform_config(data)).startswith("ghcr.io/slinkyproject/login:")


def _vendor_run() -> str:
    """The recipe's RUN that installs the accelerator's user space from its vendor's apt."""
    runs = [r for r in run_scripts("slurmd") if "/etc/apt/sources.list.d/${name}.list" in r]
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize(
    ("accelerator", "expected"),
    [("gpu", ["cuda-cudart-13-0", "libnccl2=2.29.7-1+cuda13.0", "libnccl-dev=2.29.7-1+cuda13.0"]),
     ("neuron", ["aws-neuronx-runtime-lib=2.33.10.0*", "aws-neuronx-collectives=2.33.10.0*",
                 "aws-neuronx-tools=2.31.15.0*"])],
)  # fmt: skip
def test_the_recipe_installs_the_accelerators_pinned_user_space(
    tmp_path: Path, accelerator: str, expected: list[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("curl", "gpg", "apt-get", "ldconfig"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls\n')
        (bin_dir / tool).chmod(0o755)
    script = (_vendor_run().replace("/usr/share/keyrings/", f"{tmp_path}/")
              .replace("/etc/apt/sources.list.d/", f"{tmp_path}/").replace("/var/lib/apt/lists/", f"{tmp_path}/lists/"))  # fmt: skip
    pins = software.recipe_pins("slurmd")
    name = "CUDA" if accelerator == "gpu" else "NEURON"
    # Docker defines every ARG, the download locations as "" unless given.
    downloads = dict.fromkeys(software.recipe_downloads("slurmd"), "")
    env = {**pins, **downloads, "PATH": f"{bin_dir}:/usr/bin:/bin", "ACCELERATOR": accelerator}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env,
                            capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    assert result.returncode == 1 and f"set {name}_APT_REPO" in result.stderr
    env |= {f"{name}_APT_REPO": "https://vendor.example/repo /", f"{name}_APT_KEY_URL": "k"}
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, check=True, timeout=30)
    calls = (tmp_path / "calls").read_text().splitlines()
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert install.split()[4:] == expected
    source = (tmp_path / f"{name.lower()}.list").read_text()
    assert source.strip().endswith("https://vendor.example/repo /")
