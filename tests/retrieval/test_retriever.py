"""IndexedRetriever: lazy building, the on-disk cache and its key, errors, and the configs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.model.offline import in_hub_cache
from src.retrieval.corpus import SAMPLE_CORPUS
from src.retrieval.retriever import IndexedRetriever, Retriever
from src.utils.compose import compose_config
from src.utils.config import build
from src.utils.errors import ConfigError, MissingFileError
from tests.helpers.declared import refusal

ROWS = [
    {"id": "cholera", "title": "Cholera", "content": "Cholera is caused by Vibrio cholerae."},
    {"id": "anthrax", "title": "Anthrax", "content": "Anthrax is caused by Bacillus anthracis."},
    {"id": "tetanus", "title": "Tetanus", "content": "Tetanus follows a wound with soil."},
]


def compose_retrieval(name: str, cache: Path, group: str = "retrieval"):
    """The `retrieval` node of the train config with `retrieval=<name>` (or the group's former
    name, `retriever=<name>`) and its cache in `cache`."""
    return compose_config([f"{group}={name}", f"paths.cache_dir={cache}"]).retrieval


@pytest.mark.parametrize("name", ["bm25", "minilm", "medcpt"])
def test_the_groups_former_name_chooses_the_same_retriever(name, tmp_path):
    assert compose_retrieval(name, tmp_path, "retriever") == compose_retrieval(name, tmp_path)


def corpus(folder: Path, rows: list[dict] = ROWS) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def retriever(path: str, cache: Path, **bm25: float) -> IndexedRetriever:
    return IndexedRetriever(corpus=path, backend="bm25", k=2, cache_dir=str(cache), bm25=bm25)


def test_a_second_retriever_loads_the_cached_index_and_builds_nothing(tmp_path, caplog):
    path, cache = corpus(tmp_path / "c"), tmp_path / "cache"
    first = retriever(path, cache)
    assert first.builds == 0 and not cache.exists()  # nothing happens before the first search
    with caplog.at_level(logging.INFO, logger="src.retrieval.retriever"):
        hits = first.search(["what causes cholera", "soil"])
    assert first.builds == 1
    assert [h[0].document.id for h in hits] == ["cholera", "tetanus"]
    assert "Built BM25 index of 3 documents" in caplog.text
    folders = [p.name for p in cache.iterdir()]
    assert len(folders) == 1 and folders[0].startswith("bm25-") and len(folders[0]) == 5 + 16

    caplog.clear()
    second = retriever(path, cache)
    with caplog.at_level(logging.INFO, logger="src.retrieval.retriever"):
        assert second.search(["what causes cholera", "soil"]) == hits
    assert second.builds == 0
    assert f"Loaded cached BM25 index of 3 documents from {cache / folders[0]}" in caplog.text
    first.search(["again"])
    assert first.builds == 1  # built once per object


def test_an_edited_document_or_other_settings_rebuild(tmp_path):
    cache = tmp_path / "cache"
    original = retriever(corpus(tmp_path / "a"), cache)
    original.search(["cholera"])
    edited_rows = [ROWS[0], {**ROWS[1], "content": "Anthrax: Bacillus anthracis spores."}, ROWS[2]]
    edited = retriever(corpus(tmp_path / "b", edited_rows), cache)
    edited.search(["cholera"])
    assert edited.builds == 1
    other_k1 = retriever(corpus(tmp_path / "a"), cache, k1=1.2)
    other_k1.search(["cholera"])
    assert other_k1.builds == 1
    assert len({original.cache_key(), edited.cache_key(), other_k1.cache_key()}) == 3
    assert len(list(cache.iterdir())) == 3
    # the same corpus and settings from another path reuse the index: the key is the content
    copy = retriever(corpus(tmp_path / "c"), cache)
    copy.search(["cholera"])
    assert copy.builds == 0 and copy.cache_key() == original.cache_key()


def test_a_cache_folder_without_its_manifest_is_rebuilt(tmp_path):
    path, cache = corpus(tmp_path / "c"), tmp_path / "cache"
    first = retriever(path, cache)
    first.search(["cholera"])
    folder = first.cache_folder()
    assert folder is not None
    (folder / "index.json").unlink()  # as if written by an older version or damaged
    second = retriever(path, cache)
    assert second.search(["cholera"])[0][0].document.id == "cholera"
    assert second.builds == 1 and (folder / "index.json").is_file()
    assert not list(cache.glob("*.partial-*"))


def index_files(tmp_path: Path) -> list[str]:
    """The names of the files a cached BM25 index of `ROWS` is made of."""
    built = retriever(corpus(tmp_path / "probe"), tmp_path / "probe-cache")
    built.search(["cholera"])
    folder = built.cache_folder()
    assert folder is not None
    return sorted(path.name for path in folder.iterdir())


@pytest.mark.parametrize("damage", ["half", "empty"])
def test_every_file_of_a_damaged_index_heals_to_the_same_hits(tmp_path, caplog, damage):
    path, cache = corpus(tmp_path / "c"), tmp_path / "cache"
    queries = ["what causes cholera", "soil wound", "spores"]
    clean = retriever(path, cache)
    expected = [[(hit.document.id, hit.score) for hit in hits] for hits in clean.search(queries)]
    folder = clean.cache_folder()
    assert folder is not None
    names = index_files(tmp_path)
    assert len(names) >= 3  # the manifest, the ids and bm25s's own files
    for name in names:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2] if damage == "half" else b"")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = retriever(path, cache)
            found = [
                [(hit.document.id, hit.score) for hit in hits] for hits in again.search(queries)
            ]
        assert found == expected, name
        assert "is unusable" in caplog.text, name
        assert again.builds == 1, name
        healed = retriever(path, cache)
        healed.search(queries)
        assert healed.builds == 0, name  # the rebuilt folder is whole again


def test_without_a_cache_dir_the_index_lives_in_memory(tmp_path):
    found = IndexedRetriever(corpus=corpus(tmp_path), cache_dir=None).search(["anthrax"], k=1)
    assert found[0][0].document.id == "anthrax"


def test_corpus_errors_wait_for_check_or_search(tmp_path):
    missing = IndexedRetriever(corpus=str(tmp_path / "none.jsonl"), cache_dir=str(tmp_path))
    with pytest.raises(MissingFileError, match="retrieval.corpus: no file or folder at"):
        missing.check()
    with pytest.raises(MissingFileError):
        missing.search(["anything"])
    (tmp_path / "empty.jsonl").write_text("")
    empty = IndexedRetriever(corpus=str(tmp_path / "empty.jsonl"), cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="holds no documents"):
        empty.search(["anything"])


def test_bad_settings_are_config_errors_naming_the_key(tmp_path):
    assert "retrieval.backend must be one of bm25, dense, got 'splade'" in refusal(
        {"retrieval.backend": "splade"}
    )
    with pytest.raises(ConfigError, match=r"retrieval.bm25: unknown setting\(s\) \['k3'\]"):
        IndexedRetriever(bm25={"k3": 1.0}, cache_dir=str(tmp_path))
    assert refusal({"retrieval.k": 0}).startswith("retrieval.k must be a whole number >= 1")
    with pytest.raises(
        ConfigError, match=r"retrieval.dense.pool is not a setting of retrieval=dense"
    ):
        IndexedRetriever(backend="dense", dense={"pool": "cls"}, cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"retrieval.dense.pooling must be one of mean, cls"):
        IndexedRetriever(backend="dense", dense={"pooling": "max"}, cache_dir=str(tmp_path))


def test_documents_and_lookup_by_id(tmp_path):
    found = IndexedRetriever(corpus=corpus(tmp_path), cache_dir=None)
    assert [d.id for d in found.documents] == ["cholera", "anthrax", "tetanus"]
    assert found.document("tetanus").title == "Tetanus"
    with pytest.raises(KeyError):
        found.document("plague")


def test_the_retriever_satisfies_the_protocol(tmp_path):
    def first_ids(r: Retriever) -> list[str]:
        return [hits[0].document.id for hits in r.search(["soil", "cholera"], 1)]

    assert first_ids(IndexedRetriever(corpus=corpus(tmp_path), cache_dir=None)) == [
        "tetanus",
        "cholera",
    ]


def test_the_bm25_config_builds_a_retriever_over_the_sample(tmp_path):
    node = compose_retrieval("bm25", tmp_path)
    assert node.k == 3 and node.backend == "bm25" and node.corpus is None
    assert OmegaConf.to_container(node.bm25) == {"k1": 1.5, "b": 0.75, "repeated_terms": "once"}
    built = build(node)
    assert isinstance(built, IndexedRetriever) and built.corpus_path == SAMPLE_CORPUS
    assert built.cache_dir == tmp_path / "retrieval"
    hits = built.search(["Anthrax organism"])[0]
    assert (
        hits[0].document.id.startswith("fact-") and "Bacillus anthracis" in hits[0].document.content
    )


@pytest.mark.parametrize("name", ["minilm", "medcpt"])
def test_the_dense_configs_compose_and_build_without_loading_a_model(tmp_path, name):
    built = build(compose_retrieval(name, tmp_path))
    assert built.backend == "dense" and built.builds == 0
    assert built.index.encoding.pooling == ("cls" if name == "medcpt" else "mean")


@pytest.mark.skipif(
    in_hub_cache("ncbi/MedCPT-Article-Encoder"), reason="MedCPT is in the local HF cache"
)
def test_medcpt_offline_fails_in_one_line_naming_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as in the tests' conftest: no hub
    found = build(compose_retrieval("medcpt", tmp_path))
    with pytest.raises(MissingFileError) as error:
        found.search(["anthrax"])
    message = str(error.value)
    assert message.startswith(
        "retrieval.dense.document_encoder: encoder 'ncbi/MedCPT-Article-Encoder' could not be "
        "loaded"
    )
    assert "local folder" in message and "\n" not in message
    assert found.builds == 0 and not list(tmp_path.rglob("*.partial-*"))


def test_an_encoder_path_that_does_not_exist_fails_in_one_line(tmp_path):
    dense = {"document_encoder": str(tmp_path / "no-such-encoder"), "device": "cpu"}
    found = IndexedRetriever(corpus=corpus(tmp_path), backend="dense", cache_dir=None, dense=dense)
    with pytest.raises(MissingFileError, match="retrieval.dense.document_encoder: encoder"):
        found.search(["anthrax"])
