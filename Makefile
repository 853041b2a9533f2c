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
# The demo and the tests need both sides (setup.py's extras): the hub, a user's server
# (JupyterLab), campus single sign-on, and the test tools.
DEV_EXTRAS := hub,singleuser,sso,test
# The wheel ships the prebuilt JupyterLab extension (setup.py data_files), so the extension
# is built before the project is installed, and a new build reinstalls it.
LABEXT := labextension
LABEXT_BUILD := jupyter_to_job/labextension
LABEXT_STAMP := $(LABEXT_BUILD)/package.json
LABEXT_NODE_STAMP := $(LABEXT)/node_modules/.yarn-state.yml
LABEXT_SOURCES := $(LABEXT)/package.json $(LABEXT)/yarn.lock $(LABEXT)/tsconfig.json \
	$(shell find $(LABEXT)/src $(LABEXT)/style $(LABEXT)/schema -type f -not -path '*/__tests__/*')
UI_TESTS := tests/ui
UI_NODE_STAMP := $(UI_TESTS)/node_modules/.yarn-state.yml

INSTALL_INPUTS := setup.py pyproject.toml constraints.txt $(LABEXT_STAMP) $(LABEXT)/install.json \
	$(wildcard gpuspawner/__init__.py jupyter_to_job/__init__.py) \
	jupyter-config/lab/settings/overrides.d/campus-gpu-hub.json
NODE_STAMP := node_modules/.package-lock.json

LINT_PATHS ?= gpuspawner jupyter_to_job tests benchmarks hub_config setup.py
TYPED_PATHS ?= gpuspawner/policy gpuspawner/core gpuspawner/accounting
PYTEST_ARGS ?= -v tests
DEMO_CONFIG := $(CURDIR)/hub_config/local/jupyterhub_config.py
SSO_CONFIG := $(CURDIR)/hub_config/sso/jupyterhub_config.py
WORKSTATION_CONFIG := $(CURDIR)/hub_config/workstation/jupyterhub_config.py
# Each demo keeps every file it writes while it runs (database, cookie secret, the proxy's
# pid file, GPU ledger, job store, logs, sockets) in its runtime folder: GPUSPAWNER_DEMO_RUNTIME
# when set, else its own folder below. Demos with other runtime folders and ports
# (GPUSPAWNER_DEMO_PORT and the others of hub_config/local/README.md) run side by side.
DEMO_DIR ?= $(abspath $(or $(GPUSPAWNER_DEMO_RUNTIME),.run/demo))
SSO_DIR ?= $(abspath $(or $(GPUSPAWNER_DEMO_RUNTIME),.run/demo-sso))
# Outside the checkout: each person's jobs reach their own folder in it by name.
WORKSTATION_DIR ?= $(abspath $(or $(GPUSPAWNER_DEMO_RUNTIME),/var/lib/campus-gpu-hub-demo))
# The workstation hub's servers and jobs run as other accounts, so its Python must be one they
# can run: a virtualenv of the system's Python in its runtime folder (.venv's Python may live
# in root's home, as pyenv's does), made once, remade when the project's requirements change.
WORKSTATION_PYTHON ?= /usr/bin/python3
WORKSTATION_VENV ?= $(WORKSTATION_DIR)/venv
WORKSTATION_STAMP := $(WORKSTATION_VENV)/.campus-gpu-hub-installed
WORKSTATION_EXTRAS := hub,singleuser,sso

export PATH := $(BIN):$(NODE_BIN):$(PATH)

.PHONY: system-deps help setup labextension jstest ui-test demo demo-sso demo-workstation workstation-root test lint typecheck pytest bench constraints \
	k8s-tools clean distclean

help:
	@echo "make demo   set everything up and start the local demo hub at http://127.0.0.1:8000"
	@echo "make test   set everything up and run lint, type checks and the whole test suite"
	@echo "make demo-sso  the demo hub with campus single sign-on (a stand-in campus login)"
	@echo "make demo-workstation  as root: one shared machine, each person's server and jobs as their own account"
	@echo "make lint | typecheck | pytest | jstest | ui-test | labextension | k8s-tools | bench | constraints"
	@echo "make clean | distclean"

