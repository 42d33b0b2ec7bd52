"""Imports point one way (DESIGN section 7, STYLE rule 21): no circle, and only the Airflow face reaches Airflow.

The package's import graph is read from its source with :mod:`ast`. Every import of a module of
the package is an edge, wherever it stands: at module level, under ``TYPE_CHECKING`` or inside a
function (a function-local import that dodges a circle still closes it).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import airflow_provider_streambed

PACKAGE = "airflow_provider_streambed"
SOURCE = Path(airflow_provider_streambed.__file__).parent

#: The Airflow face (DESIGN section 7): the rooms that may import Airflow. The package root is
#: one too, through its lazy export of the task group, but at import it loads no Airflow.
AIRFLOW_FACE = frozenset({PACKAGE, "assets", "get_provider_info", "hooks", "operators", "task_group", "triggers",
                         "ui"})
#: What differs between Airflow releases (DESIGN section 20): the face's, though its room,
#: ``compat/``, is everyone's (its Spark module runs in the job). No engine module may import it.
AIRFLOW_COMPAT = f"{PACKAGE}.compat.airflow"
#: Modules that import nothing of the package but each other.
PURE = frozenset({f"{PACKAGE}.lsn", f"{PACKAGE}.declarations", f"{PACKAGE}.member_declarations",
                  f"{PACKAGE}.exceptions"})


@dataclass(frozen=True, slots=True)
class Module:
    """One module of the package as its source reads.

    Attributes:
        name: the dotted name (a package by its own name).
        imports: the package's modules it imports anywhere in its source.
        imports_on_load: those it imports when it is loaded (not inside a function).
        imports_airflow: whether it imports ``airflow`` anywhere.
    """

    name: str
    imports: frozenset[str]
    imports_on_load: frozenset[str]
    imports_airflow: bool


def _dotted_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> tuple[str, ...]:
    """The dotted names of the modules ``node`` imports.

    ``from x import y`` imports ``x.y`` when that is a module, else takes ``y`` from ``x``;
    both are returned, the caller keeps those that are modules.
    """
    if isinstance(node, ast.Import):
        return tuple(alias.name for alias in node.names)
    base = node.module or ""
    if node.level:
        anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    return (base, *(f"{base}.{alias.name}" for alias in node.names))


def _own(imported: tuple[str, ...], node: ast.Import | ast.ImportFrom, names: frozenset[str]) -> set[str]:
    """The package's modules among ``imported``: for ``from x import y``, ``x.y`` if it is a module,
    else ``x`` (Python also loads the packages above a module; that is not counted)."""
    if isinstance(node, ast.Import):
        return {name for name in imported if name in names}
    submodules = {name for name in imported[1:] if name in names}
    taken_from_base = len(submodules) < len(imported) - 1
    return submodules | ({imported[0]} if taken_from_base and imported[0] in names else set())


def _read(path: Path, names: frozenset[str]) -> Module:
    """Parse the module at ``path``; ``names`` are the package's modules."""
    name = _dotted_name(path)
    anywhere: set[str] = set()
    on_load: set[str] = set()
    airflow = False

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal airflow
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported = _imported(node, name, path.name == "__init__.py")
            named = imported if isinstance(node, ast.Import) else imported[:1]
            airflow |= any(target == "airflow" or target.startswith("airflow.") for target in named)
            own = _own(imported, node, names)
            anywhere.update(own)
            if not in_function:
                on_load.update(own)
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    anywhere.discard(name)
    on_load.discard(name)
    return Module(name, frozenset(anywhere), frozenset(on_load), airflow)


@cache
def modules() -> dict[str, Module]:
    """Every module of the package by its dotted name."""
    paths = sorted(SOURCE.rglob("*.py"))
    names = frozenset(_dotted_name(path) for path in paths)
    return {module.name: module for module in (_read(path, names) for path in paths)}


