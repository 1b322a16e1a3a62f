"""Rule-based rewards for worked answers to math questions: length, formulas, key terms, structure.

Four scores, each in [0, 1], of a completion against its row's question, reference (a worked
solution, long or short) and concepts (names or statements of the mathematical concepts the
solution uses; optional). No model is involved: the rules stated here and in each class's
docstring are the whole definition.

Shared rules:
- a None field reads as ""; a row without the reference or question field raises KeyError
  naming it (only for the rewards that read that field); no concepts field means no concepts;
- GSM8K calculator annotations `<<...>>` are removed from every text before anything is counted;
- *words* are the whitespace-separated pieces of a text;
- an *alphabetic word* is a word that, once surrounding punctuation is stripped, is two or more
  letters, with an apostrophe or hyphen allowed inside ("eggs,", "Vieta's" and "well-known" are;
  "x", "2x", "$x$" and "\\frac{1}{2}" are not); the *prose share* is alphabetic words / words;
- the *prose factor* is min(1, prose share / 0.3) x the *repetition factor* (1 while at most
  30% of the word 4-grams repeat an earlier one, falling linearly to 0 at 70%): 1 for ordinary
  written solutions, near 0 for a wall of symbols or a loop; FormulaUse and ConceptCoverage are
  multiplied by it;
- a blank completion (empty or whitespace only) scores 0 on every reward.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from src.data.math import CALCULATOR

ALPHABETIC = re.compile(r"[A-Za-z]{2,}(?:['’-][A-Za-z]+)*")
PUNCTUATION = "\"'’“”.,;:!?()[]{}`*"
PROSE_FULL = 0.3  # prose share that earns the full prose factor

# --- length -------------------------------------------------------------------------------------

MIN_TARGET = 20  # words: the target length of a reference shorter than this
FULL_LOW, FULL_HIGH = 0.5, 2.0  # ratios to the target with full score
ZERO_LOW, ZERO_HIGH = 0.1, 5.0  # ratios to the target with score 0

# --- formulas -----------------------------------------------------------------------------------

TOKEN = re.compile(
    r"(?P<cmd>\\[A-Za-z]+)"
    r"|(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<arrow>=>|->|[→⇒⟹])"
    r"|(?P<rel><=|>=|!=|[=<>≤≥≠≈≡])"
    r"|(?P<op>[-+*/^×÷·±−])"
    r"|(?P<glue>[_'′!|%(){}\[\]])"
    r"|(?P<symbol>[√∑∏∫∞π²³])"
    r"|(?P<newline>\n)"
    r"|(?P<space>[^\S\n]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
NEUTRAL_COMMANDS = {
    "text", "textbf", "textit", "textrm", "mathrm", "mathbf", "mathit", "mathsf", "mbox",
    "operatorname", "boxed", "left", "right", "big", "Big", "bigl", "bigr", "Bigl", "Bigr",
    "displaystyle", "quad", "qquad", "hspace", "label", "tag", "begin", "end",
}  # fmt: skip
BREAK_COMMANDS = {"implies", "Rightarrow", "Longrightarrow", "Leftrightarrow", "iff", "therefore"}
RELATION_COMMANDS = {
    "le", "leq", "ge", "geq", "ne", "neq", "lt", "gt", "approx", "equiv", "sim", "cong",
    "leqslant", "geqslant", "propto",
}  # fmt: skip
OPERATOR_COMMANDS = {"cdot", "times", "div", "pm", "mp", "ast"}
FUNCTIONS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "lg", "exp", "max", "min", "gcd",
    "lcm", "mod", "det", "sqrt",
}  # fmt: skip
ATTACHED = set("0123456789+-*/^_=<>")  # a short letter run written against one of these is math
SPACED = set("+*/^=<>")  # ... or with only spaces between it and one of these
SHORT_WORDS = {
    "all", "an", "and", "any", "are", "as", "at", "be", "but", "by", "can", "do", "for", "has",
    "if", "in", "is", "it", "its", "let", "no", "not", "of", "on", "or", "our", "so", "the",
    "to", "use", "was", "we",
}  # fmt: skip
TARGET_MAX = 4  # formulas in the reference beyond this do not raise the target

# --- key terms ----------------------------------------------------------------------------------

LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
TERM = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
STOPWORDS = {
    "about", "above", "after", "again", "also", "another", "answer", "because", "been",
    "before", "being", "below", "between", "both", "boxed", "came", "come", "could", "does",
    "doing", "done", "down", "each", "either", "else", "every", "final", "find", "first",
    "from", "gets", "give", "given", "gives", "have", "having", "hence", "here", "into", "just",
    "know", "like", "make", "makes", "many", "more", "most", "much", "must", "need", "next",
    "only", "onto", "other", "over", "same", "second", "should", "show", "since", "solution",
    "some", "step", "steps", "such", "take", "than", "that", "their", "them", "then", "there",
    "therefore", "these", "they", "third", "this", "those", "thus", "total", "under", "until",
    "upon", "used", "uses", "using", "very", "want", "were", "what", "when", "where", "which",
    "while", "will", "with", "would", "your",
}  # fmt: skip
MAX_TERMS = 12  # key terms compared
MIN_FRESH = 3  # fewer key terms absent from the question than this: use all key terms
CONCEPT_BONUS = 2  # a word of a concept counts this many times per occurrence

# --- structure ----------------------------------------------------------------------------------

STEP_SPLIT = re.compile(r"(?<=[.!?])\s+|\n")
MARKER_WORD = re.compile(
    r"\b(?:first|firstly|second|secondly|third|next|then|finally|therefore|thus|hence|so|"
    r"since|because|now|step)\b",
    re.IGNORECASE,
)
LIST_ITEM = re.compile(r"^[ \t]*(?:\d+[.)]|[-*•])[ \t]+", re.MULTILINE)
FINAL_ANSWER = re.compile(
    r"\\boxed\{\s*[^\s}]|^[ \t]*####[ \t]*\S|\b(?:final\s+answer|answer)\s*(?:is\b|:|=)\s*\S",
    re.IGNORECASE | re.MULTILINE,
)
WORD_TOKEN = re.compile(r"[^\W_]+")
STEPS_WEIGHT, MARKERS_WEIGHT, FINAL_WEIGHT, CLEAN_WEIGHT = 0.2, 0.2, 0.3, 0.3
MAX_REPEATED = 0.3  # share of repeated lines or repeated word 4-grams still clean
REPETITION_SPAN = 0.4  # repeated 4-gram share above MAX_REPEATED at which the prose factor is 0
MAX_COPIED = 0.5  # share of word 4-grams found in the question still clean
MIN_PROSE = 0.15  # prose share below which a text is not an explanation


def clean(text: Any) -> str:
    """The text as a string without GSM8K calculator annotations; None is ""."""
    return "" if text is None else CALCULATOR.sub("", str(text))


def prose_share(text: str) -> float:
    """Alphabetic words / words of the text (0 for a blank text)."""
    words = text.split()
    if not words:
        return 0.0
    alphabetic = sum(1 for word in words if ALPHABETIC.fullmatch(word.strip(PUNCTUATION)))
    return alphabetic / len(words)


def prose_factor(text: str) -> float:
    """How far the text reads as prose rather than a wall of symbols or a loop:
    min(1, prose share / 0.3) x the repetition factor."""
    return min(1.0, prose_share(text) / PROSE_FULL) * repetition_factor(text)


def repetition_factor(text: str) -> float:
    """1 while at most 30% of the word 4-grams repeat an earlier one, falling linearly to 0 at
    70%: a completion that loops over the right terms does not keep their credit."""
    excess = _repeated(_grams(text)) - MAX_REPEATED
    return max(0.0, 1.0 - max(0.0, excess) / REPETITION_SPAN)


# --- length -------------------------------------------------------------------------------------


def length_fit(words: int, reference_words: int) -> float:
    """Score of a completion of `words` words against a reference of `reference_words` words."""
    if words <= 0:
        return 0.0
    ratio = words / max(reference_words, MIN_TARGET)
    if ratio < FULL_LOW:
        score = math.log(ratio / ZERO_LOW) / math.log(FULL_LOW / ZERO_LOW)
    elif ratio > FULL_HIGH:
        score = math.log(ZERO_HIGH / ratio) / math.log(ZERO_HIGH / FULL_HIGH)
    else:
        score = 1.0
    return min(1.0, max(0.0, score))


# --- formulas -----------------------------------------------------------------------------------


def math_text(text: str) -> str:
    """The text with `$`, `&`, LaTeX math delimiters and spacing commands turned into spaces
    (and `\\\\` into a line break), as formulas are read from it."""
    text = clean(text).replace("\\\\", "\n")
    text = re.sub(r"\\[()\[\]]|\\[,;:! ]", " ", text)
    return text.replace("$", " ").replace("&", " ")


def _is_math_word(text: str, start: int, end: int) -> bool:
    """A letter run is math when it is one letter, a function name, or two or three letters
    (not a short English word) next to math: `ax^2`, `2ab`, `+ bx +`."""
    word = text[start:end]
    if len(word) == 1 or word in FUNCTIONS:
        return True
    if len(word) > 3 or word.lower() in SHORT_WORDS:
        return False
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if before in ATTACHED or after in ATTACHED:
        return True
    left, right = start - 1, end
    while left >= 0 and text[left] in " \t":
        left -= 1
    while right < len(text) and text[right] in " \t":
        right += 1
    return (left >= 0 and text[left] in SPACED) or (right < len(text) and text[right] in SPACED)


def _kind(match: re.Match[str], text: str) -> str:
    """operand, relation, operator, command (a math command: an operand that makes a formula),
    glue (inside a formula, no role), space, or break (ends the current formula)."""
    kind, token = match.lastgroup or "other", match.group()
    if kind == "cmd":
        name = token[1:]
        if name in NEUTRAL_COMMANDS:
            return "glue"
        if name in BREAK_COMMANDS:
            return "break"
        if name in RELATION_COMMANDS:
            return "relation"
        if name in OPERATOR_COMMANDS:
            return "operator"
        return "command"
    if kind == "word":
        return "operand" if _is_math_word(text, match.start(), match.end()) else "break"
    return {
        "num": "operand",
        "symbol": "command",
        "rel": "relation",
        "op": "operator",
        "glue": "glue",
        "space": "space",
    }.get(kind, "break")


def _between_operands(kinds: list[str], wanted: str) -> bool:
    """Whether some token of kind `wanted` has an operand before it and one after it."""
    operands = [i for i, kind in enumerate(kinds) if kind in ("operand", "command")]
    if not operands:
        return False
    return any(kind == wanted and operands[0] < i < operands[-1] for i, kind in enumerate(kinds))


def _trim(key: str) -> str:
    """The key without unmatched brackets at its ends ("x=4)" -> "x=4")."""
    for opener, closer in ("()", "[]", "{}"):
        while key.endswith(closer) and key.count(closer) > key.count(opener):
            key = key[:-1]
        while key.startswith(opener) and key.count(opener) > key.count(closer):
            key = key[1:]
    return key


def _formula_key(span: list[tuple[str, str]]) -> str | None:
    """The span's text without spaces when it is a formula (see FormulaUse), else None."""
    kinds = [kind for kind, _ in span if kind != "space"]
    is_formula = (
        "command" in kinds
        or _between_operands(kinds, "relation")
        or _between_operands(kinds, "operator")
    )
    if not is_formula:
        return None
    return _trim("".join(token for kind, token in span if kind != "space"))


