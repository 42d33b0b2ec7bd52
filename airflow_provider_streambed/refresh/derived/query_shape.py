"""Which SQL members are incremental: a ``GROUP BY`` over a source or key equi-joins, read from Spark's plan.

The query is analysed by Spark itself (the plan of ``spark.sql(query)`` over the bound source
views), never matched with patterns: the plan's root must be an ``Aggregate`` whose grouping
expressions are columns of the sources and all in the ``SELECT`` list, whose other outputs are
``COUNT``, ``SUM``, ``AVG``, ``MIN`` or ``MAX`` (no ``DISTINCT``, no ``FILTER``) of anything, over
projections and deterministic filters of one source's rows, or of inner joins of such: each join's
``ON`` a conjunction of equalities of a column of each side that covers the declared key of the
one source of a side (so a row of the other side meets at most one of its rows), each source read
once, and a source not joined on its key gives a GROUP BY column (else the recompute of the touched
groups would read it whole, which costs more than computing the member whole). Such a member's
output row of a group depends only on the joined rows of that group, so it can be recomputed for
the groups a run's changes touch and kept for the others. Anything else gets the reason it is not
incremental.

PySpark has no public API to a DataFrame's analyzed plan: :func:`analyzed_plan` is the one place
that reaches it (``DataFrame._jdf``, classic sessions only; on Spark Connect a local classic Spark
reads the plan over empty sources, :mod:`.member_shape`), tested against the installed Spark in
``tests/integration/refresh/test_sql_shape.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape, GroupKey

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Aggregate functions whose value for a group depends on its rows only: Spark's class name -> SQL name.
AGGREGATES = {"Count": "count", "Sum": "sum", "Average": "avg", "Min": "min", "Max": "max"}
#: Plan nodes that keep a row's group a function of the row (with deterministic expressions).
ROW_LOCAL = frozenset({"Project", "Filter"})
#: Why a plan node makes a query not incremental, by the node's name.
NODE_REASONS = {
    "Window": "window function", "Join": "a join", "Sort": "ORDER BY", "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT", "Union": "UNION", "Distinct": "DISTINCT", "Deduplicate": "DISTINCT",
    "Generate": "a generator (explode)", "Expand": "GROUPING SETS, ROLLUP or CUBE", "Aggregate": "a nested aggregation",
}


def analyzed_plan(frame: DataFrame) -> Any | None:
    """The analyzed logical plan of ``frame`` (a JVM object), or ``None`` on Spark Connect."""
    java = getattr(frame, "_jdf", None)
    return None if java is None else java.queryExecution().analyzed()


def _items(sequence: Any) -> list[Any]:
    """A Scala ``Seq`` as a list."""
    return [sequence.apply(i) for i in range(sequence.size())]


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def group_by_shape(frame: DataFrame, sources: Mapping[str, tuple[str, ...]]) -> GroupByShape | str:
    """The query's shape if it is a ``GROUP BY`` over its sources (see the module), else why not.

    Args:
        frame: the query over its sources bound as views of their names.
        sources: per source the query reads, its declared key (a mirror's primary key or replica
            identity; empty: none).
    """
    plan = analyzed_plan(frame)
    if plan is None:
        return "its plan cannot be read on Spark Connect"
    if plan.nodeName() != "Aggregate":
        return _reason_below(plan) or ("HAVING" if plan.nodeName() == "Filter" else "its result is not a GROUP BY")
    keyed: set[str] = set()
    relations = _source_relations(plan.child(), {name.lower(): (name, key) for name, key in sources.items()}, keyed)
    if isinstance(relations, str):
        return relations
    if unread := [name for name in sources if name not in relations]:
        return f"its query does not read its source {unread[0]!r}"
    outputs = _outputs(plan, _columns(relations))
    if isinstance(outputs, str):
        return outputs
    keys, aggregates = outputs
    if unnarrowed := [name for name in relations if name not in keyed and name not in {key.source for key in keys}]:
        return (f"no GROUP BY column comes from {unnarrowed[0]} and it is not joined on its key, so every run "
                f"would read it whole")
    referenced = _referenced(plan, {name.lower() for name in sources})
    read = {name: [str(column.name()) for column in _items(relation.output())
                   if int(column.exprId().id()) in referenced] for name, relation in relations.items()}
    filtered = _filtered(plan.child(), {name.lower() for name in sources})
    return GroupByShape(tuple(relations), tuple(keys), tuple(aggregates), read, filtered)


def _source_view(node: Any, sources: Collection[str]) -> bool:
    """Whether ``node`` is a source's bound view (the alias over the ``View`` of one of
    ``sources``, by lower-cased name), not a derived table or CTE that takes a source's name."""
    return (node.nodeName() == "SubqueryAlias" and str(node.alias()).lower() in sources
            and node.child().nodeName() == "View")


