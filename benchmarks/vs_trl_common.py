"""What both sides of `benchmarks/vs_trl.py` share: the run shapes, the dense reward, the
prompt strings and the statistics of a timed run. Light on imports (no torch at import time),
so a TRL worker loads nothing of our training stack."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / "outputs" / "models"
TINY_FOLDER = MODELS_DIR / "tiny_llama_h128_l4"  # what `model=tiny` builds (conf/model/tiny.yaml)
SMOL_FOLDER = MODELS_DIR / "smollm2_135m_instruct"  # the converted SmolLM2-135M-Instruct
# SmolLM2-135M's shape with random weights (--weights random), built from the config and
# tokenizer in SMOL_FOLDER, or in SMOL_CONFIG where only those travelled (a GPU machine)
SMOL_RANDOM = MODELS_DIR / "smollm2_135m_random"
SMOL_CONFIG = MODELS_DIR / "smollm2_135m_config"
# the converted Gemma 3 270M (conf/model/gemma3_270m.yaml)
GEMMA_FOLDER = MODELS_DIR / "gemma3_270m"
# Gemma 3 270M's shape with random weights, from the config and tokenizer in GEMMA_FOLDER or
# in GEMMA_CONFIG (where only those travelled: 33 MB of tokenizer, no weights)
GEMMA_RANDOM = MODELS_DIR / "gemma3_270m_random"
GEMMA_CONFIG = MODELS_DIR / "gemma3_270m_config"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
CORPUS = REPO / "src" / "retrieval" / "samples" / "medical_textbook.jsonl"
TRAIN_SETTINGS = {  # identical in both frameworks (the dtype of ours may be changed with --dtype)
    "learning_rate": 1e-6,
    "adam_betas": (0.9, 0.99),
    "max_grad_norm": 1.0,
    "scheduler": "linear",
    "loss_type": "grpo",
    "scale_rewards": "group",
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "num_iterations": 1,
}


@dataclass(frozen=True)
class Shape:
    """One benchmark configuration: model, LoRA or not, B prompts x G completions of T tokens."""

    name: str
    title: str
    model: str  # our model config: tiny, smollm2_135m or gemma3_270m
    lora: bool
    batch: int  # B prompts per step
    group: int  # G completions per prompt
    tokens: int  # T completion tokens, forced
    prompt_tokens: int | None = None  # every prompt exactly this long; None: short questions

    def folder(self, random_weights: bool = False) -> Path:
        """The model folder both sides load: the tiny Llama's; SmolLM2's converted weights, or
        random weights of its shape."""
        if self.model == "tiny":
            return TINY_FOLDER
        if self.model == "gemma3_270m":
            return GEMMA_RANDOM if random_weights else GEMMA_FOLDER
        return SMOL_RANDOM if random_weights else SMOL_FOLDER

    def random_sources(self) -> list[Path]:
        """Where the config and tokenizer of a random-weights folder may be found."""
        if self.model == "gemma3_270m":
            return [GEMMA_FOLDER, GEMMA_CONFIG]
        return [SMOL_FOLDER, SMOL_CONFIG]

    @property
    def completions(self) -> int:
        return self.batch * self.group


SHAPES = {
    "a": Shape("a", "tiny Llama 1.1M, full fine-tuning", "tiny", False, 8, 8, 64),
    "b": Shape("b", "SmolLM2-135M + LoRA r16 (q,k,v,o)", "smollm2_135m", True, 4, 4, 64),
    "c": Shape("c", "SmolLM2-135M + LoRA, 512-token prompts", "smollm2_135m", True, 2, 8, 32, 512),
    "e": Shape("e", "Gemma 3 270M + LoRA r16 (q,k,v,o)", "gemma3_270m", True, 4, 4, 64),
    # GPU shapes (--device cuda): the rollout is most of a step
    "g": Shape("g", "SmolLM2-135M + LoRA r16 (q,k,v,o)", "smollm2_135m", True, 8, 8, 128),
    "h": Shape("h", "SmolLM2-135M + LoRA r16 (q,k,v,o)", "smollm2_135m", True, 16, 8, 256),
    # Gemma 3 270M's shape on a GPU (random weights: --weights random): --configs i,j
    "i": Shape("i", "Gemma 3 270M + LoRA r16 (q,k,v,o)", "gemma3_270m", True, 8, 8, 128),
    "j": Shape("j", "Gemma 3 270M + LoRA r16 (q,k,v,o)", "gemma3_270m", True, 16, 8, 256),
}
DEFAULT_CONFIGS = {"cpu": ["a", "b", "c"], "cuda": ["a", "g", "h"]}


# ------------------------------------------------------------------------------------ reward
def dense_score(text: str) -> float:
    """Share of digits plus half the share of vowels among the characters of `text` (0 for an
    empty text): cheap, and continuous enough that a group's completions rarely tie."""
    if not text:
        return 0.0
    digits = sum(character.isdigit() for character in text)
    vowels = sum(character in "aeiouAEIOU" for character in text)
    return (digits + 0.5 * vowels) / len(text)


class DenseTextReward:
    """`dense_score` as one of our reward functions (`reward.functions.<name>._target_`)."""

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        return [dense_score(outcome) for outcome in outcomes]


def trl_dense_reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """`dense_score` as a TRL reward function (plain-text completions)."""
    return [dense_score(completion) for completion in completions]


# ------------------------------------------------------------------------------------ prompts
def arithmetic_prompts(count: int) -> list[str]:
    """The first `count` arithmetic questions as our generator role prompts them (template
    "{question}\\nAnswer:"), e.g. "What is 37 + 48?\\nAnswer:"."""
    from src.data.arithmetic import arithmetic_problems

    return [f"{row['question']}\nAnswer:" for row in arithmetic_problems(seed=0)[:count]]


