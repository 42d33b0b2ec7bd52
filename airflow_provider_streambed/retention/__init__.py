"""Cut retention: which cuts expire (:mod:`.plan`), expiring them in one atomic commit
(:mod:`.expiry`, and folded into each publish), deleting the files nothing needs any more
(:mod:`.gc`), and running both for a group (:mod:`.maintenance`).

Nothing is imported here: :mod:`airflow_provider_streambed.publish` imports :mod:`.plan`, and
:mod:`.expiry` imports the publish package.
"""
