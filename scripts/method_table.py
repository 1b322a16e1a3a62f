"""Compose every algo with every task and every preset and print, as a markdown table, whether
each composed run's method keys are its algo file's (the rule of docs/configuration.md,
"Which value wins"), with the KL weight each run gets. The test suite checks a covering
subset of these (tests/runs/test_method.py); this walks all of them (about 0.2 s each).

    python scripts/method_table.py
"""

from __future__ import annotations

import sys

from hydra.core.hydra_config import HydraConfig

from src.grpo.settings import METHOD_KEYS
from src.runs.method import algo_file
from src.utils.compose import compose_train_config
from src.utils.config import plain
from src.utils.resolvers import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"


def names(group: str) -> list[str]:
    return sorted(path.stem for path in (CONF / group).glob("*.yaml"))


def main() -> int:
    algos, tasks, presets = names("algo"), names("task"), names("preset")
    print(f"| algo | {' | '.join(tasks)} |")
    print(f"|---|{'---|' * len(tasks)}")
    wrong = 0
    for algo in algos:
        own = algo_file(algo) or {}
        cells = []
        for task in tasks:
            kls = set()
            for preset in presets:
                cfg = compose_train_config(
                    [f"task={task}", f"preset={preset}", f"algo={algo}", "paths.run_dir=unused"]
                )
                composed = plain(cfg.algo)
                if any(composed[key] != own[key] for key in METHOD_KEYS):
                    wrong += 1
                kls.add(composed["kl_beta"])
            cells.append(f"KL {', '.join(str(kl) for kl in sorted(kls))}")
        print(f"| `{algo}` | {' | '.join(cells)} |")
    cells = []
    for task in tasks:  # no algo named: the task's own algo file, if it names one
        chosen = set()
        for preset in presets:
            cfg = compose_train_config([f"task={task}", f"preset={preset}", "paths.run_dir=unused"])
            algo = str(HydraConfig.get().runtime.choices["algo"])
            own, composed = algo_file(algo) or {}, plain(cfg.algo)
            if any(composed[key] != own[key] for key in METHOD_KEYS):
                wrong += 1
            chosen.add(f"`{algo}`, KL {composed['kl_beta']}")
        cells.append("; ".join(sorted(chosen)))
    print(f"| none named | {' | '.join(cells)} |")
    total = (len(algos) + 1) * len(tasks) * len(presets)
    print(
        f"\n{total} compositions ({len(algos)} algos and none named x {len(tasks)} tasks x "
        f"{len(presets)} presets): {total - wrong} with the method keys of the algo file that "
        f"runs, {wrong} without"
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
