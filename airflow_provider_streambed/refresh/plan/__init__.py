"""The plan of a run: which members it computes, carries or rewrites whole, and the job spec that says so.

Runs in the Airflow worker's refresh task (and ``refresh_once``), before any Spark application,
and imports no pyspark. :mod:`.build` writes the run's job spec from the ledger and the catalog;
:mod:`.work` decides per member (computed, carried, still to compute) and which staged output a
retry reuses; :mod:`.compaction` chooses the mirrors rewritten whole; :mod:`.settings` reads the
provider's own Spark settings. The guards refuse what no merge can follow: :mod:`.columns` a
mirror's columns, :mod:`.keys` its key. Where the spec is carried out (the Spark driver, or the
worker's in-process pass) :mod:`.spec` checks it again and reads the captures it names.
"""
