#!/usr/bin/env bash
# The heavy stage: DeepSpeed ZeRO-2 and ZeRO-3 against DDP on 2 CPU processes (gloo), in a venv of
# its own built from nothing (CPU torch from the local disk first, so nothing pulls a CUDA build).
# DeepSpeed JIT-builds its shared-memory comm op on the first launch (g++, about 160 s).
#   bash .ci/heavy.sh            (or: make test-heavy)
# HEAVY_DIR keeps the venv and the compiled op somewhere else than a fresh temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
HEAVY=${HEAVY_DIR:-$(mktemp -d /tmp/rlvr-heavy.XXXXXX)}
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
set +e
"$PY" -m pytest -q -p no:cacheprovider -rs tests/test_deepspeed.py 2>&1 | tee "$HEAVY/deepspeed.log"
status=${PIPESTATUS[0]}
set -e
if grep -q " skipped" "$HEAVY/deepspeed.log"; then
    echo "heavy: a DeepSpeed test was skipped" >&2
    exit 1
fi
echo "heavy: done in $(( $(date +%s) - started )) s"
exit "$status"