def passages() -> list[dict[str, str]]:
    """The packaged medical textbook passages (title, content), in file order."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def retrieval_prompts(count: int, length: int, tokenizer: Any) -> list[str]:
    """`count` retrieval-shaped prompts of exactly `length` tokens under `tokenizer`: numbered
    passages, then a question about one of them. Deterministic."""
    corpus = passages()
    prompts = []
    for i in range(count):
        start = (37 * i) % len(corpus)
        chosen = [corpus[(start + k) % len(corpus)] for k in range(40)]
        filler = "".join(
            f"Passage {k + 1} ({p['title']}): {p['content']}\n" for k, p in enumerate(chosen)
        )
        question = (
            f"\nQuestion: according to the passages, what is known about "
            f"{chosen[1]['title'].lower()}?\nAnswer:"
        )
        prompts.append(exact_length(tokenizer, filler, question, length))
    return prompts


def token_count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def exact_length(tokenizer: Any, filler: str, question: str, length: int) -> str:
    """A prefix of `filler` followed by `question`, exactly `length` tokens long."""
    ids = tokenizer(filler, add_special_tokens=False)["input_ids"]
    wanted = length - token_count(tokenizer, question)
    if wanted <= 0 or wanted + 8 > len(ids):
        raise ValueError(f"cannot make a {length}-token prompt from this filler and question")
    for keep in [wanted, *range(wanted + 8, wanted - 32, -1)]:
        text = tokenizer.decode(ids[:keep]) + question
        if token_count(tokenizer, text) == length:
            return text
    raise ValueError(f"no prefix of the filler gives exactly {length} tokens")


def make_prompts(shape: Shape, folder: Path) -> list[str]:
    """The B prompt strings of a shape, identical for both frameworks (`folder`: the model's)."""
    if shape.prompt_tokens is None:
        return arithmetic_prompts(shape.batch)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return retrieval_prompts(shape.batch, shape.prompt_tokens, tokenizer)


# ------------------------------------------------------------------------------------ results
@dataclass
class RunResult:
    """What one worker measured; written as JSON by the worker, read by the driver."""

    framework: str  # ours or trl
    shape: str
    beta: float
    seed: int
    dtype: str
    steps: int
    step_ends: list[float]  # perf_counter at the end of every step
    mean_lengths: list[float]  # completions/mean_length per step
    rewards: list[float]  # mean reward per step
    frac_reward_zero_std: list[float]  # share of groups whose rewards are all equal, per step
    prompt_tokens: list[int]  # each prompt's token count as this framework tokenizes it
    peak_rss_gib: float
    completions_per_step: int
    device: str = "cpu"  # cpu or cuda
    peak_gpu_gib: float = float("nan")  # torch.cuda.max_memory_allocated over the run
    details: dict[str, Any] = field(default_factory=dict)  # settings worth reporting
    started: float = float("nan")  # perf_counter when the framework was called (set-up begins)

    @property
    def step_seconds(self) -> list[float]:
        """Seconds of every step after the first: the time between consecutive step ends."""
        return step_seconds(self.step_ends)

    @property
    def first_step_seconds(self) -> float:
        """Seconds from the framework's call to the end of the first step: loading, set-up,
        compiling (where on) and the first step itself."""
        return self.step_ends[0] - self.started if self.step_ends else float("nan")

    @property
    def seconds_per_step(self) -> float:
        return statistics.median(self.step_seconds) if self.step_seconds else float("nan")

    @property
    def mean_length(self) -> float:
        """Mean completion length over the timed steps (all steps when only one ran)."""
        timed = self.mean_lengths[1:] or self.mean_lengths
        return statistics.fmean(timed) if timed else float("nan")

    @property
    def tokens_per_step(self) -> float:
        return self.mean_length * self.completions_per_step

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_step / self.seconds_per_step

    def summary(self) -> dict[str, Any]:
        """Everything, with the derived figures, for the JSON report."""
        return {
            **asdict(self),
            "step_seconds": self.step_seconds,
            "first_step_seconds": self.first_step_seconds,
            "seconds_per_step": self.seconds_per_step,
            "mean_length": self.mean_length,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_second": self.tokens_per_second,
        }

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> RunResult:
        return cls(**json.loads(path.read_text()))


def step_seconds(ends: list[float]) -> list[float]:
    """Seconds of every step after the first, from the times at which the steps ended."""
    return [later - earlier for earlier, later in zip(ends, ends[1:], strict=False)]


def phase_seconds(steps: list[float], per_step: dict[str, list[float]]) -> dict[str, float]:
    """Median seconds of each phase over the timed steps, and `rest`: the median of each
    step's seconds outside its phases. `per_step[name][i]` is the phase's time within the
    step that took `steps[i]` seconds; a phase without values is left out, and `rest` is
    given only where every phase has one value per step."""
    medians = {
        name: round(statistics.median(values), 3) for name, values in per_step.items() if values
    }
    if steps and all(len(values) == len(steps) for values in per_step.values()):
        outside = [
            seconds - sum(values[i] for values in per_step.values())
            for i, seconds in enumerate(steps)
        ]
        medians["rest"] = round(statistics.median(outside), 3)
    return medians


def peak_gpu_gib() -> float:
    """Peak GPU memory allocated by torch in this process so far (nan without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    return torch.cuda.max_memory_allocated() / 2**30


def build_random_model(source: Path, folder: Path, seed: int = 0) -> None:
    """A model folder with `source`'s config and tokenizer and random weights (seeded),
    saved as the model's own dtype: for shapes whose weights cannot be carried."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(source)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)


def peak_rss_gib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