def formulas(text: str) -> list[str]:
    """The distinct formulas of a text in order of appearance, each without spaces (the rule is
    in FormulaUse's docstring)."""
    text = math_text(text)
    found: dict[str, None] = {}
    span: list[tuple[str, str]] = []
    last = ""  # token group of the span's last token that is not a space

    def close() -> None:
        key = _formula_key(span)
        if key:
            found.setdefault(key)
        span.clear()

    for match in TOKEN.finditer(text):
        kind, group = _kind(match, text), match.lastgroup
        if kind == "break" or group == "newline":
            close()
            last = ""
            continue
        if group == "num" and last == "num" and span and span[-1][0] == "space":
            close()  # "1+1=2 2+2=4": two numbers apart start a new formula
        span.append((kind, match.group()))
        if kind != "space":
            last = group or ""
    close()
    return list(found)


def compact(text: str) -> str:
    """The text as formulas are read from it, without any whitespace: what copies are found in."""
    return re.sub(r"\s+", "", math_text(text))


def new_formulas(text: str, question: str) -> list[str]:
    """The distinct formulas of `text` that do not occur verbatim (spaces aside) in the question."""
    asked = compact(question)
    return [formula for formula in formulas(text) if formula not in asked]


# --- key terms ----------------------------------------------------------------------------------


