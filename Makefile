# Colony: `make run` starts everything with embedded defaults, `make test` runs the whole check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint browser redis db-start db-stop bench clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m core.run

# Debian's Chromium for the browser tests (Playwright drives it; its own download can't be used here).
# As root apt-get runs directly; otherwise through `sudo -n` (never prompts, so CI can't hang on it).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests ..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	  else echo "chromium is missing and $$(id -un) can't install it: run 'apt-get install chromium' as root." >&2; exit 1; fi; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
	    && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
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
test: $(STAMP) browser redis
	@was_running=$$($(BIN)/python -m core.embedded_db status | grep -c '^running' || true); \
	status=0; \
	$(MAKE) --no-print-directory lint && PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest || status=$$?; \
	if [ "$$was_running" = 0 ] && [ -z "$$DATABASE_URL" ]; then $(BIN)/python -m core.embedded_db stop; fi; \
	exit $$status

db-start: $(STAMP)
	$(BIN)/python -m core.embedded_db start

db-stop: $(STAMP)
	$(BIN)/python -m core.embedded_db stop

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	-$(BIN)/python -m core.embedded_db stop
	rm -rf var test-artifacts
