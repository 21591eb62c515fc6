from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.typed import dig

from ragrade.errors import ConfigError
from ragrade.exam.files import Question
from ragrade.run.answer import argmax, normalise_scores, parse_letter
from ragrade.run.pipeline import icl_examples
from ragrade.run.prompts import DEFAULT_TEMPLATE, load_template, render_prompt
from ragrade.run.spec import PipelineSpec, build_sweep_config, expand_pipelines, load_sweep_file
from ragrade.run.sweep import split_icl_pool


def _q(i: int) -> Question:
    return Question(
        id=f"q{i}",
        question=f"Question {i}?",
        choices=["w", "x", "y", "z"],
        answer=i % 4,
        doc_id="d",
        chunk_id=f"c{i}",
        context=f"ctx {i}",
    )


def test_pipeline_id_is_readable_and_normalised() -> None:
    s = PipelineSpec(llm="offline/student", retriever="bm25", k=3, icl=1, chunker="recursive-200")
    assert s.id == "llm=offline/student|retriever=bm25|k=3|icl=1|chunker=recursive-200"
    assert PipelineSpec.from_id(s.id) == s
    closed = PipelineSpec(retriever="closed", k=5, chunker="x").normalised()
    assert (closed.k, closed.chunker) == (0, "none")
    oracle = PipelineSpec(retriever="oracle", k=5).normalised()
    assert oracle.k == 1
    assert "prompt=short" in PipelineSpec(prompt="short", method="generate").id
    with pytest.raises(ValueError):
        PipelineSpec(llm="a|b")
    with pytest.raises(ConfigError):
        PipelineSpec(retriever="bm25", k=0).normalised()


def test_grid_expansion_dedupes_and_validates() -> None:
    cfg = build_sweep_config(
        {
            "grid": {"retrievers": ["closed", "bm25", "oracle"], "k": [3, 5], "icl": [0, 2]},
            "indexes": {"rec": "/tmp/a", "tok": "/tmp/b"},
        }
    )
    specs = expand_pipelines(cfg)
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    # closed and oracle ignore k and chunking: 2 icl each; bm25: 2 k x 2 icl x 2 chunkers
    assert len(specs) == 2 + 2 + 8
    with pytest.raises(ConfigError, match="needs an index"):
        expand_pipelines(build_sweep_config({"grid": {"retrievers": ["bm25"]}}))
    with pytest.raises(ConfigError, match="not defined"):
        expand_pipelines(build_sweep_config({"grid": {"retrievers": ["external:mine"]}}))
    with pytest.raises(ConfigError, match="invalid sweep config"):
        build_sweep_config({"grid": {"k": ["x"]}})
    explicit = build_sweep_config({"pipelines": [{"retriever": "bm25", "k": 2}], "indexes": {"only": "/x"}})
    assert [s.chunker for s in expand_pipelines(explicit)] == ["only"]


def test_layers_merge_file_then_flags(tmp_path: Path) -> None:
    f = tmp_path / "sweep.toml"
    f.write_text('seed = 7\n[grid]\nicl = [0, 1]\nk = [4]\n[indexes]\nrec = "idx"\n')
    layer = load_sweep_file(f)
    assert dig(layer, "indexes", "rec") == str((tmp_path / "idx").resolve())
    cfg = build_sweep_config(layer, {"grid": {"k": [2], "icl": None}, "seed": None})
    assert cfg.grid.k == [2] and cfg.grid.icl == [0, 1] and cfg.seed == 7


def test_parse_letter() -> None:
    ch = ["red", "green", "blue", "black"]
    assert parse_letter("B", ch) == 1
    assert parse_letter("(c) because", ch) == 2
    assert parse_letter("d.", ch) == 3
    assert parse_letter("The answer is A.", ch) == 0
    assert parse_letter("I pick option: C", ch) == 2
    assert parse_letter("green", ch) == 1
    assert parse_letter("A or B", ch) is None
    assert parse_letter("no idea", ch) is None
    assert parse_letter("", ch) is None
    assert parse_letter(None, ch) is None


def test_normalise_scores_hand_worked() -> None:
    n = normalise_scores([-4.0, -6.0], [2, 3], ["ab", "abcdef"])
    assert n["sum"] == [-4.0, -6.0]
    assert n["per_token"] == [-2.0, -2.0]
    assert n["per_char"] == [-2.0, -1.0]
    assert argmax(n["per_char"]) == 1 and argmax(n["sum"]) == 0
    assert argmax([float("nan"), 1.0, 1.0]) == 1
    assert argmax([float("nan")]) == -1


def test_icl_examples_held_out_nested_and_seeded() -> None:
    qs = [_q(i) for i in range(30)]
    pool, items = split_icl_pool(qs, 5, 2, seed=1)
    assert len(pool) == 5 and not set(pool) & set(items) and len(items) == 25
    assert split_icl_pool(qs, 5, 2, seed=1) == (pool, items)
    assert split_icl_pool(qs, 5, 0, seed=1) == ([], [q.id for q in qs])
    with pytest.raises(ConfigError):
        split_icl_pool(qs[:3], 5, 1, seed=0)
    pool_q = [q for q in qs if q.id in pool]
    two = icl_examples("q0", pool_q, 2, seed=1)
    assert len(two) == 2 and icl_examples("q0", pool_q, 1, seed=1) == two[:1]
    assert icl_examples("q0", pool_q, 2, seed=1) == two
    # a pool question never sees itself
    assert all(e.id != pool[0] for e in icl_examples(pool[0], pool_q, 4, seed=1))


def test_prompt_rendering_and_file_override(tmp_path: Path) -> None:
    q = _q(1)
    system, user = render_prompt(DEFAULT_TEMPLATE, q, ["first passage", "second"], [_q(2)])
    assert "[1] first passage" in user and "[2] second" in user
    assert "Question 2?" in user and "Answer: C" in user  # the example shows its answer letter
    assert user.rstrip().endswith("Answer:") and "A. w" in user and system
    _, gen = render_prompt(DEFAULT_TEMPLATE, q, [], for_generation=True)
    assert "letter" in gen and "Reference passages" not in gen
    f = tmp_path / "p.toml"
    f.write_text('system = "Be brief."\nuser = "{context}Q: {question}\\n{choices}\\n{answer_prefix}"\n')
    tpl = load_template("brief", f)
    system, user = render_prompt(tpl, q, [])
    assert system == "Be brief." and user.startswith("Q: Question 1?")
    bad = tmp_path / "bad.txt"
    bad.write_text("{nonsense}")
    with pytest.raises(ConfigError, match="placeholder"):
        load_template("bad", bad)
    (tmp_path / "unk.toml").write_text('colour = "x"\n')
    with pytest.raises(ConfigError, match="unknown prompt keys"):
        load_template("u", tmp_path / "unk.toml")