def _stem(word: str) -> str:
    """Plural to singular, roughly: -ies -> -y, a final -s dropped (not -ss, -us, -is)."""
    if len(word) >= 5 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _number(token: str) -> str:
    """A number with trailing decimal zeros removed ("2.50" -> "2.5", "18.0" -> "18")."""
    return token.rstrip("0").rstrip(".") if "." in token else token


def _tokens(text: str) -> list[str]:
    """Lower-cased words and numbers of a text without LaTeX command names or thousands commas."""
    text = THOUSANDS.sub("", LATEX_COMMAND.sub(" ", clean(text)))
    return TERM.findall(text.lower())


def vocabulary(text: str) -> set[str]:
    """Every word (stemmed) and number of a text: what a key term is looked up in."""
    return {_number(t) if t[0].isdigit() else _stem(t) for t in _tokens(text)}


def terms(text: str) -> list[str]:
    """The key-term candidates of a text in order, repeats kept: numbers, and stemmed words of at
    least four letters that are not stopwords."""
    found = []
    for token in _tokens(text):
        if token[0].isdigit():
            found.append(_number(token))
        elif len(token) >= 4 and token not in STOPWORDS and _stem(token) not in STOPWORDS:
            found.append(_stem(token))
    return found


def key_terms(reference: str, question: str, concepts: list[str]) -> list[str]:
    """Up to 12 key terms, most frequent first (the rule is in ConceptCoverage's docstring)."""
    counts: Counter[str] = Counter(terms(reference))
    for concept in concepts:
        for term in terms(concept):
            counts[term] += CONCEPT_BONUS
    asked = vocabulary(question)
    fresh = [term for term in counts if term not in asked]
    pool = fresh if len(fresh) >= MIN_FRESH else list(counts)
    return sorted(pool, key=lambda term: -counts[term])[:MAX_TERMS]


