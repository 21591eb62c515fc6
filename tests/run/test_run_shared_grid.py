"""The pieces the exam sweep shares with free-text QA: resources, item planning, grid runs, CLI flags, CSV rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam

from ragrade.cli.pipelines import GridFlags, parse_pairs
from ragrade.errors import ConfigError
from ragrade.exam.files import Question
from ragrade.run.manifest import read_manifest
from ragrade.run.pipeline import Resources, cached_resources, clear_resources, resources_for
from ragrade.run.records import WorkerContext
from ragrade.run.spec import build_sweep_config, expand_pipelines
from ragrade.run.summary import write_csv_rows
from ragrade.run.sweep import GridJob, executor_for, pipeline_context, plan_items, run_grid, worker_context

LL = "py/tests.run.fakes:make_llm"


def _question(qid: str, context: str = "") -> Question:
    return Question(
        id=qid,
        question=f"What about {qid}?",
        choices=[],
        answer=-1,
        doc_id="d1",
        chunk_id=f"c-{qid}",
        source="s.txt",
        tags={},
        context=context,
    )


def test_resources_take_questions_without_an_exam() -> None:
    res = Resources({"seed": 3, "icl_pool": ["b"]}, questions=[_question("a", "alpha text"), _question("b")])
    assert list(res.questions) == ["a", "b"]
    assert [q.id for q in res.pool] == ["b"] and res.seed == 3
    assert [q.id for q in res.select(["b", "a"])] == ["b", "a"]
    with pytest.raises(ConfigError, match=r"question ids not in the exam: \['zz'\]"):
        res.select(["a", "zz"])
    oracle = asyncio.run(res.contexts(_oracle_spec(), [res.questions["a"]]))
    assert oracle[0].passages == ["alpha text"] and oracle[0].chunk_ids == ["c-a"]
    with pytest.raises(ConfigError, match="no exam file"):
        Resources({"seed": 0})


def _oracle_spec() -> Any:
    return expand_pipelines(build_sweep_config({"grid": {"llms": [LL], "retrievers": ["oracle"]}}))[0]


class _Other(Resources):
    def __init__(self, context: Any) -> None:
        super().__init__(context, questions=[_question("x")])


def test_cached_resources_keyed_by_factory_and_context(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 6)
    clear_resources()
    ctx: WorkerContext = {"exam": str(exam), "seed": 0}
    base = resources_for(ctx)
    assert resources_for(ctx.copy()) is base  # same context, same object
    other = cached_resources(_Other, ctx)
    assert isinstance(other, _Other) and other is not base and list(other.questions) == ["x"]
    assert cached_resources(_Other, ctx) is other
    clear_resources()
    assert resources_for(ctx) is not base


def test_plan_items_holds_out_the_pool_then_limits() -> None:
    ids = [f"q{i}" for i in range(20)]
    cfg = build_sweep_config({"grid": {"llms": [LL], "retrievers": ["closed"], "icl": [0, 2]}, "icl_pool": 4})
    pool, items = plan_items(ids, expand_pipelines(cfg), cfg)
    assert len(pool) == 4 and set(pool).isdisjoint(items) and sorted(pool + items) == sorted(ids)
    assert items == [i for i in ids if i not in pool]  # exam order kept
    limited = build_sweep_config(
        {"grid": {"llms": [LL], "retrievers": ["closed"], "icl": [0, 2]}, "icl_pool": 4, "limit": 5}
    )
    assert plan_items(ids, expand_pipelines(limited), limited) == (pool, items[:5])
    no_icl = build_sweep_config({"grid": {"llms": [LL], "retrievers": ["closed"]}, "limit": 3})
    assert plan_items(ids, expand_pipelines(no_icl), no_icl) == ([], ids[:3])


def test_worker_context_extends_the_shared_context(tmp_path: Path) -> None:
    cfg = build_sweep_config({"indexes": {"small": "idx"}, "seed": 5})
    shared = pipeline_context(cfg, ["q1"])
    assert shared["indexes"] == {"small": str(Path("idx").resolve())}
    assert shared["seed"] == 5 and shared["icl_pool"] == ["q1"] and "exam" not in shared
    exam = tmp_path / "e.jsonl"
    ctx = worker_context(exam, cfg, ["q1"])
    assert ctx == {**shared, "exam": str(exam.resolve()), "answer": cfg.answer.model_dump(mode="json")}


def test_run_grid_returns_rows_in_pipeline_order_and_records_resumes(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 8)
    cfg = build_sweep_config({"grid": {"llms": [LL], "retrievers": ["closed", "oracle"]}, "shard_size": 3})
    specs = expand_pipelines(cfg)
    pool, items = plan_items([f"q{i:03d}" for i in range(8)], specs, cfg)
    job = GridJob(
        "ragrade.run.answer:exam_shard",
        worker_context(exam, cfg, pool),
        {s.id: s.model_dump(mode="json") for s in specs},
        items,
        {"test": 1},
    )
    run_dir = tmp_path / "run"
    manifest = {"version": 1, "kind": "test", "started": "2000-01-01T00:00:00+00:00"}
    rows, added = run_grid(run_dir, job, executor_for(cfg), manifest, shard_size=3)
    assert added == 16 and [(r["pipeline"], r["question_id"]) for r in rows] == [
        (s.id, q) for s in specs for q in items
    ]
    again, added_again = run_grid(run_dir, job, executor_for(cfg), {**manifest, "started": "later"}, shard_size=3)
    assert added_again == 0 and [r["question_id"] for r in again] == [r["question_id"] for r in rows]
    m = read_manifest(run_dir)
    assert m["started"] == "2000-01-01T00:00:00+00:00" and len(m["resumed"]) == 1


def test_grid_flags_layer_holds_only_given_flags() -> None:
    layer = GridFlags(llm="a/b, c/d", k="1,3", no_cache=True, seed=None).layer()
    assert layer == {"grid": {"llms": ["a/b", "c/d"], "k": [1, 3]}, "llm_options": {"cache": False}}
    assert GridFlags(no_cache=False).layer() == {}
    with pytest.raises(ConfigError, match="--icl expects integers"):
        GridFlags(icl="0,x").layer()


def test_grid_flags_merge_over_the_file_and_add_externals(tmp_path: Path) -> None:
    toml = tmp_path / "sweep.toml"
    toml.write_text('[grid]\nllms = ["x/y"]\nretrievers = ["closed"]\n\n[external]\nmine = "pkg.mod:fn"\n')
    cfg = GridFlags(config=toml, k="2", executor=None).sweep_config()
    assert cfg.grid.llms == ["x/y"] and cfg.grid.k == [2]
    assert cfg.grid.retrievers == ["closed", "external:mine"] and cfg.external == {"mine": "pkg.mod:fn"}


def test_parse_pairs() -> None:
    assert parse_pairs(None, "--x") is None
    assert parse_pairs(["dir/small/", "big=/data/big"], "--index", default_label=True) == {
        "small": "dir/small/",
        "big": "/data/big",
    }
    with pytest.raises(ConfigError, match="expects NAME=VALUE"):
        parse_pairs(["lonely"], "--external")
    with pytest.raises(ConfigError, match="given twice"):
        parse_pairs(["a=1", "a=2"], "--prompt")


def test_write_csv_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    rows: list[dict[str, Any]] = [{"a": 1, "b": None, "extra": "x"}, {"b": 0.5}]
    write_csv_rows(path, rows, ["a", "b"])
    assert path.read_text() == "a,b\n1,\n,0.5\n"