def _filtered(node: Any, sources: set[str]) -> bool:
    """Whether a ``Filter`` is among the nodes of ``node`` down to the source relations (by
    lower-cased name)."""
    if _source_view(node, sources):
        return False
    return node.nodeName() == "Filter" or any(_filtered(child, sources) for child in _items(node.children()))


def _referenced(node: Any, sources: set[str]) -> set[int]:
    """The expression ids of the columns the nodes of ``node`` down to the source relations (by
    lower-cased name) refer to."""
    if _source_view(node, sources):
        return set()
    ids = {int(column.exprId().id()) for column in _items(node.references().toSeq())}
    for child in _items(node.children()):
        ids |= _referenced(child, sources)
    return ids


def _outputs(plan: Any, columns: Mapping[int, tuple[str, str]]) -> tuple[list[GroupKey], list[AggregateOutput]] | str:
    """The ``Aggregate``'s grouping columns as its outputs name them and its aggregates, or why its
    outputs are not those columns and plain supported aggregates (``columns``: the sources',
    :func:`_columns`)."""
    grouping = _grouping_columns(plan, columns)
    if isinstance(grouping, str):
        return grouping
    keys: list[GroupKey] = []
    aggregates: list[AggregateOutput] = []
    arguments: list[Any] = []
    for output in _items(plan.aggregateExpressions()):
        inner = output.child() if _kind(output) == "Alias" else output
        if _kind(inner) == "AttributeReference" and int(inner.exprId().id()) in grouping:
            keys.append(GroupKey(str(output.name()), *grouping[int(inner.exprId().id())]))
        elif (reason := _aggregate_reason(inner)) is not None:
            return reason
        else:
            aggregates.append(_aggregate(str(output.name()), inner.aggregateFunction(), arguments, columns))
    if {(key.source, key.column) for key in keys} != set(grouping.values()):
        return "a GROUP BY column is not in its SELECT list"
    return keys, aggregates


def _aggregate(
    output: str, function: Any, arguments: list[Any], columns: Mapping[int, tuple[str, str]]
) -> AggregateOutput:
    """The aggregate ``function`` named ``output``; ``arguments`` (the distinct arguments seen so
    far, as Spark expressions) gains its argument when new (``columns``: the sources')."""
    children = _items(function.children())
    if all(child.foldable() and not child.nullable() for child in children):
        return AggregateOutput(output, AGGREGATES[_kind(function)], None, "")
    argument = children[0] if len(children) == 1 else function
    index = next((i for i, seen in enumerate(arguments) if seen.semanticEquals(argument)), len(arguments))
    if index == len(arguments):
        arguments.append(argument)
    column = columns.get(int(argument.exprId().id())) if _kind(argument) == "AttributeReference" else None
    return AggregateOutput(output, AGGREGATES[_kind(function)], index, str(argument.dataType().typeName()),
                           "" if column is None else column[1])


def _columns(relations: Mapping[str, Any]) -> dict[int, tuple[str, str]]:
    """The columns of the source ``relations``: expression id -> (source, column)."""
    return {int(attribute.exprId().id()): (name, str(attribute.name()))
            for name, relation in relations.items() for attribute in _items(relation.output())}


