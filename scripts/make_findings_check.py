"""Write the rewriter's second question set, for evaluation only: vignettes written as the
findings sample's are (`scripts/make_findings_sample.py`), over other kinds of answer (poisons,
injured nerves, occluded arteries) and their own textbook
(src/data/samples/medqa_findings_check.jsonl and
src/retrieval/samples/findings_check_textbook.jsonl).

SYNTHETIC, and never trained on: no task or preset reads it; `python -m src.eval
task=medqa_rewriter data.path=src/data/samples/medqa_findings_check.jsonl
retrieval.corpus=src/retrieval/samples/findings_check_textbook.jsonl` scores a trained
rewriter on it (docs/recipes/retrieval.md). It checks that what a rewriter learned on the
findings sample (writing what a vignette describes in a textbook's words) carries to answers,
findings and wordings it never saw. Its kinds are neither the sample's nor those of the
rewriter's worked examples (a hormone, an organism, a drug).

Deterministic: `python scripts/make_findings_check.py` rewrites both files and prints the
recall shares as the sample's script does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sample's script, beside this one
from make_findings_sample import FINDINGS as SAMPLE_FINDINGS  # noqa: E402
from make_findings_sample import ROOT, write  # noqa: E402

SAMPLE = ROOT / "src" / "data" / "samples" / "medqa_findings_check.jsonl"
CORPUS = ROOT / "src" / "retrieval" / "samples" / "findings_check_textbook.jsonl"
SEED = 11

# findings this set shares with the sample, worded as there
SHARED = (
    "jaundice",
    "lactic acidosis",
    "seizures",
    "hyperacusis",
    "ptosis",
    "dysphagia",
    "weight loss",
    "cherry-red spot",
)
# finding, in the textbook's word -> how vignettes describe it (never with that word)
FINDINGS: dict[str, list[str]] = {
    **{name: SAMPLE_FINDINGS[name] for name in SHARED},
    "headache": ["a pounding pain in the head", "a throbbing head since the morning"],
    "confusion": ["not knowing where he or she is", "muddled answers to simple questions"],
    "cherry-red skin": ["bright pink flushed cheeks and lips", "an unusually rosy complexion"],
    "miosis": ["pinpoint pupils", "very small pupils that barely react"],
    "bradycardia": ["a pulse of 42/min", "a very slow heartbeat"],
    "bronchorrhea": ["copious watery secretions from the airways", "bubbling wet breath sounds"],
    "salivation": ["drooling", "a mouth full of saliva"],
    "abdominal colic": ["cramping belly pain that comes and goes", "waves of gripping belly pain"],
    "wrist drop": ["inability to lift the hand at the wrist", "a hand that hangs limp when raised"],
    "basophilic stippling": [
        "blue dots inside the red cells on the smear",
        "speckled red cells under the microscope",
    ],
    "visual loss": ["seeing only shadows", "blurry sight like a snowstorm"],
    "metabolic acidosis": ["a bicarbonate of 9 mEq/L", "deep sighing breaths with acid blood"],
    "optic disc hyperemia": ["swollen red optic discs", "reddened nerve heads on funduscopy"],
    "hepatic necrosis": ["transaminases above 5000 U/L", "a dying liver on biopsy"],
    "garlic breath": ["breath that smells of garlic", "a garlicky odor on the breath"],
    "rice-water diarrhea": ["profuse watery stools like cloudy water", "pale watery stools"],
    "mees lines": ["white bands across the fingernails", "pale transverse lines on the nails"],
    "almond breath": ["a bitter smell like nuts on the breath", "a nutty odor to the breath"],
    "tremor": ["shaking hands", "a fine shake of the fingers"],
    "gingivitis": ["swollen red gums", "gums that bleed on brushing"],
    "erethism": ["shyness and irritability that began this year", "marked timidity and outbursts"],
    "mydriasis": ["large pupils", "wide pupils that barely react"],
    "hyperthermia": ["a temperature of 40.1 C", "a very hot body"],
    "anhidrosis": ["dry skin without sweat", "hot skin that does not sweat"],
    "urinary retention": ["a full bladder he cannot empty", "no urine passed for 12 hours"],
    "bradypnea": ["six breaths a minute", "slow shallow breathing"],
    "coma": ["no response to voice or pain", "unrousable sleep"],
    "claw hand": [
        "bent ring and little fingers that will not straighten",
        "curled fourth and fifth fingers",
    ],
    "hypothenar atrophy": [
        "wasting of the pad below the little finger",
        "a flat pad on the little-finger side of the palm",
    ],
    "thenar atrophy": ["wasting of the ball of the thumb", "a flat thumb pad"],
    "paresthesia": ["pins and needles", "tingling"],
    "deltoid atrophy": ["a flattened shoulder contour", "wasting of the rounded shoulder muscle"],
    "abduction weakness": [
        "trouble lifting the arm out to the side",
        "an arm that cannot be raised sideways",
    ],
    "foot drop": ["a foot that slaps the ground", "toes that catch on the floor when walking"],
    "steppage gait": ["lifting the knee high with each step", "a high-stepping walk"],
    "winged scapula": [
        "a shoulder blade that juts out when pushing on a wall",
        "a shoulder blade that sticks out from the back",
    ],
    "facial droop": ["a drooping corner of the mouth", "a face that sags on one side"],
    "ageusia": ["food that has no taste", "lost sense of taste on the tongue"],
    "exotropia": ["an eye that looks down and out", "one eye turned outward"],
    "hemiparesis": ["weakness of one arm and leg", "a weak side of the body"],
    "aphasia": ["trouble finding and saying words", "speech that makes no sense"],
    "gaze deviation": ["eyes turned toward one side", "a fixed look to one side"],
    "incontinence": ["wet clothes from urine passed unawares", "leaking urine without warning"],
    "abulia": ["no will to do anything", "sitting still without starting any task"],
    "hemianopia": [
        "missing the same half of vision in both eyes",
        "bumping into things on one side",
    ],
    "alexia": ["inability to read though writing is intact", "no longer able to read"],
    "hoarseness": ["a rough voice", "a husky croaking voice"],
    "vertigo": ["a spinning sensation", "the room whirling around"],
    "horner syndrome": [
        "a small pupil with a droopy lid on one side",
        "one sunken eye with a tiny pupil and dry face",
    ],
    "paraplegia": ["both legs paralyzed", "no movement of the legs"],
    "analgesia": ["no pain felt from a pinprick on the legs", "cuts on the legs that do not hurt"],
    "postprandial pain": ["belly pain half an hour after meals", "pain after every meal"],
    "sitophobia": ["fear of eating", "skipping meals to avoid the pain"],
    "amaurosis": ["sudden painless blindness in one eye", "one eye went dark without pain"],
    "retinal pallor": ["a milky white retina", "a whitened back of the eye"],
    "angina": ["crushing pressure behind the breastbone", "a heavy squeezing feeling in the chest"],
    "diaphoresis": ["drenching sweat", "cold clammy sweating"],
    "anterior st elevation": [
        "raised segments over V1 to V4 on the tracing",
        "an injury current over the front of the heart tracing",
    ],
}

# kind -> (question stem, how the passage names the answer)
KINDS: dict[str, tuple[str, str]] = {
    "poison": (
        "Poisoning with which of the following is the most likely cause of these findings?",
        "Poisoning with {answer} presents with {findings}. Treatment of {answer} poisoning starts with its antidote.",
    ),
    "nerve": (
        "Injury to which of the following nerves is the most likely cause?",
        "Injury to the {answer} nerve presents with {findings}. Nerve conduction studies place the lesion in the {answer} nerve.",
    ),
    "artery": (
        "Occlusion of which of the following arteries is the most likely cause?",
        "Occlusion of the {answer} presents with {findings}. Imaging of the {answer} shows the blocked segment.",
    ),
}

# kind -> answer -> its findings (textbook words), each a key of FINDINGS
ANSWERS: dict[str, dict[str, list[str]]] = {
    "poison": {
        "carbon monoxide": ["headache", "confusion", "cherry-red skin"],
        "organophosphates": ["miosis", "bradycardia", "bronchorrhea", "salivation"],
        "lead": ["abdominal colic", "wrist drop", "basophilic stippling"],
        "methanol": ["visual loss", "metabolic acidosis", "optic disc hyperemia"],
        "acetaminophen": ["hepatic necrosis", "jaundice", "confusion"],
        "arsenic": ["garlic breath", "rice-water diarrhea", "mees lines"],
        "cyanide": ["almond breath", "lactic acidosis", "seizures"],
        "mercury": ["tremor", "gingivitis", "erethism"],
        "atropine": ["mydriasis", "hyperthermia", "anhidrosis", "urinary retention"],
        "heroin": ["miosis", "bradypnea", "coma"],
    },
    "nerve": {
        "radial": ["wrist drop", "paresthesia"],
        "ulnar": ["claw hand", "hypothenar atrophy", "paresthesia"],
        "median": ["thenar atrophy", "paresthesia"],
        "axillary": ["deltoid atrophy", "abduction weakness", "paresthesia"],
        "common fibular": ["foot drop", "steppage gait", "paresthesia"],
        "long thoracic": ["winged scapula", "abduction weakness"],
        "facial": ["facial droop", "hyperacusis", "ageusia"],
        "oculomotor": ["ptosis", "mydriasis", "exotropia"],
    },
    "artery": {
        "middle cerebral artery": ["hemiparesis", "aphasia", "gaze deviation"],
        "anterior cerebral artery": ["hemiparesis", "incontinence", "abulia"],
        "posterior cerebral artery": ["hemianopia", "alexia"],
        "posterior inferior cerebellar artery": [
            "dysphagia",
            "hoarseness",
            "vertigo",
            "horner syndrome",
        ],
        "anterior spinal artery": ["paraplegia", "analgesia", "incontinence"],
        "superior mesenteric artery": ["postprandial pain", "sitophobia", "weight loss"],
        "central retinal artery": ["amaurosis", "cherry-red spot", "retinal pallor"],
        "left anterior descending artery": ["angina", "diaphoresis", "anterior st elevation"],
    },
}


def main() -> None:
    write(ANSWERS, KINDS, FINDINGS, SEED, (SAMPLE, CORPUS))


if __name__ == "__main__":
    main()
