from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrade.errors import DataError
from ragrade.retrieval.metrics import read_qrels


def test_qa_generate_qrels_shape_is_read(tmp_path: Path) -> None:
    path = tmp_path / "qrels.jsonl"
    recs = [
        {"query_id": "q1", "query": "Where is X?", "relevant_chunk_ids": ["c1"], "relevant_doc_ids": ["d1"]},
        {"query_id": "q2", "query": "Who made Y?", "relevant_chunk_ids": ["c2", "c3"], "relevant_doc_ids": ["d2"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert read_qrels(path, level="chunk") == {"Where is X?": {"c1": 1.0}, "Who made Y?": {"c2": 1.0, "c3": 1.0}}
    assert read_qrels(path, level="doc") == {"Where is X?": {"d1": 1.0}, "Who made Y?": {"d2": 1.0}}


def test_qrels_without_ids_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "qrels.jsonl"
    path.write_text(json.dumps({"query": "Where is X?"}) + "\n")
    with pytest.raises(DataError, match="relevant_chunk_ids"):
        read_qrels(path)
