"""The public API: every name users are told to import imports from where they are told to.

Two checks. :data:`PUBLIC` is an explicit list of the names the README, the docs, the package
root's ``__all__`` and the provider info point users to; moving or removing one of them without
a re-export fails here. And every ``from airflow_provider_streambed... import ...`` statement in a
code block of ``README.md`` or ``docs/**/*.md`` (of any language, not only Python) must import,
so the docs cannot drift from the code.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import airflow_provider_streambed
from airflow_provider_streambed.get_provider_info import get_provider_info

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_streambed"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

#: (module, name) of every public name, as the docs, ``__all__`` and the provider info give it.
PUBLIC: list[tuple[str, str]] = [
    # The package root's __all__ (StreambedRefreshGroup is exported lazily).
    (PACKAGE, "CutRetention"),
    (PACKAGE, "Lsn"),
    (PACKAGE, "Member"),
    (PACKAGE, "Mirror"),
    (PACKAGE, "PythonMember"),
    (PACKAGE, "RefreshGroup"),
    (PACKAGE, "SqlMember"),
    (PACKAGE, "StreambedRefreshGroup"),
    (PACKAGE, "__version__"),
    # The Airflow face: task group, operators, links, hooks, trigger, assets, UI, provider info.
    (f"{PACKAGE}.task_group", "StreambedRefreshGroup"),
    (f"{PACKAGE}.operators.capture", "CaptureWatermarkOperator"),
    (f"{PACKAGE}.operators.refresh", "RefreshGroupOperator"),
    (f"{PACKAGE}.operators.publish", "PublishCutOperator"),
    (f"{PACKAGE}.operators.retention", "ExpireCutsOperator"),
    (f"{PACKAGE}.operators.links", "CutLink"),
    (f"{PACKAGE}.operators.links", "HoldbackLink"),
    (f"{PACKAGE}.hooks.source", "StreambedSourceHook"),
    (f"{PACKAGE}.hooks.catalog", "StreambedCatalogHook"),
    (f"{PACKAGE}.triggers.changes", "GroupChangesTrigger"),
    (f"{PACKAGE}.triggers.changes", "group_asset"),
    (f"{PACKAGE}.assets", "member_asset_uri"),
    (f"{PACKAGE}.assets", "member_assets"),
    (f"{PACKAGE}.assets", "sanitize_uri"),
    (f"{PACKAGE}.ui.plugin", "StreambedPlugin"),
    (f"{PACKAGE}.get_provider_info", "get_provider_info"),
    # Running and reading without Airflow.
    (f"{PACKAGE}.lsn", "Lsn"),
    (f"{PACKAGE}.local", "StepTimes"),
    (f"{PACKAGE}.local", "refresh_once"),
    (f"{PACKAGE}.read", "Cut"),
    (f"{PACKAGE}.read", "CutReader"),
    (f"{PACKAGE}.read", "GroupStatus"),
    (f"{PACKAGE}.read.feed", "MemberChanges"),
    (f"{PACKAGE}.catalog", "open_catalog"),
    # What a member's code receives (docs/declaring-groups.md).
    (f"{PACKAGE}.refresh", "CutContext"),
    (f"{PACKAGE}.refresh", "Changes"),
    (f"{PACKAGE}.examples.bank_derived", "sender_totals"),
    # Named in the concepts as the one place of a rule.
    (f"{PACKAGE}.cut_order", "check_after_last_cut"),
    (f"{PACKAGE}.run_key", "make_run_key"),
    (f"{PACKAGE}.steps", "capture"),
    (f"{PACKAGE}.steps", "refresh"),
    (f"{PACKAGE}.steps", "publish"),
    (f"{PACKAGE}.steps", "settling"),
    # The errors the docs name, and how to tell their kind.
    (f"{PACKAGE}.exceptions", "StreambedError"),
    (f"{PACKAGE}.exceptions", "is_final"),
    (f"{PACKAGE}.exceptions", "FinalError"),
    (f"{PACKAGE}.exceptions", "ConfigurationError"),
    (f"{PACKAGE}.exceptions", "DeclarationError"),
    (f"{PACKAGE}.exceptions", "ConnectionConfigError"),
    (f"{PACKAGE}.exceptions", "LsnError"),
    (f"{PACKAGE}.exceptions", "LedgerError"),
    (f"{PACKAGE}.exceptions", "GroupBusyError"),
    (f"{PACKAGE}.exceptions", "RunSupersededError"),
    (f"{PACKAGE}.exceptions", "WatermarkError"),
    (f"{PACKAGE}.exceptions", "InvalidWatermarkError"),
    (f"{PACKAGE}.exceptions", "SourceError"),
    (f"{PACKAGE}.exceptions", "SlotError"),
    (f"{PACKAGE}.exceptions", "CaptureError"),
    (f"{PACKAGE}.exceptions", "UnsupportedTypeError"),
    (f"{PACKAGE}.exceptions", "DecodeError"),
    (f"{PACKAGE}.exceptions", "SchemaChangeError"),
    (f"{PACKAGE}.exceptions", "RefreshError"),
    (f"{PACKAGE}.exceptions", "FinalRefreshError"),
    (f"{PACKAGE}.exceptions", "MemberQueryError"),
    (f"{PACKAGE}.exceptions", "MirrorDivergedError"),
    (f"{PACKAGE}.exceptions", "PublishConflictError"),
    (f"{PACKAGE}.exceptions", "DamagedOutputError"),
    (f"{PACKAGE}.exceptions", "UnpublishableRunError"),
    (f"{PACKAGE}.exceptions", "OutputSchemaError"),
    (f"{PACKAGE}.exceptions", "StaleOutputError"),
    (f"{PACKAGE}.exceptions", "CatalogCapabilityError"),
    (f"{PACKAGE}.exceptions", "CutNotFoundError"),
    (f"{PACKAGE}.exceptions", "CutExpiredError"),
    (f"{PACKAGE}.exceptions", "MemberNotFoundError"),
    (f"{PACKAGE}.exceptions", "ChangeFeedError"),
    (f"{PACKAGE}.exceptions", "DependencyError"),
    (f"{PACKAGE}.exceptions", "SourceUnavailableError"),
    (f"{PACKAGE}.exceptions", "CatalogUnavailableError"),
    (f"{PACKAGE}.exceptions", "WarehouseError"),
    (f"{PACKAGE}.exceptions", "SparkUnavailableError"),
]

#: ``from airflow_provider_streambed[.x] import a, b as c`` at a line's start; the names may be
#: parenthesised over lines or continued with backslashes.
_FROM_IMPORT = re.compile(
    rf"^[ \t]*from[ \t]+(?P<module>{PACKAGE}(?:\.\w+)*)[ \t]+import[ \t]+"
    r"(?:\((?P<grouped>[^)]*)\)|(?P<names>(?:[^\n]*\\\n)*[^\n]*))",
    re.MULTILINE,
)
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(?P<body>.*?)^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)


def imports_in(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The ``(module, names)`` of every package from-import in ``text``.

    Args:
        text: source code, e.g. one code block's body.

    Returns:
        One entry per statement, its imported names in order (without ``as`` aliases and comments).
    """
    found = []
    for match in _FROM_IMPORT.finditer(text):
        listed = match.group("grouped") if match.group("grouped") is not None else match.group("names")
        listed = re.sub(r"#[^\n]*", "", listed).replace("\\\n", " ")
        names = tuple(part.split()[0] for part in listed.split(",") if part.strip())
        found.append((match.group("module"), names))
    return found


