"""The BM25 index on a hand-made corpus: ranking, batching, unknown words, saving and loading."""

from __future__ import annotations

from src.retrieval.bm25 import BM25Index
from src.retrieval.corpus import Document
from tests.helpers.declared import refusal

CORPUS = [
    Document("cholera", "Cholera", "Cholera is caused by Vibrio cholerae from contaminated water."),
    Document("anthrax", "Anthrax", "Anthrax is caused by Bacillus anthracis, a spore former."),
    Document("tetanus", "Tetanus", "Tetanus follows a wound contaminated with soil."),
    Document("scurvy", "Scurvy", "Scurvy is a deficiency of vitamin C with bleeding gums."),
    Document("rickets", "Bones in children", "Soft bones in children: rickets, from vitamin D."),
]


def built(**settings: float) -> BM25Index:
    index = BM25Index(**settings)
    index.build(CORPUS)
    return index


def test_the_matching_document_ranks_first_and_titles_count():
    index = built()
    assert index.search(["what causes anthrax"], k=3)[0][0].document.id == "anthrax"
    # "rickets" is in the content of one document only; "children" only in its title and content
    assert index.search(["children"], k=3)[0][0].document.id == "rickets"


def test_batched_queries_get_one_ranked_list_each():
    results = built().search(["vitamin C bleeding", "contaminated water", "soil wound"], k=2)
    assert [r[0].document.id for r in results] == ["scurvy", "cholera", "tetanus"]
    for hits in results:
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # "contaminated" is in two documents: both are hits, the one matching "water" too first
    assert [h.document.id for h in results[1]] == ["cholera", "tetanus"]


def test_queries_with_no_known_word_get_no_hits():
    results = built().search(["xylophone quasar", "the of and", "", "scurvy"], k=3)
    assert results[:3] == [[], [], []]
    assert [h.document.id for h in results[3]] == ["scurvy"]  # only documents sharing a word


def test_k_larger_than_the_corpus_is_capped():
    hits = built().search(["vitamin bones bleeding cholera anthrax tetanus soil"], k=50)[0]
    assert len(hits) == len(CORPUS)
    assert len({h.document.id for h in hits}) == len(CORPUS)


def test_saved_and_loaded_index_gives_the_same_hits(tmp_path):
    index = built(k1=1.2, b=0.5)
    index.save(tmp_path)
    loaded = BM25Index(k1=1.2, b=0.5)
    loaded.load(tmp_path, CORPUS)
    queries = ["caused by water", "vitamin"]
    assert loaded.search(queries, k=3) == index.search(queries, k=3)


def test_k1_and_b_change_the_scores():
    query = ["contaminated water cholera"]
    assert built(k1=1.5, b=0.75).search(query, 2) != built(k1=0.5, b=0.0).search(query, 2)


def test_a_repeated_query_term_scores_once_by_default():
    once = built()
    repeated = once.search(["contaminated water water water water"], k=2)[0]
    plain = once.search(["contaminated water"], k=2)[0]
    assert [(h.document.id, h.score) for h in repeated] == [(h.document.id, h.score) for h in plain]


def test_counting_repeats_lets_a_padded_term_outrank_the_better_match():
    # "soil" and "wound" both match tetanus; "contaminated" alone matches cholera and tetanus.
    # Repeating "contaminated" adds nothing once-scored; counted, each repeat adds its score again.
    query = ["contaminated " * 6 + "water"]
    once = built().search(query, k=2)[0]
    counted = built(repeated_terms="count").search(query, k=2)[0]
    assert once[0].document.id == counted[0].document.id == "cholera"
    assert counted[0].score > 5 * once[0].score / 2  # six times the shared word, not once
    assert once[0].score == built().search(["contaminated water"], k=1)[0][0].score


def test_the_query_terms_a_search_scores():
    assert built().query_terms("Enzyme, enzyme ENZYME of the liver") == ["enzyme", "liver"]
    counted = built(repeated_terms="count").query_terms("enzyme enzyme of the liver")
    assert counted == ["enzyme", "enzyme", "liver"]


def test_an_unknown_repeated_terms_setting_is_refused_in_one_line():

    assert "retrieval.bm25.repeated_terms must be one of once, count, got 'twice'" in refusal(
        {"retrieval.bm25.repeated_terms": "twice"}
    )
