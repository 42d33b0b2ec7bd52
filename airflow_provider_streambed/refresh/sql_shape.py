"""Which SQL members are incremental: a ``GROUP BY`` over one source, read from Spark's analyzed plan.

The query is analysed by Spark itself (the plan of ``spark.sql(query)`` over the bound source
views), never matched with patterns: the plan's root must be an ``Aggregate`` whose grouping
expressions are columns of the source and all in the ``SELECT`` list, whose other outputs are
``COUNT``, ``SUM``, ``AVG``, ``MIN`` or ``MAX`` (no ``DISTINCT``, no ``FILTER``) of anything, over
projections and deterministic filters of the one source's rows. Such a member's output row of a
group depends only on the source rows of that group, so it can be recomputed for the groups a
run's changes touch and kept for the others. Anything else gets the reason it is not incremental.

PySpark has no public API to a DataFrame's analyzed plan: :func:`analyzed_plan` is the one place
that reaches it (``DataFrame._jdf``, classic sessions only; on Spark Connect every SQL member is
computed whole), tested against the installed Spark in ``tests/integration/refresh/test_sql_shape.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

#: Aggregate functions (Spark's class names) whose value for a group depends on its rows only.
AGGREGATES = frozenset({"Count", "Sum", "Average", "Min", "Max"})
#: Plan nodes that keep a row's group a function of the row (with deterministic expressions).
ROW_LOCAL = frozenset({"Project", "Filter"})
#: Why a plan node makes a query not incremental, by the node's name.
NODE_REASONS = {
    "Window": "window function", "Join": "a join", "Sort": "ORDER BY", "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT", "Union": "UNION", "Distinct": "DISTINCT", "Deduplicate": "DISTINCT",
    "Generate": "a generator (explode)", "Expand": "GROUPING SETS, ROLLUP or CUBE", "Aggregate": "a nested aggregation",
}


@dataclass(frozen=True, slots=True)
class GroupByShape:
    """An incremental SQL member's query: a ``GROUP BY`` over ``source``.

    Attributes:
        source: the source member it reads.
        keys: per grouping column, its name in the output and in the source.
    """

    source: str
    keys: tuple[tuple[str, str], ...]


def analyzed_plan(frame: DataFrame) -> Any | None:
    """The analyzed logical plan of ``frame`` (a JVM object), or ``None`` on Spark Connect."""
    java = getattr(frame, "_jdf", None)
    return None if java is None else java.queryExecution().analyzed()


def _items(sequence: Any) -> list[Any]:
    """A Scala ``Seq`` as a list."""
    return [sequence.apply(i) for i in range(sequence.size())]


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def group_by_shape(frame: DataFrame, sources: tuple[str, ...]) -> GroupByShape | str:
    """The query's shape if it is a ``GROUP BY`` over its one source (see the module), else why not."""
    if len(sources) != 1:
        return f"it reads {len(sources)} sources (a GROUP BY over one source is incremental)"
    plan = analyzed_plan(frame)
    if plan is None:
        return "its plan cannot be read on Spark Connect"
    if plan.nodeName() != "Aggregate":
        return _reason_below(plan) or ("HAVING" if plan.nodeName() == "Filter" else "its result is not a GROUP BY")
    relation = _source_relation(plan.child(), sources[0])
    if isinstance(relation, str):
        return relation
    grouping = _grouping_columns(plan, relation)
    if isinstance(grouping, str):
        return grouping
    keys = []
    for output in _items(plan.aggregateExpressions()):
        inner = output.child() if _kind(output) == "Alias" else output
        if _kind(inner) == "AttributeReference" and int(inner.exprId().id()) in grouping:
            keys.append((str(output.name()), grouping[int(inner.exprId().id())]))
        elif (reason := _aggregate_reason(inner)) is not None:
            return reason
    if {source for _, source in keys} != set(grouping.values()):
        return "a GROUP BY column is not in its SELECT list"
    return GroupByShape(sources[0], tuple(keys))


def _grouping_columns(plan: Any, relation: Any) -> dict[int, str] | str:
    """The ``Aggregate``'s grouping columns (expression id -> source column), or why they are not
    all columns of the source ``relation``."""
    expressions = _items(plan.groupingExpressions())
    if not expressions:
        return "an aggregate without GROUP BY"
    columns = {int(attribute.exprId().id()): str(attribute.name()) for attribute in _items(relation.output())}
    grouping: dict[int, str] = {}
    for expression in expressions:
        if _kind(expression) != "AttributeReference" or int(expression.exprId().id()) not in columns:
            return "it groups by an expression that is not a column of its source"
        grouping[int(expression.exprId().id())] = columns[int(expression.exprId().id())]
    return grouping


def _aggregate_reason(expression: Any) -> str | None:
    """Why an output expression is not a plain supported aggregate, or ``None``."""
    if _kind(expression) != "AggregateExpression":
        return f"an expression over aggregates or groups ({expression.toString()})"
    function = _kind(expression.aggregateFunction())
    if function not in AGGREGATES:
        return f"aggregate function {function}"
    if expression.isDistinct() or expression.filter().isDefined():
        return "an aggregate with DISTINCT or FILTER"
    return None


def _source_relation(node: Any, source: str) -> Any:
    """The source's relation under ``node`` through row-local nodes (derived tables' aliases
    included), or why the path is not row-local."""
    while node.nodeName() != "SubqueryAlias" or str(node.alias()).lower() != source.lower():
        name = str(node.nodeName())
        if name not in ROW_LOCAL and name != "SubqueryAlias":
            return NODE_REASONS.get(name, f"a {name} in its plan")
        if _items(node.subqueries()):
            return "a subquery"
        if not all(expression.deterministic() for expression in _items(node.expressions())):
            return "a non-deterministic expression"
        node = node.child()
    return node


def _reason_below(plan: Any) -> str | None:
    """The reason of the first node of ``plan`` (depth first) that :data:`NODE_REASONS` names."""
    name = str(plan.nodeName())
    if name in NODE_REASONS and name != "Aggregate":
        return NODE_REASONS[name]
    for child in _items(plan.children()):
        if (reason := _reason_below(child)) is not None:
            return reason
    return None
