PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck conformance demo clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
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
