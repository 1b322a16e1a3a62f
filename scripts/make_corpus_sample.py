"""Write the sample retrieval corpus shipped as src/retrieval/samples/medical_textbook.jsonl.

A small medical textbook written for this project from the fact tables that generate the
MedQA/MedMCQA sample questions (scripts/make_mcq_samples.py), so that retrieval-augmented
recipes run offline on questions whose answers the corpus holds. For every fact:

- `fact-<table>-<n>`: one passage titled by the key that states the fact in two or three
  sentences, with the answer spelled exactly as in the table and the relation word of its
  table (deficiency, class, organism, nerve, secreted, hallmark, enzyme, antidote);
- `other-<table>-<n>`: five passages on the same key (risk, course, management, ...) that
  contain neither the answer nor the relation word, and a few general passages per table.

So a query made of the key alone may fetch a passage without the answer, while the key with
the relation word fetches the fact. Deterministic: run `python scripts/make_corpus_sample.py`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "retrieval" / "samples" / "medical_textbook.jsonl"


def _sibling(name: str) -> ModuleType:
    """A script of this folder as a module, whether this one runs as a script or is imported."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLES = _sibling("make_mcq_samples").TABLES

# Words that keep their capital inside a sentence (eponyms and proper names).
PROPER = (
    "Lyme",
    "Weil",
    "Tay-Sachs",
    "Gaucher",
    "Niemann-Pick",
    "Von Gierke",
    "Fabry",
    "Lesch-Nyhan",
    "Pompe",
    "McArdle",
    "Krabbe",
    "Hurler",
    "Trendelenburg",
    "Reed-Sternberg",
    "Aschoff",
    "Negri",
    "Mallory-Denk",
    "Lewy",
    "Councilman",
    "Call-Exner",
    "Heinz",
    "Howell-Jolly",
    "Michaelis-Gutmann",
    "Pick",
    "Auer",
)

