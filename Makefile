# Set-up, tests and the demo. Everything installs into .venv (see scripts/install.sh).
VENV ?= .venv
PY := $(VENV)/bin/python
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup test test-fast demo clean

setup:
	bash scripts/install.sh $(VENV)

test: setup
	$(PY) -m pytest tests --durations=15

test-fast: setup
	$(PY) -m pytest tests -m "not slow"

demo: setup
	bash scripts/demo.sh $(PY)

clean:
	rm -rf $(VENV) out
