"""The Markdown docs stay true to the code: snippets compile or run, imports resolve, links and excerpts hold.

Conventions for fenced Python blocks in ``docs/*.md`` and ``README.md``:

- every ```` ```python ```` block must compile;
- ```` ```python run ```` blocks are executed (declarations and DAG definitions: no services);
- ```` ```python source=<path>#<marker> ```` blocks must equal the lines between
  ``# [START <marker>]`` and ``# [END <marker>]`` in ``<path>`` (the example DAGs);
- every ``airflow_provider_streambed`` import in any block must resolve (module and names).
"""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), REPO / "README.md"]
PACKAGE = "airflow_provider_streambed"
_FENCE = re.compile(r"^```(?P<lang>\w*)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    info: str
    body: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def source(self) -> str | None:
        match = re.search(r"source=(\S+)", self.info)
        return match.group(1) if match else None


def python_snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in _FENCE.finditer(text):
            if match.group("lang") == "python":
                line = text.count("\n", 0, match.start()) + 1
                found.append(Snippet(page, line, match.group("info").strip(), match.group("body")))
    return found


SNIPPETS = python_snippets()


def test_the_docs_have_snippets_of_every_kind() -> None:
    assert len(SNIPPETS) >= 10
    assert sum("run" in s.info.split() for s in SNIPPETS) >= 3
    assert sum(s.source is not None for s in SNIPPETS) >= 3


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.name)
def test_snippet_compiles(snippet: Snippet) -> None:
    compile(snippet.body, snippet.name, "exec")


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if "run" in s.info.split()], ids=lambda s: s.name)
def test_runnable_snippet_runs(snippet: Snippet) -> None:
    exec(compile(snippet.body, snippet.name, "exec"), {"__name__": f"docs_snippet_{snippet.line}"})


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.source], ids=lambda s: s.name)
def test_excerpt_matches_its_source(snippet: Snippet) -> None:
    assert snippet.source is not None
    path, _, marker = snippet.source.partition("#")
    lines = (REPO / path).read_text().splitlines()
    start = lines.index(f"# [START {marker}]")
    end = lines.index(f"# [END {marker}]")
    expected = textwrap.dedent("\n".join(lines[start + 1:end])).strip()
    assert snippet.body.strip() == expected, f"{snippet.name} differs from {snippet.source}"


def package_imports(body: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every ``airflow_provider_streambed`` import in ``body``."""
    found = []
    for node in ast.walk(ast.parse(body)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            found.append((node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    return found


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.name)
def test_package_imports_resolve(snippet: Snippet) -> None:
    for module_name, names in package_imports(snippet.body):
        module = importlib.import_module(module_name)
        for name in names:
            assert hasattr(module, name), f"{snippet.name}: {module_name} has no {name!r}"


def test_import_check_catches_a_missing_name() -> None:
    [(module_name, names)] = package_imports("from airflow_provider_streambed.read import CutReader, NoSuchThing")
    assert not hasattr(importlib.import_module(module_name), names[1])


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text())
    return {slug(match) for match in re.findall(r"^#+\s+(.+)$", text, flags=re.MULTILINE)}


def relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)
    return [link for link in _LINK.findall(text) if not re.match(r"[a-z]+:", link)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_to_existing_pages_and_headings(page: Path) -> None:
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.name}: link {link!r} points to a missing file"
        if anchor:
            assert target.suffix == ".md", f"{page.name}: anchor on a non-Markdown target {link!r}"
            assert anchor in anchors(target), f"{page.name}: link {link!r}: no such heading in {target.name}"


def test_slugs_follow_github() -> None:
    assert slug("The `watermark_lsn` Param") == "the-watermark_lsn-param"
    assert slug("Replication slots and WAL retention") == "replication-slots-and-wal-retention"


def test_index_and_readme_link_every_docs_page() -> None:
    pages = {path.name for path in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= {Path(link.partition("#")[0]).name for link in relative_links(DOCS / "index.md")}
    readme = {Path(link.partition("#")[0]).name for link in relative_links(REPO / "README.md")}
    assert pages <= readme
