"""Write the rewriter's training sample: MedQA-style vignettes whose textbook passage is written
in other words (src/data/samples/medqa_findings_sample.jsonl and
src/retrieval/samples/findings_textbook.jsonl).

SYNTHETIC: written for this project from the table below, not taken from MedQA. As in real
MedQA questions over textbooks, a vignette describes what is seen ("an enlarged liver", "a
serum sodium of 127 mEq/L", "drooping eyelids") while the passage that answers it is written in
the answer's terms and the textbook's words ("Deficiency of glucose-6-phosphatase ...
hepatomegaly, hyponatremia, ptosis"). So the question alone finds the answering passage only
where a vignette happens to use a textbook word (`LEAK`), and a query in the textbook's words, or
one naming the right option, finds it. The corpus holds, for every answer, its passage (the other
answers' passages are each question's distractors: the options of a question are answers of the
same kind), and for every finding two passages in the vignettes' own words that answer nothing
(triage and history notes), which a query made of the vignette's words finds first.

Deterministic: `python scripts/make_findings_sample.py` rewrites both files and prints the share
of questions whose gold passage the question alone, the question with its options, and the answer
alone put in BM25's top 3 (`--k`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the project, for its retriever
SAMPLE = ROOT / "src" / "data" / "samples" / "medqa_findings_sample.jsonl"
CORPUS = ROOT / "src" / "retrieval" / "samples" / "findings_textbook.jsonl"
SEED = 7
VIGNETTES = 4  # questions per answer, each with other findings' wordings, ages and settings
LEAK = 0.5  # chance that a vignette names one finding in the textbook's word, as real ones do

# finding, in the textbook's word -> how vignettes describe it (never with that word)
FINDINGS: dict[str, list[str]] = {
    "hepatomegaly": ["an enlarged liver", "a liver edge palpable 5 cm below the costal margin"],
    "splenomegaly": ["an enlarged spleen", "a spleen tip felt deep in the left upper quadrant"],
    "jaundice": ["yellow skin and eyes", "yellowish sclerae"],
    "hypoglycemia": ["a blood glucose of 34 mg/dL", "low blood sugar on a fingerstick"],
    "hyperglycemia": ["a fasting blood glucose of 260 mg/dL", "high blood sugar"],
    "hyponatremia": ["a serum sodium of 127 mEq/L", "low serum sodium"],
    "hyperkalemia": ["a serum potassium of 6.4 mEq/L", "high serum potassium"],
    "hypokalemia": ["a serum potassium of 2.8 mEq/L", "low serum potassium"],
    "hypocalcemia": ["a serum calcium of 6.9 mg/dL", "low serum calcium"],
    "hypercalcemia": ["a serum calcium of 12.8 mg/dL", "high serum calcium"],
    "hypertension": ["a blood pressure of 172/104 mm Hg", "high blood pressure"],
    "hypotension": ["a blood pressure of 76/40 mm Hg", "low blood pressure"],
    "tachycardia": ["a pulse of 128/min", "a racing heartbeat"],
    "virilization": ["an enlarged clitoris with fused labial folds", "ambiguous genitalia"],
    "cataracts": ["cloudy lenses in both eyes", "absent red reflexes"],
    "intellectual disability": ["delayed milestones", "learning difficulties since childhood"],
    "seizures": ["episodes of generalized shaking", "convulsions"],
    "hyperammonemia": ["a plasma ammonia of 260 umol/L", "a high blood ammonia"],
    "hyperuricemia": ["a serum uric acid of 11 mg/dL", "high uric acid in the blood"],
    "gout": ["a hot swollen big toe", "attacks of pain at the base of the big toe"],
    "lactic acidosis": [
        "an elevated serum lactate with a low bicarbonate",
        "acid blood with high lactate",
    ],
    "cardiomegaly": ["an enlarged cardiac silhouette on chest x-ray", "a big heart on x-ray"],
    "hypotonia": ["floppy limbs", "poor muscle tone"],
    "macroglossia": ["a large protruding tongue", "a tongue too big for the mouth"],
    "cherry-red spot": [
        "a red spot at the center of each macula",
        "a bright red fovea on funduscopy",
    ],
    "hyperacusis": ["an exaggerated startle to noise", "distress at ordinary sounds"],
    "regression": ["loss of skills learned earlier", "no longer sitting or babbling as before"],
    "pancytopenia": ["low red cell, white cell and platelet counts", "all blood counts low"],
    "bone pain": ["aching in the thighs and back", "deep pain in the long bones"],
    "musty odor": ["a mousy smell to the sweat and urine", "a strange smell of the urine"],
    "hypopigmentation": ["very fair skin and hair", "pale skin and blond hair unlike the parents"],
    "vomiting": ["repeated throwing up", "emesis after meals"],
    "encephalopathy": ["lethargy progressing to unresponsiveness", "drowsiness and poor feeding"],
    "self-mutilation": ["biting of the lips and fingertips", "chewing wounds on the fingers"],
    "dystonia": ["twisting involuntary movements", "sustained abnormal postures of the limbs"],
    "angiokeratomas": [
        "small dark red papules over the lower trunk",
        "clusters of tiny red-black spots on the hips",
    ],
    "acroparesthesias": [
        "burning pain in the hands and feet",
        "episodes of burning in the fingers and toes",
    ],
    "proteinuria": ["protein on urine dipstick", "foamy urine"],
    "hematuria": ["blood in the urine", "cola-colored urine"],
    "hemoptysis": ["coughing up blood", "blood-streaked sputum"],
    "malar rash": [
        "a red rash over the cheeks and nose sparing the nasolabial folds",
        "a butterfly-shaped facial redness",
    ],
    "photosensitivity": ["rashes after time in the sun", "skin that reddens in sunlight"],
    "arthritis": ["painful swollen joints", "swollen tender knees and wrists"],
    "raynaud phenomenon": [
        "fingers that turn white then blue in the cold",
        "color changes of the fingers in cold weather",
    ],
    "calcinosis": [
        "hard white nodules under the skin of the fingers",
        "chalky deposits in the fingertips",
    ],
    "telangiectasia": [
        "small dilated vessels on the face and lips",
        "tiny red vessel spots on the lips",
    ],
    "dysphagia": ["difficulty swallowing", "food sticking in the chest"],
    "sclerodactyly": [
        "tight shiny skin over the fingers",
        "thickened skin that limits bending of the fingers",
    ],
    "interstitial lung disease": [
        "fine crackles at both lung bases with breathlessness",
        "dry cough and shortness of breath on exertion",
    ],
    "proximal muscle weakness": [
        "difficulty climbing stairs and rising from a chair",
        "trouble lifting the arms to comb the hair",
    ],
    "mechanic hands": [
        "cracked rough skin on the sides of the fingers",
        "fissured calloused fingertips",
    ],
    "exophthalmos": ["protruding eyes", "eyes that bulge forward"],
    "goiter": [
        "a diffuse painless swelling of the front of the neck",
        "a neck mass that moves with swallowing",
    ],
    "heat intolerance": ["feeling hot when others are comfortable", "sweating in a cool room"],
    "weight loss": ["losing 8 kg without trying", "clothes that have become loose"],
    "ptosis": ["drooping eyelids", "eyelids that sag by evening"],
    "diplopia": ["double vision", "seeing two images"],
    "fatigability": ["weakness that worsens with use", "weakness worse at the end of the day"],
    "pruritus": ["generalized itching", "scratch marks from constant itch"],
    "xanthelasma": ["yellow plaques on the eyelids", "soft yellow patches near the inner eyelids"],
    "steatorrhea": ["pale greasy foul-smelling stools", "oily stools that float"],
    "dermatitis herpetiformis": [
        "itchy blisters on the elbows and knees",
        "grouped itchy vesicles over the extensor surfaces",
    ],
    "anemia": ["a hemoglobin of 8.9 g/dL", "pale conjunctivae and tiredness"],
    "xerostomia": ["a dry mouth", "needing water to swallow dry food"],
    "xerophthalmia": ["dry gritty eyes", "eyes that feel sandy"],
    "parotid enlargement": [
        "swelling in front of both ears",
        "bilateral cheek swelling at the angle of the jaw",
    ],
    "sinusitis": [
        "chronic nasal crusting and facial pain",
        "a blocked nose with bloody discharge for months",
    ],
    "glossitis": ["a smooth red sore tongue", "a beefy painful tongue"],
    "paresthesia": ["tingling in the feet", "pins and needles in both legs"],
    "megaloblastic anemia": [
        "a hemoglobin of 8 g/dL with a mean corpuscular volume of 118 fL",
        "large red cells with hypersegmented neutrophils",
    ],
    "pleuritis": ["sharp chest pain on deep breathing", "chest pain that is worse on inspiration"],
    "hyporeflexia": ["absent ankle and knee jerks", "diminished tendon reflexes"],
    "short stature": [
        "a height below the third percentile",
        "being much shorter than the rest of the family",
    ],
    "webbed neck": [
        "extra skin folds at the sides of the neck",
        "a broad neck with loose lateral skin",
    ],
    "amenorrhea": ["no menstrual periods by age 16", "absent menses"],
    "coarctation": ["weak femoral pulses", "a blood pressure higher in the arms than the legs"],
    "gynecomastia": ["breast enlargement", "tender swelling under both nipples"],
    "tall stature": [
        "a height above the 97th percentile",
        "being taller than everyone in the family",
    ],
    "infertility": ["no pregnancy after two years of trying", "a semen analysis without sperm"],
    "small testes": ["firm testes of 2 mL each", "testes smaller than expected"],
    "epicanthal folds": [
        "upslanting eyes with skin folds at the inner corners",
        "skin covering the inner corners of the eyes",
    ],
    "single palmar crease": ["one crease across each palm", "a single line across the palms"],
    "duodenal atresia": [
        "bilious vomiting with a double bubble on x-ray",
        "green vomiting on the first day of life",
    ],
    "rocker-bottom feet": ["feet with rounded soles", "convex soles of the feet"],
    "clenched fists": ["hands held tight with overlapping fingers", "fists that do not open"],
    "micrognathia": ["a small receding jaw", "a tiny chin"],
    "cleft lip": ["a split upper lip", "a gap in the upper lip"],
    "polydactyly": ["six fingers on each hand", "an extra digit on each hand"],
    "microcephaly": ["a small head circumference", "a head size below the third percentile"],
    "high-pitched cry": ["a cry like a mewing kitten", "a shrill weak cry"],
    "ascites": ["a distended abdomen with shifting dullness", "a fluid wave across the abdomen"],
    "pelvic mass": ["a firm mass on bimanual examination", "a lump felt deep in the lower abdomen"],
    "nocturia": ["waking three times a night to urinate", "getting up at night to pass urine"],
    "urinary hesitancy": ["difficulty starting the urine stream", "a weak stream"],
    "palpable gallbladder": [
        "a nontender mass under the right ribs",
        "a round swelling felt below the right costal margin",
    ],
    "vaginal bleeding": [
        "bleeding from the vagina weeks after delivery",
        "irregular bleeding per vagina",
    ],
    "thyroid nodule": ["a firm lump in the neck", "a hard neck swelling on one side"],
    "diarrhea": ["frequent watery stools", "loose stools many times a day"],
    "flushing": ["episodes of facial redness", "attacks of a hot red face"],
    "wheezing": ["whistling breath sounds", "noisy breathing out"],
    "murmur": ["an extra sound at the lower left sternal border", "a blowing sound over the heart"],
    "hematochezia": ["bright red blood in the stools", "blood mixed with stool"],
    "confusion": ["disorientation to place and time", "not knowing the date or the place"],
    "ataxia": ["an unsteady wide-based gait", "staggering when walking"],
    "ophthalmoplegia": ["weak eye movements", "eyes that do not move fully to the sides"],
    "dermatitis": ["a scaly rash on sun-exposed skin", "rough dark skin on the neck and hands"],
    "dementia": ["memory loss", "forgetting recent events"],
    "gingival bleeding": ["bleeding swollen gums", "gums that bleed on brushing"],
    "perifollicular hemorrhage": [
        "small bleeds around hair follicles",
        "red dots around each hair",
    ],
    "corkscrew hairs": ["coiled body hairs", "twisted hairs on the legs"],
    "night blindness": ["trouble seeing in dim light", "poor vision at dusk"],
    "bitot spots": [
        "foamy gray patches on the white of the eye",
        "grayish spots on the conjunctiva",
    ],
    "bowed legs": ["legs curving outward", "knees far apart when standing"],
    "ecchymoses": ["large bruises after minor bumps", "bruising all over the body"],
    "prolonged prothrombin time": [
        "blood that is slow to clot on testing",
        "an INR of 3.1 without anticoagulants",
    ],
    "cheilosis": ["cracks at the corners of the mouth", "fissured red lips"],
    "corneal vascularization": [
        "vessels growing into the clear front of the eye",
        "red eyes with new vessels over the iris",
    ],
    "hemolytic anemia": [
        "anemia with a high reticulocyte count and low haptoglobin",
        "dark urine and pallor with fragmented cells",
    ],
    "loss of vibration sense": [
        "not feeling a tuning fork at the toes",
        "numb feet on tuning fork testing",
    ],
    "recurrent pneumonia": ["repeated chest infections", "three lung infections this year"],
    "salty sweat": ["skin that tastes salty", "a salty taste when kissed"],
    "lens dislocation": ["a shifted lens in each eye", "a trembling iris with blurred vision"],
    "aortic root dilation": [
        "a widened aorta on echocardiography",
        "a large aortic diameter on imaging",
    ],
    "cafe-au-lait spots": ["flat light-brown patches on the trunk", "coffee-colored skin patches"],
    "neurofibromas": ["soft skin nodules", "rubbery bumps under the skin"],
    "lisch nodules": ["tan dots on the iris", "small brown iris bumps"],
    "pseudohypertrophy": ["large firm calves", "calves that look muscular but are weak"],
    "macroorchidism": ["large testes", "testes 30 mL in volume"],
    "long face": ["a long narrow face with large ears", "an elongated face"],
    "polyps": ["hundreds of growths on colonoscopy", "a colon carpeted by growths"],
    "bronze skin": ["darkened skin of a gray-brown hue", "a tan that does not fade"],
    "kayser-fleischer rings": [
        "golden-brown rings at the edge of the cornea",
        "brown rims around the iris",
    ],
    "tremor": ["a flapping shake of the hands", "shaking of the arms"],
    "dark urine": ["urine that turns black on standing", "urine darkening in air"],
    "ochronosis": ["blue-black ear cartilage", "dark pigment in the sclerae and ears"],
    "thrombosis": ["a clot in a leg vein", "a swollen painful calf with a clot"],
    "dysgeusia": ["a distorted sense of taste", "food that tastes of metal"],
    "alopecia": ["patchy hair loss", "hair falling out in clumps"],
    "poor wound healing": [
        "cuts that take months to close",
        "a surgical incision still open after six weeks",
    ],
    "acrodermatitis": [
        "a crusted red rash around the mouth and anus",
        "scaly red patches at the fingertips and around the mouth",
    ],
    "neutropenia": ["a low neutrophil count", "an absolute neutrophil count of 600/uL"],
    "koilonychia": ["spoon-shaped nails", "thin nails curved upward like a spoon"],
    "pica": ["a craving to eat ice", "eating clay and chalk"],
    "cold intolerance": ["feeling cold in a warm room", "wearing a sweater in summer"],
    "weight gain": ["gaining 9 kg in a year", "clothes that have become tight"],
    "constipation": ["hard stools twice a week", "straining to pass stool"],
    "myopathy": ["aching weak muscles", "sore weak thighs"],
    "nail whitening": ["white fingernail beds", "pale chalky nails"],
    "tetany": ["cramps of the hands with flexed wrists", "spasms of the hands and feet"],
    "arrhythmia": ["an irregular heartbeat", "palpitations with an irregular pulse"],
    "headache": ["attacks of pounding head pain", "a head that throbs during the spells"],
    "diaphoresis": ["episodes of heavy sweating", "sweat-soaked clothes during attacks"],
    "achlorhydria": ["no acid in the gastric juice", "a gastric pH above 7"],
    "necrolytic migratory erythema": [
        "a spreading red blistering rash on the groin and legs",
        "a crusting rash that moves from place to place",
    ],
    "peptic ulcers": [
        "sores in the stomach and duodenum on endoscopy",
        "burning upper belly pain eased by food",
    ],
    "galactorrhea": [
        "milky discharge from the nipples",
        "milk leaking from the breasts without pregnancy",
    ],
}

# kind -> (question stem, how the passage names the answer)
KINDS: dict[str, tuple[str, str]] = {
    "enzyme": (
        "Deficiency of which of the following enzymes is the most likely cause of these findings?",
        "Deficiency of {answer} presents with {findings}. In deficiency of {answer} the blocked step explains each of these.",
    ),
    "antibody": (
        "Which of the following antibodies is most likely to be found in this patient's serum?",
        "The antibody {answer} is found in the disorder that presents with {findings}. A positive {answer} test supports that diagnosis.",
    ),
    "karyotype": (
        "Which of the following karyotypes is most likely in this patient?",
        "The karyotype {answer} is seen in the syndrome that presents with {findings}. Chromosome analysis showing {answer} confirms it.",
    ),
    "marker": (
        "Which of the following serum markers is most likely to be elevated?",
        "The serum marker {answer} is elevated in the tumor that presents with {findings}. Following {answer} tracks the response to treatment.",
    ),
    "vitamin": (
        "Deficiency of which of the following vitamins is the most likely cause?",
        "Deficiency of {answer} presents with {findings}. Replacing {answer} reverses most of these features.",
    ),
    "gene": (
        "A mutation in which of the following genes is the most likely cause?",
        "Mutations of the {answer} gene cause the disorder that presents with {findings}. Testing for {answer} variants confirms it.",
    ),
    "mineral": (
        "Deficiency of which of the following minerals is the most likely cause?",
        "Deficiency of the mineral {answer} presents with {findings}. Supplements of {answer} correct it.",
    ),
    "tumor": (
        "Which of the following tumors is the most likely cause of these findings?",
        "The tumor {answer} presents with {findings}. Removing the {answer} relieves most of these features.",
    ),
}

# kind -> answer -> its findings (textbook words), each a key of FINDINGS
ANSWERS: dict[str, dict[str, list[str]]] = {
    "enzyme": {
        "21-hydroxylase": ["virilization", "hyponatremia", "hyperkalemia", "hypotension"],
        "11-beta-hydroxylase": ["virilization", "hypertension", "hypokalemia"],
        "17-alpha-hydroxylase": ["hypertension", "hypokalemia", "amenorrhea"],
        "glucose-6-phosphatase": [
            "hypoglycemia",
            "hepatomegaly",
            "lactic acidosis",
            "hyperuricemia",
        ],
        "acid alpha-glucosidase": ["cardiomegaly", "hypotonia", "macroglossia"],
        "hexosaminidase A": ["cherry-red spot", "hyperacusis", "regression"],
        "glucocerebrosidase": ["splenomegaly", "hepatomegaly", "pancytopenia", "bone pain"],
        "phenylalanine hydroxylase": [
            "intellectual disability",
            "seizures",
            "musty odor",
            "hypopigmentation",
        ],
        "ornithine transcarbamylase": ["hyperammonemia", "vomiting", "encephalopathy"],
        "hypoxanthine-guanine phosphoribosyltransferase": [
            "self-mutilation",
            "hyperuricemia",
            "dystonia",
            "gout",
        ],
        "galactose-1-phosphate uridyltransferase": [
            "cataracts",
            "jaundice",
            "hepatomegaly",
            "vomiting",
        ],
        "alpha-galactosidase A": ["angiokeratomas", "acroparesthesias", "proteinuria"],
        "sphingomyelinase": ["cherry-red spot", "hepatomegaly", "splenomegaly", "regression"],
        "homogentisate oxidase": ["dark urine", "ochronosis", "arthritis"],
        "cystathionine beta-synthase": [
            "lens dislocation",
            "tall stature",
            "thrombosis",
            "intellectual disability",
        ],
        "aldolase B": ["hypoglycemia", "vomiting", "jaundice", "hepatomegaly"],
    },
    "antibody": {
        "anti-dsDNA": ["malar rash", "arthritis", "proteinuria", "photosensitivity"],
        "anti-centromere": ["calcinosis", "raynaud phenomenon", "telangiectasia", "dysphagia"],
        "anti-Scl-70": ["sclerodactyly", "interstitial lung disease", "raynaud phenomenon"],
        "anti-Jo-1": ["proximal muscle weakness", "mechanic hands", "interstitial lung disease"],
        "anti-TSH receptor": [
            "exophthalmos",
            "goiter",
            "tachycardia",
            "heat intolerance",
            "weight loss",
        ],
        "anti-acetylcholine receptor": ["ptosis", "diplopia", "fatigability"],
        "anti-GBM": ["hemoptysis", "hematuria"],
        "anti-mitochondrial": ["pruritus", "jaundice", "xanthelasma"],
        "anti-tissue transglutaminase": [
            "steatorrhea",
            "weight loss",
            "dermatitis herpetiformis",
            "anemia",
        ],
        "anti-Ro": ["xerostomia", "xerophthalmia", "parotid enlargement"],
        "PR3-ANCA": ["sinusitis", "hemoptysis", "hematuria"],
        "anti-intrinsic factor": ["glossitis", "paresthesia", "megaloblastic anemia"],
        "anti-histone": ["arthritis", "pleuritis", "malar rash"],
        "anti-voltage-gated calcium channel": [
            "proximal muscle weakness",
            "xerostomia",
            "hyporeflexia",
        ],
    },
    "karyotype": {
        "45,X": ["short stature", "webbed neck", "amenorrhea", "coarctation"],
        "47,XXY": ["gynecomastia", "tall stature", "infertility", "small testes"],
        "47,XX,+21": ["hypotonia", "epicanthal folds", "single palmar crease", "duodenal atresia"],
        "47,XY,+18": ["rocker-bottom feet", "clenched fists", "micrognathia"],
        "47,XX,+13": ["cleft lip", "polydactyly", "microcephaly"],
        "46,XY,del(5p)": ["high-pitched cry", "microcephaly", "intellectual disability"],
    },
    "marker": {
        "alpha-fetoprotein": ["hepatomegaly", "weight loss", "jaundice", "ascites"],
        "CA-125": ["ascites", "pelvic mass", "weight loss"],
        "prostate-specific antigen": ["urinary hesitancy", "nocturia", "bone pain"],
        "CA 19-9": ["jaundice", "weight loss", "palpable gallbladder"],
        "beta-hCG": ["vaginal bleeding", "hemoptysis", "tachycardia"],
        "calcitonin": ["thyroid nodule", "diarrhea", "flushing"],
        "5-hydroxyindoleacetic acid": ["flushing", "diarrhea", "wheezing", "murmur"],
        "carcinoembryonic antigen": ["hematochezia", "anemia", "weight loss"],
    },
    "vitamin": {
        "thiamine": ["confusion", "ataxia", "ophthalmoplegia"],
        "niacin": ["dermatitis", "diarrhea", "dementia"],
        "vitamin C": ["gingival bleeding", "perifollicular hemorrhage", "corkscrew hairs"],
        "vitamin A": ["night blindness", "xerophthalmia", "bitot spots"],
        "vitamin D": ["bowed legs", "bone pain", "hypocalcemia"],
        "vitamin K": ["ecchymoses", "prolonged prothrombin time", "hematuria"],
        "vitamin B12": ["glossitis", "paresthesia", "megaloblastic anemia", "dementia"],
        "riboflavin": ["cheilosis", "corneal vascularization", "glossitis"],
        "vitamin E": ["ataxia", "hemolytic anemia", "loss of vibration sense"],
    },
    "gene": {
        "CFTR": ["recurrent pneumonia", "steatorrhea", "infertility", "salty sweat"],
        "FBN1": ["tall stature", "lens dislocation", "aortic root dilation"],
        "NF1": ["cafe-au-lait spots", "neurofibromas", "lisch nodules"],
        "dystrophin": ["pseudohypertrophy", "proximal muscle weakness", "cardiomegaly"],
        "FMR1": ["macroorchidism", "long face", "intellectual disability"],
        "APC": ["polyps", "hematochezia", "anemia"],
        "HFE": ["bronze skin", "hyperglycemia", "hepatomegaly", "arthritis"],
        "ATP7B": ["kayser-fleischer rings", "tremor", "jaundice", "dystonia"],
        "RET": ["thyroid nodule", "hypertension", "hypercalcemia"],
    },
    "mineral": {
        "zinc": ["dysgeusia", "alopecia", "poor wound healing", "acrodermatitis"],
        "copper": ["anemia", "neutropenia", "ataxia", "hypopigmentation"],
        "iron": ["anemia", "koilonychia", "pica", "glossitis"],
        "iodine": ["goiter", "cold intolerance", "weight gain", "constipation"],
        "selenium": ["cardiomegaly", "myopathy", "nail whitening"],
        "magnesium": ["tetany", "arrhythmia", "hypocalcemia", "hypokalemia"],
    },
    "tumor": {
        "pheochromocytoma": ["hypertension", "tachycardia", "headache", "diaphoresis"],
        "insulinoma": ["hypoglycemia", "confusion", "weight gain"],
        "VIPoma": ["diarrhea", "hypokalemia", "achlorhydria"],
        "glucagonoma": ["necrolytic migratory erythema", "hyperglycemia", "weight loss"],
        "gastrinoma": ["peptic ulcers", "diarrhea", "steatorrhea"],
        "prolactinoma": ["galactorrhea", "amenorrhea", "headache"],
    },
}

PEOPLE = ["man", "woman", "boy", "girl"]
CHILDREN = {"karyotype": 1.0, "enzyme": 0.6}  # kind -> the share of its vignettes about a child
OPENINGS = [
    "A {age}-year-old {person} is brought to the physician with {first}.",
    "A {age}-year-old {person} comes to the clinic because of {first}.",
    "A {age}-year-old {person} is evaluated in the emergency department for {first}.",
    "A {age}-year-old {person} presents with {first}.",
]
MORE = [
    "Examination shows {rest}.",
    "There is also {rest}.",
    "Further evaluation shows {rest}.",
]
MORE_CHILD = "The parents also report {rest}."
NOTES = [  # passages in the vignettes' words that answer nothing
    "Triage note: patients who come to the clinic with {form} are asked when it began, what "
    "makes it better or worse, and which medicines they take, and are examined before any "
    "cause is named.",
    "History taking: when a patient is brought to the physician with {form}, the family history, "
    "travel and diet are recorded, and the first tests are chosen from the examination.",
]


def listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def vignette(
    kind: str,
    findings: list[str],
    rng: random.Random,
    kinds: dict[str, tuple[str, str]] = KINDS,
    wordings: dict[str, list[str]] = FINDINGS,
) -> str:
    """A question describing `findings` in the vignettes' words (`wordings`), at most one in the
    textbook's, ending with its kind's stem."""
    child = rng.random() < CHILDREN.get(kind, 0.0)
    age = rng.randint(1, 12) if child else rng.randint(18, 75)
    person = rng.choice(PEOPLE[2:] if child else PEOPLE[:2])
    chosen = rng.sample(findings, k=min(len(findings), rng.choice([3, 4])))
    leak = rng.randrange(len(chosen)) if rng.random() < LEAK else -1
    forms = [
        finding if i == leak else rng.choice(wordings[finding]) for i, finding in enumerate(chosen)
    ]
    opening = rng.choice(OPENINGS).format(age=age, person=person, first=listed(forms[:2]))
    more = rng.choice([*MORE, MORE_CHILD] if child else MORE)
    rest = more.format(rest=listed(forms[2:])) if forms[2:] else ""
    return " ".join(part for part in (opening, rest, kinds[kind][0]) if part)


def questions(
    rng: random.Random,
    table: dict[str, dict[str, list[str]]] = ANSWERS,
    kinds: dict[str, tuple[str, str]] = KINDS,
    wordings: dict[str, list[str]] = FINDINGS,
) -> list[dict]:
    """VIGNETTES questions per answer of `table`, each with three other answers of its kind
    as options."""
    rows = []
    for kind, answers in table.items():
        for answer, findings in answers.items():
            others = [other for other in answers if other != answer]
            for _ in range(VIGNETTES):
                options = [answer, *rng.sample(others, 3)]
                rng.shuffle(options)
                by_letter = dict(zip("ABCD", options, strict=True))
                rows.append(
                    {
                        "question": vignette(kind, findings, rng, kinds, wordings),
                        "answer": answer,
                        "options": by_letter,
                        "meta_info": f"synthetic-findings-{kind}",
                        "answer_idx": "ABCD"[options.index(answer)],
                    }
                )
    rng.shuffle(rows)
    return rows


def corpus(
    table: dict[str, dict[str, list[str]]] = ANSWERS,
    kinds: dict[str, tuple[str, str]] = KINDS,
    wordings: dict[str, list[str]] = FINDINGS,
) -> list[dict]:
    """One passage per answer in the textbook's words, two notes per finding in the vignettes'."""
    passages = []
    for kind, answers in table.items():
        for n, (answer, findings) in enumerate(answers.items()):
            text = kinds[kind][1].format(answer=answer, findings=listed(findings))
            passages.append({"id": f"answer-{kind}-{n}", "title": answer, "content": text})
    for n, forms in enumerate(wordings.values()):
        for m, (note, form) in enumerate(zip(NOTES, forms, strict=False)):
            passages.append(
                {
                    "id": f"note-{n}-{m}",
                    "title": form.capitalize(),
                    "content": note.format(form=form),
                }
            )
    return passages


def recall(rows: list[dict], k: int, corpus_path: Path = CORPUS) -> dict[str, float]:
    """The share of rows whose gold passage (one holding the answer) the recipe's retriever
    (BM25 over `corpus_path`) puts in the top k for the question, the question with its
    options, and the answer alone."""
    from src.retrieval.retriever import IndexedRetriever

    with tempfile.TemporaryDirectory() as cache:
        retriever = IndexedRetriever(corpus=str(corpus_path), k=k, cache_dir=cache)
        queries = {
            "question": [row["question"] for row in rows],
            "question with its options": [
                " ".join([row["question"], *row["options"].values()]) for row in rows
            ],
            "answer": [row["answer"] for row in rows],
        }
        shares = {}
        for name, texts in queries.items():
            found = retriever.search(texts, k)
            hits = [
                any(row["answer"].lower() in hit.document.content.lower() for hit in hits)
                for row, hits in zip(rows, found, strict=True)
            ]
            shares[name] = sum(hits) / len(hits)
    return shares


def write(
    table: dict[str, dict[str, list[str]]],
    kinds: dict[str, tuple[str, str]],
    wordings: dict[str, list[str]],
    seed: int,
    paths: tuple[Path, Path],
) -> None:
    """Write the questions and the corpus of `table` to `paths` (questions, corpus) and print
    the recall shares of BM25's top `--k`."""
    parser = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or "").strip())
    parser.add_argument("--k", type=int, default=3, help="retrieval depth for the recall report")
    args = parser.parse_args()
    for kind, answers in table.items():
        for answer, findings in answers.items():
            missing = [finding for finding in findings if finding not in wordings]
            assert not missing, f"{kind}/{answer}: no wording for {missing}"
    rows = questions(random.Random(seed), table, kinds, wordings)
    passages = corpus(table, kinds, wordings)
    sample, textbook = paths
    sample.write_text("".join(json.dumps(row) + "\n" for row in rows))
    textbook.write_text("".join(json.dumps(passage) + "\n" for passage in passages))
    print(f"{sample.relative_to(ROOT)}: {len(rows)} questions")
    print(f"{textbook.relative_to(ROOT)}: {len(passages)} passages")
    for name, share in recall(rows, args.k, textbook).items():
        print(f"gold passage in BM25's top {args.k} with the {name} as the query: {share:.3f}")


def main() -> None:
    write(ANSWERS, KINDS, FINDINGS, SEED, (SAMPLE, CORPUS))


if __name__ == "__main__":
    main()
