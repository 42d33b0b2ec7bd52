# Quick start: `make demo` and `make test`. Both install what is missing first.
# Targets are idempotent; `make install` only does work when something is missing or changed.

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# Python lines beside $(PYTHON) on which `make test` runs the quick subset too (README's versions table).
OTHER_PYTHONS ?= 3.12 3.13
OTHER_VENVS := $(foreach version,$(OTHER_PYTHONS),.venv-$(version))
# The pyspark `make install` puts in the venvs (the `spark-submit` extra allows 3.5 to 4.3), and the
# other Spark lines `make test` runs the matrix on (`make test-matrix SPARK_LINES=...`; the
# matrix test's default is every line: tests/integration/matrix/test_matrix.py).
DEFAULT_PYSPARK ?= 4.2.0
SPARK_LINES ?= 3.5.7 4.1.4 4.3.0
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install system-packages demo live test test-cluster test-matrix test-fast lint bench bench-quick

install: system-packages $(VENV)/.installed $(OTHER_VENVS:=/.installed) .jars/.installed

# Debian's PostgreSQL server binaries (tests start throwaway clusters), a Java 17 runtime (Spark),
# Maven (the Java parts below), Chromium with its driver (the Streambed page's browser test), and
# iproute2 (the cluster tests put Spark workers in network namespaces).
system-packages:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	[ -x /usr/bin/chromedriver ] || missing="$$missing chromium-driver"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# $(call install_package,DIR,PYTHON): the package with its Spark and test extras in the virtualenv DIR.
define install_package
	[ -x $(1)/bin/python ] || $(2) -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q -e '.[spark-submit,test]' pyspark==$(DEFAULT_PYSPARK)
	# pyspark-client (pulled by the spark provider) overwrites pyspark's files: put pyspark back.
	$(1)/bin/pip install -q --force-reinstall --no-deps pyspark==$(DEFAULT_PYSPARK)
	$(1)/bin/spark-submit --version 2>&1 | grep -q 'version $(DEFAULT_PYSPARK)' || { echo "spark-submit is broken in $(1)"; exit 1; }
	touch $(1)/.installed
endef

# An interpreter of Python $(1): on PATH, else pyenv's newest of that line.
python_of = $(shell python$(1) -V >/dev/null 2>&1 && echo python$(1) || \
	echo "$$(pyenv root 2>/dev/null)/versions/$$(pyenv latest $(1) 2>/dev/null)/bin/python$(1)")

$(VENV)/.installed: pyproject.toml
	$(call install_package,$(VENV),$(PYTHON))

.venv-%/.installed: pyproject.toml
	$(call install_package,.venv-$*,$(call python_of,$*))

# The Java parts a real cluster has, for the tests (S3A, Iceberg's Spark runtime, Nessie): versions
# pinned in java/pom.xml, copied into .jars/<folder>/ (airflow_provider_streambed.testing.jars).
.jars/.installed: java/pom.xml
	rm -rf .jars  # a version changed: no jar of the old one stays beside the new
	mvn -q -B -f java/pom.xml generate-resources
	touch $@

demo: install
	$(BIN)/python scripts/demo.py

# A real local Airflow (api-server, scheduler, dag-processor, triggerer; LocalExecutor, metadata on
# the throwaway cluster) refreshing the bank's mirrors on each commit: LIVE_SECONDS=300 by default;
# LIVE_DERIVED=1 adds the derived balances, computed on a Spark Connect server that stays up.
live: install
	$(BIN)/python scripts/live.py --seconds $(or $(LIVE_SECONDS),300) $(if $(LIVE_DERIVED),--derived)

# The whole suite on $(PYTHON) (the default suite, then the production-shape tests marked
# 'cluster', then the Spark-line matrix on $(SPARK_LINES)), then the quick subset on each of $(OTHER_PYTHONS).
test: install
	$(BIN)/python -m pytest -m "not cluster and not matrix"; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; \
	[ $$status -eq 0 ] || exit $$status; \
	$(MAKE) --no-print-directory test-cluster || exit $$?; \
	$(MAKE) --no-print-directory test-matrix || exit $$?; \
	for venv in $(OTHER_VENVS); do \
	  echo "quick subset on $$($$venv/bin/python -V)"; \
	  $$venv/bin/python -m pytest -q -m "not slow" -p no:cacheprovider; status=$$?; \
	  if [ $$status -eq 5 ]; then echo "pytest collected no tests on $$venv: failing"; exit 1; fi; \
	  [ $$status -eq 0 ] || exit $$status; \
	done

# The production shape alone: Spark workers in network namespaces, Nessie, Iceberg's Spark runtime.
test-cluster: install
	$(BIN)/python -m pytest -m cluster; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no cluster tests: failing"; exit 1; fi; exit $$status

# The Spark-line matrix: the line test on $(DEFAULT_PYSPARK) here, then in a virtualenv per line of
# $(SPARK_LINES) (.venvs/pyspark-<version>, made on first use: minutes each, then kept).
test-matrix: install
	STREAMBED_SPARK_LINES="$(SPARK_LINES)" $(BIN)/python -m pytest -m matrix; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no matrix tests: failing"; exit 1; fi; exit $$status

test-fast: install
	$(BIN)/python -m pytest -m "not slow"; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$status

lint: install
	$(BIN)/ruff check airflow_provider_streambed tests dags benchmarks scripts
	$(BIN)/mypy

bench: install
	for script in benchmarks/bench_*.py; do $(BIN)/python -m benchmarks.$$(basename $$script .py) || exit 1; done

# Every benchmark once at its smoke size (--quick), the six that start spark-submit applications
# too, which the slow suite skips to keep within its budget (tests/integration/test_benchmarks.py).
bench-quick: install
	STREAMBED_BENCH_SMOKE=all $(BIN)/python -m pytest -m slow tests/integration/test_benchmarks.py