# Per table (by topic): the slug used in ids, the relation word of its fact passages, the title
# of a fact passage, the fact passage, three (title, text) passages on the same key without the
# answer or the relation word, and general passages on the subject.
# Placeholders: {Key} the key at the start of a sentence, {key} inside one, {answer} as written.
BOOK: dict[str, dict] = {
    "Vitamins": {
        "slug": "vitamins",
        "relation": "deficiency",
        "title": "{Key}",
        "fact": (
            "Deficiency of {answer} causes {key}. Finding {key} therefore prompts a review of "
            "the diet and of the absorption of {answer}, and an adequate supply of {answer} "
            "corrects or prevents this deficiency."
        ),
        "others": [
            (
                "{Key}: who is at risk",
                "The risk of {key} is highest in people with a poor diet, chronic alcohol use, "
                "malabsorption, or increased needs such as pregnancy, lactation and rapid "
                "growth. Screening such groups allows earlier treatment.",
            ),
            (
                "{Key}: clinical picture",
                "The clinical picture of {key} develops gradually and may be missed at first. "
                "Examination looks "
                "for its typical signs together with other features of poor nutrition, such as "
                "weight loss, fatigue and poor wound healing.",
            ),
            (
                "{Key}: investigations and follow-up",
                "Blood tests, and imaging where relevant, help to confirm {key} and to rule out "
                "other explanations. Once treatment starts, patients with {key} are reviewed to "
                "make sure the findings resolve and that the diet has improved.",
            ),
            (
                "{Key}: differential diagnosis",
                "Other conditions can look like {key}, including inherited disorders, drug "
                "effects and chronic disease of the liver, kidney or gut. The most likely "
                "explanation is found by combining the diet history with the examination and "
                "the laboratory results.",
            ),
            (
                "{Key}: prevention in the community",
                "Public health programmes reduce {key} by improving the diet of groups at risk, "
                "fortifying staple foods and teaching families about balanced meals. Such "
                "measures cost less than treating {key} once it is found.",
            ),
        ],
        "general": [
            (
                "Vitamins: an overview",
                "Vitamins are organic compounds that the body needs in small amounts and cannot "
                "make in sufficient quantity, so they must come from the diet. They are grouped "
                "into fat-soluble vitamins, stored in the liver and fatty tissue, and "
                "water-soluble vitamins, most of which are stored only briefly.",
            ),
            (
                "Nutritional assessment",
                "A nutritional assessment combines a diet history, body measurements, a search "
                "for signs of malnutrition and selected blood tests. It identifies people whose "
                "intake is poor before complications appear.",
            ),
            (
                "Micronutrient supplements",
                "Supplements are useful when the diet cannot meet needs, as in pregnancy, "
                "malabsorption or restrictive diets. Large doses of some fat-soluble vitamins "
                "are toxic, so a supplement should match a documented need.",
            ),
        ],
    },
    "Drug classes": {
        "slug": "drug-classes",
        "relation": "class",
        "title": "{Key}",
        "fact": (
            "{Key} belongs to the drug class of the {answer}s. Knowing this class predicts "
            "the main actions, adverse effects and interactions of {key}, which it shares with "
            "the other members of the class."
        ),
        "others": [
            (
                "{Key}: dosing and administration",
                "{Key} is started at a low dose and adjusted to the response and to kidney and "
                "liver function. Patients are told how and when to take {key}, and what to do "
                "if a dose is missed.",
            ),
            (
                "{Key}: adverse effects and monitoring",
                "Like any medicine, {key} can cause unwanted effects, and some of them are found "
                "only by blood tests or regular review. Patients taking {key} should report new "
                "symptoms promptly.",
            ),
            (
                "{Key}: interactions and precautions",
                "Before prescribing {key}, the prescriber reviews the other medicines the patient "
                "takes, as well as pregnancy, breastfeeding and allergies. Older adults and "
                "people with organ impairment may need a smaller dose of {key}.",
            ),
            (
                "{Key}: patient counselling",
                "When a patient is started on {key}, the prescriber explains what the drug is "
                "for, how long it takes to work and which warning signs need attention. Written "
                "information helps patients to take {key} as intended.",
            ),
            (
                "{Key}: overdose and stopping treatment",
                "An overdose of {key} is managed with supportive care, with advice from a poison "
                "centre. Stopping {key} abruptly causes problems with some medicines, so the "
                "dose may need to be reduced gradually.",
            ),
        ],
        "general": [
            (
                "Grouping drugs",
                "Drugs are grouped by mechanism of action, chemical structure or therapeutic use. "
                "Members of one group often share a suffix in their generic names, which helps "
                "students remember them.",
            ),
            (
                "Pharmacokinetics",
                "Pharmacokinetics describes what the body does to a drug: absorption, "
                "distribution, metabolism and excretion. The half-life determines how often a "
                "drug must be given to keep a steady level in the blood.",
            ),
            (
                "Adverse drug reactions",
                "Adverse drug reactions range from predictable, dose-related effects to rare "
                "allergic and idiosyncratic reactions. Reporting suspected reactions helps "
                "regulators detect problems that trials were too small to reveal.",
            ),
        ],
    },
    "Bacteriology": {
        "slug": "bacteriology",
        "relation": "organism",
        "title": "{Key}",
        "fact": (
            "{Key} is caused by {answer}. This bacterium is the causative organism of {key}, "
            "and finding it in clinical specimens supports the diagnosis and guides the choice "
            "of antibiotics."
        ),
        "others": [
            (
                "{Key}: transmission and epidemiology",
                "Public health services record every case of {key} to detect outbreaks early and "
                "to protect contacts. The burden of {key} is greatest where housing, sanitation, "
                "vaccination or access to care are poor.",
            ),
            (
                "{Key}: clinical course",
                "The course of {key} depends on the route and dose of exposure and on the "
                "patient's immunity. Without timely treatment {key} can lead to serious "
                "complications, and some patients need hospital care.",
            ),
            (
                "{Key}: diagnosis and management",
                "{Key} is diagnosed from the history, the examination and laboratory "
                "confirmation by microscopy, culture, serology or molecular tests. Management "
                "combines antimicrobial therapy with supportive care and follow-up.",
            ),
            (
                "{Key}: prevention",
                "{Key} is prevented by measures that interrupt its spread, such as clean water, "
                "safe food, protective clothing, vaccination where a vaccine exists, and prompt "
                "treatment of contacts.",
            ),
            (
                "{Key}: notification and outcome",
                "A patient diagnosed with {key} is most likely to recover fully when treatment "
                "starts early. Notifying the case to the public health authorities is a legal "
                "duty in many countries.",
            ),
        ],
        "general": [
            (
                "The Gram stain",
                "The Gram stain divides most bacteria into Gram-positive organisms, which keep "
                "crystal violet, and Gram-negative organisms, which do not. It is often the "
                "first laboratory step in finding the cause of an infection.",
            ),
            (
                "Koch's postulates",
                "Koch's postulates set out how to show that a microbe causes a disease: it is "
                "found in every case, grown in pure culture, reproduces the disease in a host "
                "and is recovered again. Many infections do not meet them all.",
            ),
            (
                "Antibiotic stewardship",
                "Antibiotic stewardship means choosing the right drug, dose and duration and "
                "stopping treatment that is not needed. It slows the spread of resistant "
                "bacteria in hospitals and in the community.",
            ),
        ],
    },
    "Upper and lower limb": {
        "slug": "limb-nerves",
        "relation": "nerve",
        "title": "{Key}",
        "fact": (
            "{Key} results from injury to the {answer}. The {answer} supplies the muscles whose "
            "loss produces {key}, so this sign points the examiner to that nerve."
        ),
        "others": [
            (
                "{Key}: bedside examination",
                "To assess {key}, the examiner compares both sides, watches the patient move "
                "against gravity and then against resistance, and grades power on the usual "
                "scale from 0 to 5. Photographs or video help to follow {key} over time.",
            ),
            (
                "{Key}: rehabilitation",
                "Physiotherapy for {key} keeps the joints supple while strength returns, and a "
                "splint or brace may hold the limb in a useful position. Recovery from {key} "
                "after an injury can take months, and progress is reviewed at regular visits.",
            ),
            (
                "{Key}: other explanations",
                "Not every case of {key} has the same origin: muscle disease, a stroke, a spinal "
                "cord lesion or a joint problem can give a similar picture. A careful history "
                "and examination separate these possibilities.",
            ),
            (
                "{Key}: tendon transfer and splints",
                "When {key} does not improve after an injury, surgical exploration, tendon "
                "transfer or a permanent splint may be considered. The choice depends on the "
                "time since the injury and on the patient's work and hobbies.",
            ),
            (
                "{Key}: daily life",
                "{Key} makes everyday tasks harder, and occupational therapists teach ways "
                "around it, such as adapted tools and modified movements. Most patients with "
                "{key} return to work once they have learned them.",
            ),
        ],
        "general": [
            (
                "Grading peripheral nerve injuries",
                "Peripheral nerve injuries are graded as neurapraxia, a block of conduction, "
                "axonotmesis, a loss of axons within an intact sheath, and neurotmesis, a "
                "complete division. Recovery is fastest after neurapraxia.",
            ),
            (
                "The brachial plexus",
                "The brachial plexus is formed by the anterior rami of C5 to T1 and supplies the "
                "upper limb. Its roots, trunks, divisions, cords and branches are a favourite "
                "topic of anatomy examinations.",
            ),
            (
                "The lumbosacral plexus",
                "The lumbar and sacral plexuses supply the muscles and skin of the lower limb. "
                "Lesions of the plexus itself are rarer than injuries of its terminal branches "
                "around the hip, knee and ankle.",
            ),
        ],
    },
    "Endocrine": {
        "slug": "endocrine",
        "relation": "secreted",
        "title": "{Key}",
        "fact": (
            "{Key} is secreted by the {answer}. Its release from the {answer} is regulated by "
            "feedback, and disease there raises or lowers the level of {key} in the blood."
        ),
        "others": [
            (
                "{Key}: actions on target tissues",
                "{Key} acts on its target tissues through specific receptors, and its effects "
                "help to keep the internal environment stable. Too much or too little {key} "
                "produces recognisable clinical syndromes.",
            ),
            (
                "{Key}: laboratory measurement",
                "The level of {key} is measured in blood, and sometimes in urine or saliva, by "
                "immunoassay. Samples are timed with care because the concentration of {key} "
                "varies with the time of day, posture, meals and stress.",
            ),
            (
                "{Key}: daily rhythm and regulation",
                "The daily pattern of {key} reflects sleep, meals, stress and feedback from the "
                "substances it controls. Drugs and illness can shift this pattern, which matters "
                "when results are interpreted.",
            ),
            (
                "{Key}: changes with age",
                "The level of {key} changes over the course of life, from childhood through "
                "puberty and pregnancy to old age. Reference ranges for {key} therefore depend "
                "on age and sex.",
            ),
            (
                "{Key}: drugs that alter it",
                "Many drugs change the level or the action of {key}, some on purpose and some as "
                "an unwanted effect. A medication history is part of interpreting any abnormal "
                "result for {key}.",
            ),
        ],
        "general": [
            (
                "Hormones and feedback",
                "Most hormones are controlled by negative feedback: a rising level of the hormone "
                "or of the substance it regulates reduces further release. Positive feedback is "
                "rare, the surge before ovulation being the classic example.",
            ),
            (
                "Peptide and steroid hormones",
                "Peptide hormones dissolve in plasma and act on receptors at the cell surface, "
                "while steroid hormones travel bound to proteins and act on receptors inside the "
                "cell. The difference explains their speed and duration of action.",
            ),
            (
                "Testing endocrine function",
                "Endocrine function is tested by measuring a hormone together with the signal "
                "that controls it, and by stimulation or suppression tests when a single value "
                "is not conclusive.",
            ),
        ],
    },
    "Inclusion bodies": {
        "slug": "inclusion-bodies",
        "relation": "hallmark",
        "title": "{Key}",
        "fact": (
            "{Key} are the hallmark finding of {answer}. A pathologist who sees {key} in a "
            "specimen considers {answer} first, because they are characteristic of that "
            "condition."
        ),
        "others": [
            (
                "{Key}: appearance under the microscope",
                "{Key} are recognised by their size, shape and staining in routine sections, and "
                "special stains or immunohistochemistry may help. Describing {key} precisely "
                "avoids confusion with artefacts.",
            ),
            (
                "{Key}: the term and its use",
                "The term {key} has been used by pathologists for many decades and appears in "
                "reports and textbooks of histopathology. Students learn to recognise {key} from "
                "teaching slides.",
            ),
            (
                "{Key}: pitfalls in interpretation",
                "Structures that resemble {key} can appear in other settings, so the finding is "
                "always read together with the clinical history and the rest of the specimen. A "
                "second opinion helps when {key} are scanty.",
            ),
            (
                "{Key}: electron microscopy",
                "Electron microscopy has been used to study the fine structure of {key}, but it "
                "is rarely needed to identify them in routine diagnostic work.",
            ),
            (
                "{Key}: in examinations",
                "{Key} are a favourite subject of examination questions in pathology, often shown "
                "as a photograph beside a short clinical history.",
            ),
        ],
        "general": [
            (
                "Inclusion bodies in diagnosis",
                "Inclusion bodies are aggregates of protein, pigment or viral material inside "
                "cells. Seen in the right clinical setting, some of them point strongly to a "
                "single diagnosis.",
            ),
            (
                "Histological stains",
                "Haematoxylin stains nuclei blue and eosin stains cytoplasm pink; special stains "
                "such as periodic acid-Schiff, Prussian blue and Ziehl-Neelsen reveal "
                "carbohydrates, iron and acid-fast bacilli.",
            ),
            (
                "Cytology and biopsy",
                "Cytology examines loose cells from fluids or fine-needle aspirates, while a "
                "biopsy preserves the architecture of the tissue. Each answers different "
                "questions and they are often combined.",
            ),
        ],
    },
    "Inborn errors of metabolism": {
        "slug": "inborn-errors",
        "relation": "enzyme",
        "title": "{Key}",
        "fact": (
            "{Key} results from deficiency of the enzyme {answer}. Without enough {answer} "
            "activity the pathway this enzyme serves is blocked, and an enzyme assay or genetic "
            "testing confirms the diagnosis."
        ),
        "others": [
            (
                "{Key}: inheritance and screening",
                "{Key} is an inherited disorder, and families with an affected child are offered "
                "genetic counselling. Some countries include {key} in newborn or carrier "
                "screening programmes.",
            ),
            (
                "{Key}: clinical presentation",
                "The age at onset and the severity of {key} vary between patients, from infancy "
                "to adult life. In a child diagnosed with {key}, growth, development, the "
                "nervous system and the internal organs are examined and followed over time.",
            ),
            (
                "{Key}: treatment and outlook",
                "Treatment of {key} depends on the organs involved and may include diet, "
                "replacement therapy, transplantation or supportive care. Specialist centres "
                "coordinate the long-term care of people with {key}.",
            ),
            (
                "{Key}: laboratory diagnosis",
                "{Key} is diagnosed from the clinical picture, metabolite levels in blood or "
                "urine and molecular genetic testing. Prenatal diagnosis is possible once the "
                "family's variant is known.",
            ),
            (
                "{Key}: living with the condition",
                "Families of children with {key} benefit from patient organisations, specialist "
                "nurses and coordinated schooling. Adults with {key} need a planned move from "
                "paediatric to adult services.",
            ),
        ],
        "general": [
            (
                "Inborn errors of metabolism: an overview",
                "Inborn errors of metabolism are inherited disorders in which a blocked pathway "
                "lets a substrate accumulate or a product run short. Most are individually rare "
                "but together they are a common cause of illness in childhood.",
            ),
            (
                "Lysosomal storage disorders",
                "In lysosomal storage disorders, undegraded material builds up inside lysosomes "
                "and enlarges cells of the liver, spleen, bone marrow or brain. Many of them "
                "share features such as organ enlargement and developmental regression.",
            ),
            (
                "Newborn screening",
                "Newborn screening tests a few drops of blood from a heel prick for treatable "
                "disorders before symptoms appear. A positive screen is always followed by "
                "confirmatory testing.",
            ),
        ],
    },
    "Toxicology": {
        "slug": "toxicology",
        "relation": "antidote",
        "title": "{Key} poisoning",
        "fact": (
            "The specific antidote for {key} poisoning is {answer}. It is given as soon as "
            "{key} poisoning is recognised, alongside supportive care, and the response is "
            "watched closely."
        ),
        "others": [
            (
                "{Key} poisoning: how it happens",
                "{Key} poisoning may be accidental, occupational or deliberate, and young "
                "children are at particular risk at home. Poison control centres give advice on "
                "{key} exposures by telephone.",
            ),
            (
                "{Key} poisoning: clinical features",
                "The features of {key} poisoning depend on the dose, the route and the time "
                "since exposure, and early on the patient may look well. Vital signs, mental "
                "state and the timing of the exposure are recorded on arrival.",
            ),
            (
                "{Key} poisoning: assessment in the emergency department",
                "The first steps in {key} poisoning are securing the airway, breathing and "
                "circulation, and asking about other substances taken. Blood tests, an ECG and "
                "observation decide whether the patient can go home or needs admission.",
            ),
            (
                "{Key} poisoning: investigations",
                "Investigations in {key} poisoning include blood gases, electrolytes, kidney and "
                "liver function, and a blood level where one can be measured. Repeating them "
                "shows whether the patient is improving.",
            ),
            (
                "{Key} poisoning: prevention",
                "Most {key} poisoning is preventable: safe storage, child-resistant packaging, "
                "clear labels and safety at work all reduce it. Patients brought to hospital "
                "after deliberate self-poisoning are offered a mental health assessment.",
            ),
        ],
        "general": [
            (
                "General management of poisoning",
                "Most poisoned patients recover with supportive care alone: a secure airway, "
                "adequate breathing and circulation, and treatment of seizures and abnormal "
                "temperature. Specific treatment is added once the substance is known.",
            ),
            (
                "Toxidromes",
                "A toxidrome is a cluster of signs that suggests a group of poisons, such as the "
                "anticholinergic, cholinergic, sympathomimetic and sedative-hypnotic syndromes. "
                "Recognising one narrows the search when the history is unclear.",
            ),
            (
                "Gut decontamination",
                "Activated charcoal binds many drugs in the gut and is most useful within an "
                "hour of ingestion in a patient who can protect the airway. It does not bind "
                "metals, alcohols or corrosives.",
            ),
        ],
    },
    "Cranial nerves": {
        "slug": "cranial-nerves",
        "relation": "nerve",
        "title": "{Key}",
        "fact": (
            "The {answer} is responsible for {key}. Damage to this cranial nerve weakens or "
            "abolishes that function on the affected side, so testing {key} examines the "
            "{answer}."
        ),
        "others": [
            (
                "{Key}: clinical testing",
                "Testing {key} is part of the neurological examination: the examiner compares "
                "the two sides and notes any asymmetry. Simple tools such as a torch, a tuning "
                "fork or test substances are enough at the bedside.",
            ),
            (
                "{Key}: development and anatomy",
                "The pathways serving {key} are laid down early in embryonic life, and their "
                "course through the head and neck is taught in every anatomy course.",
            ),
            (
                "{Key}: disorders",
                "Disorders of {key} may follow trauma, tumours, infection, stroke or surgery, and "
                "some recover with time. Imaging of the brain and skull base is often needed to "
                "find the lesion.",
            ),
            (
                "{Key}: changes with age",
                "Like other functions of the nervous system, {key} can decline with age, and "
                "the change is usually gradual and symmetrical. A sudden or one-sided change "
                "in {key} needs investigation.",
            ),
            (
                "{Key}: assessment in children",
                "In young children, {key} is assessed through play and observation rather than "
                "formal commands. Problems found early are referred for specialist assessment.",
            ),
        ],
        "general": [
            (
                "The cranial nerves: an overview",
                "Twelve pairs of cranial nerves leave the brain and brainstem and are numbered "
                "from front to back. Some are purely sensory, some purely motor and some mixed, "
                "and several carry parasympathetic fibres.",
            ),
            (
                "Examining the cranial nerves",
                "A screening examination of the cranial nerves takes a few minutes: smell, "
                "visual acuity and fields, pupils, eye movements, facial sensation and movement, "
                "hearing, palate, shoulder shrug and tongue.",
            ),
            (
                "Brainstem lesions",
                "A lesion of the brainstem often affects a cranial nerve on one side and the "
                "long tracts to the limbs on the other, a crossed pattern that localises it.",
            ),
        ],
    },
}


