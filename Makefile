# The two commands: `make demo` and `make test`. Everything a fresh machine needs is installed here.
# mrjob needs Python 3.11 or 3.12 (3.13 removed modules it imports).
PY ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Two installs: BASE is the package and its dependencies, all that `crawlfleet` (the demo, a crawl, the
# fleet) needs; STAMP adds the dev tools (pytest, ruff, mypy, pip-audit, ...), pyspark and pyarrow (Parquet), for the tests.
BASE := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: demo test services services-down lint typecheck bench clean audit

$(BASE): pyproject.toml
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/pip install -q -e '.[dev,spark,parquet]'
	touch $(STAMP)

demo: $(BASE)
	$(BIN)/crawlfleet demo

services: $(BASE)
	./scripts/services.sh up

services-down:
	./scripts/services.sh down

# The dependency audit runs first (it takes seconds) so that the test summary stays the last lines.
# scripts/test.sh runs the fault trials beside the other tiers (see its header for why).
test: $(STAMP) services
	./scripts/audit.sh
	./scripts/test.sh

lint: $(STAMP)
	$(BIN)/ruff check pipeline fetchers jobs crawlfleet tests
	$(BIN)/mypy pipeline fetchers jobs crawlfleet tests

# Dependency audit alone (pip-audit against PyPI's vulnerability data; also the first step of `make test`).
# Findings and accepted risks: docs/AUDIT.md.
audit: $(STAMP)
	./scripts/audit.sh

clean:
	rm -rf $(VENV) var build *.egg-info
