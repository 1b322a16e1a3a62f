"""Math question answering: CHAMP competition problems (offline default), GSM8K files and JSON
lists of `{question, answer, source}`, all in one canonical row.

Canonical row: `question`; `reference` (the worked reference solution, what the heuristic reward
compares with and what SFT teaches); `answer` (the final value, what `reward=accuracy` compares
with; '' when a worked answer states none); `concepts` (names of the concepts the solution uses,
CHAMP only); `source`; `subject` (the problem type: a CHAMP category, MATH's `type`); `id`. A row's format is recognised from the row itself: a GSM8K answer
carries its final value after `####`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from src.data.answers import extract_final_answer
from src.data.mcq import BadRow, DropRow, blank, text
from src.utils.errors import MissingFileError

CHAMP_FILE = "dataset_files/v0.json"  # inside the `champ_dataset` package
CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations: "48/2 = <<48/2=24>>24"


def champ_problems() -> dict[str, Any]:
    """The 270 CHAMP problems (Mao et al., 2024) from the PyPI package `champ-dataset`, read from
    its JSON file: question, worked solution steps (closed by "The answer is ..."), final answer
    and the concepts each uses."""
    spec = importlib.util.find_spec("champ_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise MissingFileError(
            "data=math reads CHAMP from the PyPI package `champ-dataset`, which is not installed: "
            "pip install champ-dataset, or give your own file with data.path=FILE"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / CHAMP_FILE
    if not path.is_file():
        raise MissingFileError(f"{path}: CHAMP's data file is missing; reinstall champ-dataset")
    release = json.loads(path.read_text(encoding="utf-8"))
    concepts = release["concepts"]
    rows = []
    for problem in release["problems"].values():
        steps = [step["_text"] for step in problem["solution"]["steps"]]
        used = [concepts[key] for key in problem["ch_list"] if key in concepts]
        rows.append(
            {
                "question": problem["_text"],
                "reference": "\n".join([*steps, f"The answer is {problem['_answer']}."]),
                "final_answer": problem["_answer"],
                "concepts": [concept.get("name") or concept["_text"] for concept in used],
                "source": f"champ:{problem['category']}",
                "id": problem["identifier"],
            }
        )
    return {"all": rows, "source": "champ-dataset"}


class MathQA:
    """Schema of math rows, whatever file they come from.

    - GSM8K (`question`, `answer` with `#### value` last): the reference is the answer with its
      calculator annotations removed; the final value is what follows the last `####` (a row
      with nothing there is dropped).
    - A JSON list of `{question, answer, source}`: the answer is the reference; its final value
      is an explicit `final_answer` field, else the one the answer states (`\\boxed{}`,
      "the answer is ..."), else ''.
    - Rows with `reference` and `final_answer` (CHAMP, as `champ_problems` reads it).
    Rows without a question or an answer are dropped and counted.
    """

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        question = text(row.get("question"))
        if not question:
            raise DropRow("missing question")
        answer = row.get("answer")
        if answer is not None and not isinstance(answer, (str, int, float)):
            raise BadRow(f"answer must be text or a number, got {type(answer).__name__}")
        answer = text(answer)
        if "####" in answer:
            reference = CALCULATOR.sub("", answer).strip()
            final = answer.rsplit("####", 1)[1].strip()
            if not final:
                raise DropRow("no final value after ####")
        else:
            reference = text(row.get("reference")) or answer
            if not reference:
                raise DropRow("missing answer")
            final = text(row.get("final_answer")) or stated(reference)
        return {
            "question": question,
            "reference": reference,
            "answer": final,
            "concepts": concept_list(row.get("concepts")),
            "source": text(row.get("source")),
            "subject": problem_type(row),
            "id": text(row.get("id")),
        }


def problem_type(row: dict[str, Any]) -> str:
    """The row's kind (the datamodule's `subject`, what `data.unseen.kinds` names): its own
    `subject` or `type` (MATH), else a CHAMP category (`champ:Number-Theory` -> Number-Theory)."""
    kind = text(row.get("subject")) or text(row.get("type"))
    source = text(row.get("source"))
    return kind or (source.split(":", 1)[1] if source.startswith("champ:") else "")


def concept_list(value: Any) -> list[str]:
    """Concept names as a list of strings: a list as given, one string as one concept."""
    if blank(value) or value == []:
        return []
    if isinstance(value, str):
        return [value.strip()]
    if isinstance(value, (list, tuple)):
        return [text(item) for item in value if not blank(item)]
    raise BadRow(f"concepts must be a list of strings, got {type(value).__name__}")


def stated(solution: str) -> str:
    """The final value a worked solution states (`\\boxed{}`, "the answer is ..."); '' if none."""
    return extract_final_answer(solution, last_number=False) or ""
