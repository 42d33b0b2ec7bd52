# Airflow with this provider, Java 17 and PySpark 4.2.0. One image for every service of
# docker-compose.yml: the Airflow components, and the Spark master and worker (the Spark job
# imports airflow_provider_streambed.refresh, so executors need the provider importable too).
# Build context: the repository root (see docker-compose.yml).
ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_IMAGE}

USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && ln -sfn "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
 && mkdir -p /opt/streambed/warehouse /opt/streambed/src \
 && chown -R airflow:0 /opt/streambed
ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    PYSPARK_PYTHON=python \
    PYSPARK_DRIVER_PYTHON=python

USER airflow
COPY --chown=airflow:0 pyproject.toml README.md /opt/streambed/src/
COPY --chown=airflow:0 airflow_provider_streambed /opt/streambed/src/airflow_provider_streambed
# Keep the image's Airflow version; then put pyspark back exactly like the Makefile does
# (pyspark-client, pulled by the spark provider, overwrites pyspark's files).
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/streambed/src[spark-submit]" \
 && pip install --no-cache-dir --force-reinstall --no-deps pyspark==4.2.0 \
 && spark-submit --version 2>&1 | grep -q 'version 4.2.0'
