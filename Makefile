PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck conformance demo docs clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt tests/plugin/http/typescript/package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	# the TypeScript client example's test compiles it with the tsc its package-lock.json pins
	command -v npm >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --silent --no-audit --no-fund --prefix tests/plugin/http/typescript
	# the inspector's browser tests drive Debian's chromium; a fresh machine does not have it
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	touch $(STAMP)

lint: install
	$(BIN)/ruff check kernel plugin tests

# mypy cannot follow the editable install's import hook, so it reads the package through a tree of
# links that spells the installed layout: plugin/ as affect_memory, kernel/ as affect_memory.kernel.
TYPECHECK := $(VENV)/typecheck

typecheck: install
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/affect_memory
	ln -s $(CURDIR)/plugin/* $(TYPECHECK)/affect_memory/
	ln -s $(CURDIR)/kernel $(TYPECHECK)/affect_memory/kernel
	MYPYPATH=$(TYPECHECK) $(BIN)/mypy -p affect_memory

# The documentation site (mkdocs.yml), strictly: a broken link or API reference fails. Its
# reference pages read the package as mypy does, through a tree of links of their own (so a
# typecheck running meanwhile cannot pull it away); the site goes to site/, git-ignored.
DOCS_SOURCE := $(VENV)/docs-source

docs: install
	rm -rf $(DOCS_SOURCE) && mkdir -p $(DOCS_SOURCE)/affect_memory
	ln -s $(CURDIR)/plugin/* $(DOCS_SOURCE)/affect_memory/
	ln -s $(CURDIR)/kernel $(DOCS_SOURCE)/affect_memory/kernel
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: lint typecheck
	HF_HUB_OFFLINE=1 ANONYMIZED_TELEMETRY=False $(BIN)/python -m pytest -q -n 2 --dist loadfile

demo: install
	HF_HUB_OFFLINE=1 ANONYMIZED_TELEMETRY=False $(BIN)/affect-memory demo

conformance: install
	$(BIN)/affect-memory conformance fixtures/kernel_cases.json fixtures/continuity_traces.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

.PHONY: notebooks
notebooks: install
	HF_HUB_OFFLINE=1 ANONYMIZED_TELEMETRY=False $(BIN)/python -m affect_memory.experiments.notebooks \
		notebooks/*.ipynb --out notebooks/rendered
