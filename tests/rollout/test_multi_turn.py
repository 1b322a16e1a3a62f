"""The multi-turn rollout with a scripted turn sampler: where rows pause and end, what is
inserted and marked, the limits, and how the rows of a group part after their first search."""

from __future__ import annotations

import pytest
import torch

from src.rollout.multi_turn import MultiTurnSampler, Tags, query_of
from src.rollout.stops import first_mark
from tests.helpers.scripted_turns import ScriptedTurns

INFO = "\n<information>{text}</information>\n"


class Library:
    """A tool that answers query q with 'about q' in the information tags, and records the
    queries and the prompts they continue."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []
        self.prompts: list[list[str]] = []

    def __call__(self, queries: list[str], prompts: list[str]) -> list[str]:
        self.asked.append(list(queries))
        self.prompts.append(list(prompts))
        return [INFO.format(text=f"about {query}") for query in queries]


def script(context: str, row: int) -> str:
    """Row 0 of a group searches once then answers; row 1 answers at once; row 2 searches, then
    searches again, then answers; row 3 writes on past its budget. A later turn (one row at a
    time) knows its row by the turns before it, in its context."""
    if "<search>step" in context:
        searches = context.count("<information>")
        return f"<search>step {searches}</search>" if searches < 2 else "<answer>C</answer>$"
    if "<search> cause" in context:
        return " <answer>B</answer> more$"
    first = ["<search> cause </search> junk", "<answer>A</answer>$", "<search>step 0</search>"]
    return (first + ["x" * 500])[row]


def test_rows_pause_at_a_search_get_the_tools_text_and_end_at_their_answer(tiny_lm):
    turns, tool = ScriptedTurns(script, max_completion_length=70), Library()
    rollout = MultiTurnSampler(turns, tool, max_searches=2).sample(tiny_lm, ["Q?"], 4)
    texts = rollout.completions
    assert texts[0] == "<search> cause </search>" + INFO.format(text="about cause") + (
        " <answer>B</answer>"
    )  # paused at the closing tag (" junk" never written), ended at the answer (" more" cut)
    assert texts[1] == "<answer>A</answer>"
    assert texts[2] == (
        "<search>step 0</search>" + INFO.format(text="about step 0")
        + "<search>step 1</search>" + INFO.format(text="about step 1") + "<answer>C</answer>"
    )  # fmt: skip
    assert texts[3] == "x" * 70  # the budget: 70 written tokens
    assert rollout.is_clipped.tolist() == [False, False, False, True]
    assert tool.asked == [["cause", "step 0"], ["step 1"]]
    assert tool.prompts == [["Q?", "Q?"], ["Q?"]]  # each query's own prompt
    # every inserted token is marked and no other; the written ones stay within the budget
    tokenizer = tiny_lm.tokenizer
    for row in range(4):
        ids = rollout.completion_ids[row][rollout.completion_mask[row].bool()]
        marked = rollout.inserted_mask[row][rollout.completion_mask[row].bool()].bool()
        inserted = tokenizer.decode(ids[marked].tolist())
        wanted = {0: ["about cause"], 2: ["about step 0", "about step 1"]}.get(row, [])
        assert inserted == "".join(INFO.format(text=text) for text in wanted)
        assert rollout.action_mask[row].sum() <= 70


def test_the_group_reads_its_prompt_once_then_only_the_searching_rows_go_on(tiny_lm):
    turns, tool = ScriptedTurns(script, max_completion_length=60), Library()
    MultiTurnSampler(turns, tool, max_searches=2).sample(tiny_lm, ["Q?", "R?"], 4)
    assert tool.prompts[0] == ["Q?", "Q?", "R?", "R?"]  # rows 0 and 2 of each group search
    (first, g1, room1), (second, g2, _), (third, g3, _) = turns.calls
    assert len(first) == 2 and g1 == 4 and room1 == 60  # each prompt once, for its 4 rows
    assert g2 == g3 == 1 and len(second) == 4 and len(third) == 2  # rows 0 and 2 of each
    assert second[0].endswith(INFO.format(text="about cause"))
    assert second[1].endswith(INFO.format(text="about step 0"))  # the group parted
    for context in second:
        assert context.startswith("Q?") or context.startswith("R?")


def test_after_its_last_search_a_closing_tag_is_plain_text(tiny_lm):
    turns, tool = ScriptedTurns(script, max_completion_length=60), Library()
    rollout = MultiTurnSampler(turns, tool, max_searches=1).sample(tiny_lm, ["Q?"], 4)
    assert tool.asked == [["cause", "step 0"]]
    assert rollout.completions[2] == (
        "<search>step 0</search>" + INFO.format(text="about step 0") + "<search>step 1</search>"
    )  # no EOS and no answer: the turn ends with the text the script gave
    none = MultiTurnSampler(turns, tool, max_searches=0).sample(tiny_lm, ["Q?"], 4)
    assert none.inserted_mask.sum() == 0 and len(tool.asked) == 1


def test_a_search_that_spends_the_budget_ends_the_row_clipped(tiny_lm):
    turns, tool = ScriptedTurns(script, max_completion_length=24), Library()
    rollout = MultiTurnSampler(turns, tool).sample(tiny_lm, ["Q?"], 4)
    # row 0's query turn is 24 tokens, exactly the budget: searched, then nothing left
    assert rollout.completions[0] == "<search> cause </search>" + INFO.format(text="about cause")
    assert bool(rollout.is_clipped[0])
    assert tool.asked[0][0] == "cause"


def test_marks_and_queries_are_found_in_the_text():
    class Bytes:
        def decode(self, ids, skip_special_tokens=True):
            return bytes(ids).decode()

    ids = list(b"ab</search>cd")
    assert first_mark(Bytes(), ids, ["</search>", "</answer>"]) == (11, "</search>")
    assert first_mark(Bytes(), ids, ["</answer>"]) == (len(ids), None)
    assert query_of("think <search> a b </search>", Tags()) == "a b"
    assert query_of("no tag </search>", Tags()) == "no tag"


def test_without_searches_it_samples_what_the_turn_sampler_samples(tiny_lm):
    from src.rollout.hf import HFSampler

    turns = HFSampler(max_completion_length=8)
    torch.manual_seed(3)
    plain = turns.sample(tiny_lm, ["What is 1 + 2?", "Hi"], group_size=3)
    torch.manual_seed(3)
    multi = MultiTurnSampler(turns, Library(), max_searches=0).sample(
        tiny_lm, ["What is 1 + 2?", "Hi"], group_size=3
    )
    width = plain.completion_mask.sum(dim=1).max()
    assert torch.equal(multi.completion_mask, plain.completion_mask[:, :width])
    assert torch.equal(multi.completion_ids, plain.completion_ids[:, :width])
    assert torch.equal(multi.is_clipped, plain.is_clipped)
    assert multi.completions == plain.completions
    assert multi.inserted_mask.sum() == 0 and torch.equal(multi.prompt_ids, plain.prompt_ids)


def test_lengths_count_what_the_policy_wrote_and_the_searches_are_counted(tiny_lm):
    from src.grpo.metrics import RolloutRecord, rollout_metrics

    turns = ScriptedTurns(script, max_completion_length=70)
    rollout = MultiTurnSampler(turns, Library()).sample(tiny_lm, ["Q?"], 4)
    assert rollout.lengths.tolist() == [24 + 19, 18, 23 + 23 + 18, 70]  # no inserted token
    info = [len(INFO.format(text=t)) for t in ("about cause", "about step 0", "about step 1")]
    assert rollout.inserted_lengths.tolist() == [info[0], 0, info[1] + info[2], 0]
    assert rollout.insertions.tolist() == [1, 0, 2, 0]
    record = RolloutRecord(
        rewards=torch.tensor([1.0, 0.0, 1.0, 0.0]),
        lengths=rollout.lengths,
        clipped=rollout.is_clipped,
        parts={},
        errors={},
        details=[{}] * 4,
        inserted=rollout.inserted_lengths,
        searches=rollout.insertions,
    )
    metrics = rollout_metrics(record, group_size=4)
    assert metrics["searches/mean"] == 0.75 and metrics["searches/none_share"] == 0.5
    assert metrics["completions/mean_inserted_length"] == sum(info) / 4
    assert metrics["completions/mean_length"] == (43 + 18 + 64 + 70) / 4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_on_a_cuda_device_the_rollout_and_the_policys_log_probs_are_the_cpus(tiny_lm):
    """The turns are assembled, padded and marked on the network's device, and the log-probs of
    what the policy wrote, with the passages in context, are the CPU's."""
    from src.model.causal_lm import load_causal_lm
    from src.rollout.hf import HFSampler

    lm = load_causal_lm(tiny_lm.network.name_or_path)  # a private copy, moved to the GPU
    lm.network.to("cuda")

    def sampler():
        return MultiTurnSampler(ScriptedTurns(script, max_completion_length=70), Library())

    cpu = sampler().sample(tiny_lm, ["Q?", "R?"], 4)
    gpu = sampler().sample(lm, ["Q?", "R?"], 4)
    for field in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask"):
        assert getattr(gpu, field).device.type == "cuda"
        assert torch.equal(getattr(gpu, field).cpu(), getattr(cpu, field))
    assert torch.equal(gpu.inserted_mask.cpu(), cpu.inserted_mask) and cpu.inserted_mask.any()
    assert torch.equal(gpu.is_clipped.cpu(), cpu.is_clipped)
    assert gpu.completions == cpu.completions
    with torch.no_grad():
        on_cpu, on_gpu = tiny_lm.log_probs(cpu)[0], lm.log_probs(gpu)[0].cpu()
    written = cpu.action_mask.bool()
    assert torch.allclose(on_gpu[written], on_cpu[written], atol=1e-3)
    # the real turn sampler draws on the GPU too
    drawn = MultiTurnSampler(HFSampler(max_completion_length=8), Library()).sample(lm, ["Hi"], 3)
    assert drawn.completion_ids.device.type == "cuda" and drawn.completion_ids.shape[0] == 3