def room(name: str) -> str:
    """The sub-package or top-level module ``name`` belongs to (the package root is its own)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def reached(starts: Iterable[str], on_load: bool = False) -> set[str]:
    """The modules ``starts`` import, directly or not (``on_load``: only imports run when loaded),
    and the packages above each, which Python loads first (``read/__init__`` before ``read.cuts``):
    of a package loaded so, only what it imports when loaded (not its lazy exports)."""
    graph = modules()
    seen: set[str] = set()
    todo = [(name, on_load) for name in starts]
    while todo:
        name, loaded_only = todo.pop()
        if (name, loaded_only) in seen or (name, False) in seen:
            continue
        seen.add((name, loaded_only))
        todo.extend((imported, on_load) for imported in
                    (graph[name].imports_on_load if loaded_only else graph[name].imports))
        todo.extend((".".join(name.split(".")[:end]), True) for end in range(1, name.count(".") + 1))
    return {name for name, _ in seen}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` that hold a circle (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(part) > 1 or node in graph.get(node, ()):
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = modules()
    assert f"{PACKAGE}.refresh.plan.work" in graph[f"{PACKAGE}.refresh.in_process"].imports_on_load
    assert f"{PACKAGE}.task_group" in graph[PACKAGE].imports - graph[PACKAGE].imports_on_load  # in a function
    mirrors = f"{PACKAGE}.refresh.mirrors"
    assert f"{mirrors}.merge_input" in graph[f"{mirrors}.spark_merge"].imports  # from x import y
    assert f"{PACKAGE}.storage" in graph[f"{mirrors}.duckdb_merge"].imports  # from package import module
    assert graph[f"{PACKAGE}.operators.base"].imports_airflow
    assert not graph[f"{PACKAGE}.refresh.spark.job"].imports_airflow


def test_no_module_imports_itself_through_others() -> None:
    """No circle anywhere in the package, refresh/ included (``connect -> job -> plan -> connect`` was one)."""
    graph = {name: set(module.imports) for name, module in modules().items()}
    assert circles(graph) == []


def test_rooms_import_one_way() -> None:
    """No circle between rooms either: retention/ sits above publish/, which never imports it."""
    graph: dict[str, set[str]] = {}
    for name, module in modules().items():
        others = {room(target) for target in module.imports} - {room(name)}
        graph.setdefault(room(name), set()).update(others)
    assert circles(graph) == []


def test_only_the_airflow_face_reaches_airflow() -> None:
    graph = modules()
    engine = [name for name in graph if room(name) not in AIRFLOW_FACE and name != AIRFLOW_COMPAT]
    reaching = {name: sorted(m for m in reached([name]) if graph[m].imports_airflow) for name in engine}
    assert {name: through for name, through in reaching.items() if through} == {}


def test_the_package_root_loads_no_airflow() -> None:
    """A Spark worker without Airflow imports the declarations from the package root."""
    graph = modules()
    assert [name for name in reached([PACKAGE], on_load=True) if graph[name].imports_airflow] == []


def test_pure_modules_import_only_each_other() -> None:
    graph = modules()
    assert {name: sorted(graph[name].imports - PURE) for name in PURE} == {name: [] for name in PURE}


def test_the_spark_job_imports_neither_capture_nor_publish() -> None:
    """The job gets a job spec (the packages above a module it imports, ``refresh/__init__`` and
    ``read/__init__`` among them, run first when Python imports it)."""
    graph = modules()
    job = reached([f"{PACKAGE}.refresh.spark.entry"])
    assert f"{PACKAGE}.refresh.spark.job" in job
    assert sorted(name for name in job if room(name) in {"capture", "publish"} or graph[name].imports_airflow) == []


def test_the_in_process_path_imports_no_pyspark() -> None:
    """The refresh task stages in-process mirrors (DuckDB) on a worker that may have no pyspark: the
    steps it composes and ``refresh_once`` load without it (a Spark run imports pyspark when it starts)."""
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # every import of pyspark or a submodule of it fails\n"
        f"import {PACKAGE}.refresh.in_process, {PACKAGE}.refresh.mirrors.duckdb_merge, {PACKAGE}.refresh.plan.work\n"
        f"import {PACKAGE}.steps, {PACKAGE}.local\n"
    )
    path = os.pathsep.join([str(SOURCE.parent), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
