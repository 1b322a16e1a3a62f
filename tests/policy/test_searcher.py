"""The searcher role: what it reads from a multi-turn completion, its settings' errors, and how
a run samples it (the multi-turn rollout around the configured sampler)."""

from __future__ import annotations

import contextlib

import pytest

from src.policy.generator import Generator
from src.policy.rewriter import option_probability
from src.policy.searcher import Searcher
from src.retrieval.corpus import Document
from src.retrieval.hit import Hit
from src.rollout.hf import HFSampler
from src.rollout.multi_turn import MultiTurnSampler
from src.runs.parts import role_sampler
from src.utils.errors import ConfigError

DOCS = {
    "vitamin c": Document("d1", "vitamin C", "Scurvy: perifollicular hemorrhage."),
    "rickets": Document("d2", "vitamin D", "Rickets: bowed legs."),
}


class Shelf:
    """Finds the document whose key the query holds."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.asked.append(list(queries))
        return [[Hit(d, 1.0) for key, d in DOCS.items() if key in q.lower()][:k] for q in queries]


ROW = {"question": "Bleeding gums?", "options_text": "A. x\nB. y", "answer": "B"}
ROW = {**ROW, "answer_text": "vitamin C"}


def test_the_outcome_is_the_last_answers_letter_and_the_searches_are_counted():
    role = Searcher(retriever=Shelf(), k=1)
    info = role.settings.information
    read = info.format(text="[1] vitamin C: Scurvy: perifollicular hemorrhage.")
    searched = f"I should look. <search>vitamin C deficiency</search>{read}<answer>B</answer>"
    misled = (
        "<search>rickets</search>"
        + info.format(text="[1] vitamin D: Rickets.")
        + ("<answer>maybe A</answer> then <answer>(C)</answer>")
    )
    outcomes = role.outcomes([searched, misled, "B", "<answer>B"], [ROW] * 4)
    assert outcomes.texts == ["B", "C", "", ""]  # no closed answer tag: no answer
    assert [d["searches"] for d in outcomes.details] == [1.0, 1.0, 0.0, 0.0]
    assert [d["searched"] for d in outcomes.details] == [1.0, 1.0, 0.0, 0.0]
    assert outcomes.details[0]["queries"] == ["vitamin C deficiency"]
    assert [d["gold_in_information"] for d in outcomes.details] == [1.0, 0.0, 0.0, 0.0]
    assert [d["gold_reciprocal_rank"] for d in outcomes.details] == [0.0] * 4  # never searched
    # a letter inside the passages is not the policy's answer
    planted = "<search>q</search>" + info.format(text="<answer>A</answer>")
    assert role.outcomes([planted], [ROW]).texts == [""]


class InOrder(Shelf):
    """Finds the documents whose keys the query holds, in the order the query names them."""

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.asked.append(list(queries))
        at = [
            {q.lower().find(key): d for key, d in DOCS.items() if key in q.lower()} for q in queries
        ]
        return [[Hit(found[i], 1.0) for i in sorted(found)][:k] for found in at]


def test_the_gold_passages_reciprocal_rank_is_the_best_over_the_searches_read():
    role = Searcher(retriever=InOrder(), k=2, max_searches=2)
    tool = role.search_tool()
    texts = tool(["rickets then vitamin c", "vitamin c", "rickets"], [""] * 3)  # as inserted
    second = f"<search>rickets then vitamin c</search>{texts[0]}<answer>x</answer>"
    both = second.replace("<answer>", f"<search>vitamin c</search>{texts[1]}<answer>")
    missed = f"<search>rickets</search>{texts[2]}<answer>x</answer>"
    details = role.outcomes([second, both, missed], [ROW] * 3).details
    assert [d["gold_reciprocal_rank"] for d in details] == [0.5, 1.0, 0.0]
    assert [d["gold_in_information"] for d in details] == [1.0, 1.0, 0.0]


def test_each_turn_shows_what_was_written_its_query_and_the_ids_it_read():
    role = Searcher(retriever=Shelf(), k=2, max_searches=2)
    tool = role.search_tool()
    texts = tool(["vitamin C deficiency", "rickets"], ["", ""])
    completion = (
        f"vitamin C deficiency</search>{texts[0]}"
        f"Not sure. <search>rickets</search>{texts[1]}<answer>B</answer>"
    )
    role.response_prefix = "<search>"
    (detail,) = role.outcomes([completion], [ROW]).details
    assert detail["turns"] == [
        {
            "wrote": "<search>vitamin C deficiency</search>",
            "query": "vitamin C deficiency",
            "passages": ["d1"],
        },
        {"wrote": "Not sure. <search>rickets</search>", "query": "rickets", "passages": ["d2"]},
        {"wrote": "<answer>B</answer>"},
    ]
    unasked = (
        "<search>scurvy</search>" + role.settings.information.format(text="") + "<answer>A</answer>"
    )
    role.response_prefix = ""
    (detail,) = role.outcomes([unasked], [ROW]).details
    assert detail["turns"][0] == {
        "wrote": "<search>scurvy</search>",
        "query": "scurvy",
        "passages": None,
    }  # a query the tool never answered
    assert [
        t["wrote"] for t in role.outcomes(["<answer>A</answer>"], [ROW]).details[0]["turns"]
    ] == ["<answer>A</answer>"]


def test_the_queries_are_what_the_sampler_searched():
    """A turn that opens two search tags searched the text after the last one (`query_of`);
    `queries` reports that query, and a closing tag with no passages after it searched nothing."""
    role = Searcher(retriever=Shelf(), k=1)
    info = role.settings.information
    completion = (
        f"<search>scurvy <search>vitamin C</search>{info.format(text='')}"
        "<answer>A</answer> and </search>"
    )
    (detail,) = role.outcomes([completion], [ROW]).details
    assert detail["queries"] == ["vitamin C"]
    assert detail["turns"][0]["query"] == "vitamin C"


def test_an_answer_by_option_text_names_its_option_and_a_bare_letter_names_none():
    role = Searcher(retriever=Shelf(), answer_as="option")
    options = {"A": "vitamin B", "B": "vitamin B12", "C": "iron", "D": "Iron deficiency"}
    said = ["<answer>Vitamin  B12</answer>", "<answer>it is iron</answer>", "<answer>B</answer>"]
    rows = [{**ROW, "options": options}] * 4
    texts = role.outcomes([*said, "<answer>vitamin B</answer>"], rows).texts
    assert texts == ["B", "C", "", "A"]  # the longest option named; a letter alone is no option
    assert role.outcomes(["<answer>iron deficiency</answer>"], rows[:1]).texts == ["D"]
    assert Searcher(retriever=Shelf()).outcomes(said[2:], rows[:1]).texts == ["B"]  # letters


def test_an_answer_that_lists_several_options_names_none():
    role = Searcher(retriever=Shelf(), answer_as="option")
    options = {"A": "vitamin B", "B": "vitamin B12", "C": "iron", "D": "folate"}
    rows = [{**ROW, "options": options}] * 4
    said = [
        "<answer>iron, folate</answer>",  # a list of options answers nothing
        "<answer>vitamin B12 or iron</answer>",
        "<answer>vitamin B12, not vitamin B</answer>",  # 'vitamin B' is part of 'vitamin B12'
        "<answer>folate</answer>",
    ]
    assert role.outcomes(said, rows).texts == ["", "", "B", "D"]
    twins = {"A": "iron", "B": "Iron", "C": "zinc", "D": "folate"}  # one text under two letters
    assert role.outcomes(["<answer>iron</answer>"], [{**ROW, "options": twins}]).texts == [""]


def test_the_tool_forgets_the_oldest_queries_past_its_memory():
    role = Searcher(retriever=Shelf(), k=1)
    tool = role.tool
    tool.remembered = 2
    role.search_tool()(["rickets", "vitamin c", "rickets again"], [""] * 3)
    assert tool.ids_of("rickets") is None
    assert (tool.ids_of("vitamin c"), tool.ids_of("rickets again")) == (["d1"], ["d2"])


def test_the_tool_inserts_the_top_passages_and_a_blank_query_finds_nothing():
    shelf = Shelf()
    role = Searcher(retriever=shelf, k=2)
    info = role.settings.information.format
    assert role.search_tool()(["Rickets in a child", "  "], ["", ""]) == [
        info(text="[1] vitamin D: Rickets: bowed legs."),
        info(text=""),
    ]
    assert shelf.asked == [["Rickets in a child"]]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"k": 0}, "policy.k must be a whole number >= 1"),
        ({"max_searches": -1}, "policy.max_searches must be a whole number >= 0"),
        ({"information": "<information></information>"}, "policy.information must hold {text}"),
        ({"search_close": ""}, "policy.search_close must be a non-empty text"),
        ({"answer_as": "text"}, "policy.answer_as must be one of"),
        ({"reader_template": "Answer:"}, "policy.reader_template must hold {passages}"),
        ({"frozen_batch_size": 0}, "policy.frozen_batch_size must be a whole number >= 1"),
        ({"max_query_tokens": 0}, "policy.max_query_tokens must be a whole number >= 1 or null"),
    ],
)
def test_bad_settings_are_named(setting, message):
    with pytest.raises(ConfigError, match=message):
        Searcher(retriever=Shelf(), **setting)


def test_a_run_samples_a_searcher_in_turns_and_refuses_a_sampler_without_turns():
    role = Searcher(retriever=Shelf(), max_searches=3)
    turns = HFSampler(max_completion_length=16)
    sampler = role_sampler(role, turns)
    assert isinstance(sampler, MultiTurnSampler)
    assert sampler.turns is turns and sampler.max_searches == 3 and sampler.tags == role.tags
    assert sampler.max_completion_length == 16 and sampler.temperature == turns.temperature

    class WholeCompletions:  # what vLLM's sampler offers: no tokens after token prompts
        temperature = 1.0
        max_completion_length = 16

        def sample(self, lm, prompts, group_size, greedy=False): ...

        def sync(self, lm): ...

    with pytest.raises(ConfigError, match="WholeCompletions cannot sample.*use rollout=hf"):
        role_sampler(role, WholeCompletions())
    assert role_sampler(Generator(), turns) is turns  # other roles: the sampler as configured


def test_plain_rag_searches_the_question_first_as_if_the_policy_had():
    shelf = Shelf()
    role = Searcher(
        retriever=shelf, k=1, max_searches=0, search_question_first=True, response_prefix="<answer>"
    )
    row = {**ROW, "question": "Vitamin C and bleeding gums?"}
    role.prepare(None, [row])
    role.prepare(None, [row])  # once per row
    assert shelf.asked == [["Vitamin C and bleeding gums?"]]
    (prompt,) = role.prompts([row])
    passages = "[1] vitamin C: Scurvy: perifollicular hemorrhage."
    assert prompt.endswith(
        "<search>Vitamin C and bleeding gums?</search>"
        + role.settings.information.format(text=passages)
        + "<answer>"
    )  # the response prefix after the search
    outcome = role.outcomes(["B</answer>"], [row])
    assert outcome.texts == ["B"] and outcome.details[0]["gold_in_information"] == 1.0
    assert outcome.details[0]["gold_reciprocal_rank"] == 1.0  # the question's search counts
    assert Searcher(retriever=shelf).prepare(None, [dict(ROW)]) == {}  # nothing by default
    assert len(shelf.asked) == 1


def test_the_findings_query_experiment_searches_the_findings_and_options_and_names_no_query(
    make_cfg,
):
    base = make_cfg("task=medqa_searcher_smollm2", tiny=False)
    cfg = make_cfg("experiment=searcher_findings_query", tiny=False)
    assert cfg.task_name == "medqa_searcher" and cfg.data.shuffle_options
    assert cfg.policy.answer_as == "option" and cfg.algo.max_completion_length == 96
    assert "<search>your query</search>" in base.policy.template
    (turn,) = cfg.policy.examples
    for prompt in (cfg.policy.template, turn.user):
        assert "between <search> and </search>" in prompt and "your query" not in prompt
    query = turn.assistant.split("<search>")[1].split("</search>")[0]
    options = [line[3:] for line in turn.user.splitlines() if line[1:3] == ". "]
    assert options and all(option in query for option in options)  # the options are searched
    assert "swollen ankles" in query  # and the question's findings before them
    answer = turn.assistant.split("<answer>")[1].split("</answer>")[0]
    assert answer in options and not turn.assistant.split("[1] ")[1].startswith(answer)


def test_the_gold_rank_reward_reads_the_searchers_detail(make_cfg):
    cfg = make_cfg("experiment=searcher_gemma_base", "reward=[accuracy,gold_rank]", tiny=False)
    assert cfg.task_name == "medqa_searcher" and not cfg.policy.use_chat_template
    functions = cfg.reward.functions
    assert sorted(functions) == ["accuracy", "gold_rank"]
    assert functions.gold_rank.key == "gold_reciprocal_rank"  # a detail the searcher reports


def test_the_terms_variant_changes_only_the_worked_searches(make_cfg):
    base = make_cfg("experiment=searcher_gemma_base", tiny=False)
    terms = make_cfg("experiment=searcher_gemma_terms", tiny=False)
    assert "<search>peripheral edema, orthopnea, asthma" in terms.policy.template
    assert terms.policy.template.endswith(base.policy.template[-40:])  # the question as before
    assert terms.algo.optimizer.lr == base.algo.optimizer.lr and terms.model == base.model


def test_a_response_prefix_that_starts_the_query_is_not_searched_as_the_sampler_does_not():
    role = Searcher(retriever=Shelf(), k=1, response_prefix="<search>Textbook terms:")
    (text,) = role.search_tool()(["vitamin C"], [""])  # the sampler searched the completion's
    completion = " vitamin C</search>" + text + "<answer>x</answer>"
    (detail,) = role.outcomes([completion], [ROW]).details
    assert detail["queries"] == ["vitamin C"] and detail["turns"][0]["passages"] == ["d1"]
    assert detail["gold_reciprocal_rank"] == 1.0


def test_a_search_can_expand_the_query_with_the_question_and_show_the_options_after_it():
    """`query_template` and `information` read the fields of the row whose prompt the search
    continues: the question is searched before the policy's terms, the options come after the
    passages, and the outcome reads the same searched query and inserted text back."""
    shelf = Shelf()
    role = Searcher(
        retriever=shelf,
        k=1,
        max_searches=1,
        template="Q: {question}\nTerms:",
        search_open="Terms:",
        search_close="\n",
        answer_open="Answer:",
        answer_close="\n",
        answer_as="option",
        query_template="{question} {query}",
        information="Passage: {text}\nOptions:\n{options_text}\n",
    )
    row = {**ROW, "question": "Bleeding gums, which vitamin?", "options": {"A": "x", "B": "y"}}
    (prompt,) = role.prompts([row])
    assert "A. x" not in prompt  # the search is written before the options are shown
    (inserted,) = role.search_tool()(["vitamin C"], [prompt])  # as query_of trims it
    assert shelf.asked == [["Bleeding gums, which vitamin? vitamin C"]]
    assert (
        inserted
        == "Passage: [1] vitamin C: Scurvy: perifollicular hemorrhage.\nOptions:\nA. x\nB. y\n"
    )
    (outcome,) = role.outcomes([" vitamin C\n" + inserted + "Answer: y\n"], [row]).details
    assert outcome["queries"] == ["Bleeding gums, which vitamin? vitamin C"]
    assert outcome["turns"][0]["passages"] == ["d1"] and outcome["gold_in_information"] == 1.0
    assert outcome["gold_reciprocal_rank"] == 1.0
    assert role.outcomes([" vitamin C\n" + inserted + "Answer: y\n"], [row]).texts == ["B"]
    with pytest.raises(ConfigError, match="policy.query_template uses field 'question'"):
        role.search_tool()(["vitamin C"], ["a prompt the role never made"])


def test_a_query_template_without_the_query_is_named():
    with pytest.raises(ConfigError, match="policy.query_template must hold {query}"):
        Searcher(retriever=Shelf(), query_template="{question}")


def test_the_terms_first_experiment_writes_its_search_before_the_options_in_every_head(make_cfg):
    cfg = make_cfg("experiment=searcher_gemma_terms_first", tiny=False)
    policy, heads = cfg.policy, cfg.eval.policy_overrides
    question = policy.template.rsplit("\n\n", 1)[1]
    assert question == "Question: {question}\nTextbook terms:" == question.replace("{options", "")
    assert "{options_text}" in policy.information and policy.query_template.startswith("{question}")
    worked = policy.template.split("\n\n")[:-1]
    assert worked and all(ex.split("\n")[1].startswith(policy.search_open) for ex in worked)
    assert all(ex.split("\n")[-1].startswith(policy.answer_open) for ex in worked)
    assert heads.no_retrieval.template.endswith("Options:\n{options_text}\n")
    rag = Searcher(
        retriever=Shelf(),
        k=1,
        template=policy.template,
        information=policy.information,
        search_close=policy.search_close,
        **heads.rag,
    )
    row = {**ROW, "question_passages": "[1] vitamin C: Scurvy."}
    (prompt,) = rag.prompts([row])
    assert prompt == policy.template.format(question="Bleeding gums?") + (
        " Bleeding gums?\nPassage: [1] vitamin C: Scurvy.\nOptions:\nA. x\nB. y\nAnswer:"
    )  # the question as the terms line after the same worked examples, then the answer
    assert cfg.reward.functions.gold_rank.key == "gold_reciprocal_rank"
    assert policy.rank_depth > cfg.retrieval.k == 1  # the rank is read deeper than the passage


def test_a_deeper_rank_places_the_gold_passage_the_search_did_not_insert():
    shelf = InOrder()
    role = Searcher(retriever=shelf, k=1, max_searches=1, rank_depth=2)
    (inserted,) = role.search_tool()(["rickets then vitamin c"], [""])
    assert "vitamin C" not in inserted and role.tool.ids_of("rickets then vitamin c") == ["d2"]
    completion = f"<search>rickets then vitamin c</search>{inserted}<answer>x</answer>"
    (detail,) = role.outcomes([completion], [ROW]).details
    assert detail["gold_reciprocal_rank"] == 0.5 and detail["gold_in_information"] == 0.0
    assert Searcher(retriever=shelf, k=1).tool.depth == 1  # by default: the passages read
    with pytest.raises(ConfigError, match="policy.rank_depth must be a whole number >= 1"):
        Searcher(retriever=shelf, rank_depth=-1)


class ReadsScurvy:
    """A frozen reader that prefers option B after a context naming scurvy and option A
    otherwise; it keeps what it was asked and whether the adapter was off."""

    def __init__(self) -> None:
        self.contexts: list[str] = []
        self.continuations: list[list[str]] = []
        self.adapter_on = True

    def continuation_scores(self, contexts, continuations):
        assert not self.adapter_on  # the base reads, not the policy
        self.contexts += contexts
        self.continuations += continuations
        return [
            [float(i == ("Scurvy" in c)) for i in range(len(o))]
            for c, o in zip(contexts, continuations, strict=True)
        ]

    @contextlib.contextmanager
    def adapter_disabled(self):
        self.adapter_on = False
        yield
        self.adapter_on = True


def test_a_frozen_reader_scores_the_gold_option_after_the_last_passages_read():
    role = Searcher(
        retriever=Shelf(), k=1, max_searches=2, reader_template="{passages}\nQ: {question}\nA:"
    )
    options = {"A": "vitamin D", "B": "vitamin C", "C": "iron", "D": "zinc"}
    row = {**ROW, "options": options}  # gold B: vitamin C
    (scurvy,) = role.search_tool()(["vitamin c"], [""])
    (rickets,) = role.search_tool()(["rickets"], [""])
    found = f"<search>vitamin c</search>{scurvy}<answer>vitamin C</answer>"
    misled = (
        f"<search>vitamin c</search>{scurvy}<search>rickets</search>{rickets}<answer>x</answer>"
    )
    reader = ReadsScurvy()
    details = role.outcomes([found, misled, "<answer>B</answer>"], [row] * 3, reader).details
    assert [d["gold_probability"] for d in details] == pytest.approx(
        [option_probability([0, 1, 0, 0], 1), option_probability([1, 0, 0, 0], 1), 0.0]
    )  # the last search's passages are read; no search, nothing read: 0
    assert reader.contexts == [
        "[1] vitamin C: Scurvy: perifollicular hemorrhage.\nQ: Bleeding gums?\nA:",
        "[1] vitamin D: Rickets: bowed legs.\nQ: Bleeding gums?\nA:",
    ]
    assert reader.continuations[0] == [" vitamin D", " vitamin C", " iron", " zinc"]
    assert reader.adapter_on  # on again after
    no_gold = {**row, "answer": ""}
    assert role.outcomes([found], [no_gold], reader).details[0]["gold_probability"] == 0.0
    assert "gold_probability" not in Searcher(retriever=Shelf()).outcomes([found], [row]).details[0]


def test_the_reader_scored_experiment_is_the_terms_first_one_with_a_frozen_readers_term(make_cfg):
    first = make_cfg("experiment=searcher_gemma_terms_first", tiny=False)
    scored = make_cfg("experiment=searcher_gemma_reader_scored", tiny=False)
    assert scored.policy.template == first.policy.template  # the same prompt and search
    assert scored.policy.information == first.policy.information
    assert first.policy.reader_template is None and "{passages}" in scored.policy.reader_template
    assert list(scored.reward.functions) == ["accuracy", "gold_probability", "gold_rank"]
    assert scored.reward.functions.gold_probability.key == "gold_probability"
    assert scored.algo.multi_objective_aggregation == "normalize_then_sum"  # each term in its group
    role = Searcher(retriever=Shelf(), k=1, reader_template=scored.policy.reader_template)
    options = {"A": "vitamin D", "B": "vitamin C", "C": "iron", "D": "zinc"}
    reader = ReadsScurvy()
    (scurvy,) = role.search_tool()(["vitamin c"], [""])
    found = f"<search>vitamin c</search>{scurvy}<answer>vitamin C</answer>"
    role.outcomes([found], [{**ROW, "options": options}], reader)
    assert reader.contexts == [
        "Use the textbook passage to answer the question.\n\n[1] vitamin C: Scurvy: perifollicular"
        " hemorrhage.\n\nQuestion: Bleeding gums?\nAnswer:"
    ]


def test_an_oracle_row_reads_its_gold_passage_whatever_it_searched_and_the_search_is_ranked():
    """A training draw marked `oracle` (data.oracle_share) reads the passage titled with its gold
    answer in place of what the query found; the query is still searched and ranked, so
    `gold_rank` pays the search; unmarked rows read what they found."""
    shelf = Shelf()
    role = Searcher(retriever=shelf, k=1, max_searches=1, rank_depth=5)
    row = {**ROW, "options": {"A": "vitamin D", "B": "vitamin C"}}
    oracle, plain = {**row, "oracle": True}, {**row, "question": "Bowed legs?", "oracle": False}
    prompts = role.prompts([oracle, plain])
    read = role.search_tool()(["rickets", "rickets"], prompts)
    assert (
        read[0]
        == "\n<information>[1] vitamin C: Scurvy: perifollicular hemorrhage.</information>\n"
    )
    assert read[1] == "\n<information>[1] vitamin D: Rickets: bowed legs.</information>\n"
    assert ["rickets", "rickets"] in shelf.asked  # the query was searched all the same
    completions = [f"<search>rickets</search>{text}<answer>B</answer>" for text in read]
    details = role.outcomes(completions, [oracle, plain]).details
    assert [d["oracle"] for d in details] == [1.0, 0.0]
    assert [d["gold_in_information"] for d in details] == [1.0, 0.0]
    assert [d["gold_reciprocal_rank"] for d in details] == [0.0, 0.0]  # rickets never ranks it
    assert "oracle" not in role.outcomes(completions[:1], [row]).details[0]  # no share, no key


def test_an_oracle_row_without_a_passage_holding_its_answer_reads_what_it_found():
    role = Searcher(retriever=Shelf(), k=1, max_searches=1)
    row = {**ROW, "answer_text": "zinc", "oracle": True}
    (prompt,) = role.prompts([row])
    (read,) = role.search_tool()(["rickets"], [prompt])
    assert "vitamin D: Rickets" in read


def test_an_oracle_row_reading_k_passages_reads_its_gold_one_among_what_it_found():
    """With `k` over 1 an oracle row reads as many passages as a searched one: its gold passage
    among the query's other hits (RAFT's distractors), at a place the query fixes, so copying
    the first passage's title is not always right."""
    role = Searcher(retriever=Shelf(), k=2, max_searches=1)
    row = {**ROW, "oracle": True}  # gold: vitamin C; the queries find vitamin D (rickets)
    (prompt,) = role.prompts([row])
    queries = [f"rickets {word}" for word in ("legs", "bones", "child", "bowed", "soft", "x")]
    read = role.search_tool()(queries + queries[:1], [prompt] * 7)
    for text in read:
        assert text.count("vitamin C: Scurvy") == 1 and text.count("vitamin D: Rickets") == 1
    assert read[-1] == read[0]  # the same query reads the same passages in the same order
    first = {text.split("[1] ")[1].split(":")[0] for text in read}
    assert first == {"vitamin C", "vitamin D"}  # the gold passage is not always on top


