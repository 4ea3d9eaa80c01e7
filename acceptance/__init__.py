"""The node-side acceptance program: check a new accelerator node before work lands on it.

``python -m acceptance decide --instance-type T --evidence DIR`` reads what the checking tools
wrote (``nvidia-smi``, ``fi_info``, ``all_reduce_perf``, ``dcgmi diag``, ``neuron-ls``,
``nccom-test``) and compares it with the instance type's facts in :mod:`components.catalog` and
the floors in ``baselines.json``. Deciding is pure and separate from running the tools, so it is
tested offline with realistic output for every catalog type. ``python -m acceptance check``
(:mod:`acceptance.check`) runs the tools on the node and decides; ``python -m acceptance agent``
(:mod:`acceptance.agent`) gates the node: the check pod, the verdict, the node's marks and its
replacement.

``python -m acceptance mirror`` (:mod:`acceptance.mirror`) keeps Slurm's node states and the
Kubernetes nodes' health marks in agreement, through slurmrestd and the Kubernetes API.

The package runs in the acceptance image, without Pulumi: it imports the standard library,
``components.catalog`` and ``components.health_marks`` (an import-linter contract in
pyproject.toml keeps it so), and the ``kubernetes`` client only where the agent and the mirror
talk to the API server.
"""
