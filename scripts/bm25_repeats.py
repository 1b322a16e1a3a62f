"""What a repeated query term earns under BM25, on the rewriter's findings sample and its unseen
split: the share of questions whose gold passage BM25's top `--k` holds when the question is
searched followed by its answer's findings in the textbook's words (two of them, or all), or by
one of them said four times, with each repeated term scored once (`retrieval.bm25.repeated_terms:
once`, the default) and once per repeat (`count`, as bm25s, rank_bm25 and Lucene score).

    python scripts/bm25_repeats.py          # top 1, as task=medqa_rewriter reads (retrieval.k 1)
    python scripts/bm25_repeats.py --k 3

docs/recipes/retrieval.md gives the figures: counted, a query that repeats one right word does
as well as one that names every finding, which a trained rewriter learns to exploit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sample's scripts, beside this one
import make_findings_sample as sample  # noqa: E402
import make_findings_unseen as unseen  # noqa: E402
from make_findings_sample import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))  # the project, for its retriever
from src.retrieval.bm25 import REPEATED_TERMS  # noqa: E402
from src.retrieval.retriever import IndexedRetriever  # noqa: E402


def queries(rows: list[dict], findings: dict[str, list[str]]) -> dict[str, list[str]]:
    """Query name -> one query per row: the question, then findings of its answer."""
    return {
        "question": [row["question"] for row in rows],
        "question + 2 findings": [
            f"{row['question']} {', '.join(findings[row['answer']][:2])}" for row in rows
        ],
        "question + every finding": [
            f"{row['question']} {', '.join(findings[row['answer']])}" for row in rows
        ],
        "question + 1 finding x4": [
            f"{row['question']} {', '.join([findings[row['answer']][0]] * 4)}" for row in rows
        ],
    }


def shares(script: ModuleType, k: int) -> dict[str, dict[str, float]]:
    """Mode -> query name -> the share of the script's rows whose gold passage is in the top k."""
    rows = [json.loads(line) for line in script.SAMPLE.open()]
    findings = {answer: f for kind in script.ANSWERS.values() for answer, f in kind.items()}
    found: dict[str, dict[str, float]] = {}
    for mode in REPEATED_TERMS:
        retriever = IndexedRetriever(
            corpus=str(script.CORPUS), k=k, cache_dir=None, bm25={"repeated_terms": mode}
        )
        found[mode] = {}
        for name, texts in queries(rows, findings).items():
            hits = retriever.search(texts, k)
            gold = [
                any(row["answer"].lower() in hit.document.content.lower() for hit in row_hits)
                for row, row_hits in zip(rows, hits, strict=True)
            ]
            found[mode][name] = sum(gold) / len(gold)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--k", type=int, default=1, help="retrieval depth (task: retrieval.k 1)")
    args = parser.parse_args()
    for script in (sample, unseen):
        for mode, by_query in shares(script, args.k).items():
            cells = ", ".join(f"{name} {share:.3f}" for name, share in by_query.items())
            print(f"{script.SAMPLE.name}, repeated_terms={mode}, top {args.k}: {cells}")


if __name__ == "__main__":
    main()
