# The two commands: `make demo` and `make test`. Everything a fresh machine needs is installed here.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test services services-down lint typecheck bench clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || PY=python3; \
	  [ -x $(BIN)/python ] || $${PY:-$(PY)} -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crawlfleet demo

services: $(STAMP)
	./scripts/services.sh up

services-down:
	./scripts/services.sh down

test: $(STAMP) services
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check pipeline fetchers jobs tests
	$(BIN)/mypy pipeline fetchers jobs

clean:
	rm -rf $(VENV) var build *.egg-info