def doc_imports() -> list[tuple[str, str, str]]:
    """``(where, module, name)`` of every name a code block of the README or the docs imports from the package."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in _FENCE.finditer(text):
            line = text.count("\n", 0, block.start()) + 1
            where = f"{page.relative_to(REPO)}:{line}"
            found += [(where, module, name) for module, names in imports_in(block.group("body")) for name in names]
    return found


DOC_IMPORTS = doc_imports()


def resolves(module_name: str, name: str) -> bool:
    """Whether ``from module_name import name`` succeeds (a submodule counts, as Python's import does)."""
    module = importlib.import_module(module_name)
    if hasattr(module, name):
        return True
    try:
        importlib.import_module(f"{module_name}.{name}")
    except ModuleNotFoundError:
        return False
    return True


@pytest.mark.parametrize(("module_name", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_name_imports(module_name: str, name: str) -> None:
    module = importlib.import_module(module_name)
    assert getattr(module, name, None) is not None, f"{module_name} has no {name!r}: re-export it where it moved"


def test_the_list_has_the_whole_package_root() -> None:
    """The root's ``__all__`` and the list agree: a name added to or dropped from one is in the other."""
    assert set(airflow_provider_streambed.__all__) == {name for module, name in PUBLIC if module == PACKAGE}


def test_the_list_has_every_module_the_provider_info_names() -> None:
    info = get_provider_info()
    modules = [path for kind in ("hooks", "operators", "triggers") for entry in info[kind]
               for path in entry["python-modules"]]
    classes = [entry["hook-class-name"] for entry in info["connection-types"]] + info["extra-links"]
    classes += [entry["handler"] for entry in info["asset-uris"]]
    classes += [entry["plugin-class"] for entry in info["plugins"]]
    assert set(modules) <= {module for module, _ in PUBLIC}
    assert set(classes) <= {f"{module}.{name}" for module, name in PUBLIC}


def test_the_docs_import_something() -> None:
    """The scan finds the docs' imports (a broken pattern would pass every doc silently)."""
    assert len(DOC_IMPORTS) >= 15, DOC_IMPORTS
    assert (f"{PACKAGE}.read", "CutReader") in {(module, name) for _, module, name in DOC_IMPORTS}


@pytest.mark.parametrize(("where", "module_name", "name"), DOC_IMPORTS, ids=[f"{w}:{n}" for w, _, n in DOC_IMPORTS])
def test_doc_import_resolves(where: str, module_name: str, name: str) -> None:
    assert resolves(module_name, name), f"{where}: `from {module_name} import {name}` fails"


def test_doc_import_check_reads_every_form_and_catches_a_missing_name() -> None:
    text = (
        f"from {PACKAGE} import Mirror, RefreshGroup as Group  # a comment\n"
        f"from {PACKAGE}.lsn import \\\n    Lsn\n"
        f"    from {PACKAGE}.read import (\n        CutReader,  # why\n        NoSuchThing,\n    )\n"
        "from somewhere_else import Mirror\n"
    )
    assert imports_in(text) == [
        (PACKAGE, ("Mirror", "RefreshGroup")),
        (f"{PACKAGE}.lsn", ("Lsn",)),
        (f"{PACKAGE}.read", ("CutReader", "NoSuchThing")),
    ]
    assert resolves(f"{PACKAGE}.read", "CutReader") and resolves(PACKAGE, "lsn")
    assert not resolves(f"{PACKAGE}.read", "NoSuchThing")