class Widths:
    """An `HFSampler` that records how many tokens each turn's decoding drew, and that can be
    told to ignore the rollout's stop (a turn then runs to its longest row's end)."""

    def __init__(self, ignore_stop: bool, **settings) -> None:
        from src.rollout.hf import HFSampler

        self.sampler = HFSampler(**settings)
        self.ignore_stop = ignore_stop
        self.temperature = self.sampler.temperature
        self.max_completion_length = self.sampler.max_completion_length
        self.stop_strings = self.sampler.stop_strings
        self.widths: list[int] = []

    def sync(self, lm) -> None:
        self.sampler.sync(lm)

    def new_tokens(self, lm, ids, mask, group_size, max_new_tokens, greedy=False, stop=None):
        stop = None if self.ignore_stop else stop
        drawn = self.sampler.new_tokens(lm, ids, mask, group_size, max_new_tokens, greedy, stop)
        self.widths.append(drawn.tokens.size(1))
        return drawn

    def new_tokens_after(self, lm, contexts, max_new_tokens, greedy=False, stop=None):
        stop = None if self.ignore_stop else stop
        drawn = self.sampler.new_tokens_after(lm, contexts, max_new_tokens, greedy, stop)
        self.widths.append(drawn.tokens.size(1))
        return drawn


def rollouts(tiny_lm, prompts, tags, max_searches, greedy, seed=0):
    """The same rollout with the turns' decoding stopped at each row's marks and without."""
    out = []
    for ignore in (False, True):
        turns = Widths(ignore, max_completion_length=40)
        torch.manual_seed(seed)
        sampler = MultiTurnSampler(turns, Library(), max_searches=max_searches, tags=tags)
        out.append((sampler.sample(tiny_lm, prompts, 4, greedy=greedy), turns.widths))
    return out