def test_the_oracle_read_experiment_is_the_reader_scored_one_searching_terms_alone(make_cfg):
    scored = make_cfg("experiment=searcher_gemma_reader_scored", tiny=False)
    oracle = make_cfg("experiment=searcher_gemma_oracle_read", tiny=False)
    assert oracle.policy.template == scored.policy.template
    assert oracle.policy.reader_template == scored.policy.reader_template
    assert list(oracle.reward.functions) == list(scored.reward.functions)
    assert scored.data.oracle_share == 0.0 and oracle.data.oracle_share == 0.5
    assert oracle.policy.query_template == "{query}"  # the terms alone decide the passage


def test_an_empty_completion_searched_nothing_and_answered_nothing():
    """A completion that ended at once (EOS first) has no turns: no search, no answer."""
    role = Searcher(retriever=Shelf(), k=1, max_searches=1)
    outcomes = role.outcomes([""], [ROW])
    assert outcomes.texts == [""]
    assert outcomes.details[0]["turns"] == [] and outcomes.details[0]["searches"] == 0.0


def test_whether_an_answer_names_an_option_is_a_detail_the_reward_can_pay():
    role = Searcher(retriever=Shelf(), answer_as="option")
    options = {"A": "46,XY,del(5p)", "B": "47,XXY", "C": "47,XX,+13", "D": "47,XX,+21"}
    said = ["<answer>47,XXY</answer>", "<answer>45,X</answer>", "no answer at all"]
    details = role.outcomes(said, [{**ROW, "options": options}] * 3).details
    assert [detail["named_option"] for detail in details] == [1.0, 0.0, 0.0]


def test_the_named_option_term_joins_the_oracle_read_experiments_reward(make_cfg):
    cfg = make_cfg(
        "experiment=searcher_gemma_oracle_read",
        "reward=[accuracy,gold_probability,gold_rank,named_option]",
        tiny=False,
    )
    assert list(cfg.reward.functions) == [
        "accuracy",
        "gold_probability",
        "gold_rank",
        "named_option",
    ]
    assert cfg.reward.functions.named_option.key == "named_option"
    assert cfg.reward.weights.named_option == 0.25
