"""Overlap of a free-text answer with the reference answer: token F1, ROUGE-L and BLEU.

Every score is computed by `torchmetrics.functional.text`, one (outcome, reference) pair at a
time (its functions average over a batch, and BLEU pools a batch into one corpus score), and
lies in [0, 1]; the overlap total is their sum, in [0, 3] (the reward of LAPDOG).

What is compared:
- the outcome is stripped, then a leading `Answer:` (any case, spaces allowed before the colon)
  is removed; the whole rest counts, every line of it;
- the reference is the row's `reference_field` (default `answer_text`) as a string, stripped;
- an outcome or a reference without a letter or digit (empty, blank, only punctuation, or a
  missing/None reference) scores 0 on every metric, never NaN.

The metrics:
- `f1`: SQuAD token F1 (`squad`: lower-cased, punctuation and the articles a/an/the removed,
  split on whitespace), divided by 100; also 0 when either text holds only articles.
- `rouge_l`: ROUGE-L F-measure (`rouge_score(..., rouge_keys="rougeL")`, no stemmer;
  torchmetrics lower-cases and keeps only runs of a-z0-9).
- `bleu`: `bleu_score` of one pair with our normalisation, made for answers of 1-4 words:
  both texts lower-cased and cut into words (runs of Unicode letters and digits; punctuation
  dropped), rejoined with single spaces; n_gram = min(4, words in the reference, words in
  the outcome), uniform weights; smooth=True (add-one on the 2..n-gram precisions). Capping
  n by the outcome's length too lets a one-word answer still score (by its unigram precision
  times the brevity penalty) instead of 0. Caveat of torchmetrics' BLEU: it is 0 whenever
  some order 1..n has no matching n-gram, smoothing notwithstanding (e.g. "radial artery" vs
  "radial nerve" shares no bigram: BLEU 0, F1 0.5). Values are in [0, 1] (`bleu_score`
  returns a fraction, not sacrebleu's 0-100).
"""

from __future__ import annotations

import re
from typing import Any

from torchmetrics.functional.text import bleu_score, rouge_score, squad

ANSWER_PREFIX = re.compile(r"^answer\s*:", re.IGNORECASE)
WORD = re.compile(r"[^\W_]+")
ARTICLES = {"a", "an", "the"}  # what SQuAD's normalisation drops


def clean_outcome(outcome: str) -> str:
    """The outcome stripped, without a leading `Answer:` prefix (any case)."""
    return ANSWER_PREFIX.sub("", outcome.strip(), count=1).strip()


def _words(text: str) -> list[str]:
    """Lower-cased runs of letters and digits: BLEU's tokens, and the test for an empty text."""
    return WORD.findall(text.lower())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 of the two texts in [0, 1] (torchmetrics `squad` / 100); 0 if either
    has no word but articles (SQuAD would score two such texts 1, as both normalise to "")."""
    if not set(_words(prediction)) - ARTICLES or not set(_words(reference)) - ARTICLES:
        return 0.0
    scores = squad(
        {"prediction_text": prediction, "id": "0"},
        {"answers": {"answer_start": [0], "text": [reference]}, "id": "0"},
    )
    return float(scores["f1"]) / 100.0


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure of the two texts in [0, 1] (torchmetrics `rouge_score`); 0 if either
    has no word."""
    if not _words(prediction) or not _words(reference):
        return 0.0
    return float(rouge_score(prediction, reference, rouge_keys="rougeL")["rougeL_fmeasure"])


def bleu(prediction: str, reference: str) -> float:
    """Sentence BLEU in [0, 1] (torchmetrics `bleu_score`) of the lower-cased word sequences,
    n_gram = min(4, reference words, prediction words), smooth=True; 0 if either has no word."""
    ours, theirs = _words(prediction), _words(reference)
    if not ours or not theirs:
        return 0.0
    n_gram = min(4, len(ours), len(theirs))
    return float(bleu_score([" ".join(ours)], [[" ".join(theirs)]], n_gram=n_gram, smooth=True))


def overlap_total(prediction: str, reference: str) -> float:
    """token_f1 + rouge_l + bleu, in [0, 3]."""
    return (
        token_f1(prediction, reference)
        + rouge_l(prediction, reference)
        + bleu(prediction, reference)
    )


SCORERS = {"f1": token_f1, "rouge_l": rouge_l, "bleu": bleu, "total": overlap_total}


class Overlap:
    """One overlap metric of each outcome with its row's reference answer (see the module
    docstring for the normalisation): `f1`, `rouge_l`, `bleu` (each in [0, 1]) or `total`
    (their sum, in [0, 3]). The outcome loses a leading `Answer:`; blank texts score 0.
    """

    def __init__(self, metric: str = "f1", reference_field: str = "answer_text") -> None:
        self.metric = metric
        self.reference_field = reference_field
        self._score = SCORERS[metric]

    def __call__(self, outcomes: list[str], rows: list[dict[str, Any]]) -> list[float]:
        scores = []
        for outcome, row in zip(outcomes, rows, strict=True):
            if self.reference_field not in row:
                raise KeyError(
                    f"the row has no field {self.reference_field!r} (reference_field of the "
                    f"overlap reward); it has {sorted(row)}"
                )
            reference = row[self.reference_field]
            reference = "" if reference is None else str(reference).strip()
            scores.append(self._score(clean_outcome(outcome or ""), reference))
        return scores