setup: $(INSTALL_STAMP) $(NODE_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# jlpm (yarn 3) and jupyter-builder come with jupyter_builder, a dependency of jupyterlab;
# they are installed on their own first because the project's install needs the build.
$(BIN)/jupyter-builder: | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt jupyter_builder

# yarn's node-modules linker rewrites node_modules/.yarn-state.yml on every install.
$(LABEXT_NODE_STAMP): $(LABEXT)/package.json $(LABEXT)/yarn.lock | $(BIN)/jupyter-builder
	cd $(LABEXT) && $(BIN)/jlpm install --immutable
	touch $@

$(LABEXT_STAMP): $(LABEXT_SOURCES) $(LABEXT_NODE_STAMP)
	cd $(LABEXT) && $(BIN)/jlpm build:prod

labextension: $(LABEXT_STAMP)

# An editable install does not install setup.py's data_files, so the built JupyterLab
# extension (linked, so rebuilds show at once) and the server extension's config are put
# where Jupyter looks in this virtualenv; a wheel install carries them itself.
$(INSTALL_STAMP): $(INSTALL_INPUTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[$(DEV_EXTRAS)]'
	mkdir -p $(VENV)/share/jupyter/labextensions/@campus-gpu-hub $(VENV)/etc/jupyter/jupyter_server_config.d
	ln -sfn $(CURDIR)/$(LABEXT_BUILD) $(VENV)/share/jupyter/labextensions/@campus-gpu-hub/jupyter-to-job
	cp jupyter-config/jupyter_server_config.d/jupyter_to_job.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	mkdir -p $(VENV)/share/jupyter/lab/settings/overrides.d
	cp jupyter-config/lab/settings/overrides.d/campus-gpu-hub.json $(VENV)/share/jupyter/lab/settings/overrides.d/
	touch $@

# npm writes node_modules/.package-lock.json on every install, so it is the stamp.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

demo: setup
	mkdir -p $(DEMO_DIR)
	cd $(DEMO_DIR) && GPUSPAWNER_DEMO_RUNTIME=$(DEMO_DIR) exec $(BIN)/jupyterhub -f $(DEMO_CONFIG)

# The same hub logging in through OpenID Connect; it starts the stand-in campus provider
# (hub_config/sso/campus_idp) on http://127.0.0.1:8010. Password for every demo person:
# campus-demo. Set CAMPUS_OIDC_ISSUER (see hub_config/sso/README.md) for a real provider.
demo-sso: setup
	mkdir -p $(SSO_DIR)
	cd $(SSO_DIR) && GPUSPAWNER_DEMO_RUNTIME=$(SSO_DIR) exec $(BIN)/jupyterhub -f $(SSO_CONFIG)

# The production setup for one shared machine (hub_config/workstation), with the demo's
# people, courses and flavors: it creates their system accounts, so it needs root.
demo-workstation: workstation-root setup $(WORKSTATION_STAMP)
	mkdir -p $(WORKSTATION_DIR)
	cd $(WORKSTATION_DIR) && PATH=$(WORKSTATION_VENV)/bin:$$PATH GPUSPAWNER_DEMO_RUNTIME=$(WORKSTATION_DIR) \
	  exec $(WORKSTATION_VENV)/bin/jupyterhub -f $(WORKSTATION_CONFIG)

workstation-root:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make demo-workstation creates the demo people's system accounts and runs each server and job as its owner, so it needs root: sudo make demo-workstation. (make demo needs no root, and has no isolation between users.)" >&2; \
	  exit 1; \
	fi

# The project installed as for .venv (editable, so it runs this checkout's code, which every
# account must therefore be able to read), from the system's Python, with umask 022.
# Debian's python3-venv is installed when that Python cannot make virtualenvs.
$(WORKSTATION_STAMP): $(INSTALL_INPUTS) | workstation-root
	@test -x $(WORKSTATION_PYTHON) || { echo "The workstation hub needs a Python every account can run, and $(WORKSTATION_PYTHON) does not exist. Install one (sudo apt-get install -y python3-venv) or name it: sudo make demo-workstation WORKSTATION_PYTHON=/usr/local/bin/python3" >&2; exit 1; }
	@$(WORKSTATION_PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
	  echo "Installing from Debian: python3-venv"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
	@echo "Building the workstation hub's virtualenv $(WORKSTATION_VENV) from $(WORKSTATION_PYTHON), readable by every account (once; again only when setup.py, pyproject.toml, constraints.txt or the lab extension change)."
	mkdir -p $(WORKSTATION_DIR)
	chmod 0711 $(WORKSTATION_DIR)
	umask 022 && $(WORKSTATION_PYTHON) -m venv $(WORKSTATION_VENV)
	umask 022 && $(WORKSTATION_VENV)/bin/python -m pip install --quiet -c constraints.txt -e '.[$(WORKSTATION_EXTRAS)]'
	umask 022 && mkdir -p $(WORKSTATION_VENV)/share/jupyter/labextensions/@campus-gpu-hub $(WORKSTATION_VENV)/etc/jupyter/jupyter_server_config.d
	ln -sfn $(CURDIR)/$(LABEXT_BUILD) $(WORKSTATION_VENV)/share/jupyter/labextensions/@campus-gpu-hub/jupyter-to-job
	install -m 0644 jupyter-config/jupyter_server_config.d/jupyter_to_job.json $(WORKSTATION_VENV)/etc/jupyter/jupyter_server_config.d/
	touch $@

test: setup system-deps k8s-tools lint typecheck jstest pytest ui-test

# The real Kubernetes control plane the tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, helm, Kueue), built from the Go modules pinned in tools/k8s
# into ~/.cache/campus-gpu-hub/k8s-tools (K8S_TOOLS_CACHE), once per set of versions.
k8s-tools:
	@command -v go >/dev/null 2>&1 || { echo "Building the Kubernetes control plane for the tests needs Go 1.24 or newer (https://go.dev/doc/install)." >&2; exit 1; }
	tools/k8s/build.sh

# Real components the tests use from Debian: PostgreSQL (the job store is tested against a
# real server), Chromium (browser tests) and Prometheus (prometheus and promtool: the shipped
# rules and a scrape of the hub, tests/operations). Installed when missing, as root (CI runs
# as root).
system-deps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing from Debian:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "The tests need:$$missing. Install with: sudo apt-get install -y$$missing" >&2; exit 1; \
	  fi; \
	fi

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/lint-imports --no-cache
	cd $(LABEXT) && $(BIN)/jlpm lint:check

jstest: setup
	cd $(LABEXT) && $(BIN)/jlpm test

# Playwright drives Debian's Chromium (apt-get install -y chromium); no browser download.
$(UI_NODE_STAMP): $(UI_TESTS)/package.json $(UI_TESTS)/yarn.lock | $(BIN)/jupyter-builder
	cd $(UI_TESTS) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/jlpm install --immutable
	touch $@

# playwright.config.js's projects, then the hub as helm deploys it (playwright.chart.config.js:
# root only, else skipped; it needs k8s-tools), whose minute of start the others do not wait for.
ui-test: setup $(UI_NODE_STAMP)
	cd $(UI_TESTS) && status=0 && { $(BIN)/jlpm test || status=$$?; } \
	  && { $(BIN)/jlpm test:chart || status=$$?; } && exit $$status

typecheck: setup
	$(BIN)/mypy $(TYPED_PATHS)

# pytest exits 5 when it collects no tests; that fails the target like any other error.
pytest: setup $(UI_NODE_STAMP) k8s-tools
	$(BIN)/pytest $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m benchmarks

# Re-pin constraints.txt from a throwaway virtualenv built from setup.py's extras.
constraints: $(LABEXT_STAMP)
	rm -rf .run/constraints-venv
	$(PYTHON) -m venv .run/constraints-venv
	.run/constraints-venv/bin/python -m pip install --quiet --upgrade pip
	.run/constraints-venv/bin/python -m pip install --quiet '.[$(DEV_EXTRAS)]'
	{ sed -n '/^#/p' constraints.txt; \
	  .run/constraints-venv/bin/python -m pip freeze --exclude campus-gpu-hub; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .run/constraints-venv

clean:
	rm -rf .run test-artifacts build dist .pytest_cache .ruff_cache .mypy_cache
	rm -rf $(LABEXT_BUILD) $(LABEXT)/lib $(LABEXT)/coverage $(LABEXT)/junit.xml \
		$(LABEXT)/tsconfig.tsbuildinfo $(LABEXT)/.eslintcache $(LABEXT)/.stylelintcache
	find . -path ./$(VENV) -prune -o -name node_modules -prune -o \
		\( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) node_modules $(LABEXT)/node_modules $(LABEXT)/.yarn \
		$(UI_TESTS)/node_modules $(UI_TESTS)/.yarn
