"""Mirror merges: a source table's rows at W from the previous cut's snapshot plus the run's changelog.

One step, two implementations with the same result (merge-on-read: new files hold the changed
keys' last images, position deletes remove their previous rows):

- :mod:`.duckdb_merge` runs in the Airflow worker's refresh task, for the common incremental case;
  it imports no pyspark. DuckDB locates and ranks (:mod:`.merge_lookups`, running the queries of
  :mod:`.merge_queries`, the keyless scan narrowed by :mod:`.keyless_probe`), pyarrow writes (the
  position-delete rows of :mod:`.position_delete_rows`).
- :mod:`.spark_merge` runs in the Spark job (driver and executors), for first copies, truncates and
  merges past the in-process limits; a keyless mirror is merged as a multiset by
  :mod:`.spark_multiset`.

Both read what :mod:`.merge_input` describes and give what :mod:`.merge_output` stages. A small
mirror's compaction is rewritten whole in the worker (:mod:`.rewrite`), a large one's by Spark's
merge. :mod:`.copies` adopts a mirror copied by this run's bootstrap as it is, with neither engine.
"""
