"""Final answers read out of text: what a worked solution or a completion states, and the
numeric value of a final-answer string (GSM8K-style: "1,000", "$5", "3/4", "18 dollars", "12%").

The data loaders read reference solutions with it and `reward=accuracy` reads completions, so
both sides are read alike.
"""

from __future__ import annotations

import re

# A number at the start of a normalised answer: sign, digits (commas only in groups of three),
# decimals, an optional "/denominator"; what follows is kept to check it is not more arithmetic.
LEADING_NUMBER = re.compile(
    r"(?P<sign>[+-]?)\s*"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+))?"
    r"(?P<rest>.*)",
    re.DOTALL,
)
# After the number: an operator, another digit, or a separator glued to a digit ("1,2",
# "3.5.2", "10:30") means the text is an expression or a list, not one value ("5-year" is).
NOT_A_VALUE = re.compile(r"\s*(?:[+*/×÷^=<>]|-(?![A-Za-z])|\d)|[.,:]\d")
LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}|\\[dt]?frac\s*(\d)(\d)")
CURRENCY = re.compile(r"\\?[$€£]")

# The last number of a completion, fractions ("3/4", "\frac{3}{4}") included.
ANY_NUMBER = re.compile(
    r"\\[dt]?frac\s*\{\s*-?\d+(?:\.\d+)?\s*\}\s*\{\s*\d+(?:\.\d+)?\s*\}"
    r"|(?:(?<![\w)])-)?[$€£]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?"
)
ANSWER_PHRASE = re.compile(
    r"\b(?:final\s+answer(?:\s+is)?|answer\s+is|answer\s*:)\s*:?\s*"
    r"(?P<value>[^\n]*?)(?=\.\s|\.$|\n|$)",
    re.IGNORECASE,
)
BOXED = re.compile(r"\\boxed\s*\{")


def _braced(text: str, start: int) -> str | None:
    """The text inside the braces that open at `start`, or None when they never close."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index]
    return None


def _unwrap_boxed(text: str) -> str:
    """The content of `\\boxed{...}` when it wraps the whole text, else the text unchanged."""
    text = text.strip()
    match = BOXED.match(text)
    if match:
        content = _braced(text, match.end() - 1)
        if content is not None and match.end() + len(content) + 1 == len(text):
            return content.strip()
    return text


def normalize_number(text: str) -> float | None:
    """The numeric value of a final-answer string, or None when it does not start with a number.

    Ignores thousands separators ("1,000"; "1,2" is not one), currency signs ($, €, £), `$`
    math delimiters, a surrounding `\\boxed{}`, a leading "=" or "+", a trailing period or
    comma and units or words after the number ("18 dollars", "5 cm", "12%" is 12, as GSM8K
    writes percentages). Fractions "3/4" and `\\frac{3}{4}` / `\\dfrac{3}{4}` give their value.
    Text where the number is followed by more arithmetic or digits ("5 + 3", "1,2") is None,
    as is text that starts with words ("f(x)=0").
    """
    text = CURRENCY.sub("", _unwrap_boxed(str(text)))
    text = _unwrap_boxed(text).replace("\\%", "%").replace("{,}", ",").replace("\\!", "")
    text = LATEX_FRACTION.sub(lambda m: f"{m[1] or m[3]}/{m[2] or m[4]}", text)
    text = text.replace("−", "-").strip().lstrip("=").strip().rstrip(".,").strip()
    match = LEADING_NUMBER.fullmatch(text)
    if match is None or NOT_A_VALUE.match(match["rest"]):
        return None
    value = float(match["num"].replace(",", ""))
    if match["den"] is not None:
        denominator = float(match["den"].replace(",", ""))
        if denominator == 0:
            return None
        value /= denominator
    return -value if match["sign"] == "-" else value


def _last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` whose braces balance and hold something."""
    for match in reversed(list(BOXED.finditer(text))):
        content = _braced(text, match.end() - 1)
        if content is not None and content.strip():
            return content.strip()
    return None


def extract_final_answer(text: str, last_number: bool = True) -> str | None:
    """The final answer a completion states, or None when it states none.

    In order of precedence: the first non-empty line after the last `####`; the content of the
    last `\\boxed{...}` (braces balanced); the value after the last "answer is", "answer:" or
    "final answer" phrase (case-insensitive) up to the end of its line or sentence; otherwise
    the last number in the text, a fraction such as "3/4" or `\\frac{3}{4}` included (unless
    `last_number` is false: a reference that states no answer has none).
    """
    if "####" in text:
        after = text.rsplit("####", 1)[1]
        lines = [line.strip() for line in after.splitlines() if line.strip()]
        if lines:
            return lines[0]
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    for match in reversed(list(ANSWER_PHRASE.finditer(text))):
        value = match["value"].strip(" \t*_`\"'")
        if value:
            return value
    numbers = ANY_NUMBER.findall(text) if last_number else []
    return numbers[-1] if numbers else None


def canonical_text(text: str) -> str:
    """Text for a non-numeric comparison: no `$`, `\\boxed{}` or trailing period, lower case,
    single spaces."""
    text = _unwrap_boxed(text.replace("$", "")).rstrip(".").strip()
    return " ".join(text.split()).lower()
