#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one go: the sampler contract on both backends, the GPU
# tests, hf vs vLLM rollout throughput, and a 10-step GRPO run with each backend.
#
#   bash benchmarks/gpu_smoke.sh            (PYTHON=... to pick another interpreter)
set -euo pipefail

# Run from the repository root, with the project's virtual environment when there is one.
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then default_python=.venv/bin/python; else default_python=python3; fi
PYTHON="${PYTHON:-$default_python}"
OUT="$(mktemp -d)"
echo "== outputs of this smoke run: $OUT"

# 1. A GPU must be visible to the driver.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv

# 2. vLLM, the gpu extra, installed if it is missing (it brings the CUDA torch build it needs);
#    then torch must see the GPU too.
if ! "$PYTHON" -c "import vllm" 2>/dev/null; then
    "$PYTHON" -m pip install -e ".[gpu]"
fi
"$PYTHON" -c "import torch, vllm; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('vllm', vllm.__version__, 'torch', torch.__version__, 'CUDA', torch.version.cuda)"

# 3. The sampler contract on hf and vllm, then every test marked for a GPU.
"$PYTHON" -m pytest -p no:cacheprovider -ra tests/rollout/test_sampler_contract.py
"$PYTHON" -m pytest -p no:cacheprovider -ra -m gpu tests

# 4. Rollout throughput: completion tokens per second of hf and vllm on the same prompts.
"$PYTHON" benchmarks/rollout_throughput.py --model smollm2_135m

# 5. A short GRPO run with each backend (10 steps of LoRA on SmolLM2-135M).
for backend in hf vllm; do
    echo "== GRPO, rollout=$backend"
    "$PYTHON" -m src.train task=arithmetic model=smollm2_135m 'hardware=[gpu,lora]' \
        rollout="$backend" trainer.max_steps=10 \
        paths.output_root="$OUT/outputs" 2>&1 | tee "$OUT/train_$backend.log"
done

# 6. The final reward figures of both runs, side by side (the SFT warm start is shared).
for backend in hf vllm; do
    echo "== rollout=$backend, final rewards:"
    grep "Final metrics" "$OUT/train_$backend.log" | tail -n 1 \
        | grep -oE "'(eval/[^']+|rewards?/[^']+|reward[^']*)': [-0-9.e]+" || echo "(no Final metrics line)"
done
