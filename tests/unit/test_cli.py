"""The command line's group references and subcommand table (no services)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed.cli import COMMANDS, GROUP_COMMANDS, build_parser, group_name, load_group, main
from airflow_provider_streambed.cli.cuts_diff import cut_range
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.lsn import Lsn

DECLARATION = """
from airflow_provider_streambed import Mirror, RefreshGroup
shop = RefreshGroup("shop", "src", "cat", "ns", [Mirror("public.orders")])
not_a_group = 42
"""


def test_a_group_is_loaded_from_a_file_or_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shop_dag.py").write_text(DECLARATION)
    assert load_group(f"{tmp_path / 'shop_dag.py'}:shop").name == "shop"
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_group("shop_dag:shop").members[0].name == "orders"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("shop_dag", r"group reference 'shop_dag': use path/to/file.py:variable or module:variable"),
        ("no_such_module_xyz:shop", r"group reference 'no_such_module_xyz:shop' cannot be loaded: No module named"),
        ("missing.py:shop", r"group reference 'missing.py:shop' cannot be loaded"),
        ("shop_dag:not_a_group", r"'not_a_group' is not a RefreshGroup"),
        ("shop_dag:absent", r"'absent' is not a RefreshGroup"),
        ("broken.py:shop", r"'broken.py:shop' cannot be loaded: '\(' was never closed \(.*broken.py, line 2\)"),
        ("failing.py:shop", r"group reference 'failing.py:shop' cannot be loaded: NameError: name 'Mirorr' is not"),
        ("invalid.py:shop", r"group name 'Shop!' is invalid"),
    ],
)
def test_bad_references_name_what_is_wrong(
    reference: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop_dag.py").write_text(DECLARATION)
    (tmp_path / "broken.py").write_text("from airflow_provider_streambed import Mirror\nshop = RefreshGroup(\n")
    (tmp_path / "failing.py").write_text("shop = Mirorr('public.orders')\n")
    (tmp_path / "invalid.py").write_text(DECLARATION.replace('"shop"', '"Shop!"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DeclarationError, match=message):
        load_group(reference)


def test_every_subcommand_parses_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for name in COMMANDS:
        with pytest.raises(SystemExit) as done:
            parser.parse_args([name, "--help"])
        assert done.value.code == 0
        assert f"usage: streambed {name}" in capsys.readouterr().out


def test_every_subcommand_takes_the_group_and_catalog_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for name in GROUP_COMMANDS:
        with pytest.raises(SystemExit):
            parser.parse_args([name, "--help"])
        usage = capsys.readouterr().out
        assert "--group GROUP" in usage and "--catalog-uri CATALOG_URI" in usage, name
        assert ("--source-dsn-env" in usage) == (name in ("capture", "refresh", "resync")), name
        assert "--dsn " not in usage, name


def test_a_group_name_or_reference_gives_the_name(tmp_path: Path) -> None:
    (tmp_path / "shop_dag.py").write_text(DECLARATION)
    assert group_name("shop") == "shop"
    assert group_name(f"{tmp_path / 'shop_dag.py'}:shop") == "shop"


@pytest.mark.parametrize("command", ["capture", "refresh"])
def test_the_source_dsn_comes_from_the_environment(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shop_dag.py").write_text(DECLARATION)
    monkeypatch.delenv("MY_DSN", raising=False)
    arguments = [command, "--group", f"{tmp_path / 'shop_dag.py'}:shop", "--catalog-uri", "sqlite://",
                 "--warehouse", tmp_path.as_uri(), "--source-dsn-env", "MY_DSN"]
    assert main(arguments) == 2
    assert "set the source DSN in the environment variable MY_DSN" in capsys.readouterr().out


def test_the_slot_create_timeout_is_a_positive_number_of_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    base = ["capture", "--group", "g.py:group", "--warehouse", "/tmp/w"]
    assert parser.parse_args(base).slot_create_timeout == 600.0
    assert parser.parse_args([*base, "--slot-create-timeout", "2.5"]).slot_create_timeout == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--slot-create-timeout", bad])
        assert "must be a number of seconds greater than 0" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["capture", "refresh", "resync"])
def test_a_watermark_that_is_not_an_lsn_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    arguments = [command, "--group", "shop_dag.py:shop", "--catalog-uri", "sqlite://", "--warehouse", "w"]
    assert parser.parse_args([*arguments, "--watermark", "0/16b3748"]).watermark == Lsn.parse("0/16B3748")
    assert parser.parse_args(arguments).watermark is None
    with pytest.raises(SystemExit) as done:
        parser.parse_args([*arguments, "--watermark", "yesterday"])
    assert done.value.code == 2
    assert "argument --watermark: invalid LSN 'yesterday': expected two hex numbers" in capsys.readouterr().err


def test_resync_copies_every_table_or_the_members_named() -> None:
    parser = build_parser()
    arguments = ["--group", "shop_dag.py:shop", "--catalog-uri", "sqlite://", "--warehouse", "w"]
    whole = parser.parse_args(["resync", *arguments])
    assert whole.resync and whole.members == []
    some = parser.parse_args(["resync", *arguments, "--member", "orders", "--member", "lines"])
    assert some.resync and some.members == ["orders", "lines"]  # refresh_once(resync=False, resync_members=...)
    plain = parser.parse_args(["refresh", *arguments])
    assert not plain.resync and plain.members == []


def test_cuts_diff_takes_two_cut_numbers_after_the_options() -> None:
    assert cut_range(["2", "5"]) == (2, 5)
    with pytest.raises(DeclarationError, match="name two cut numbers"):
        cut_range(["2"])
    with pytest.raises(DeclarationError, match="name two cut numbers"):
        cut_range(["2", "x"])


def test_words_left_over_are_refused_unless_the_command_takes_positionals(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "list", "--group", "g", "--catalog-uri", "sqlite://", "--warehouse", "file:///w", "extra"])
    assert "unrecognized arguments: extra" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cuts", "diff", "--group", "g", "--catalog-uri", "sqlite://", "--warehouse", "file:///w", "1", "--bad"])
    assert "unrecognized arguments: 1 --bad" in capsys.readouterr().err
