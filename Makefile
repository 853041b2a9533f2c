# Campus GPU Hub: the two entry points are `make demo` and `make test` (see README.md).
# Every target that needs tools depends on `setup`, which is idempotent: it creates .venv and
# node_modules only when missing and reinstalls only when their inputs changed.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/node_modules/.bin

# The installed project is recorded by a stamp; a new top-level package (gpuspawner/,
# jupyter_to_job/) also triggers a reinstall, because an editable install maps the
# packages that existed when it ran.
INSTALL_STAMP := $(VENV)/.campus-gpu-hub-installed
INSTALL_INPUTS := setup.py pyproject.toml constraints.txt \
	$(wildcard gpuspawner/__init__.py jupyter_to_job/__init__.py)
NODE_STAMP := node_modules/.package-lock.json

LINT_PATHS ?= gpuspawner jupyter_to_job tests benchmarks hub_config setup.py
TYPED_PATHS ?= gpuspawner/policy
PYTEST_ARGS ?= -v tests
DEMO_CONFIG := $(CURDIR)/hub_config/local/jupyterhub_config.py
DEMO_DIR := .run/demo

export PATH := $(BIN):$(NODE_BIN):$(PATH)

.PHONY: help setup demo test lint typecheck pytest bench constraints clean distclean

help:
	@echo "make demo   set everything up and start the local demo hub at http://127.0.0.1:8000"
	@echo "make test   set everything up and run lint, type checks and the whole test suite"
	@echo "make lint | typecheck | pytest | bench | constraints | clean | distclean"

setup: $(INSTALL_STAMP) $(NODE_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALL_STAMP): $(INSTALL_INPUTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,lab]'
	touch $@

# npm writes node_modules/.package-lock.json on every install, so it is the stamp.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

demo: setup
	mkdir -p $(DEMO_DIR)
	cd $(DEMO_DIR) && exec $(BIN)/jupyterhub -f $(DEMO_CONFIG)

test: setup lint typecheck pytest

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: setup
	$(BIN)/mypy $(TYPED_PATHS)

# pytest exits 5 when it collects no tests; that fails the target like any other error.
pytest: setup
	$(BIN)/pytest $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m benchmarks

# Re-pin constraints.txt from a throwaway virtualenv built from setup.py's extras.
constraints:
	rm -rf .run/constraints-venv
	$(PYTHON) -m venv .run/constraints-venv
	.run/constraints-venv/bin/python -m pip install --quiet --upgrade pip
	.run/constraints-venv/bin/python -m pip install --quiet '.[test,lab]'
	{ sed -n '/^#/p' constraints.txt; \
	  .run/constraints-venv/bin/python -m pip freeze --exclude campus-gpu-hub; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .run/constraints-venv

clean:
	rm -rf .run test-artifacts build dist .pytest_cache .ruff_cache .mypy_cache
	find . -path ./$(VENV) -prune -o -path ./node_modules -prune -o \
		\( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) node_modules
