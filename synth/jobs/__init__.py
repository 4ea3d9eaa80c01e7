"""The jobs model: what the consuming controllers would decide about every job path of a stack.

``python -m synth jobs <stack> [--json]`` prints it; synthesis writes it as ``jobs.json`` and
blocks a stack in which a promised path cannot run.
"""
