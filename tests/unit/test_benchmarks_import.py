"""Every module under ``benchmarks/`` and ``scripts/`` imports, and importing one starts nothing.

Benchmarks import as package modules (they run as ``python -m benchmarks.<name>``), scripts by
file name with ``scripts/`` on the path (they run as ``python scripts/<name>.py`` and import each
other). Each benchmark's work waits for ``main()``, whose parser offers ``--quick`` (the slow
suite's smoke run, ``tests/integration/test_benchmarks.py``). The names a benchmark or script
imports from this repository inside its functions, and the modules and attributes it names in
strings (``python -m <module>``, a patched ``module``, ``name``), exist too: a move in the package
cannot break one before it runs.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted(ROOT.glob("benchmarks/*.py"))
SCRIPTS = sorted(ROOT.glob("scripts/*.py"))
RUNNABLE = [path for path in BENCHMARKS if path.stem.startswith("bench_") or path.stem == "soak"]
OURS = ("airflow_provider_streambed", "benchmarks", "tests")


def ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


@pytest.fixture
def starts_nothing() -> Iterator[None]:
    """Fails the test when the block left a thread or a child process running."""
    threads, children = set(threading.enumerate()), {child.pid for child in psutil.Process().children(recursive=True)}
    yield
    assert set(threading.enumerate()) <= threads, "importing started a thread"
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= children, \
        "importing started a process"


@pytest.fixture
def scripts_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``scripts/`` on the path as when a script runs; the scripts imported are forgotten after."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    yield
    for name in [name for name, module in sys.modules.items()
                 if Path(getattr(module, "__file__", None) or "/").parent == ROOT / "scripts"]:
        del sys.modules[name]


def as_main(path: Path) -> bool:
    """Whether the module's last statement is ``if __name__ == "__main__":``."""
    last = ast.parse(path.read_text()).body[-1]
    return isinstance(last, ast.If) and ast.unparse(last.test) in ('__name__ == "__main__"', "__name__ == '__main__'")


@pytest.mark.usefixtures("starts_nothing")
@pytest.mark.parametrize("path", BENCHMARKS, ids=ids(BENCHMARKS))
def test_a_benchmark_imports_and_starts_nothing(path: Path) -> None:
    module = importlib.import_module(f"benchmarks.{path.stem}")

    assert path not in RUNNABLE or (callable(getattr(module, "main", None)) and as_main(path))


@pytest.mark.usefixtures("starts_nothing", "scripts_on_path")
@pytest.mark.parametrize("path", SCRIPTS, ids=ids(SCRIPTS))
def test_a_script_imports_and_starts_nothing(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # as a script's own imports see it (dataclasses look it up)
    spec.loader.exec_module(module)

    assert callable(getattr(module, "main", None)) == as_main(path)  # a script runs main(), a helper has none


@pytest.mark.parametrize("path", RUNNABLE, ids=ids(RUNNABLE))
def test_a_benchmark_offers_a_quick_run(path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [path.name, "--help"])  # main() parses its arguments before any work

    with pytest.raises(SystemExit, match="0"):
        importlib.import_module(f"benchmarks.{path.stem}").main()

    assert "--quick" in capsys.readouterr().out


def references(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, attribute or ``None``) of every name of this repository ``path`` refers to:
    imports at any depth, ``"-m", "<module>"`` in a command, and ``("<module>", "<attribute>", ...)``
    calls (a patch)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from ((node.lineno, node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name, None) for alias in node.names)
        elif isinstance(node, ast.List | ast.Call):
            values = node.elts if isinstance(node, ast.List) else node.args
            texts = [value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
                     for value in values]
            for first, second in itertools.pairwise(texts):
                if first == "-m" and second:
                    yield node.lineno, second, None
                elif isinstance(node, ast.Call) and first and second and first.startswith(f"{OURS[0]}."):
                    yield node.lineno, first, second


def missing(module: str, attribute: str | None) -> bool:
    """Whether ``module`` (and its ``attribute``, or a submodule of that name) cannot be found."""
    try:
        imported = importlib.import_module(module)
    except ImportError:
        return True
    if attribute is None or hasattr(imported, attribute):
        return False
    return not hasattr(imported, "__path__") or importlib.util.find_spec(f"{module}.{attribute}") is None


@pytest.mark.parametrize("path", BENCHMARKS + SCRIPTS, ids=ids(BENCHMARKS) + ids(SCRIPTS))
def test_every_name_a_module_refers_to_exists(path: Path) -> None:
    broken = [f"{path.name}:{line}: {module}" + (f".{attribute}" if attribute else "")
              for line, module, attribute in references(path)
              if module.split(".")[0] in OURS and missing(module, attribute)]

    assert broken == []
