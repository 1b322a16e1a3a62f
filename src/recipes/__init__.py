"""Recipes whose parts serve only their own task, each in one folder: its networks, sampler,
data, role, stages trained before GRPO and steps run before it. The core never imports a
recipe; a task's config reaches it through `_target_`s and the `before_grpo` hook."""