# --- structure ----------------------------------------------------------------------------------


def steps(text: str) -> list[str]:
    """The sentences and lines of a text that hold an alphabetic word."""
    return [piece for piece in STEP_SPLIT.split(text) if prose_share(piece) > 0]


def markers(text: str) -> int:
    """Step and connective markers: marker words plus numbered or bulleted lines."""
    return len(MARKER_WORD.findall(text)) + len(LIST_ITEM.findall(text))


def has_final_answer(text: str) -> bool:
    """Whether the text states a final answer: `\\boxed{X}`, a `#### X` line, or "answer" /
    "final answer" followed by "is", ":" or "=" and something."""
    return FINAL_ANSWER.search(text) is not None


def _repeated(items: list[Any]) -> float:
    """Share of the items that repeat an earlier one (0 when there are none)."""
    return 1.0 - len(set(items)) / len(items) if items else 0.0


def _grams(text: str) -> list[tuple[str, ...]]:
    """Word 4-grams of the lower-cased runs of letters and digits."""
    words = WORD_TOKEN.findall(text.lower())
    return [tuple(words[i : i + 4]) for i in range(len(words) - 3)]


def is_clean(text: str, question: str) -> bool:
    """The no-degeneracy check of Structure (see its docstring)."""
    lines = [line.strip().lower() for line in text.splitlines() if line.strip()]
    grams = _grams(text)
    asked = set(_grams(question))
    copied = sum(1 for gram in grams if gram in asked) / len(grams) if grams else 0.0
    return (
        _repeated(lines) <= MAX_REPEATED
        and _repeated(grams) <= MAX_REPEATED
        and copied <= MAX_COPIED
        and prose_share(text) >= MIN_PROSE
    )


# --- rewards ------------------------------------------------------------------------------------


