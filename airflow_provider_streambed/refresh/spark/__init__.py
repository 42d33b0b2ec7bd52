"""The Spark application of a refresh, and the two transports that run it.

:mod:`.job` computes the requested members of a group as of W on the session of :mod:`.session`;
it runs in the Spark driver (its DataFrames on the executors) and imports neither capture nor
publish: it reads a job spec. The transports: :mod:`.submit` launches it with spark-submit
(``entry.py`` is the file spark-submit runs), :mod:`.connect` runs it in the Airflow worker as
a Spark Connect client (:mod:`.connect_variables` are the variables that switch pyspark to
Connect). :mod:`.checks` are the merges' checks that fail a job as final.
"""