def _grouping_columns(plan: Any, columns: Mapping[int, tuple[str, str]]) -> dict[int, tuple[str, str]] | str:
    """The ``Aggregate``'s grouping columns (expression id -> source and column), or why they are
    not all ``columns`` of the sources (:func:`_columns`)."""
    expressions = _items(plan.groupingExpressions())
    if not expressions:
        return "an aggregate without GROUP BY"
    grouping: dict[int, tuple[str, str]] = {}
    for expression in expressions:
        if _kind(expression) != "AttributeReference" or int(expression.exprId().id()) not in columns:
            return "it groups by an expression that is not a column of its sources"
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


def _source_relations(
    node: Any, sources: Mapping[str, tuple[str, tuple[str, ...]]], keyed: set[str]
) -> dict[str, Any] | str:
    """The relations of the sources under ``node`` (by source name; ``sources``: by lower-cased
    name, the name and its key) through row-local nodes (derived tables' aliases included) and key
    equi-joins, or why the path is not one of those; ``keyed`` gains the sources joined on their key."""
    while not _source_view(node, sources):
        name = str(node.nodeName())
        if name == "Join":
            return _joined_relations(node, sources, keyed)
        if name not in ROW_LOCAL and name != "SubqueryAlias":
            return NODE_REASONS.get(name, f"a {name} in its plan")
        if _items(node.subqueries()):
            return "a subquery"
        if not all(expression.deterministic() for expression in _items(node.expressions())):
            return "a non-deterministic expression"
        node = node.child()
    return {sources[str(node.alias()).lower()][0]: node}


def _joined_relations(
    join: Any, sources: Mapping[str, tuple[str, tuple[str, ...]]], keyed: set[str]
) -> dict[str, Any] | str:
    """The source relations of both sides of ``join``, or why it is not an inner join whose ``ON``
    equates the key of one side's only source to columns of the other side (``keyed`` gains it)."""
    if str(join.joinType().sql()) != "INNER":
        return f"a {str(join.joinType().sql()).lower()} join"
    sides = [_source_relations(side, sources, keyed) for side in (join.left(), join.right())]
    for side in sides:
        if isinstance(side, str):
            return side
    left, right = sides
    assert not isinstance(left, str) and not isinstance(right, str)
    if both := set(left) & set(right):
        return f"a self-join of {sorted(both)[0]}"
    pairs = _equated(join)
    if isinstance(pairs, str):
        return pairs
    for relations, ids in ((right, {right_id for _, right_id in pairs}), (left, {left_id for left_id, _ in pairs})):
        if len(relations) == 1:
            columns = _columns(relations)
            name = next(iter(relations))
            key = {(name, column) for column in sources[name.lower()][1]}
            if key and key <= {columns[i] for i in ids if i in columns}:
                keyed.add(name)
                return {**left, **right}
    return f"a join not on the key of {' or '.join(name for name in (*right, *left))}"


def _equated(join: Any) -> list[tuple[int, int]] | str:
    """The columns (expression ids) of the left and right side that ``join``'s condition equates,
    or why it is not a conjunction of equalities of a column of each side."""
    if not join.condition().isDefined():
        return "a join without ON (a cross join)"
    left, right = ({int(column.exprId().id()) for column in _items(side.output())}
                   for side in (join.left(), join.right()))
    pending, pairs = [join.condition().get()], []
    while pending:
        condition = pending.pop()
        if _kind(condition) == "And":
            pending += [condition.left(), condition.right()]
            continue
        operands = [condition.left(), condition.right()] if _kind(condition) == "EqualTo" else []
        ids = [int(operand.exprId().id()) for operand in operands if _kind(operand) == "AttributeReference"]
        if len(ids) == 2 and ids[0] in right and ids[1] in left:
            ids.reverse()
        if len(ids) != 2 or ids[0] not in left or ids[1] not in right:
            return f"a join on something else than equal columns ({condition.sql()})"
        pairs.append((ids[0], ids[1]))
    return pairs


def _reason_below(plan: Any) -> str | None:
    """The reason of the first node of ``plan`` (depth first) that :data:`NODE_REASONS` names."""
    name = str(plan.nodeName())
    if name in NODE_REASONS and name != "Aggregate":
        return NODE_REASONS[name]
    for child in _items(plan.children()):
        if (reason := _reason_below(child)) is not None:
            return reason
    return None
