"""Vector stores: exact backends agree exactly, ANN backends reach recall@10 >= 0.95, pgvector on a real server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragrade.errors import ConfigError
from ragrade.retrieval.store import create_store, recall_at_k, topk_exact


def _data(n: int = 3000, dim: int = 48, q: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(30, dim))
    x = centres[rng.integers(0, 30, n)] + 0.6 * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    qs = x[rng.choice(n, q, replace=False)] + 0.1 * rng.normal(size=(q, dim))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    return x.astype(np.float32), qs.astype(np.float32)


def test_topk_exact_hand_worked() -> None:
    m = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32)
    res = topk_exact(m, np.array([[1, 0]], dtype=np.float32), 3)[0]
    assert [p for p, _ in res] == [0, 2, 3]  # tie between 0 and 2 broken by position
    assert res[2][1] == pytest.approx(0.6)
    assert topk_exact(m, np.array([[0, 1]], dtype=np.float32), 10)[0][0] == (1, 1.0)


def test_exact_store_persists(tmp_path: Path) -> None:
    x, qs = _data(500, 16, 10)
    store = create_store("exact", tmp_path / "s", 16)
    store.build(x)
    again = create_store("exact", tmp_path / "s", 16)
    assert again.exists()
    assert again.search(qs, 5) == topk_exact(x, qs, 5)


@pytest.mark.parametrize("backend", ["faiss", "usearch", "chroma"])
def test_ann_recall_at_10(tmp_path: Path, backend: str) -> None:
    x, qs = _data()
    exact = topk_exact(x, qs, 10)
    store = create_store(backend, tmp_path / backend, x.shape[1])
    store.build(x)
    reopened = create_store(backend, tmp_path / backend, x.shape[1])
    assert reopened.exists()
    approx = reopened.search(qs, 10)
    recall = recall_at_k(exact, approx, 10)
    print(f"{backend} recall@10 = {recall:.4f}")
    assert recall >= 0.95
    # scores are cosines, comparable with the exact ones
    for e, a in zip(exact, approx, strict=True):
        common = dict(e).keys() & dict(a).keys()
        for p in common:
            assert dict(a)[p] == pytest.approx(dict(e)[p], abs=1e-4)


def test_unknown_backend_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Did you mean 'faiss'"):
        create_store("fiass", tmp_path, 4)


def test_index_store_override_builds_from_vectors(facts_index: Path) -> None:
    from ragrade.retrieval.index import load_index

    idx = load_index(facts_index)
    q = ["Who composed the Glass Harbour symphony?"]
    exact = idx.retriever("dense").retrieve(q, 5)[0]
    for backend in ("faiss", "usearch"):
        other = idx.retriever("dense", store=backend).retrieve(q, 5)[0]
        assert [h.chunk_id for h in other] == [h.chunk_id for h in exact]


@pytest.fixture(scope="module")
def pg_dsn() -> object:
    import shutil
    import tempfile

    try:
        from pgserver.postgres_server import get_server
    except ImportError:
        pytest.skip("pgserver is not installed")
    # a fresh dir directly under /tmp: as root, pgserver runs PostgreSQL as an unprivileged user,
    # which cannot enter pytest's private (0700) temp tree
    data = tempfile.mkdtemp(prefix="ragrade-pg-")
    try:
        srv = get_server(data, cleanup_mode="stop")
    except Exception as exc:  # a machine where the bundled PostgreSQL cannot run
        shutil.rmtree(data, ignore_errors=True)
        pytest.skip(f"pgserver could not start PostgreSQL here: {type(exc).__name__}: {exc}")
    yield srv.get_uri()
    srv.cleanup()
    shutil.rmtree(data, ignore_errors=True)


@pytest.mark.pgvector
def test_pgvector_matches_exact(tmp_path: Path, pg_dsn: str) -> None:
    x, qs = _data(400, 24, 12)
    exact = topk_exact(x, qs, 10)
    store = create_store("pgvector", tmp_path / "pg", 24, dsn=pg_dsn, table="t_exact")
    store.build(x)
    got = store.search(qs, 10)
    assert [[p for p, _ in r] for r in got] == [[p for p, _ in r] for r in exact]
    for e, g in zip(exact, got, strict=True):
        assert [s for _, s in g] == pytest.approx([s for _, s in e], abs=1e-5)
    hnsw = create_store("pgvector", tmp_path / "pg2", 24, dsn=pg_dsn, table="t_hnsw", hnsw=True)
    hnsw.build(x)
    assert recall_at_k(exact, hnsw.search(qs, 10), 10) >= 0.95
    assert "dsn" not in store.describe()


def test_pgvector_needs_dsn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGRADE_PG_DSN", raising=False)
    store = create_store("pgvector", tmp_path, 4)
    with pytest.raises(ConfigError, match="RAGRADE_PG_DSN"):
        store.build(np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(ConfigError, match="identifier"):
        create_store("pgvector", tmp_path, 4, table="x; drop table y")
