# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0 is the CPU build on this machine's disk; an unpinned torch pulls a multi-GB CUDA build.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: venv test demo benchmark lint format bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[test,trl]"
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -x --durations=15

demo: $(STAMP)
	$(BIN)/rollalloc demo --resume

# The reference benchmark (docs/testbed.md, "The paper-regime testbed" and "Power"): every strategy
# x seeds 0-9, then seeds by precision: one more seed of every strategy whose 90% speedup interval
# over grpo is wider than +-0.1, and of grpo, round after round, until none is (at most 60 seeds).
# About 200 runs of 51-60 s each, two at a time: about 95 minutes on an idle 2-core machine.
# Stopped, it resumes (finished runs are reused, the rounds re-derived from them).
BENCH_STRATEGIES ?= grpo,dapo,pilot-commit,cero,knapsack,speed-rl,greso,mopps,posterior-signal
BENCH_SEEDS ?= 0,1,2,3,4,5,6,7,8,9
BENCH_HALF_WIDTH ?= 0.1
benchmark: $(STAMP)
	$(BIN)/rollalloc compare --config configs/testbed-paper.yaml --strategies $(BENCH_STRATEGIES) \
		--seeds $(BENCH_SEEDS) --half-width $(BENCH_HALF_WIDTH) --max-seeds 60 \
		--out runs/benchmark --resume

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

bench: $(STAMP)
	$(BIN)/rollalloc bench overhead --pool 1000000 --json

clean:
	rm -rf $(VENV) .venv-verl build dist src/*.egg-info
