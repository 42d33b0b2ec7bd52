"""Bootstrap copies adopted without Spark: a mirror copied this run, with no change since, is its copy.

The copy's files are typed Parquet of the mirror's columns (:mod:`~airflow_provider_streambed.capture.copy`),
so a mirror whose table had no change between the copy's snapshot and W needs no computation:
its staged output names the copy's files as they are and publish moves them into the table.
A mirror with changes is merged by the Spark job instead, which adopts the copy's files too and
deletes its changed rows by position (:func:`~airflow_provider_streambed.refresh.mirrors.merge_input.mirror_input`).
"""

from __future__ import annotations

import datetime as dt
import logging

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.refresh.plan.work import definition_digest, fit_manifest
from airflow_provider_streambed.staging import CaptureManifest, JobSpec, MemberManifest, read_json, write_json
from airflow_provider_streambed.staging.members import file_sizes
from airflow_provider_streambed.staging.paths import member_manifest_uri

logger = logging.getLogger(__name__)

#: The staged manifest's reason for a copy adopted as it is.
ADOPTED_AS_IS = "bootstrap copy adopted as is (no change since the copy)"


def stage_unchanged_copies(spec: JobSpec) -> tuple[str, ...]:
    """Stage every computed mirror of the spec (its ``members``, default all) whose copy is its state
    at W and that is not staged yet; returns their names."""
    data = read_json(spec.capture_manifest)
    if data is None:
        return ()
    group = RefreshGroup.from_dict(spec.group)
    captures = {table.member.lower(): table for table in CaptureManifest.from_dict(data).tables}
    staged = []
    for name in spec.computed_members():
        member = group.member(name)
        capture = captures.get(member.name.lower())
        if not isinstance(member, Mirror) or capture is None or not capture.bootstrap or capture.changes:
            continue
        if fit_manifest(spec, group, member) is not None:
            continue
        manifest = MemberManifest(
            member=member.name,
            watermark=spec.watermark,
            files=capture.copy_files,
            row_count=capture.copied_rows,
            key_columns=capture.key_columns,
            written_at=dt.datetime.now(dt.UTC).isoformat(),
            definition=definition_digest(member),
            reason=ADOPTED_AS_IS,
            sizes=file_sizes(capture.copy_files),
            resynced=capture.resynced,
            source=capture.source_record(),
            renamed=dict(capture.renamed),
        )
        write_json(member_manifest_uri(spec.staging_root, member.name), manifest.to_dict())
        staged.append(member.name)
        logger.info("group=%s member=%s W=%s: %s, %d rows in %d files", group.name, member.name, spec.watermark,
                    ADOPTED_AS_IS, capture.copied_rows, len(capture.copy_files))
    return tuple(staged)
