# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0 is the CPU build on this machine's disk; an unpinned torch pulls a multi-GB CUDA build.
TORCH ?= torch==2.13.0
# The libraries whose numerics decide a warm start's weights, pinned so that a fresh machine
# rebuilds the same policy under the same cache key (docs/design-notes.md, session 39).
PINS ?= transformers==5.25.0 numpy==2.4.6
STAMP := $(VENV)/.installed

.PHONY: venv test demo benchmark lint format bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)" $(PINS)
	$(BIN)/pip install -q -e ".[test,trl]" $(PINS)
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -x --durations=15

demo: $(STAMP)
	$(BIN)/rollalloc demo --resume

# The reference benchmark (docs/testbed.md, "Seeds by precision"): every strategy x seeds 0-9, then
# round after round one more seed of every strategy whose 90% speedup interval over grpo is wider
# than +-0.1 (unless it lies below 0.9: slower), and of grpo, until none is (at most 60 seeds each).
# Measured (docs/testbed.md, "Seeds by precision"): 200 runs in 23 rounds, 94 minutes on the 2-core
# machine; the worst case (every strategy to 60 seeds, 540 runs) would be about 4.5 hours. Stopped, it resumes:
# finished runs are reused and the rounds re-derived from them (same settings). A fixed seed list
# instead: make benchmark BENCH_HALF_WIDTH= BENCH_SEEDS=0,1,2,3,4
BENCH_STRATEGIES ?= grpo,dapo,pilot-commit,cero,knapsack,speed-rl,greso,mopps,posterior-signal
BENCH_SEEDS ?= 0,1,2,3,4,5,6,7,8,9
BENCH_HALF_WIDTH ?= 0.1
BENCH_MAX_SEEDS ?= 60
benchmark: $(STAMP)
	$(BIN)/rollalloc compare --config configs/testbed-paper.yaml --strategies $(BENCH_STRATEGIES) \
		--seeds $(BENCH_SEEDS) \
		$(if $(BENCH_HALF_WIDTH),--half-width $(BENCH_HALF_WIDTH) --max-seeds $(BENCH_MAX_SEEDS)) \
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
