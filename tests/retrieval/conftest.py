"""Fixtures of the retrieval tests: a corpus of distinctive facts, a built index, tiny models."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import fact_chunks


@pytest.fixture(scope="session")
def facts_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index (bm25 + default MiniLM dense, exact store) over the fact chunks."""
    from ragrade.retrieval.index import IndexConfig, build_index

    out = tmp_path_factory.mktemp("facts") / "index"
    build_index(fact_chunks(), out, IndexConfig())
    return out


def _tiny_bert(path: Path, classifier: bool) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    from ragrade.embedding.embed import minilm_path

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    cfg.num_labels = 1  # a kwarg the strict config class does not declare
    model = BertForSequenceClassification(cfg) if classifier else BertModel(cfg)
    model.save_pretrained(str(path))
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(str(path))
    return path


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 1-layer cross-encoder with random weights, saved by the test itself."""
    return str(_tiny_bert(tmp_path_factory.mktemp("ce") / "tiny-ce", classifier=True))


@pytest.fixture(scope="session")
def tiny_st_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 1-layer sentence-transformers model (dim 32, mean pooling, normalised) with random weights."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    bert = _tiny_bert(tmp_path_factory.mktemp("st") / "tiny-bert", classifier=False)
    word = Transformer(str(bert), max_seq_length=64)
    pool = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    out = tmp_path_factory.mktemp("st") / "tiny-st"
    SentenceTransformer(modules=[word, pool, Normalize()], device="cpu").save(str(out))
    return str(out)
