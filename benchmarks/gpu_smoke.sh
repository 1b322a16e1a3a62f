#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one go: the sampler contract, the GPU tests, rollout
# throughput, and a 10-step GRPO run per backend and per hardware preset (LoRA, QLoRA).
#
#   bash benchmarks/gpu_smoke.sh
#
# Settings, as environment variables:
#   PYTHON=...     the interpreter (default: .venv/bin/python when there is one, else python3)
#   MODEL=...      the model config (default smollm2_135m; `tiny` needs no weights)
#   VLLM=0         leave vLLM out (no install, hf only); default 1 installs the gpu extra
#   OUT=...        where logs go (default: a fresh temporary folder)
set -euo pipefail

# Run from the repository root, with the project's virtual environment when there is one.
cd "$(dirname "$0")/.."
if [[ -x .venv/bin/python ]]; then default_python=.venv/bin/python; else default_python=python3; fi
PYTHON="${PYTHON:-$default_python}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the scripts import src without an install
MODEL="${MODEL:-smollm2_135m}"
VLLM="${VLLM:-1}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
echo "== outputs of this smoke run: $OUT (model=$MODEL, vLLM=$VLLM)"

# 1. A GPU must be visible to the driver.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv

# 2. vLLM, the gpu extra, installed if it is missing (it brings the CUDA torch build it needs);
#    then torch must see the GPU too.
backends=(hf)
if [[ "$VLLM" == 1 ]]; then
    if ! "$PYTHON" -c "import vllm" 2>/dev/null; then
        "$PYTHON" -m pip install -e ".[gpu]"
    fi
    "$PYTHON" -c "import vllm; print('vllm', vllm.__version__)"
    backends=(hf vllm)
fi
"$PYTHON" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"

# 3. The sampler contract (vLLM's case skips itself without vLLM), then every test marked for a GPU.
"$PYTHON" -m pytest -p no:cacheprovider -ra tests/rollout/test_sampler_contract.py
#    (only the files that hold GPU marks: the others may need dev packages a GPU image lacks)
mapfile -t gpu_tests < <(grep -rl "mark\.gpu" tests --include='test_*.py')
"$PYTHON" -m pytest -p no:cacheprovider -ra -m gpu "${gpu_tests[@]}"

# 4. Rollout throughput: completion tokens per second of each backend on the same prompts.
"$PYTHON" benchmarks/rollout_throughput.py --model "$MODEL"

# 5. A short GRPO run per backend, then QLoRA (4-bit base + LoRA) with hf.
#    A failed run is reported and the others still run; the script then exits with 1.
failed=()
run() {  # NAME OVERRIDE...
    local name=$1; shift
    echo "== GRPO, $name"
    "$PYTHON" -m src.train task=arithmetic model="$MODEL" trainer.max_steps=10 \
        paths.output_root="$OUT/outputs" "$@" 2>&1 | tee "$OUT/train_$name.log" || failed+=("$name")
}
for backend in "${backends[@]}"; do
    run "$backend" 'hardware=[gpu,lora]' rollout="$backend"
done
run qlora 'hardware=[gpu,4bit,lora]' rollout=hf

# 6. The final reward figures of the runs, side by side (the SFT warm start is shared).
for name in "${backends[@]}" qlora; do
    echo "== $name, final rewards:"
    grep "Final metrics" "$OUT/train_$name.log" | tail -n 1 \
        | grep -oE "'(eval/[^']+|rewards?/[^']+|reward[^']*)': [-0-9.e]+" || echo "(no Final metrics line)"
done
if (( ${#failed[@]} )); then
    echo "== failed runs: ${failed[*]} (logs in $OUT)"
    exit 1
fi