def same(a, b) -> bool:
    fields = ("completion_ids", "completion_mask", "inserted_mask", "is_clipped")
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields) and (
        a.completions == b.completions
    )


def test_a_turn_stops_decoding_once_every_row_has_paused_or_answered_with_the_same_rows(tiny_lm):
    """Greedy, the tiny model writes '????...' after 'Q?': every row pauses at the query's
    closing mark '??' after two tokens, so the first turn draws 2 tokens, not 40; the rows
    (searches, inserted text, what follows) are the same as when each turn runs to its end."""
    tags = Tags(search_close="??", answer_close="}}")
    (stopped, widths), (full, full_widths) = rollouts(tiny_lm, ["Q?"], tags, 1, greedy=True)
    assert widths[0] == 2 and full_widths[0] == 40
    assert stopped.insertions.tolist() == [1] * 4
    assert same(stopped, full)
    # sampled, one turn: rows end at a byte some of them draw; the others write on, the same
    tags = Tags(answer_close="K")
    (stopped, _), (full, _) = rollouts(tiny_lm, ["Q?", "R?"], tags, 0, greedy=False, seed=4)
    assert same(stopped, full)
    assert 0 < sum("K" in text for text in full.completions) < 8  # some rows ended at the mark


def test_one_line_end_closes_the_query_while_the_row_may_search_then_the_answer(tiny_lm):
    """The terms-first searcher's tags: a line's end closes both the query and the answer. It
    is the query's while a search is left (then the tool is called), the answer's after."""

    def lines(context: str, row: int) -> str:
        return " B\nmore" if "<information>" in context else " terms\nrest"

    tags = Tags(search_open="T:", search_close="\n", answer_close="\n")
    for searches, wanted, asked in (
        (1, [" terms\n" + INFO.format(text="about terms") + " B\n"], [["terms"]]),
        (0, [" terms\n"], []),
    ):
        tool = Library()
        turns = ScriptedTurns(lines, max_completion_length=30)
        sampler = MultiTurnSampler(turns, tool, max_searches=searches, tags=tags)
        rollout = sampler.sample(tiny_lm, ["Q?"], 1)
        assert rollout.completions == wanted and tool.asked == asked
        assert not rollout.is_clipped.any()


