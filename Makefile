# Set-up, tests and the demo. Everything installs into .venv (see scripts/install.sh).
VENV ?= .venv
PY := $(VENV)/bin/python
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup test test-fast demo docs clean

setup:
	bash scripts/install.sh $(VENV)

test: setup
	$(PY) -m pytest tests --durations=15

test-fast: setup
	$(PY) -m pytest tests/unit

# DEMO_ARGS: options of `specdec demo`, e.g. DEMO_ARGS=--verbose (the engine's logs on the terminal)
demo: setup
	bash scripts/demo.sh $(PY) $(DEMO_ARGS)

# docs/reference.md is generated from the code (tests/unit/test_reference_docs.py checks it).
docs: setup
	$(PY) -m flows.reference > docs/reference.md.tmp && mv docs/reference.md.tmp docs/reference.md

clean:
	rm -rf $(VENV) out
