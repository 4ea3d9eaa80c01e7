"""The slurmd image recipe starts from the Slurm release the bill of materials pins."""

from __future__ import annotations

import re
import subprocess

import pytest

from components import software, trainer, versions
from synth.stackfile import REPOSITORY_ROOT

DOCKERFILE = REPOSITORY_ROOT / "images" / "slurmd" / "Dockerfile"


@pytest.mark.parametrize(
    ("argument", "image"), [("SLURMD_IMAGE", "slurmd"), ("LOGIN_IMAGE", "login")]
)
def test_slurm_recipe_builds_on_the_pinned_slinky_images(argument: str, image: str) -> None:
    match = re.search(rf"^ARG {argument}=(\S+)$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert match, f"images/slurmd/Dockerfile has no default {argument}"
    repository, _, tag = match.group(1).split("@", 1)[0].rpartition(":")
    controller, pinned_tag = software.repository_and_tag(versions.SLINKY_IMAGES["slurmctld"])
    assert repository == f"{controller.rpartition('/')[0]}/{image}"
    # The same Slurm release as slurmctld (slurmd and slurmctld must share it); the flavour is
    # Ubuntu 24.04, which the Neuron runtime and aws-ofi-nccl are released for (26.04 is not).
    slurm_release = pinned_tag.split("-", 1)[0]
    assert tag == f"{slurm_release}-ubuntu24.04", "bump the base with SLINKY_IMAGES' release"


def test_slinky_images_share_one_slurm_release() -> None:
    # slurmctld, slurmdbd, slurmrestd and the login nodes speak one Slurm protocol version; the
    # dependency bot's Slinky group moves them together, and this holds it to that.
    releases = {
        component: software.repository_and_tag(reference)[1].split("@")[0].split("-", 1)[0]
        for component, reference in versions.SLINKY_IMAGES.items()
    }
    assert len(set(releases.values())) == 1, releases


@pytest.mark.parametrize(
    ("recipe", "locations"),
    [
        ("slurmd", ("EFA_INSTALLER_URL", "NEURON_APT_REPO", "NEURON_APT_KEY_URL",
                    "CUDA_APT_REPO", "CUDA_APT_KEY_URL")),
        ("training-cuda", ("EFA_INSTALLER_URL",)),
        ("training-neuron",
         ("EFA_INSTALLER_URL", "NEURON_APT_REPO", "NEURON_APT_KEY_URL", "NEURON_PIP_INDEX")),
        ("acceptance", ("EFA_INSTALLER_URL", "CUDA_APT_REPO", "CUDA_APT_KEY_URL", "NCCL_TESTS_URL",
                        "NEURON_APT_REPO", "NEURON_APT_KEY_URL")),
        ("efa-exporter", ()),
    ],
)  # fmt: skip
def test_recipes_name_no_download_host(recipe: str, locations: tuple[str, ...]) -> None:
    # Download locations are build arguments the builder takes from AWS's documentation.
    text = (REPOSITORY_ROOT / "images" / recipe / "Dockerfile").read_text()
    assert not re.search(r"https?://", text)
    for argument in locations:
        assert re.search(rf'^ARG {argument}=""$', text, flags=re.MULTILINE), argument
        assert f"${{{argument}}}" in text, f"{argument} is never used"


def run_scripts(recipe: str) -> list[str]:
    """The shell of every RUN instruction, as Docker hands it to the shell: continuation lines
    joined, comment lines inside the instruction dropped."""
    scripts: list[str] = []
    current: list[str] | None = None
    for line in (REPOSITORY_ROOT / "images" / recipe / "Dockerfile").read_text().splitlines():
        stripped = line.strip()
        if current is None:
            if not stripped.startswith("RUN "):
                continue
            current, stripped = [], stripped.removeprefix("RUN ")
        elif stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current.append(stripped[:-1])
        else:
            current.append(stripped)
            scripts.append(" ".join(current))
            current = None
    return scripts


@pytest.mark.parametrize(
    "recipe", ["slurmd", "training-cuda", "training-neuron", "acceptance", "efa-exporter"]
)
def test_recipe_shell_parses(recipe: str) -> None:
    scripts = run_scripts(recipe)
    assert scripts, "the recipe has RUN instructions"
    for script in scripts:
        result = subprocess.run(
            ["bash", "-n", "-o", "pipefail", "-c", script],
            check=False,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, (result.stderr, script)


def test_the_acceptance_image_serves_trainers_mpi_pods() -> None:
    """The fabric test runs Trainer MPI pods on the acceptance image (components/fabric_test.py).

    Its workers start ``/usr/sbin/sshd -De -f <config>`` as user 1000 with Trainer's key mounted
    in ``MPI_SSH_PATH``: the recipe makes that user ``mpiuser``, writes that config as Trainer's
    MPI images have it (kubeflow/mpi-operator v0.8.2 build/base/sshd_config plus its port) and
    checks it serves as that user; its last check finds mpirun, sshd and the MPI all_reduce_perf.
    """
    pod = {"containers": [{"name": "node", "image": "i"}]}
    worker = next(job for job in trainer.mpi_replicated_jobs(pod, "i") if job["name"] == "node")
    (container,) = worker["template"]["spec"]["template"]["spec"]["containers"]
    sshd, config = container["command"][0], container["args"][-1]
    home = trainer.MPI_SSH_PATH.rsplit("/", 1)[0]
    assert config.startswith(f"{home}/")
    scripts = run_scripts("acceptance")
    (setup,) = [script for script in scripts if "openssh-server" in script]
    user = trainer.MPI_USER_ID
    assert f"useradd --uid {user} --user-group --create-home {home.rsplit('/', 1)[1]};" in setup
    (written,) = re.findall(r"printf '%s\\n' (.*?) > (\S+);", setup)
    assert written[1] == config
    assert re.findall(r'"([^"]+)"', written[0]) == [
        f"PidFile {home}/sshd.pid",
        f"HostKey {trainer.MPI_SSH_PATH}/id_rsa",
        "StrictModes no",
        "Port ${MPI_SSH_PORT}",
    ]
    assert f"setpriv --reuid={user} --regid={user} --clear-groups {sshd} -t -f {config};" in setup
    assert "setcap" not in setup  # the pods drop every capability
    last = scripts[-1]
    assert last.startswith(f"tools=(fi_info mpirun {sshd});"), last
    assert '"${MPI_ALL_REDUCE_PERF}"' in last
    # the check pods' user (the image's USER) and the fabric pods' both run the program
    text = (REPOSITORY_ROOT / "images" / "acceptance" / "Dockerfile").read_text()
    (check_user,) = re.findall(r"^USER (\d+):", text, flags=re.MULTILINE)
    assert f"for user in {check_user} {user};" in last
