"""The slurmd image recipe starts from the Slurm release the bill of materials pins."""

from __future__ import annotations

import re

from components import versions
from synth.stackfile import REPOSITORY_ROOT

DOCKERFILE = REPOSITORY_ROOT / "images" / "slurmd" / "Dockerfile"


def test_slurmd_dockerfile_builds_on_the_pinned_slinky_slurmd() -> None:
    match = re.search(r"^ARG SLURMD_IMAGE=(\S+)$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert match, "images/slurmd/Dockerfile has no default SLURMD_IMAGE"
    assert match.group(1) == (
        f"{versions.SLINKY_IMAGE_REPOSITORY}/slurmd:{versions.SLURM_IMAGE_TAG}"
    ), "bump the Dockerfile's base with components.versions.SLURM_IMAGE_TAG"


def test_slurmd_dockerfile_names_no_download_host() -> None:
    # Download locations are build arguments the builder takes from AWS's documentation.
    text = DOCKERFILE.read_text()
    assert not re.search(r"https?://", text)
    for argument in ("EFA_INSTALLER_URL", "NEURON_APT_REPO", "NEURON_APT_KEY_URL"):
        assert re.search(rf'^ARG {argument}=""$', text, flags=re.MULTILINE), argument