def _inside(key: str) -> str:
    """The key as written inside a sentence: lower-case first letter unless it is a name."""
    if key.startswith(PROPER):
        return key
    return key[0].lower() + key[1:]


def _fill(template: str, key: str, answer: str) -> str:
    text = template.format(Key=key[0].upper() + key[1:], key=_inside(key), answer=answer)
    return re.sub(r"\s+", " ", text).strip()


def passages() -> list[dict[str, str]]:
    """Every passage of the sample textbook, in a fixed order: per table, its facts, then the
    passages on the same keys, then its general passages."""
    rows: list[dict[str, str]] = []
    for _subject, topic, _forward, _reverse, _explain, facts in TABLES:
        book = BOOK[topic]
        slug = book["slug"]
        others: list[tuple[str, str]] = []
        for number, (key, answer) in enumerate(facts):
            rows.append(
                {
                    "id": f"fact-{slug}-{number}",
                    "title": _fill(book["title"], key, answer),
                    "content": _fill(book["fact"], key, answer),
                }
            )
            for title, text in book["others"]:
                others.append((_fill(title, key, answer), _fill(text, key, answer)))
                _check_other(others[-1], answer, book["relation"])
        for title, text in book["general"]:
            for _key, answer in facts:
                _check_other((title, text), answer, None)
            others.append((title, text))
        rows += [
            {"id": f"other-{slug}-{number}", "title": title, "content": text}
            for number, (title, text) in enumerate(others)
        ]
    titles = [row["title"] for row in rows]
    assert len(set(titles)) == len(titles), "every passage needs a title of its own"
    return rows


def _check_other(passage: tuple[str, str], answer: str, relation: str | None) -> None:
    """A passage other than the fact must not give the answer (or the relation word) away."""
    text = " ".join(passage).lower()
    assert answer.lower() not in text, (passage, answer)
    if relation is not None:
        assert not re.search(rf"\b{relation}", text), (passage, relation)


def render() -> str:
    """The JSONL text of the sample corpus."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in passages())


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render(), encoding="utf-8")
    print(f"{OUT}: {len(passages())} passages")
