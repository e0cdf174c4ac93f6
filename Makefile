# The two commands: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check
# the locks go in with uv (requirements/pip.lock installs it beside pip): the same pins and hashes,
# ~10 s instead of pip's ~3 minutes for the dev lock on a fresh machine
UV     := $(VENV)/bin/uv pip install -q --python $(PY)
export LITELLM_LOCAL_MODEL_COST_MAP := True
# Every process of `make test` (the suite starts hundreds: `cairn` commands, servers, docs pages, wheel
# venvs) reads the bytecode the first one wrote instead of compiling each module from source again:
# in an environment with PYTHONDONTWRITEBYTECODE=1 every process compiled again (`import litellm`
# 16.6 s from source, 9.2 s from bytecode; LlamaIndex 9.1 s, 3.7 s). __pycache__ is gitignored.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-unit bench bench-quality quality-gate install dev clean serve openapi configuration dist lint lint-fast package package-lock lock browser

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Installs come from lock files with hashes (requirements/*.lock), then cairn itself without deps.
# The embedded default (make demo, requirements/local.lock) carries the document parsers and MCP too:
# `cairn ingest` reads PDF/HTML/Office and `cairn mcp` runs without a second install.
# `make lock` re-resolves them from pyproject.toml (the one command for upgrades).
LOCK_LOCAL := requirements/local.lock
LOCK_DEV   := requirements/dev.lock

LOCK_PIP   := requirements/pip.lock

$(VENV)/.pip: $(LOCK_PIP) | $(VENV)/bin/python
	$(PIP) install --require-hashes -r $(LOCK_PIP)
	touch $@

$(VENV)/.installed: pyproject.toml $(LOCK_LOCAL) $(VENV)/.pip
	$(UV) --require-hashes -r $(LOCK_LOCAL)
	$(UV) --no-deps -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(LOCK_DEV) $(VENV)/.pip
	$(UV) --require-hashes -r $(LOCK_DEV)
	$(UV) --no-deps -e .
	touch $@

lock: $(VENV)/.pip
	$(VENV)/bin/uv pip compile pyproject.toml --upgrade --generate-hashes --python-version 3.11 --extra local --extra docs --extra mcp -o $(LOCK_LOCAL)
	$(VENV)/bin/uv pip compile pyproject.toml --upgrade --generate-hashes --python-version 3.11 --extra local --extra aws --extra docs --extra dev -o $(LOCK_DEV)

install: $(VENV)/.installed

dev: $(VENV)/.dev-installed

demo: install
	$(VENV)/bin/cairn --home .cairn/demo demo
	@echo "== To look at it in the console: $(VENV)/bin/cairn --home .cairn/demo serve, then open http://127.0.0.1:8080/console"

# asl-validator (npm) checks the workflow definition in tests/integration/test_templates.py;
# installed project-locally, once. Without npm the test skips and says so.
ASL_VALIDATOR_VERSION := 4.0.0
ASL_VALIDATOR := .tools/node_modules/.bin/asl-validator

$(ASL_VALIDATOR):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --no-save --no-audit --no-fund --silent --prefix .tools asl-validator@$(ASL_VALIDATOR_VERSION); \
	else echo "npm not found: the ASL check will be skipped"; fi

# The TypeScript client's dependencies (clients/typescript/package-lock.json: the generator, tsc, the
# Vercel AI SDK its docs use), installed in the package's folder from the lock; tests/e2e/test_clients.py
# runs its `npm test` against `cairn serve`. Without npm those tests skip and say so.
TS_CLIENT := clients/typescript
TS_CLIENT_DEPS := $(TS_CLIENT)/node_modules/.package-lock.json

$(TS_CLIENT_DEPS): $(TS_CLIENT)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund --silent --prefix $(TS_CLIENT) && touch $@; \
	else echo "npm not found: the TypeScript client's tests will be skipped"; fi

# Debian's chromium drives the console's browser tests (tests/e2e/test_console.py, Playwright with
# executable_path; never `playwright install`). Installed once with apt as root; where apt is not
# available the tests skip and say so.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; } \
		|| echo "could not install chromium with apt-get: the console's browser tests will be skipped"; \
	else echo "apt-get not available (or not root): the console's browser tests will be skipped"; fi

browser: $(CHROMIUM)

# ruff and the layer contracts first (seconds); mypy (~40 s cold) checks the types beside the tests, at
# the lowest priority (it takes the cores the test workers leave idle, not theirs while they start), and
# its findings fail the target after them (printed at the end)
test: dev $(ASL_VALIDATOR) $(TS_CLIENT_DEPS) browser lint-fast
	@mkdir -p build
	@nice -n 19 $(VENV)/bin/mypy > build/mypy.log 2>&1 & mypy=$$!; \
	$(PY) -m pytest -q -n auto --dist loadfile --durations=25; tests=$$?; \
	wait $$mypy; types=$$?; echo "== mypy"; cat build/mypy.log; \
	exit $$(( tests != 0 || types != 0 ))

test-unit: dev
	$(PY) -m pytest -q -m unit

serve: install
	$(VENV)/bin/cairn serve

# the OpenAPI document of the /v1 route table (docs/openapi.json) and the API's events in template.yaml
openapi: dev
	$(PY) -c "from cairn.api import openapi_document; open('docs/openapi.json', 'w').write(openapi_document())"
	$(PY) infra/api_events.py

# docs/configuration.md: the table of environment variables, generated from cairn.core.config.Settings
configuration: dev
	$(PY) -c "from cairn.core.config_doc import write; print('docs/configuration.md', 'rewritten' if write() else 'unchanged')"

# the quality gate: ruff and mypy (configured in pyproject.toml, installed from the dev lock) on
# lib/, functions/ and infra/, at zero findings; `make test` runs lint-fast first and mypy beside the tests
lint: lint-fast
	$(VENV)/bin/mypy

lint-fast: dev
	$(VENV)/bin/ruff check lib functions infra tools
	$(VENV)/bin/ruff check tests benchmarks --select F  # pyflakes: undefined names, unused imports and variables (one hid an assert that checked nothing)
	$(VENV)/bin/lint-imports --no-cache  # the layers (doors -> app -> engine -> ports -> core) and no import cycle

# the wheel of the distribution cairn-context (imports as `cairn`; docs/ ships inside as cairn._docs)
dist: | $(VENV)/bin/python
	rm -rf dist build lib/*.egg-info
	$(PIP) wheel --no-deps --wheel-dir dist .
	rm -rf build lib/*.egg-info
	@ls -l dist/*.whl

# every Lambda function built for python3.12 on arm64 with only what it imports, compiled for it; fails past 230 MB
package: dev
	$(PY) infra/package/build.py build

# re-pin the layers' locks (with hashes) after changing dependencies
package-lock: dev
	$(PY) infra/package/build.py lock

bench: dev
	$(PY) -m benchmarks.run --data $(or $(DATA),../shared/data)
	$(PY) -m benchmarks.plots        # PNGs in benchmarks/plots/ from the results just written

# every public quality set in one table (benchmarks/results/quality_table.md): the flat sets, the
# conversational sets (dstc11, mtrag, trec_cast: benchmarks/sources/), LoCoMo; the data sets live
# under DATA (default ../shared/data), the agent_day chats in the repository; about 30 minutes
bench-quality: dev
	$(PY) -m benchmarks.run quality conversations locomo agent_day multilingual --data $(or $(DATA),../shared/data)
	$(PY) -m benchmarks.quality_table
	$(PY) -m benchmarks.quality_gate

# the agent path's figures on the repository's chats against benchmarks/quality_baseline.json
# (make test runs the same check: tests/e2e/test_quality_gate.py); QUALITY_WRITE=1 rewrites the baseline
quality-gate: dev
	$(PY) -m benchmarks.quality_gate $(if $(QUALITY_WRITE),--write)

clean:
	rm -rf $(VENV) .cairn .pytest_cache .hypothesis