class MathReward:
    """Base of the rewards here: reads the row fields and scores each outcome in [0, 1]."""

    reads_reference = True  # whether the rule reads the reference field (then it must exist)
    reads_question = True  # whether the rule reads the question field (then it must exist)

    def __init__(self, reference_field: str = "reference", question_field: str = "question"):
        self.reference_field = reference_field
        self.question_field = question_field

    def field(self, row: dict[str, Any], name: str) -> str:
        """The row's field as a string ("" when None); KeyError naming it when it is missing."""
        if name not in row:
            raise KeyError(
                f"the row has no field {name!r} (a field of the {type(self).__name__} reward); "
                f"it has {sorted(row)}"
            )
        return clean(row[name])

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        """One score in [0, 1] per outcome, against the row beside it; a blank outcome gets 0."""
        scores = []
        for outcome, row in zip(outcomes, rows, strict=True):
            reference = self.field(row, self.reference_field) if self.reads_reference else ""
            question = self.field(row, self.question_field) if self.reads_question else ""
            text = clean(outcome)
            scores.append(
                float(self.score(text, reference, question, row)) if text.strip() else 0.0
            )
        return scores

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        """The score of one non-blank completion (texts already cleaned), by the class's rule."""
        raise NotImplementedError


class StatedAnswer(MathReward):
    """1 when the completion states a final answer (`has_final_answer`: `\\boxed{X}`, a line
    `#### X`, or "answer" / "final answer" then "is", ":" or "="), else 0. Weighted 0 in
    `reward=heuristic`: it reports the share of answers that arrive, and `structure` already
    rewards them."""

    reads_reference = False
    reads_question = False

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        return float(has_final_answer(text))


class LengthFit(MathReward):
    """Length appropriateness: the completion's word count against the reference's.

    The target is the reference's word count, at least 20 (so a one-number reference asks for
    10-40 words). With ratio = completion words / target: 1 for 0.5 <= ratio <= 2; below 0.5 the
    score falls linearly in log(ratio) to 0 at ratio 0.1 (log(ratio/0.1) / log 5); above 2 it
    falls linearly in log(ratio) to 0 at ratio 5 (log(5/ratio) / log 2.5). Blank: 0. The
    question is not read (`question_field` is accepted for a uniform configuration).
    """

    reads_question = False

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        return length_fit(len(text.split()), len(reference.split()))


class FormulaUse(MathReward):
    """Use of mathematical formulas, equations and notation, counted against the reference.

    The text is read with `$`, `&`, `\\( \\) \\[ \\]` and LaTeX spacing commands as spaces and
    `\\\\` as a line break, and cut into spans. A span ends at a line break, at any character not
    listed below (`,` `.` `:` `;` `?` `#` ...), at an implication (`=>`, `->`, `→`, `\\implies`,
    `\\Rightarrow`, `\\Longrightarrow`, `\\Leftrightarrow`, `\\iff`, `\\therefore`), at a
    prose word, and before a number that follows another number with only spaces between
    ("1+1=2 2+2=4" is two spans). A *prose word* is a run of letters other than: a single
    letter; a function name (sin cos tan cot sec csc log ln lg exp max min gcd lcm mod det sqrt);
    a run of two or three letters that is not a short English word (and, is, so, the, of, ...)
    and touches a digit or one of `+ - * / ^ _ = < >`, or has only spaces between it and one of
    `+ * / ^ = < >` (`ax^2`, `2ab`, `+ bx +`). Inside a span:
    - operands: numbers (`12`, `3.5`, `1,000`), the letter runs that are not prose words, and
      math commands;
    - relations: = < > <= >= != ≤ ≥ ≠ ≈ ≡ and \\le \\leq \\ge \\geq \\ne \\neq \\lt \\gt
      \\approx \\equiv \\sim \\cong \\leqslant \\geqslant \\propto;
    - operators: + - * / ^ × ÷ · ± − and \\cdot \\times \\div \\pm \\mp \\ast;
    - math commands: any LaTeX command other than the relations, operators, implications and
      the layout commands (\\text \\mathrm \\mathbf \\boxed \\left \\right \\quad ...), e.g.
      \\frac \\sqrt \\sum \\int \\pi \\alpha; also the symbols √ ∑ ∏ ∫ ∞ π ² ³;
    - brackets, `_`, `'`, `!`, `|` and `%` belong to a span without a role.
    A span is a *formula* when it holds a math command, or a relation or an operator with an
    operand somewhere before it and somewhere after it in the span: `x + 3 = 7`,
    `a_n = 2a_{n-1}`, `x^2 \\geq 0`, `3 * 4 = 12`, `\\frac{1}{2}`, `16 - 7` are formulas;
    `x`, `-5`, `$18`, `\\boxed{5}`, "x equals 4" are not. A formula's text is the span without
    whitespace and without unmatched brackets at its ends; two formulas are the same when their
    texts are. A formula whose text occurs in the question's text (read the same way, whitespace
    removed) does not count, so a copied equation earns nothing.

    Score = min(1, distinct new formulas / target) * prose factor, where target is the number of
    distinct new formulas of the reference clamped to [1, 4]; the prose factor
    (min(1, prose share / 0.3), see the module docstring) keeps a wall of symbols low.
    """

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        target = min(TARGET_MAX, max(1, len(new_formulas(reference, question))))
        found = len(new_formulas(text, question))
        return min(1.0, found / target) * prose_factor(text)


