"""Names the provider owns in the source database, derived from the group name, and their quoting.

One home for the slot and publication names (see DESIGN.md section 2) and for SQL identifier
quoting, which always goes through :mod:`psycopg.sql`.
"""

from __future__ import annotations

from psycopg import sql

from airflow_provider_streambed.declarations import GROUP_NAME, RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.member_declarations import Mirror

PREFIX = "streambed_"


def _checked(group: RefreshGroup | str) -> str:
    name = group.name if isinstance(group, RefreshGroup) else group
    if not GROUP_NAME.fullmatch(name):
        raise DeclarationError(f"group name {name!r} is invalid for a replication slot name")
    return name


def slot_name(group: RefreshGroup | str) -> str:
    """The group's logical replication slot: ``streambed_<group>`` (at most 50 characters)."""
    return PREFIX + _checked(group)


def publication_name(group: RefreshGroup | str) -> str:
    """The group's publication: ``streambed_<group>``."""
    return PREFIX + _checked(group)


def quoted_table(schema: str, table: str) -> sql.Composed:
    """``"schema"."table"`` quoted for SQL."""
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))


def mirror_table(mirror: Mirror) -> sql.Composed:
    """The mirror's source table quoted for SQL."""
    return quoted_table(mirror.schema, mirror.table)
