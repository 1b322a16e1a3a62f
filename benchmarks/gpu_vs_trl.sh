#!/usr/bin/env bash
# Ours against TRL's GRPOTrainer on one CUDA GPU, in one go: the GPU tests of the decoding and
# log-prob paths, then `benchmarks/vs_trl.py --device cuda`, each under its own time limit,
# results printed as they come and kept in $OUT.
#
#   bash benchmarks/gpu_vs_trl.sh
#
# For a GPU machine where this project is not installed: wheels of what its image lacks
# (hydra-core, omegaconf, mlflow-skinny and its needs, trl, datasets) in .whl/ are installed
# into /tmp/site first; SmolLM2's config and tokenizer files in
# outputs/models/smollm2_135m_config give its shape random weights (vs_trl.py --weights random).
#
# Settings, as environment variables:
#   PYTHON=...   the interpreter (default: .venv/bin/python when there is one, else python3)
#   CONFIGS=...  vs_trl.py configurations (default g,h,a)
#   ROUNDS=...   alternating ours/TRL rounds (default 2)
#   STEPS=...    GRPO steps per run, the first untimed (default 4)
#   TESTS=0      skip the tests
#   LIMIT=...    seconds for vs_trl.py (default 480)
#   OUT=...      where logs and results go (default: a fresh temporary folder)
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then default_python=.venv/bin/python; else default_python=python3; fi
PYTHON="${PYTHON:-$default_python}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PYTHON" -c "import torch, transformers, trl; print('torch', torch.__version__, 'CUDA', torch.version.cuda, '| transformers', transformers.__version__, '| trl', trl.__version__)"

if [[ "${TESTS:-1}" == 1 ]]; then
    echo "== GPU tests of the decoding and log-prob paths"
    timeout 240 "$PYTHON" -m pytest -q -p no:cacheprovider -x \
        tests/model/fast/test_captured_steps.py tests/model/fast/test_static_steps.py \
        tests/model/fast/test_chunked_head.py tests/model/test_head_log_probs.py \
        2>&1 | tail -15 | tee "$OUT/tests.log"
fi

echo "== vs TRL on the GPU"
timeout "${LIMIT:-480}" "$PYTHON" benchmarks/vs_trl.py --device cuda \
    --configs "${CONFIGS:-g,h,a}" --betas 0.04 --rounds "${ROUNDS:-2}" --steps "${STEPS:-4}" \
    --out "$OUT/vs_trl.json" 2>&1 | tee "$OUT/vs_trl.log"
