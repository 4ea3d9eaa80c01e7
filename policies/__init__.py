"""The CrossGuard policy pack of the training platform (rules in ``policies.rules``).

Importing the package first defers the one costly part of importing jsonschema
(:func:`defer_iri_grammar`), which the offline gate (``policies.offline``) imports in every
synthesis and every test process.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

IRI_SYNTAX = "rfc3987_syntax"
"""The module jsonschema's ``iri`` and ``iri-reference`` format checks call (jsonschema 4.26.0
jsonschema/_format.py imports it at import time when installed; jupyter-events asks for
``jsonschema[format-nongpl]``, which installs it beside jupyterhub in the dev requirements)."""


def defer_iri_grammar() -> None:
    """Build rfc3987-syntax's RFC 3987 parser when an IRI is first checked, not at import.

    ``rfc3987_syntax`` builds an Earley parser of RFC 3987's grammar when imported
    (rfc3987-syntax 1.1.0 rfc3987_syntax/syntax_helpers.py, ``syntax_parser = Lark(...)``):
    about 1.4 CPU-seconds in every process that imports jsonschema, which imports it for two
    format checks. Nothing here passes jsonschema a format checker, so no process of this
    project checks an IRI, but each paid for the parser. This puts a stand-in under its name
    whose ``is_valid_syntax`` imports the real module on its first call and then answers
    exactly as it does: what jsonschema validates is unchanged, only when the parser is built.

    Does nothing when jsonschema's format checks are already imported (too late to matter),
    when the real module is already loaded, or when it is not installed (the runtime
    requirements, and the pack under ``pulumi preview``, do without it).
    """
    if "jsonschema._format" in sys.modules or IRI_SYNTAX in sys.modules:
        return
    if importlib.util.find_spec(IRI_SYNTAX) is None:
        return
    stand_in = types.ModuleType(IRI_SYNTAX, "Stands in for rfc3987_syntax until first used.")

    def is_valid_syntax(term: str, value: str) -> bool:
        """rfc3987_syntax's own ``is_valid_syntax``, imported on the first call."""
        if sys.modules.get(IRI_SYNTAX) is stand_in:
            del sys.modules[IRI_SYNTAX]
        real = importlib.import_module(IRI_SYNTAX)
        answer: bool = real.is_valid_syntax(term, value)
        return answer

    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules[IRI_SYNTAX] = stand_in


defer_iri_grammar()
