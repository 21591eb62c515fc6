"""BERTScore through bert-score agrees with a direct computation (own forward pass + greedy cosine matching)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pytest

from ragrade.errors import ConfigError
from ragrade.judge.bertscore import BertScore, BertScoreConfig, resolve_model_path

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# slow: importing torch, transformers and bert-score (with matplotlib) takes 5-10 s on 2 cores in a fresh process;
# the suite's earlier tests have imported torch and transformers. The model loads take well under 0.1 s each.
pytestmark = pytest.mark.slow

CANDS = [
    "The Eiffel Tower was finished in 1889 for the World's Fair.",
    "Water boils at one hundred degrees.",
    "Shakespeare",
    "It is a small red fruit that grows on trees in orchards across Europe.",
]
REFS = [
    "Construction of the Eiffel Tower ended in 1889.",
    "At sea level, water boils at 100 degrees Celsius.",
    "William Shakespeare wrote Hamlet.",
    "An apple is a fruit.",
]


@pytest.fixture(scope="module")
def model() -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model_path("minilm")
    tok = AutoTokenizer.from_pretrained(path)
    mdl = AutoModel.from_pretrained(path)
    mdl.eval()
    return tok, mdl


def _direct(
    tok: PreTrainedTokenizerBase,
    mdl: PreTrainedModel,
    cand: str,
    ref: str,
    layer: int,
    idf: dict[int, float] | None = None,
) -> tuple[float, float, float]:
    """BERTScore by hand: hidden states of ``layer``, cosine matrix, greedy max, idf-weighted means.

    Special tokens ([CLS], [SEP]) take part in the matching but carry zero weight, as in bert-score.
    """
    import torch

    def enc(text: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            out = mdl(**ids, output_hidden_states=True)
        emb = out.hidden_states[layer][0].numpy().astype(np.float64)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        token_ids = ids["input_ids"][0].tolist()
        special = {tok.cls_token_id, tok.sep_token_id}
        if idf is None:
            w = np.array([0.0 if t in special else 1.0 for t in token_ids])
        else:
            w = np.array([idf.get(t, 0.0) for t in token_ids])
        return emb, w / w.sum()

    c, wc = enc(cand)
    r, wr = enc(ref)
    sim = c @ r.T
    p = float((sim.max(axis=1) * wc).sum())
    rc = float((sim.max(axis=0) * wr).sum())
    return p, rc, 2 * p * rc / (p + rc)


@pytest.mark.parametrize("layer", [6, 3])
def test_matches_direct_computation(model: tuple[PreTrainedTokenizerBase, PreTrainedModel], layer: int) -> None:
    tok, mdl = model
    scorer = BertScore(BertScoreConfig(num_layers=layer))
    res = scorer.score(CANDS, [[r] for r in REFS])
    for i, (c, r) in enumerate(zip(CANDS, REFS, strict=True)):
        p, rc, f = _direct(tok, mdl, c, r, layer)
        assert res.precision[i] == pytest.approx(p, abs=1e-4)
        assert res.recall[i] == pytest.approx(rc, abs=1e-4)
        assert res.f1[i] == pytest.approx(f, abs=1e-4)
    assert res.f1[0] > res.f1[3]  # a paraphrase beats an unrelated answer


def test_idf_matches_direct_computation(model: tuple[PreTrainedTokenizerBase, PreTrainedModel]) -> None:
    tok, mdl = model
    scorer = BertScore(BertScoreConfig(idf=True))
    scorer.set_idf_corpus(REFS)
    res = scorer.score(CANDS[:2], [[REFS[0]], [REFS[1]]])
    # idf(w) = log((M + 1) / (df(w) + 1)) over the M reference sentences, unseen tokens log(M + 1)
    m = len(REFS)
    df: dict[int, int] = {}
    for ref in REFS:
        for t in set(tok(ref)["input_ids"]):
            df[t] = df.get(t, 0) + 1
    vocab = set(tok(CANDS[0])["input_ids"]) | set(tok(CANDS[1])["input_ids"]) | set(df)
    idf = {t: math.log((m + 1) / (df.get(t, 0) + 1)) for t in vocab}
    for i in range(2):
        p, _rc, f = _direct(tok, mdl, CANDS[i], REFS[i], 6, idf)
        assert res.f1[i] == pytest.approx(f, abs=1e-4)
        assert res.precision[i] == pytest.approx(p, abs=1e-4)


def test_best_reference_and_empty_answer() -> None:
    scorer = BertScore()
    res = scorer.score(["Paris", "   "], [["London", "Paris"], ["Paris"]])
    assert res.f1[0] == pytest.approx(1.0, abs=1e-4)
    assert res.f1[1] == 0.0 and res.precision[1] == 0.0


def test_bad_layer_and_model() -> None:
    with pytest.raises(ConfigError, match="between 1 and 6"):
        BertScore(BertScoreConfig(num_layers=7))
    with pytest.raises(ConfigError, match="not a local folder"):
        BertScore(BertScoreConfig(model="bert-base-uncased"))


def test_fingerprint_tracks_settings() -> None:
    a = BertScore(BertScoreConfig(num_layers=6)).fingerprint()
    assert BertScore(BertScoreConfig(num_layers=6)).fingerprint() == a  # stable: a rerun reuses its scores
    assert BertScore().fingerprint() == a  # the default is the last layer of MiniLM (6)
    assert BertScore(BertScoreConfig(num_layers=5)).fingerprint() != a
    idf = BertScore(BertScoreConfig(idf=True))
    plain_idf = idf.fingerprint()
    assert plain_idf != a
    idf.set_idf_corpus(REFS)
    with_refs = idf.fingerprint()
    assert with_refs != plain_idf  # idf weights depend on the reference set
    idf.set_idf_corpus([*reversed(REFS), REFS[0], "  "])  # the same set: order, repeats and blanks do not count
    assert idf.fingerprint() == with_refs
    idf.set_idf_corpus(REFS[:2])
    assert idf.fingerprint() != with_refs
    no_idf = BertScore()
    no_idf.set_idf_corpus(REFS)  # without idf the reference set changes nothing
    assert no_idf.fingerprint() == a
