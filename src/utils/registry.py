"""Functions chosen by name in a setting (`algo.advantage_estimator`, `algo.policy_loss`,
`algo.loss_type`'s aggregations): a dict of name -> function that registers with a decorator,
refuses a name twice, keeps what each entry declares about itself, and names the choices when
asked for one it does not hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Registry(dict[str, T]):
    """Entries by name, added with `@registry.register(name, **facts)`; `facts[name]` keeps
    what the entry declared (a policy loss: the settings it reads). `kind` names the entries
    in errors ("policy loss must be one of [...]")."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.facts: dict[str, dict[str, Any]] = {}

    def register(self, name: str, **facts: Any) -> Callable[[T], T]:
        """A decorator that adds its function under `name`, with `facts` about it."""

        def add(entry: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self[name] = entry
            self.facts[name] = facts
            return entry

        return add

    def named(self, name: str) -> T:
        """The entry registered as `name`; `ValueError` listing the names otherwise."""
        if name not in self:
            raise ValueError(f"{self.kind} must be one of {sorted(self)}, got {name!r}")
        return self[name]
