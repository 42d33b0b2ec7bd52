"""Change capture from PostgreSQL: slot and publication, pinned watermark, pgoutput decoding, changelogs.

The public entry points are :func:`~airflow_provider_streambed.capture.run.capture_run` and
:func:`~airflow_provider_streambed.capture.slot.advance_slot`. Nothing here imports Airflow.
"""
