# compaction studio: `make run` to try it, `make test` to check it.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PG_URL ?= postgres://postgres@127.0.0.1:5432/cs_test

.PHONY: run test test-sqlite test-postgres install services bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) scripts/run_dev.py

services:
	@bash scripts/ensure_services.sh

# The whole suite on SQLite, then the database-backed tests again on PostgreSQL.
test: $(STAMP) services
	$(PY) -m pytest -q
	@if [ -n "$$CI" ] || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then \
		echo "== database tests on PostgreSQL =="; \
		DATABASE_URL=$(PG_URL) $(PY) -m pytest -q -m "not nodb" tests/service; \
	else echo "PostgreSQL not reachable: skipped the PostgreSQL pass (CI runs it)"; fi

bench: $(STAMP)
	@for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .data .pytest_cache