def test_a_query_that_runs_past_its_token_limit_is_searched_as_it_stands(tiny_lm):
    """`Tags.max_query_tokens` (a base model's terms line that never ends): the first 6 tokens
    are the query, its line's end is inserted before the passages (context, not an action),
    and the row answers after them; a query that ends within the limit, and an answer written
    after the last search, are not cut."""

    def lines(context: str, row: int) -> str:
        if "<information>" in context:
            return " the long answer line\n"
        return [" a b c d e f g\nrest", " ab\nrest"][row]

    tags = Tags(search_open="T:", search_close="\n", answer_close="\n", max_query_tokens=6)
    tool = Library()
    turns = ScriptedTurns(lines, max_completion_length=40)
    rollout = MultiTurnSampler(turns, tool, max_searches=1, tags=tags).sample(tiny_lm, ["Q?"], 2)
    assert tool.asked == [["a b c", "ab"]]
    assert rollout.completions == [
        " a b c" + "\n" + INFO.format(text="about a b c") + " the long answer line\n",
        " ab\n" + INFO.format(text="about ab") + " the long answer line\n",
    ]
    marked = rollout.inserted_mask[0][rollout.completion_mask[0].bool()].bool()
    ids = rollout.completion_ids[0][rollout.completion_mask[0].bool()]
    assert tiny_lm.tokenizer.decode(ids[marked].tolist()) == "\n" + INFO.format(text="about a b c")
    assert not rollout.is_clipped.any()


def test_the_query_limit_stops_the_turns_decoding_with_the_same_rows(tiny_lm):
    """Greedy, the tiny model writes '????...' and never a mark: with a 5-token query limit the
    first turn draws 5 tokens, not 40, and the rows are those of a turn drawn to its end and
    cut at the limit."""
    tags = Tags(search_close="}}", answer_close="{{", max_query_tokens=5)
    (stopped, widths), (full, full_widths) = rollouts(tiny_lm, ["Q?"], tags, 1, greedy=True)
    assert widths[0] == 5 and full_widths[0] == 40
    assert stopped.insertions.tolist() == [1] * 4
    assert same(stopped, full)


def test_the_rollout_reports_the_samplers_log_probs_of_what_the_policy_wrote(tiny_lm):
    """Across turns, each token the policy drew keeps the sampler's log-prob of it (in float32
    the trainer's, taken with the inserted passages in context) and each inserted token 0; a
    turn sampler that reports none (a script) leaves the rollout without them."""
    from src.rollout.hf import HFSampler

    tags = Tags(search_open="T:", search_close="\n", answer_close="</answer>", max_query_tokens=3)
    turns = HFSampler(max_completion_length=16, temperature=0.8)
    torch.manual_seed(0)
    rollout = MultiTurnSampler(turns, Library(), max_searches=1, tags=tags).sample(
        tiny_lm, ["Q?", "What?"], 2
    )
    assert rollout.inserted_mask.any()  # every row searched after 3 tokens
    with torch.no_grad():
        trained, _ = tiny_lm.log_probs(rollout, temperature=0.8)
    wrote = rollout.action_mask.bool()
    assert torch.allclose(rollout.sampler_logps[wrote], trained[wrote], atol=1e-4)
    assert rollout.sampler_logps[rollout.inserted_mask.bool()].eq(0).all()
    scripted = ScriptedTurns(script, max_completion_length=70)
    assert MultiTurnSampler(scripted, Library()).sample(tiny_lm, ["Q?"], 2).sampler_logps is None
