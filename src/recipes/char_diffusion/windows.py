"""Text files as fixed-length character windows with masked spans (`data=char_diffusion`).

The text (one file, or every .txt/.md file of a folder, in name order) has its whitespace runs
collapsed to single spaces and is cut into consecutive windows of `window` characters (the
tail shorter than a window is dropped). In each window spans of `min_span`..`max_span`
characters are masked until exactly round(`mask_ratio` * `window`) positions are, from a
generator seeded by `seed` and the window's place in the text, so a window is masked the same
way in every run and whatever the split. The windows are shuffled by `seed` and the first
`val_size` are held out.
"""

from __future__ import annotations

import random
import re
from importlib import resources
from pathlib import Path
from typing import Any

from src.data.datamodule import PromptDataModule
from src.data.files import DataFileError
from src.utils.errors import ConfigError, MissingFileError

SHIPPED = "char_corpus.txt"  # in src/data/samples: generated English prose, see scripts/
TEXT_SUFFIXES = (".txt", ".md")


class CharWindowDataModule(PromptDataModule):
    """Rows of masked windows: `masked` (the window, `mask_char` at each masked position),
    `text` (the original window) and `answer` (the original characters of the masked
    positions, left to right: what masked-LM training teaches)."""

    def __init__(
        self,
        path: str | None = None,
        window: int = 64,
        mask_ratio: float = 0.25,
        min_span: int = 2,
        max_span: int = 8,
        mask_char: str = "\u2588",
        **datamodule: Any,
    ) -> None:
        if not 1 <= min_span <= max_span:
            raise ConfigError(
                f"data.min_span and data.max_span must satisfy 1 <= min_span <= max_span, "
                f"got {min_span} and {max_span}"
            )
        self.text_path = path
        self.window = window
        self.mask_ratio = mask_ratio
        self.min_span = min_span
        self.max_span = max_span
        self.mask_char = mask_char
        super().__init__(source=self.windows, required_fields=[], **datamodule)

    def windows(self) -> dict[str, Any]:
        """Every masked window of the text, shuffled by the seed (the datamodule holds out
        the first `val_size`)."""
        path = Path(self.text_path) if self.text_path else shipped_corpus()
        text = read_text(path).replace(self.mask_char, "?")
        count = len(text) // self.window
        if count == 0:
            raise DataFileError(
                f"{path}: {len(text)} characters of text (whitespace collapsed), fewer than one "
                f"window of data.window={self.window}; give more text or a smaller data.window"
            )
        rows = []
        for number in range(count):
            original = text[number * self.window : (number + 1) * self.window]
            positions = mask_positions(
                self.window,
                self.mask_ratio,
                self.min_span,
                self.max_span,
                random.Random(f"{self.settings.seed}:{number}"),
            )
            rows.append(self.masked_row(original, positions))
        random.Random(self.settings.seed).shuffle(rows)
        return {"all": rows, "source": str(path)}

    def remasked(self, row: dict[str, Any], rng: random.Random) -> dict[str, str]:
        """The row's window masked afresh (masked-LM pretraining sees new spans every time)."""
        positions = mask_positions(
            len(row["text"]), self.mask_ratio, self.min_span, self.max_span, rng
        )
        return self.masked_row(row["text"], positions)

    def masked_row(self, original: str, positions: list[int]) -> dict[str, str]:
        """The row of `original` with `positions` masked."""
        chars = list(original)
        for position in positions:
            chars[position] = self.mask_char
        answer = "".join(original[position] for position in positions)
        return {"masked": "".join(chars), "text": original, "answer": answer}


def mask_positions(
    window: int, mask_ratio: float, min_span: int, max_span: int, rng: random.Random
) -> list[int]:
    """Sorted positions of spans masked in a window until round(mask_ratio * window) (at
    least one) are; the last span is cut to land exactly there."""
    target = max(1, round(mask_ratio * window))
    masked: set[int] = set()
    while len(masked) < target:
        length = min(rng.randint(min_span, max_span), window)
        start = rng.randrange(window - length + 1)
        for position in range(start, start + length):
            if len(masked) < target:
                masked.add(position)
    return sorted(masked)


def read_text(path: Path) -> str:
    """The text of a file, or of every .txt/.md file under a folder, whitespace collapsed."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file())
        if not files:
            raise MissingFileError(f"data.path={path}: the folder holds no .txt or .md files")
    elif path.is_file():
        files = [path]
    else:
        raise MissingFileError(f"data.path={path}: no such file or folder; point data.path to text")
    parts = []
    for file in files:
        try:
            parts.append(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError as error:
            raise DataFileError(
                f"{file}: not UTF-8 text (byte {error.start}); convert it or leave it out"
            ) from None
    text = re.sub(r"\s+", " ", " ".join(parts)).strip()
    if not text:
        raise DataFileError(f"{path}: no text in it; data.path needs a non-empty text file")
    return text


def shipped_corpus() -> Path:
    """The corpus that ships with the package (about 400 kB of generated English prose)."""
    return Path(str(resources.files("src.data") / "samples" / SHIPPED))
