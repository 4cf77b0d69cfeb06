# compaction studio: `make run` to try it, `make test` to check it.
SHELL  := /bin/bash
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PG_URL ?= postgres://postgres@127.0.0.1:5432/cs_test

.PHONY: run test lint test-postgres install services bench mutate clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# make run PORT=9000 serves on another port
run: $(STAMP)
	$(PY) scripts/run_dev.py $(if $(PORT),--port $(PORT))

services:
	@bash scripts/ensure_services.sh

# The suite runs on PYTEST_WORKERS processes (pytest-xdist; tests sharing something fixed
# carry an xdist_group and run one after the other), slowest tests first (tests/slow_tests.txt;
# xdist's own reordering of groups is off, so that order holds), and prints its 20 slowest tests.
PYTEST_WORKERS ?= 2
PYTEST_ARGS    := -q -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=20
# One pass of pytest; its exit status 5 ("no tests collected") is not a failure: a pass
# whose selection is empty has nothing to fail.
pytest_pass = rc=0; $(PY) -m pytest $(PYTEST_ARGS) $(1) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "(this pass selected no tests)"; rc=0; fi; exit $$rc

# Linters and type checks first (fast, and a type error often explains a failing test),
# then the whole suite on SQLite, then the tests marked `postgres` (they exercise what
# PostgreSQL does differently: row locks, races, COPY, batched writes, durability settings,
# connection loss, transaction semantics) again on PostgreSQL.
test: $(STAMP) services lint
	@echo "== the whole suite on SQLite =="
	@$(call pytest_pass,)
	@$(MAKE) --no-print-directory test-postgres

lint: $(STAMP)
	$(VENV)/bin/ruff check compaction dashboard tests bench scripts
	$(VENV)/bin/mypy compaction dashboard

test-postgres: $(STAMP)
	@if [ "$$CI" = "true" ] || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then \
		echo "== tests marked postgres again on PostgreSQL =="; \
		export DATABASE_URL=$(PG_URL); $(call pytest_pass,-m postgres tests); \
	else echo "SKIPPED: PostgreSQL not reachable on 127.0.0.1:5432, so the PostgreSQL pass did not run (CI runs it)"; fi

bench: $(STAMP)
	@for f in bench/[!_]*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Mutation testing of the critical modules (mutmut, one module and one test process at a time;
# hours, not part of `make test`). `make mutate MODULES="cut access"` for some of them;
# the figures go to bench/README.md ("Mutation testing").
mutate: $(STAMP)
	$(PY) scripts/mutate.py $(MODULES)

clean:
	rm -rf $(VENV) .data .pytest_cache
