# Colony: `make run` starts everything with embedded defaults, `make test` runs the whole check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint browser db-start db-stop bench clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m core.run

# Debian's Chromium for the browser tests (Playwright drives it; its own download can't be used here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests ..."; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python manage.py check
	$(BIN)/python manage.py makemigrations --check --dry-run

# The embedded database is stopped afterwards unless it was already running (e.g. under make run).
test: $(STAMP) browser
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
