"""Write the rewriter's unseen split: question kinds the findings sample never holds, over a
textbook of their own (src/data/samples/medqa_findings_unseen.jsonl and
src/retrieval/samples/findings_unseen_textbook.jsonl).

SYNTHETIC, written as the findings sample is (`scripts/make_findings_sample.py`), but its kinds
(heart valve lesions, vasculitides, kidney stones) are neither the sample's nor the second
set's (`scripts/make_findings_check.py`) nor those of the rewriter's worked examples (a
hormone, an organism, a drug), and its passages are worded in their own way. `task=medqa_rewriter`
scores it beside the held-out rows at every evaluation (`eval_unseen/*`, from
`data.unseen_path` searched in `retrieval.unseen_corpus`), and `python -m src.eval
task=medqa_rewriter eval.split=unseen` scores every head on it: held-out rows of the training's
own kinds measure the sample, these measure whether what was learned carries to questions and a
textbook the policy never saw. Settings are chosen on this split, never on the held-out rows.

Deterministic: `python scripts/make_findings_unseen.py` rewrites both files and prints the recall
shares as the sample's script does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sample's script, beside this one
from make_findings_sample import FINDINGS as SAMPLE_FINDINGS  # noqa: E402
from make_findings_sample import ROOT, write  # noqa: E402

SAMPLE = ROOT / "src" / "data" / "samples" / "medqa_findings_unseen.jsonl"
CORPUS = ROOT / "src" / "retrieval" / "samples" / "findings_unseen_textbook.jsonl"
SEED = 13

# findings this split shares with the sample, worded as there
SHARED = ("hemoptysis", "hematuria", "hypertension", "ascites", "gout")
# finding, in the textbook's word -> how vignettes describe it (never with that word)
FINDINGS: dict[str, list[str]] = {
    **{name: SAMPLE_FINDINGS[name] for name in SHARED},
    "syncope": ["fainting on exertion", "passing out while climbing stairs"],
    "angina": ["chest tightness on exertion", "pressure in the chest when walking uphill"],
    "crescendo-decrescendo murmur": [
        "a harsh sound at the right upper sternal border that rises and falls",
        "a rough noise over the right second intercostal space",
    ],
    "pulsus parvus": ["a weak and delayed carotid pulse", "a slow-rising small pulse"],
    "opening snap": [
        "an extra snapping sound after the second heart sound",
        "a sharp early diastolic sound",
    ],
    "atrial fibrillation": ["an irregularly irregular pulse", "a chaotic heartbeat"],
    "dyspnea": ["breathlessness on lying flat", "shortness of breath when walking"],
    "bounding pulses": ["pulses that hit hard and fall away", "a forceful collapsing pulse"],
    "wide pulse pressure": [
        "a blood pressure of 160/40 mm Hg",
        "a large gap between systolic and diastolic pressure",
    ],
    "head bobbing": ["nodding of the head with each heartbeat", "a head that bobs with the pulse"],
    "holosystolic murmur": [
        "a blowing sound at the apex through the whole beat",
        "a sound at the apex that spreads to the armpit",
    ],
    "midsystolic click": ["a click in the middle of each beat", "a sharp click heard at the apex"],
    "palpitations": ["awareness of the heartbeat", "a fluttering in the chest"],
    "jugular venous distension": ["swollen neck veins", "neck veins full to the jaw while sitting"],
    "pulsatile liver": [
        "a liver that throbs under the hand",
        "a pulsing mass under the right ribs",
    ],
    "peripheral edema": ["swollen ankles", "pitting swelling of both legs"],
    "jaw claudication": ["jaw pain while chewing", "jaw aching that stops when chewing stops"],
    "scalp tenderness": ["pain when combing the hair", "a sore scalp"],
    "visual loss": ["sudden loss of sight in one eye", "a dark curtain over one eye"],
    "headache": ["a new pain in the temples", "a dull pain at the side of the head"],
    "absent pulses": ["no pulse at the wrist", "missing radial pulses"],
    "arm claudication": ["arm pain when lifting", "aching arms on use"],
    "bruits": ["a whooshing sound over the neck vessels", "noises heard over the carotids"],
    "strawberry tongue": ["a red bumpy tongue", "a bright red tongue with bumps"],
    "desquamation": ["peeling skin of the fingers", "skin peeling from the hands"],
    "conjunctivitis": ["red eyes without discharge", "bloodshot eyes"],
    "lymphadenopathy": ["a swollen gland in the neck", "a lump in the neck from a gland"],
    "palpable purpura": [
        "raised purple spots on the buttocks and legs",
        "purple bumps on the legs",
    ],
    "abdominal pain": ["a belly ache", "cramps in the belly"],
    "arthralgia": ["sore knees and ankles", "aching joints"],
    "livedo reticularis": ["a lacy purple mottling of the legs", "a net-like mottled rash"],
    "mononeuritis multiplex": [
        "foot drop on one side and a weak hand on the other",
        "numb patches in the areas of several nerves",
    ],
    "digital ischemia": ["cold blue fingertips with ulcers", "dark painful toe tips"],
    "claudication": ["calf pain on walking", "leg cramps after a short walk"],
    "thrombophlebitis": ["tender red cords along the veins", "painful lines along leg veins"],
    "envelope-shaped crystals": [
        "crystals shaped like envelopes in the urine",
        "square crystals with a cross on urine microscopy",
    ],
    "flank pain": [
        "pain in the side spreading to the groin",
        "colicky pain from the back to the groin",
    ],
    "radiolucent stone": [
        "a stone not seen on x-ray but seen on CT",
        "a stone invisible on a plain film",
    ],
    "acidic urine": ["a urine pH of 5.0", "urine with a very low pH"],
    "hexagonal crystals": ["six-sided crystals in the urine", "crystals with six flat sides"],
    "childhood nephrolithiasis": [
        "kidney stones since early childhood",
        "a first stone in the kidney at age 6",
    ],
    "staghorn calculus": [
        "a branching stone filling the kidney",
        "a stone cast of the whole collecting system",
    ],
    "alkaline urine": ["a urine pH of 8.0", "urine that is very basic"],
    "urinary tract infection": [
        "burning on passing urine with fever",
        "repeated bladder infections",
    ],
}

# kind -> (question stem, how this textbook's passage names the answer)
KINDS: dict[str, tuple[str, str]] = {
    "valve": (
        "Which of the following valve lesions is the most likely cause of these findings?",
        "{answer}: on examination, {findings}. Echocardiography in {answer} shows the affected valve.",
    ),
    "vasculitis": (
        "Which of the following vasculitides is the most likely diagnosis?",
        "{answer} is a vasculitis whose features are {findings}. A biopsy in {answer} shows inflamed vessel walls.",
    ),
    "stone": (
        "Which of the following kinds of kidney stone is most likely?",
        "Stones of {answer} form in patients with {findings}. Analysis of a passed stone identifies {answer}.",
    ),
}

# kind -> answer -> its findings (textbook words), each a key of FINDINGS
ANSWERS: dict[str, dict[str, list[str]]] = {
    "valve": {
        "aortic stenosis": ["syncope", "angina", "crescendo-decrescendo murmur", "pulsus parvus"],
        "mitral stenosis": ["opening snap", "atrial fibrillation", "hemoptysis", "dyspnea"],
        "aortic regurgitation": ["bounding pulses", "wide pulse pressure", "head bobbing"],
        "mitral regurgitation": ["holosystolic murmur", "dyspnea", "atrial fibrillation"],
        "mitral valve prolapse": ["midsystolic click", "palpitations", "syncope"],
        "tricuspid regurgitation": [
            "jugular venous distension",
            "pulsatile liver",
            "peripheral edema",
            "ascites",
        ],
    },
    "vasculitis": {
        "giant cell arteritis": ["jaw claudication", "scalp tenderness", "visual loss", "headache"],
        "Takayasu arteritis": ["absent pulses", "arm claudication", "bruits"],
        "Kawasaki disease": [
            "strawberry tongue",
            "desquamation",
            "conjunctivitis",
            "lymphadenopathy",
        ],
        "IgA vasculitis": ["palpable purpura", "abdominal pain", "arthralgia", "hematuria"],
        "polyarteritis nodosa": ["livedo reticularis", "mononeuritis multiplex", "hypertension"],
        "thromboangiitis obliterans": ["digital ischemia", "claudication", "thrombophlebitis"],
    },
    "stone": {
        "calcium oxalate": ["envelope-shaped crystals", "flank pain", "hematuria"],
        "uric acid": ["radiolucent stone", "gout", "acidic urine"],
        "cystine": ["hexagonal crystals", "childhood nephrolithiasis", "flank pain"],
        "struvite": ["staghorn calculus", "alkaline urine", "urinary tract infection"],
    },
}


def main() -> None:
    write(ANSWERS, KINDS, FINDINGS, SEED, (SAMPLE, CORPUS))


if __name__ == "__main__":
    main()
