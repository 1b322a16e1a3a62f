"""Stages that train what a recipe needs before GRPO, cached by what shapes them: their shared
loop (`fit.py`), their order and cache (`stages.py`), and a stage that is another task's run
(`task_run.py`); the models a stage trains live with their recipe (`src/recipes/`)."""
