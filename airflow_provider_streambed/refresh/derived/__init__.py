"""Derived members: Spark SQL and PySpark members over other members of the run, and their incremental class.

:mod:`.members` computes a SQL or Python member in the Spark job from its sources' snapshots
(:class:`~.members.CutContext` is what a Python member is given). :mod:`.sources` reads a
member's sources at W and the rows they changed this run, in the process that asks (the worker
or the Spark driver), without pyspark; :mod:`.incremental` hands them to Spark (``Changes``).

The incremental class, a ``GROUP BY`` over one source or key equi-joins: :mod:`.shape` says what
such a query's shape is and keeps its record with the member's output, :mod:`.query_shape` reads
it from Spark's analysed plan, and :mod:`.member_shape` takes the record or reads the plan again.
:mod:`.delta_rules` is its one rule: which aggregates a source's changes alone update exactly.
The update itself has two implementations of one computation: :mod:`.spark_delta` in the Spark
job and :mod:`.duckdb_delta` in the worker's process (no JVM); :mod:`.incremental_sql` stages
an incremental member in Spark, recomputing the groups no delta can update.
"""
