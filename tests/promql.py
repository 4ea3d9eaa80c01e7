"""Which metrics a PromQL expression names, and which of them no exporter writes.

The rules and dashboards are code; these checks let a test hold every expression to the
catalogue of :mod:`components.observability.metric_catalog` (a name no exporter at our pins
writes makes a panel empty and an alert silent, with no error anywhere).

``__name__`` matchers: an equality names its metric; a regular expression is accepted only
when it is an alternation of plain names (``__name__=~"a_total|b_total"``), which names each
of them; any other regular expression, and every negative ``__name__`` matcher (``!=``,
``!~``), can select metrics no one listed, so it is refused with :class:`UnboundedNameError`
rather than guessed at.

For the tests only: promql-parser is a development requirement (requirements-dev.txt), so
nothing the program runs may import this module.
"""

from __future__ import annotations

import re
from typing import Final

import promql_parser

from components.observability.metric_catalog import METRIC_NAME

NAME_LABEL: Final = "__name__"

_ALTERNATION: Final = rf"(?:{METRIC_NAME.pattern})(?:\|(?:{METRIC_NAME.pattern}))*"
_NAME_ALTERNATION: Final = re.compile(rf"{_ALTERNATION}|\({_ALTERNATION}\)")
"""A regular expression that matches exactly a list of names (``a|b``, ``(a|b)``)."""


_OPERATORS: Final = (
    (promql_parser.MatchOp.Equal, "="),
    (promql_parser.MatchOp.NotEqual, "!="),
    (promql_parser.MatchOp.Re, "=~"),
    (promql_parser.MatchOp.NotRe, "!~"),
)
"""How PromQL writes each matcher operator, for error messages (the parser's operators are
not hashable)."""


def _operator(op: promql_parser.MatchOp) -> str:
    """PromQL's spelling of a matcher operator."""
    return next((text for known, text in _OPERATORS if op == known), str(op))


class PromQLError(ValueError):
    """An expression this module cannot vouch for; the message names the expression."""


class PromQLSyntaxError(PromQLError):
    """The expression does not parse."""


class UnboundedNameError(PromQLError):
    """A selector that may select metrics by a pattern, or by no name at all.

    The metrics it reads cannot be listed, so they cannot be checked.
    """


def _selector_names(selector: promql_parser.VectorSelector, expression: str) -> set[str]:
    """The metric names one vector selector selects.

    Args:
        selector: the selector (``name{matchers}``, ``{__name__=...}``, with ``or`` matchers).
        expression: the whole expression, for the error message.
    """
    matchers = selector.matchers
    branches: list[list[promql_parser.Matcher]] = (
        [list(branch) for branch in matchers.or_matchers]
        if matchers.or_matchers
        else [list(matchers.matchers)]
    )
    found: set[str] = set()
    for branch in branches:
        named = {selector.name} if selector.name else set()
        for matcher in branch:
            if matcher.name != NAME_LABEL:
                continue
            if matcher.op == promql_parser.MatchOp.Equal:
                named.add(matcher.value)
            elif matcher.op == promql_parser.MatchOp.Re and _NAME_ALTERNATION.fullmatch(
                matcher.value
            ):
                named.update(matcher.value.strip("()").split("|"))
            else:
                raise UnboundedNameError(
                    f"PromQL {expression!r}: the matcher {NAME_LABEL}"
                    f"{_operator(matcher.op)}{matcher.value!r} may select metrics no exporter "
                    "lists; name each "
                    'metric (or an alternation of names, __name__=~"a|b")'
                )
        if not named:
            raise UnboundedNameError(
                f"PromQL {expression!r}: a selector names no metric ({selector.prettify()})"
            )
        found |= named
    return found


def _names(node: promql_parser.Expr, expression: str) -> set[str]:
    """The metric names under one node of the syntax tree.

    Every node type is listed: a new one in a later promql-parser fails here loudly rather
    than hiding its selectors.

    Args:
        node: the node.
        expression: the whole expression, for error messages.
    """
    if isinstance(node, promql_parser.VectorSelector):
        return _selector_names(node, expression)
    if isinstance(node, promql_parser.MatrixSelector):
        return _selector_names(node.vector_selector, expression)
    if isinstance(node, promql_parser.Call):
        return set().union(*(_names(argument, expression) for argument in node.args))
    if isinstance(node, promql_parser.AggregateExpr):
        names = _names(node.expr, expression)
        if node.param is not None:
            names |= _names(node.param, expression)
        return names
    if isinstance(node, promql_parser.BinaryExpr):
        return _names(node.lhs, expression) | _names(node.rhs, expression)
    if isinstance(
        node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
    ):
        return _names(node.expr, expression)
    if isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral):
        return set()
    raise PromQLError(f"PromQL {expression!r}: no rule for a {type(node).__name__} node")


def metric_names(expression: str) -> set[str]:
    """Every metric name an expression selects, wherever the selector sits.

    Vector and range selectors, ``__name__`` matchers (see the module's docstring), inside
    function calls, aggregations (their parameter too), binary operations, parentheses,
    unary minus and subqueries.

    Args:
        expression: the PromQL, as a rule or panel holds it.

    Raises:
        PromQLSyntaxError: the expression does not parse (the message quotes it).
        UnboundedNameError: a selector's metrics cannot be listed.
    """
    try:
        tree = promql_parser.parse(expression)
    except ValueError as error:
        raise PromQLSyntaxError(f"PromQL {expression!r} does not parse: {error}") from error
    return _names(tree, expression)


def unknown_metrics(expression: str, known: set[str] | frozenset[str],
                    recorded: set[str] | frozenset[str]) -> set[str]:  # fmt: skip
    """The metrics an expression names that neither an exporter nor a recording rule writes.

    Args:
        expression: the PromQL.
        known: what the exporters write
            (:func:`components.observability.metric_catalog.known_metrics`).
        recorded: the ``record`` names of the recording rules the stack defines; a name a
            rule records counts as known.

    Raises:
        PromQLSyntaxError: the expression does not parse.
        UnboundedNameError: a selector's metrics cannot be listed.
    """
    return metric_names(expression) - set(known) - set(recorded)
