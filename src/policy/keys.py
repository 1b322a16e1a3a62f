"""The policy role's keys (`policy.*`, conf/policy/): its prompts and, for the retrieval roles,
what is searched and read. Each key's type, range and choices, beside the code that reads it;
`src.runs.schema` assembles every folder's table and checks a composed config against them."""

from __future__ import annotations

from src.utils.setting import (
    ANY_TEXT,
    FLAG,
    MARK,
    OPTIONAL_TEMPLATE,
    OPTIONAL_TEXT,
    TEMPLATE,
    TEXT,
    AnyOf,
    Setting,
    choice,
    whole,
)

CHAT_TEMPLATE_CHOICES = (True, False, "auto")  # policy.use_chat_template
QUERY_SOURCES = ("rewriter", "question", "question_options", "expanded", "expanded_options")
ANSWER_MODES = ("likelihood", "generate")
ANSWER_FORMS = ("letter", "option")  # what the searcher's answer tag holds

# key -> what it may hold; what each means is said beside it in its config
SETTINGS: dict[str, Setting | AnyOf] = {
    # the policy role
    "policy.template": TEMPLATE,
    "policy.sft_target": Setting("template", blank=True),
    "policy.response_prefix": ANY_TEXT,
    "policy.plan_prefix": ANY_TEXT,
    "policy.plan_template": TEMPLATE,
    "policy.answer_template": TEMPLATE,
    "policy.reader_template": OPTIONAL_TEMPLATE,
    "policy.query_template": TEMPLATE,
    "policy.document_template": TEMPLATE,
    "policy.passage_template": TEMPLATE,
    "policy.planner.max_completion_length": whole(1),
    "policy.answerer.max_completion_length": whole(1),
    "policy.system_prompt": OPTIONAL_TEXT,
    "policy.use_chat_template": Setting("str", choices=CHAT_TEMPLATE_CHOICES),
    "policy.num_queries": whole(1),
    "policy.query_k": whole(1),
    "policy.k": whole(1),
    "policy.rank_depth": whole(1),
    "policy.max_searches": whole(0),
    "policy.information": TEMPLATE,
    "policy.search_question_first": FLAG,
    "policy.answer_as": choice(*ANSWER_FORMS),
    "policy.search_open": MARK,
    "policy.search_close": MARK,
    "policy.answer_open": MARK,
    "policy.answer_close": MARK,
    "policy.max_query_tokens": whole(1, nullable=True),
    "policy.query_source": choice(*QUERY_SOURCES),
    "policy.plan_cache_dir": TEXT,
    "policy.plan_model": TEXT,
    "policy.answer_mode": choice(*ANSWER_MODES),
    "policy.frozen_batch_size": whole(1),
    "policy.reader": Setting("config", nullable=True),
}
