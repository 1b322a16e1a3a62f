"""`task=char_diffusion` shrunk for tests: 24-character windows, one-block models, a few
steps per stage (seconds on a 2-core CPU). Use with `make_cfg(*SMALL, tiny=False)`."""

from __future__ import annotations

MODEL = ["hidden_size=32", "num_layers=1", "num_heads=2", "intermediate_size=64"]
SMALL = [
    "task=char_diffusion",
    "data.window=24",
    "data.val_size=16",
    "data.batch_size=2",
    "data.eval_batch_size=16",
    *[f"model.{setting}" for setting in MODEL],
    "stages.generator.train.max_steps=6",
    "stages.generator.train.batch_size=8",
    "stages.generator.train.warmup_steps=1",
    "stages.generator.train.eval_every_n_steps=3",
    "stages.generator.train.early_step=2",
    *[f"stages.judge.train.model.{setting}" for setting in MODEL],
    "stages.judge.train.max_steps=4",
    "stages.judge.train.batch_size=8",
    "stages.judge.train.warmup_steps=1",
    "stages.judge.train.eval_every_n_steps=2",
    "rounds.judge_steps=2",
    "algo.group_size=4",
    "algo.samples_every_n_steps=1",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.enable_model_summary=false",
    "room.k=2",
    "room.eval_rows=4",
]
