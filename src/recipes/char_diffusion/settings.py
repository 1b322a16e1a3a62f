"""The type, range and allowed values of task=char_diffusion's own keys, beside its code: the
task names this table under `settings_tables`, and `src.runs.schema.check_schema` checks them
as it checks every other key (one `error:` line naming the key, the value and what is
allowed)."""

from __future__ import annotations

from src.utils.setting import (
    FLAG,
    MASK,
    OPTIONAL_TEXT,
    TEXT,
    TEXTS,
    AnyOf,
    Setting,
    choice,
    number,
    whole,
)

# what a judge's score reads: the window, or its filled characters
SCORES = ("window", "characters")
GREEDY = "0: greedy"  # what a temperature of 0 means

SETTINGS: dict[str, Setting | AnyOf] = {
    # the task's data and model
    "data.window": whole(2),
    "data.mask_ratio": number(0, 1, above=True, below=True),
    "data.min_span": whole(1),
    "data.max_span": whole(1),
    "data.mask_char": MASK,
    "model.mask_char": MASK,
    "policy.mask_char": MASK,
    "rollout.denoising_steps": whole(1, why="1: every masked position at once"),
    "data.source.seed": whole(),
    "model.seed": whole(),
    "data.source.low": whole(),
    "data.source.high": whole(),
    "model.builder.*": whole(0),
    "model.hidden_size": whole(1),
    "model.intermediate_size": whole(1),
    "model.num_heads": whole(1),
    "model.num_layers": whole(1),
    "model.max_length": whole(1),
    "model.dropout": number(0, 1),
    # the generator's pretraining and the judge's training (the stages)
    "stages.generator.train.max_steps": whole(1),
    "stages.generator.train.optimizer.lr": number(0, above=True),
    "stages.generator.train.optimizer.weight_decay": number(0),
    "stages.generator.train.batch_size": whole(1),
    "stages.generator.train.dropout": number(0, 1),
    "stages.generator.train.warmup_steps": whole(0),
    "stages.generator.train.eval_every_n_steps": whole(1),
    "stages.generator.train.early_step": whole(0),
    "stages.judge.train.max_swaps": whole(1),
    "stages.judge.train.max_steps": whole(1),
    "stages.judge.train.optimizer.lr": number(0, above=True),
    "stages.judge.train.optimizer.weight_decay": number(0),
    "stages.judge.train.batch_size": whole(1),
    "stages.judge.train.warmup_steps": whole(0),
    "stages.judge.train.eval_every_n_steps": whole(1),
    "stages.judge.train.worse_only": FLAG,
    "stages.judge.train.better_as_real": FLAG,
    "stages.judge.train.from_generator": FLAG,
    "stages.judge.train.char_on_real": FLAG,
    "stages.judge.train.name": TEXT,
    "stages.judge.train.init": OPTIONAL_TEXT,
    "stages.judge.train.replay": TEXTS,
    "stages.judge.train.negatives.*": number(0),
    "stages.judge.train.temperatures": Setting("numbers", low=0, why=GREEDY),
    "stages.judge.train.replay_temperatures": Setting("numbers", low=0, nullable=True, why=GREEDY),
    "stages.judge.train.char_loss": number(0, why="0: no character head"),
    "stages.judge.train.window_loss": number(0, why="0: the judge learns only its characters"),
    "stages.judge.train.model.max_length": whole(1),
    "stages.judge.train.model.hidden_size": whole(1),
    "stages.judge.train.model.num_layers": whole(1),
    "stages.judge.train.model.num_heads": whole(1),
    "stages.judge.train.model.intermediate_size": whole(1),
    "stages.judge.train.model.dropout": number(0, 1),
    "stages.judge.train.model.sees_mask": FLAG,
    "stages.judge.train.model.score": choice(*SCORES),
    # adversarial rounds of a judge
    "rounds.count": whole(1),
    "rounds.stage": TEXT,
    "rounds.grpo_steps": whole(1, nullable=True),  # null: the run's steps
    "rounds.judge_steps": whole(1),
    "rounds.replay_share": number(0, 1, below=True),
    "rounds.replay_temperatures": Setting("numbers", low=0, nullable=True, why=GREEDY),
    "rounds.cache_dir": TEXT,
}