class ConceptCoverage(MathReward):
    """Key-term overlap with the reference and the row's concepts.

    Texts are read lower-cased, without LaTeX command names (`\\frac` gives no term) and without
    thousands commas. Candidate terms: numbers (trailing decimal zeros dropped: 2.50 -> 2.5) and
    words (runs of letters) of at least four letters not in the module's STOPWORDS (function
    words and answer boilerplate: "that", "with", "therefore", "answer", "step", ...), each
    stemmed: -ies -> -y, a final -s dropped except after s, u or i ("roots" -> "root"). A term's
    count is its occurrences in the reference plus 2 per occurrence in the row's concepts
    (`concepts_field`, a list of strings or one string; missing or None is none). Terms found
    in the question's words and numbers (stemmed alike) are dropped, unless fewer than 3 would
    remain, then all are kept. The key terms are the 12 with the highest count (ties: first
    seen, reference before concepts).

    Score = (key terms whose stem or number occurs in the completion / key terms) * prose factor
    (see the module docstring; a wall of numbers does not cover concepts). No key terms: 0.
    """

    def __init__(
        self,
        reference_field: str = "reference",
        question_field: str = "question",
        concepts_field: str = "concepts",
    ):
        super().__init__(reference_field, question_field)
        self.concepts_field = concepts_field

    def concepts(self, row: dict[str, Any]) -> list[str]:
        """The row's concepts as a list of strings (a single string is one concept)."""
        value = row.get(self.concepts_field)
        if value is None:
            return []
        if isinstance(value, str):
            return [clean(value)]
        return [clean(item) for item in value]

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        wanted = key_terms(reference, question, self.concepts(row))
        if not wanted:
            return 0.0
        present = vocabulary(text)
        return sum(term in present for term in wanted) / len(wanted) * prose_factor(text)


class Structure(MathReward):
    """A well formatted, clear explanation: the sum of four checks.

    - 0.2 several steps: at least two sentences or lines (a line is cut into sentences after
      `.`, `!` or `?` followed by whitespace) that each hold an alphabetic word;
    - 0.2 markers, 0.1 each up to two: the words first, firstly, second, secondly, third, next,
      then, finally, therefore, thus, hence, so, since, because, now, step (whole words, any
      case), and lines starting with a number and `.` or `)`, or with `-`, `*` or `•`, then a
      space;
    - 0.3 a stated final answer: `\\boxed{X}`, a line `#### X`, or "answer" or "final answer"
      followed by "is", ":" or "=" and then some non-space character ("The answer is 18",
      "Final answer: 5");
    - 0.3 prose, not degenerate: at most 30% of the non-blank lines repeat an earlier one
      (case and outer spaces aside), at most 30% of the word 4-grams (lower-cased runs of letters
      and digits) repeat an earlier one, at most 50% of the word 4-grams occur in the question,
      and a prose share of at least 0.15.

    The reference is not read (`reference_field` is accepted for a uniform configuration).
    """

    reads_reference = False

    def score(self, text: str, reference: str, question: str, row: dict[str, Any]) -> float:
        return (
            STEPS_WEIGHT * (len(steps(text)) >= 2)
            + MARKERS_WEIGHT * min(1.0, markers(text) / 2)
            + FINAL_WEIGHT * has_final_answer(text)
            + CLEAN_WEIGHT * is_clean(text, question)
        )
