"""pyiceberg's private API is used in publish/iceberg/ only: no other module of the package imports a
``_``-prefixed pyiceberg name or reads a ``_``-prefixed attribute of another object."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_streambed
import airflow_provider_streambed.publish.iceberg as fence

PACKAGE = Path(airflow_provider_streambed.__file__).parent
FENCE = Path(fence.__file__).parent
#: Private attributes of other dependencies, each listed in docs/limitations.md: pyspark's JVM
#: gateway and session (the Spark job), the Spark provider's resolved connection (``submit_master``).
OTHER_DEPENDENCIES = {"_jvm", "_jsparkSession", "_connection"}


def private_uses(path: Path) -> list[str]:
    """The private pyiceberg imports and the private attributes of other objects in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg"):
            found += [f"{node.lineno}: import {alias.name}" for alias in node.names if alias.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            inherited = isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
            if not (own or inherited or node.attr in OTHER_DEPENDENCIES):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_pyiceberg_s_private_api_is_used_in_publish_iceberg_only() -> None:
    outside = [path for path in sorted(PACKAGE.rglob("*.py")) if FENCE not in path.parents]
    assert len(outside) > 50
    uses = {str(path.relative_to(PACKAGE)): private_uses(path) for path in outside}
    assert {path: found for path, found in uses.items() if found} == {}


def test_the_fence_is_seen() -> None:
    inside = {path.name: private_uses(path) for path in FENCE.glob("*.py")}
    assert all(inside[name] for name in ("transaction.py", "pointers.py", "metastore.py", "rest.py", "snapshot.py"))
