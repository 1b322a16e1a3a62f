"""Write the synthetic MedMCQA and MedQA sample files shipped in src/data/samples/.

The questions are generated from small tables of textbook facts written for this project;
they are synthetic (not rows of the real datasets) but follow the real schemas exactly, so the
loaders, rewards and the offline demo run on them. Run: `python scripts/make_mcq_samples.py`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "data" / "samples"

# (subject, topic, forward stem, reverse stem, explanation, facts as (key, answer))
TABLES = [
    (
        "Biochemistry",
        "Vitamins",
        "Deficiency of which vitamin causes {key}?",
        "Deficiency of {answer} causes which of the following?",
        "{answer_cap} deficiency causes {key}.",
        [
            ("scurvy", "vitamin C"),
            ("rickets", "vitamin D"),
            ("beriberi", "thiamine (vitamin B1)"),
            ("pellagra", "niacin (vitamin B3)"),
            ("night blindness", "vitamin A"),
            ("a bleeding tendency with prolonged prothrombin time", "vitamin K"),
            ("angular cheilitis and glossitis", "riboflavin (vitamin B2)"),
            ("subacute combined degeneration of the spinal cord", "vitamin B12"),
            ("neural tube defects in the fetus", "folic acid"),
            ("sideroblastic anemia", "pyridoxine (vitamin B6)"),
            ("hemolytic anemia in premature infants", "vitamin E"),
            ("dermatitis and alopecia after eating raw egg whites", "biotin"),
        ],
    ),
    (
        "Pharmacology",
        "Drug classes",
        "{key} belongs to which class of drugs?",
        "Which of the following drugs is a {answer}?",
        "{key_cap} is a {answer}.",
        [
            ("Metformin", "biguanide"),
            ("Atenolol", "selective beta-1 blocker"),
            ("Omeprazole", "proton pump inhibitor"),
            ("Lisinopril", "ACE inhibitor"),
            ("Losartan", "angiotensin II receptor blocker"),
            ("Furosemide", "loop diuretic"),
            ("Spironolactone", "aldosterone antagonist"),
            ("Warfarin", "vitamin K antagonist"),
            ("Simvastatin", "HMG-CoA reductase inhibitor"),
            ("Amlodipine", "calcium channel blocker"),
            ("Salbutamol", "short-acting beta-2 agonist"),
            ("Ondansetron", "5-HT3 antagonist"),
            ("Fluoxetine", "selective serotonin reuptake inhibitor"),
            ("Haloperidol", "typical antipsychotic"),
            ("Allopurinol", "xanthine oxidase inhibitor"),
            ("Ciprofloxacin", "fluoroquinolone"),
            ("Glibenclamide", "sulfonylurea"),
            ("Diazepam", "benzodiazepine"),
        ],
    ),
    (
        "Microbiology",
        "Bacteriology",
        "{key} is caused by which organism?",
        "{answer} causes which of the following diseases?",
        "{key_cap} is caused by {answer}.",
        [
            ("Cholera", "Vibrio cholerae"),
            ("Tuberculosis", "Mycobacterium tuberculosis"),
            ("Syphilis", "Treponema pallidum"),
            ("Tetanus", "Clostridium tetani"),
            ("Diphtheria", "Corynebacterium diphtheriae"),
            ("Whooping cough", "Bordetella pertussis"),
            ("Lyme disease", "Borrelia burgdorferi"),
            ("Typhoid fever", "Salmonella Typhi"),
            ("Plague", "Yersinia pestis"),
            ("Anthrax", "Bacillus anthracis"),
            ("Leprosy", "Mycobacterium leprae"),
            ("Gas gangrene", "Clostridium perfringens"),
            ("Weil disease", "Leptospira interrogans"),
            ("Epidemic typhus", "Rickettsia prowazekii"),
            ("Peptic ulcer disease", "Helicobacter pylori"),
        ],
    ),
    (
        "Anatomy",
        "Upper and lower limb",
        "Injury to which nerve causes {key}?",
        "Injury to the {answer} causes which of the following?",
        "The {answer} supplies the muscles whose loss produces {key}.",
        [
            ("wrist drop", "radial nerve"),
            ("claw hand", "ulnar nerve"),
            ("ape thumb deformity", "median nerve"),
            ("winged scapula", "long thoracic nerve"),
            ("foot drop", "common peroneal nerve"),
            ("loss of shoulder abduction beyond 15 degrees", "axillary nerve"),
            ("weak elbow flexion and loss of the biceps reflex", "musculocutaneous nerve"),
            ("loss of knee extension", "femoral nerve"),
            ("weak thigh adduction", "obturator nerve"),
            ("loss of plantar flexion of the foot", "tibial nerve"),
            ("paralysis of the hemidiaphragm", "phrenic nerve"),
            ("Trendelenburg gait", "superior gluteal nerve"),
        ],
    ),
    (
        "Physiology",
        "Endocrine",
        "{key} is secreted by which of the following?",
        "Which hormone is secreted by the {answer}?",
        "{key_cap} is secreted by the {answer}.",
        [
            ("Insulin", "beta cells of the pancreatic islets"),
            ("Glucagon", "alpha cells of the pancreatic islets"),
            ("Cortisol", "zona fasciculata of the adrenal cortex"),
            ("Aldosterone", "zona glomerulosa of the adrenal cortex"),
            ("Parathyroid hormone", "chief cells of the parathyroid gland"),
            ("Calcitonin", "parafollicular C cells of the thyroid"),
            ("Melatonin", "pineal gland"),
            ("Renin", "juxtaglomerular cells of the kidney"),
            ("Epinephrine", "adrenal medulla"),
            ("Prolactin", "lactotrophs of the anterior pituitary"),
            ("Somatostatin", "delta cells of the pancreatic islets"),
            ("Testosterone", "Leydig cells of the testis"),
        ],
    ),
    (
        "Pathology",
        "Inclusion bodies",
        "{key} are characteristic of which condition?",
        "Which finding is characteristic of {answer}?",
        "{key_cap} are the hallmark finding of {answer}.",
        [
            ("Reed-Sternberg cells", "Hodgkin lymphoma"),
            ("Aschoff bodies", "rheumatic carditis"),
            ("Negri bodies", "rabies"),
            ("Mallory-Denk bodies", "alcoholic hepatitis"),
            ("Lewy bodies", "Parkinson disease"),
            ("Psammoma bodies", "papillary thyroid carcinoma"),
            ("Auer rods", "acute myeloid leukemia"),
            ("Councilman bodies", "yellow fever"),
            ("Call-Exner bodies", "granulosa cell tumor"),
            ("Heinz bodies", "G6PD deficiency"),
            ("Howell-Jolly bodies", "asplenia"),
            ("Owl's eye inclusions", "cytomegalovirus infection"),
            ("Michaelis-Gutmann bodies", "malakoplakia"),
            ("Pick bodies", "frontotemporal dementia"),
        ],
    ),
    (
        "Biochemistry",
        "Inborn errors of metabolism",
        "{key} is caused by deficiency of which enzyme?",
        "Deficiency of {answer} causes which disease?",
        "{key_cap} results from deficiency of {answer}.",
        [
            ("Tay-Sachs disease", "hexosaminidase A"),
            ("Gaucher disease", "glucocerebrosidase"),
            ("Niemann-Pick disease", "sphingomyelinase"),
            ("Phenylketonuria", "phenylalanine hydroxylase"),
            ("Alkaptonuria", "homogentisate oxidase"),
            ("Von Gierke disease", "glucose-6-phosphatase"),
            ("Fabry disease", "alpha-galactosidase A"),
            ("Metachromatic leukodystrophy", "arylsulfatase A"),
            ("Lesch-Nyhan syndrome", "HGPRT"),
            ("Pompe disease", "lysosomal acid alpha-glucosidase"),
            ("McArdle disease", "muscle glycogen phosphorylase"),
            ("Krabbe disease", "galactocerebrosidase"),
            ("Hurler syndrome", "alpha-L-iduronidase"),
            ("Maple syrup urine disease", "branched-chain alpha-ketoacid dehydrogenase"),
        ],
    ),
    (
        "Forensic Medicine",
        "Toxicology",
        "What is the antidote for {key} poisoning?",
        "{answer_cap} is the antidote for which poisoning?",
        "{answer_cap} is the specific antidote for {key} poisoning.",
        [
            ("paracetamol", "N-acetylcysteine"),
            ("opioid", "naloxone"),
            ("benzodiazepine", "flumazenil"),
            ("heparin", "protamine sulfate"),
            ("methanol", "fomepizole"),
            ("cyanide", "hydroxocobalamin"),
            ("iron", "deferoxamine"),
            ("digoxin", "digoxin-specific antibody fragments"),
            ("organophosphate", "atropine"),
            ("beta-blocker", "glucagon"),
            ("nitrite-induced methemoglobinemia", "methylene blue"),
            ("tricyclic antidepressant", "sodium bicarbonate"),
            ("lead", "succimer"),
            ("carbon monoxide", "100% oxygen"),
        ],
    ),
    (
        "Anatomy",
        "Cranial nerves",
        "Which cranial nerve is responsible for {key}?",
        "The {answer} is responsible for which function?",
        "{key_cap} is the function of the {answer}.",
        [
            ("the sense of smell", "olfactory nerve (CN I)"),
            ("vision", "optic nerve (CN II)"),
            ("constriction of the pupil", "oculomotor nerve (CN III)"),
            ("movement of the superior oblique muscle", "trochlear nerve (CN IV)"),
            ("the muscles of mastication", "trigeminal nerve (CN V)"),
            ("abduction of the eye", "abducens nerve (CN VI)"),
            ("the muscles of facial expression", "facial nerve (CN VII)"),
            ("hearing and balance", "vestibulocochlear nerve (CN VIII)"),
            ("taste from the posterior third of the tongue", "glossopharyngeal nerve (CN IX)"),
            ("parasympathetic supply to the heart", "vagus nerve (CN X)"),
            ("shrugging the shoulders", "accessory nerve (CN XI)"),
            ("movements of the tongue", "hypoglossal nerve (CN XII)"),
        ],
    ),
]

PEOPLE = ["man", "woman", "boy", "girl"]


def cap(text: str) -> str:
    return text[0].upper() + text[1:]


def facts():
    """Every (table, key, answer, distractor pool) pair, forward and reverse."""
    for subject, topic, forward, reverse, explain, rows in TABLES:
        keys = [k for k, _ in rows]
        answers = [a for _, a in rows]
        for key, answer in rows:
            words = {"key": key, "answer": answer, "key_cap": cap(key), "answer_cap": cap(answer)}
            exp = explain.format(**words)
            yield subject, topic, forward.format(**words), answer, answers, exp, key
            yield (
                subject,
                topic,
                reverse.format(**words),
                cap(key),
                [cap(k) for k in keys],
                exp,
                key,
            )


def options_for(rng: random.Random, answer: str, pool: list[str]) -> tuple[list[str], int]:
    others = rng.sample([p for p in pool if p != answer], 3)
    index = rng.randrange(4)
    return others[:index] + [answer] + others[index:], index


def medmcqa(rng: random.Random) -> list[dict]:
    rows = []
    for number, (subject, topic, question, answer, pool, exp, _) in enumerate(facts()):
        options, cop = options_for(rng, answer, pool)
        rows.append(
            {
                "id": f"synthetic-medmcqa-{number:04d}",
                "question": question,
                "opa": options[0],
                "opb": options[1],
                "opc": options[2],
                "opd": options[3],
                "cop": cop,
                "choice_type": "single",
                "exp": exp,
                "subject_name": subject,
                "topic_name": topic,
            }
        )
    rng.shuffle(rows)
    return rows


VIGNETTES = {
    "Vitamins": "A {age}-year-old {person} with a poor diet is found to have {key}. "
    "Deficiency of which of the following is the most likely cause?",
    "Bacteriology": "A {age}-year-old {person} is diagnosed with {key_low}. "
    "Which of the following organisms is the most likely cause?",
    "Toxicology": "A {age}-year-old {person} is brought to the emergency department after "
    "{key} poisoning. Which of the following is the most appropriate antidote?",
    "Upper and lower limb": "A {age}-year-old {person} has {key} after an injury. "
    "Which of the following nerves is most likely damaged?",
    "Inborn errors of metabolism": "A {age}-year-old {person} is diagnosed with {key}. "
    "Deficiency of which of the following enzymes is responsible?",
    "Drug classes": "A {age}-year-old {person} is started on {key_low}. "
    "To which of the following classes does this drug belong?",
}


def medqa(rng: random.Random) -> list[dict]:
    rows = []
    for _subject, topic, _, _, _, table in TABLES:
        if topic not in VIGNETTES:
            continue
        answers = [a for _, a in table]
        for key, answer in table:
            for _ in range(2):
                words = {
                    "age": rng.randint(18, 75),
                    "person": rng.choice(PEOPLE[:2]),
                    "key": key,
                    "key_low": key[0].lower() + key[1:],
                }
                options, index = options_for(rng, cap(answer), [cap(a) for a in answers])
                letters = "ABCD"
                rows.append(
                    {
                        "question": VIGNETTES[topic].format(**words),
                        "answer": options[index],
                        "options": dict(zip(letters, options, strict=True)),
                        "meta_info": "step1",
                        "answer_idx": letters[index],
                    }
                )
    rng.shuffle(rows)
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "medmcqa_sample.jsonl", medmcqa(random.Random(0)))
    write_jsonl(OUT / "medqa_sample.jsonl", medqa(random.Random(1)))
