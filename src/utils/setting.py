"""What one config key may hold: its kind, range, choices and whether null is allowed, with
the words an error uses to say it. Each config group declares its keys in a table of these
beside its code (`src/<folder>/keys.py`); `src.runs.schema` assembles the tables and checks a
composed config against them."""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar

from src.utils.config import plain
from src.utils.errors import ConfigError

INDEX_TEXT = re.compile(r"\s*\d+\s*(,\s*\d+\s*)*,?\s*")  # "0,1" or "0,": device indices


@dataclass(frozen=True)
class Setting:
    """What one key may hold: a `kind` (`int`, `float`, `bool`, `str`; `mark`, a non-empty text
    that may be blank, such as a line's end; `mask`, one character outside printable ASCII;
    `template`, a text that `str.format` can fill; `texts`, a list of non-empty texts (at
    least `low` of them); `numbers`, a non-empty list of numbers each in the range; `names`, a
    mapping of names to names; `mapping`, a mapping of names to mappings (settings by name);
    `indices`, device indices as a list or as text with commas; `config`, an object's config
    with `_target_`), an
    inclusive range (`low`, `high`; `above` makes `low`
    exclusive, `below` makes `high` exclusive), the `choices` (a tuple, or a registry whose
    names are read when a value is checked, so an entry registered later is a choice), and
    whether null is allowed; `why` says what the range means, in the error's words."""

    kind: str
    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False  # `high` is exclusive
    choices: tuple[Any, ...] | Mapping[str, Any] | None = None
    nullable: bool = False
    blank: bool = False  # a text may be empty
    why: str = ""  # what the range means, said after it ("advantages are group-relative")

    def allowed(self) -> str:
        """What the key may hold, in words."""
        if self.choices is not None:
            words = "one of " + ", ".join(str(choice) for choice in self.choices)
        else:
            words = {
                "int": "a whole number",
                "float": "a number",
                "bool": "true or false",
                "str": "a text",
                "mark": "a non-empty text (a line's end counts)",
                "mask": "one character outside printable ASCII (the text's alphabet)",
                "texts": "a list of non-empty texts",
                "names": "a mapping of names to names, such as {mean_reward: reward}",
                "mapping": "a mapping of names to settings, such as {question: {k: 1}}",
                "numbers": "a non-empty list of numbers",
                "template": "a text whose every { closes a {field} (a brace itself is {{ or }})",
                "indices": "device indices (a list, or text such as 0,1)",
                "config": "a config with _target_",
            }[self.kind]
            if self.kind == "texts":
                words += f", at least {int(self.low)} of them" if self.low else ""
            elif self.low is not None and self.high is not None:
                words += (
                    f" in {'(' if self.above else '['}{self.low}, {self.high}"
                    f"{')' if self.below else ']'}"
                )
            elif self.low is not None:
                words += f" {'>' if self.above else '>='} {self.low}"
            elif self.high is not None:
                words += f" <= {self.high}"
        words += " or null" if self.nullable else ""
        return f"{words} ({self.why})" if self.why else words

    def accepts(self, value: Any) -> bool:
        """Whether `value` is of this kind, in range and among the choices."""
        if value is None:
            return self.nullable
        if self.choices is not None:
            return any(value == choice and type(value) is type(choice) for choice in self.choices)
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "str":
            return isinstance(value, str) and (self.blank or bool(value.strip()))
        if self.kind == "mark":
            return isinstance(value, str) and value != ""
        if self.kind == "mask":
            return isinstance(value, str) and len(value) == 1 and not (" " <= value <= "~")
        if self.kind == "template":
            return isinstance(value, str) and (self.blank or bool(value.strip())) and formats(value)
        if self.kind == "texts":  # `low`: the fewest texts
            return (
                isinstance(value, list | tuple)
                and len(value) >= (self.low or 0)
                and all(isinstance(text, str) and text != "" for text in value)
            )
        if self.kind == "numbers":
            each = Setting("float", self.low, self.high, self.above, self.below)
            return isinstance(value, list | tuple) and bool(value) and all(map(each.accepts, value))
        if self.kind == "names":
            return isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            )
        if self.kind == "mapping":
            return isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, dict) for k, v in value.items()
            )
        if self.kind == "indices":
            if isinstance(value, list | tuple):
                return bool(value) and all(
                    isinstance(index, int) and not isinstance(index, bool) and index >= 0
                    for index in value
                )
            return isinstance(value, str) and "," in value and bool(INDEX_TEXT.fullmatch(value))
        if self.kind == "config":
            return isinstance(value, dict) and bool(value.get("_target_"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or (value < self.high if self.below else value <= self.high)


@dataclass(frozen=True)
class AnyOf:
    """A key that may hold any of several settings' values (`trainer.devices`: a count, -1,
    "auto" or device indices); `words` says it in short where the options' own words are
    long."""

    options: tuple[Setting, ...]
    words: str | None = None
    kind: str = "any"
    choices: tuple[Any, ...] | None = None

    def allowed(self) -> str:
        return self.words or " or ".join(option.allowed() for option in self.options)

    def accepts(self, value: Any) -> bool:
        return any(option.accepts(value) for option in self.options)


def formats(text: str) -> bool:
    """Whether `text` is a `str.format` pattern: every brace opens or closes a field, or is
    doubled."""
    try:
        list(string.Formatter().parse(text))
    except ValueError:  # "Single '}' encountered", "expected '}' before end of string"
        return False
    return True


def whole(low: float | None = None, **more: Any) -> Setting:
    return Setting("int", low=low, **more)


def number(low: float | None = None, high: float | None = None, **more: Any) -> Setting:
    return Setting("float", low=low, high=high, **more)


def choice(*choices: Any, nullable: bool = False) -> Setting:
    return Setting("str", choices=choices, nullable=nullable)


FLAG = Setting("bool")
TEXT = Setting("str")
OPTIONAL_TEXT = Setting("str", nullable=True)
TEMPLATE = Setting("template")  # a prompt filled with str.format: its braces must pair
OPTIONAL_TEMPLATE = Setting("template", nullable=True)
TEXTS = Setting("texts", nullable=True)  # a list of texts (a bare text is refused, not split)
ANY_TEXT = Setting("str", blank=True)  # a template part or prefix that may be empty
MARK = Setting("mark")  # a tag searched for in a text: empty would match anywhere
MASK = Setting("mask")  # the character a masked position shows, never one of the text's


D = TypeVar("D", bound="Declared")


def checked(table: Mapping[str, Setting | AnyOf], key: str, value: Any) -> Any:
    """`value`, where `key`'s declaration in `table` accepts it (or none declares it); else
    `ConfigError` in the settings check's words. `Declared` holds its fields to their
    declarations this way; no constructor calls it (the settings check has checked every
    key of the config before any part is built: tests/test_declared_once.py)."""
    setting = table.get(key)
    if setting is not None and not setting.accepts(value):
        raise ConfigError(f"{key} must be {setting.allowed()}, got {value!r}")
    return value


class Declared:
    """The base of a part's settings object: a frozen dataclass whose every field is the key
    `SECTION.field` of the part's declared table (`TABLE`, its folder's keys.py), built once
    from the config's keys and checked there against that declaration, one line per wrong
    value. The parts take the object and read its fields; none checks a value again."""

    SECTION: ClassVar[str]
    TABLE: ClassVar[Mapping[str, Setting | AnyOf]]
    NEEDED_BY: ClassVar[str | None] = None  # the part a missing required key is named with

    def __post_init__(self) -> None:
        for field in fields(self):  # type: ignore[arg-type]
            checked(self.TABLE, f"{self.SECTION}.{field.name}", getattr(self, field.name))

    @classmethod
    def taken_from(cls: type[D], keys: dict[str, Any]) -> D:
        """The settings among `keys`, removed from it (what is left is for another part); a
        missing required key is named (with `NEEDED_BY`, where the class names its part)."""
        mine = {f.name: keys.pop(f.name) for f in fields(cls) if f.name in keys}  # type: ignore[arg-type]
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in mine and f.default is MISSING and f.default_factory is MISSING:
                key = f"{cls.SECTION}.{f.name}"
                needed = f"{cls.NEEDED_BY} needs {key}" if cls.NEEDED_BY else f"{key} is needed"
                raise ConfigError(f"{needed}; set it in the config")
        return cls(**mine)

    @classmethod
    def of(cls: type[D], keys: dict[str, Any], part: str) -> D:
        """The settings from `keys`, every one of which must be a field: an unknown key is
        named with `part` (what reads them) and the keys it knows."""
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(keys) - known)
        if unknown:
            raise ConfigError(
                f"{cls.SECTION}.{unknown[0]} is not a setting of {part}; its settings are "
                f"{', '.join(sorted(known))}"
            )
        return cls.taken_from(dict(keys))

    @classmethod
    def of_section(cls: type[D], node: Any, part: str) -> D:
        """The settings of a config section (`cfg.get("room")`), resolved, as `of` takes them;
        the defaults where the config has no such section."""
        return cls() if node is None else cls.of(plain(node), part)

    @classmethod
    def more_keys(cls) -> set[str]:
        """Its fields: the keys a part that takes any keyword reads through it (the settings
        check's `runs/read_keys.py`)."""
        return {f.name for f in fields(cls)}  # type: ignore[arg-type]
