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

# The reference benchmark (docs/testbed.md, "The paper-regime testbed"): every strategy x 20 seeds,
# 180 runs of 51-60 s each, two at a time: about 80 minutes on an idle 2-core machine. Stopped, it
# resumes (finished runs are reused); it runs seed-major, so a stopped benchmark has every strategy
# at the same seeds. Fewer seeds: make benchmark BENCH_SEEDS=0,1,2,3,4
BENCH_STRATEGIES ?= grpo,dapo,pilot-commit,cero,knapsack,speed-rl,greso,mopps,posterior-signal
BENCH_SEEDS ?= 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19
benchmark: $(STAMP)
	$(BIN)/rollalloc compare --config configs/testbed-paper.yaml --strategies $(BENCH_STRATEGIES) \
		--seeds $(BENCH_SEEDS) --out runs/benchmark --resume

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
