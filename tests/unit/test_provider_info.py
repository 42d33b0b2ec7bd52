from __future__ import annotations

import importlib

import pytest

from airflow_provider_streambed.get_provider_info import get_provider_info


def test_package_name_uses_hyphens() -> None:
    assert get_provider_info()["package-name"] == "airflow-provider-streambed"


def test_every_listed_class_imports() -> None:
    info = get_provider_info()
    paths = [hook["hook-class-name"] for hook in info.get("connection-types", [])]
    paths += [name for group in info.get("hooks", []) for name in group.get("python-modules", [])]
    paths += [name for group in info.get("operators", []) for name in group.get("python-modules", [])]
    paths += [name for group in info.get("triggers", []) for name in group.get("python-modules", [])]
    paths += [entry["handler"] for entry in info.get("asset-uris", [])]
    assert len(paths) >= 8, paths
    for path in paths:
        module_name, _, attribute = path.rpartition(".")
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError:
            module = importlib.import_module(module_name)
            assert hasattr(module, attribute), path


def test_airflow_providers_manager_loads_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    providers = ProvidersManager().providers
    assert "airflow-provider-streambed" in providers, sorted(providers)
    assert providers["airflow-provider-streambed"].data["name"] == "Streambed"


def test_package_root_imports_no_airflow() -> None:
    import subprocess
    import sys

    code = (
        "import sys, airflow_provider_streambed, airflow_provider_streambed.ledger;"
        "sys.exit(1 if any(m == 'airflow' or m.startswith('airflow.') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize("module", ["lsn", "declarations", "member_declarations", "exceptions", "run_key"])
def test_pure_modules_import_nothing_of_the_engine(module: str) -> None:
    source = importlib.import_module(f"airflow_provider_streambed.{module}").__file__
    assert source is not None
    with open(source, encoding="utf-8") as handle:
        imports = [line for line in handle if line.startswith(("import ", "from "))]
    allowed = ("airflow_provider_streambed.lsn", "airflow_provider_streambed.declarations",
               "airflow_provider_streambed.member_declarations", "airflow_provider_streambed.exceptions")
    for line in imports:
        if "airflow_provider_streambed" in line:
            assert any(name in line for name in allowed), line


def test_providers_manager_lists_hooks_and_asset_scheme() -> None:
    from airflow_provider_streambed.compat.airflow import providers_manager

    manager = providers_manager()
    hooks = manager.hooks
    catalog = hooks["streambed_catalog"]
    assert catalog is not None
    assert catalog.hook_class_name == "airflow_provider_streambed.hooks.catalog.StreambedCatalogHook"
    assert catalog.connection_id_attribute_name == "catalog_conn_id"
    manager.initialize_providers_asset_uri_resources()
    assert "streambed" in manager.asset_uri_handlers
