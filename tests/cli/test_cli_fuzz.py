"""Bad input for every verb and file kind: exit 2, one ``ragrade: error:`` line, no traceback, no valid-looking output.

The CLI runs in-process (``ragrade.cli.main.main``); one small corpus, index, exam and run directory are
built once for the module and every case damages a copy or a file of its own.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from ragrade.cli.main import main

Cap = pytest.CaptureFixture[str]

DOC = (
    "# The {t} service {{ #{t} }}\n\n"
    '!!! note "About {t}"\n    The {t} service is configured in {t}.toml.\n\n'
    "The {t} subsystem stores record {i} in the {t} registry and rotates it every {j} days. "
    "Operators set {t}_limit = {k} to bound the queue of the {t} workers.\n\n"
    "```python\n# start the {t} worker\nif ready:\n    start_{t}(limit={k})\n```\n"
)
TOPICS = ("keys", "backup", "cluster", "tokens", "storage", "logging")


def _run(argv: Sequence[object], capsys: Cap) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_user_error(code: int, err: str, *needles: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ragrade: error:")]
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(errors) == 1 and errors[0] == lines[-1], err
    assert "╭" not in err and "Usage:" not in err and "done in" not in err, err
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def _write_exam(chunks_path: Path, out: Path) -> None:
    """Four hand-made cloze questions over the first chunks (no generator, no embedding: fast)."""
    lines = chunks_path.read_text(encoding="utf-8").splitlines()[1:]
    chunks = [json.loads(line) for line in lines]
    records: list[dict[str, object]] = [{"ragrade": {"kind": "exam", "version": 1}}]
    for n, chunk in enumerate(chunks[:4]):
        topic = TOPICS[n % len(TOPICS)]
        choices = [topic, *[t for t in TOPICS if t != topic][:3]]
        records.append(
            {
                "id": f"q{n}",
                "question": f"Which service stores record ____ ({chunk['text'][:40]})?",
                "choices": choices,
                "answer": 0,
                "doc_id": chunk["doc_id"],
                "chunk_id": chunk["id"],
            }
        )
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    docs = root / "docs"
    docs.mkdir()
    for n, t in enumerate(TOPICS):
        (docs / f"{t}.md").write_text(DOC.format(t=t, i=n * 7, j=n + 2, k=n * 3 + 1), encoding="utf-8")
    p = {
        "root": root,
        "docs": docs,
        "docs_jsonl": root / "docs.jsonl",
        "idx": root / "idx",
        "exam": root / "exam.jsonl",
        "run": root / "run",
        "chunks": root / "idx" / "chunks.jsonl",
    }
    assert main(["corpus", str(docs), "--out", str(p["docs_jsonl"])]) == 0
    assert main(["index", str(p["docs_jsonl"]), "--out", str(p["idx"]), "--size", "60", "--overlap", "0"]) == 0
    _write_exam(p["idx"] / "chunks.jsonl", p["exam"])
    assert (
        main(
            [
                "exam",
                "take",
                str(p["exam"]),
                "--index",
                f"r={p['idx']}",
                "--llm",
                "offline/student",
                "--retrievers",
                "closed,bm25",
                "--k",
                "2",
                "--out",
                str(p["run"]),
            ]
        )
        == 0
    )
    return p


# ----------------------------------------------------------------------------- damaged file contents

BAD_CONTENT: dict[str, bytes] = {
    "binary": b"\xff\xfe\x00\x81\x9c garbage \xc3\x28\n",
    "deep-array": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "deep-object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n",
    "not-an-object": b"[1, 2, 3]\n",
    "wrong-fields": b'{"x": 1}\n',
    "truncated": b'{"id": "a", "text": "unfinished\n',
}

# verb -> argv with {f} (the bad file) and {o} (an output path that must not appear)
VERBS: dict[str, list[str]] = {
    "corpus": ["corpus", "{f}", "--out", "{o}"],
    "chunk": ["chunk", "{f}", "--out", "{o}"],
    "index": ["index", "{f}", "--out", "{o}", "--no-dense"],
    "exam-stats": ["exam", "stats", "{f}"],
    "exam-take": [
        "exam",
        "take",
        "{f}",
        "--index",
        "r={idx}",
        "--llm",
        "offline/student",
        "--retrievers",
        "bm25",
        "--out",
        "{o}",
    ],
    "retrieval-eval": ["retrieval-eval", "{idx}", "{f}", "-r", "bm25", "--out", "{o}"],
    "robust-run": ["robust", "run", "{f}", "--testbed", "noise", "--llm", "offline/extractive", "--out", "{o}"],
    "robust-build": ["robust", "build", "--exam", "{f}", "--index", "{idx}", "--out", "{o}"],
    "qa-answer": [
        "qa",
        "answer",
        "{f}",
        "--index",
        "r={idx}",
        "--llm",
        "offline/student",
        "--retrievers",
        "bm25",
        "--out",
        "{o}",
    ],
    "qa-generate": ["qa", "generate", "{f}", "--llm", "offline", "--out", "{o}"],
    "judge": ["judge", "{f}", "--metrics", "exact", "--out", "{o}"],
    "run": ["run", "{f}", "--out", "{o}"],
}


def _fill(argv: list[str], **values: Path) -> list[str]:
    return [a.format(**{k: str(v) for k, v in values.items()}) for a in argv]


def _nothing_valid_written(out: Path) -> None:
    """No output, or nothing in it a later command would take as a finished result."""
    if not out.exists():
        return
    assert out.is_dir(), f"{out} was written"
    finished = {"responses.parquet", "metrics.json", "results.jsonl", "summary.csv", "scores.jsonl"}
    found = [p.name for p in out.rglob("*") if p.name in finished]
    assert not found, found


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_damaged_input_files(verb: str, base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    for name, content in BAD_CONTENT.items():
        if verb == "run" and name != "binary":
            continue  # a TOML config: binary content is its damaged form
        bad = tmp_path / f"{name}.jsonl"
        bad.write_bytes(content)
        out = tmp_path / f"out-{name}"
        code, _, err = _run(_fill(VERBS[verb], f=bad, o=out, idx=base["idx"]), capsys)
        _assert_user_error(code, err, str(bad))
        _nothing_valid_written(out)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_folder_given_as_input_file(verb: str, base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    if verb in ("qa-generate", "corpus"):
        pytest.skip("takes a folder")
    out = tmp_path / "out"
    code, _, err = _run(_fill(VERBS[verb], f=folder, o=out, idx=base["idx"]), capsys)
    _assert_user_error(code, err, str(folder))
    _nothing_valid_written(out)


# ----------------------------------------------------------------------------- malformed records

CHUNK = {"id": "c1", "doc_id": "d1", "text": "the keys rotate", "start": 0, "end": 15}
QUESTION = {
    "id": "q1",
    "question": "Which ____ rotates?",
    "choices": ["keys", "locks", "doors", "gates"],
    "answer": 0,
    "doc_id": "d1",
    "chunk_id": "c1",
}

MALFORMED: dict[str, tuple[str, dict[str, object], str]] = {
    # name: (file kind, record, expected words in the error)
    "chunk-text-null": ("chunks", {**CHUNK, "text": None}, "'text' must be a string"),
    "chunk-text-number": ("chunks", {**CHUNK, "text": 7}, "'text' must be a string"),
    "chunk-text-object": ("chunks", {**CHUNK, "text": {"a": 1}}, "'text' must be a string"),
    "chunk-start-text": ("chunks", {**CHUNK, "start": "0"}, "'start'"),
    "chunk-end-before-start": ("chunks", {**CHUNK, "start": 9, "end": 2}, "after end"),
    "doc-text-number": ("documents", {"id": "d1", "text": 12}, "'text' must be a string"),
    "doc-id-null": ("documents", {"id": None, "text": "x"}, "'id'"),
    "question-null": ("exam", {**QUESTION, "question": None}, "'question' must be a string"),
    "question-object": ("exam", {**QUESTION, "question": {"q": 1}}, "'question' must be a string"),
    "three-choices": ("exam", {**QUESTION, "choices": ["a", "b", "c"]}, "4 candidates"),
    "same-choices": ("exam", {**QUESTION, "choices": ["a", "a", "b", "c"]}, "same candidate twice"),
    "answer-float": ("exam", {**QUESTION, "answer": 1.5}, "'answer'"),
    "answer-bool": ("exam", {**QUESTION, "answer": True}, "'answer'"),
    "answer-out-of-range": ("exam", {**QUESTION, "answer": 4}, "'answer'"),
    "choices-numbers": ("exam", {**QUESTION, "choices": [1, 2, 3, 4]}, "list of strings"),
    "qa-question-null": ("qa", {"id": "a", "question": None}, "'question' must be a string"),
    "qa-span-text": ("qa", {"id": "a", "question": "q?", "answer_span": "0-3"}, "'answer_span'"),
    "rgb-query-number": ("rgb", {"id": 1, "query": 5, "answer": "x", "positive": [], "negative": []}, "'query'"),
    "rgb-positive-string": (
        "rgb",
        {"id": 1, "query": "q?", "answer": "x", "positive": "doc", "negative": []},
        "'positive'",
    ),
}

READERS: dict[str, list[list[str]]] = {
    "chunks": [
        VERBS["index"],
        ["exam", "generate", "{f}", "--llm", "offline", "--out", "{o}"],
    ],
    "documents": [VERBS["chunk"], VERBS["index"]],
    "exam": [VERBS["exam-stats"], VERBS["exam-take"], ["retrieval-eval", "{idx}", "{f}"]],
    "qa": [
        [
            "qa",
            "answer",
            "{f}",
            "--index",
            "r={idx}",
            "--llm",
            "offline/student",
            "--retrievers",
            "bm25",
            "--out",
            "{o}",
        ]
    ],
    "rgb": [["robust", "run", "{f}", "--testbed", "noise", "--llm", "offline/extractive", "--out", "{o}"]],
}

HEADERS = {"chunks": "chunks", "documents": "documents", "exam": "exam", "qa": "qa", "rgb": "robust_data"}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_records_fail_with_file_and_line(
    case: str, base: dict[str, Path], tmp_path: Path, capsys: Cap
) -> None:
    kind, record, words = MALFORMED[case]
    bad = tmp_path / f"{kind}.jsonl"
    header = {"ragrade": {"kind": HEADERS[kind], "version": 1}}
    bad.write_text(json.dumps(header) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    for argv in READERS[kind]:
        out = tmp_path / "out"
        code, _, err = _run(_fill(argv, f=bad, o=out, idx=base["idx"]), capsys)
        _assert_user_error(code, err, f"{bad}:2:", words)
        _nothing_valid_written(out)


# ----------------------------------------------------------------------------- damaged index


def _damage_vectors(how: str) -> Callable[[Path], None]:
    def damage(idx: Path) -> None:
        vec = idx / "dense" / "vectors.npy"
        if how == "truncated":
            vec.write_bytes(vec.read_bytes()[:200])
        elif how == "garbage":
            vec.write_bytes(b"this is not numpy" * 20)
        elif how == "object":
            np.save(vec, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
        elif how == "three-rows":
            np.save(vec, np.zeros((3, 384), dtype=np.float32))
        elif how == "wrong-dim":
            np.save(vec, np.zeros((len((idx / "chunks.jsonl").read_text().splitlines()) - 1, 7), dtype=np.float32))

    return damage


def _garbage(rel: str, content: bytes) -> Callable[[Path], None]:
    def damage(idx: Path) -> None:
        (idx / rel).write_bytes(content)

    return damage


INDEX_DAMAGE: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # name: (damage, retriever, words)
    "vectors-truncated": (_damage_vectors("truncated"), "dense", "vectors.npy"),
    "vectors-garbage": (_damage_vectors("garbage"), "dense", "vectors.npy"),
    "vectors-pickled-object": (_damage_vectors("object"), "dense", "vectors.npy"),
    "vectors-three-rows": (_damage_vectors("three-rows"), "dense", "3 vectors for"),
    "vectors-wrong-dim": (_damage_vectors("wrong-dim"), "dense", "dimensions"),
    "bm25-config-garbage": (_garbage("bm25/bm25_config.json", b"{nope"), "bm25", "bm25_config.json"),
    "bm25-config-list": (_garbage("bm25/bm25_config.json", b"[1, 2]"), "bm25", "damaged BM25 index"),
    "bm25-params-garbage": (_garbage("bm25/params.index.json", b"\x00\x01garbage"), "bm25", "damaged BM25 index"),
    "manifest-garbage": (_garbage("manifest.json", b"\xff\xfe"), "bm25", "manifest.json"),
    "manifest-counts": (
        _garbage(
            "manifest.json",
            json.dumps({"format": "ragrade-index", "version": 1, "counts": {"chunks": "many"}}).encode(),
        ),
        "bm25",
        "bad index manifest",
    ),
    "chunks-binary": (_garbage("chunks.jsonl", b"\xff\xfe\x00"), "bm25", "chunks.jsonl:1"),
}


@pytest.mark.parametrize("case", sorted(INDEX_DAMAGE))
def test_damaged_index(case: str, base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    damage, retriever, words = INDEX_DAMAGE[case]
    idx = tmp_path / "idx"
    shutil.copytree(base["idx"], idx)
    damage(idx)
    code, _, err = _run(["search", idx, f"how often do the keys rotate? {case}", "-r", retriever], capsys)
    _assert_user_error(code, err, words)
    out = tmp_path / "run"
    code, _, err = _run(
        [
            "exam",
            "take",
            base["exam"],
            "--index",
            f"r={idx}",
            "--llm",
            "offline/student",
            "--retrievers",
            retriever,
            "--out",
            out,
        ],
        capsys,
    )
    _assert_user_error(code, err, words)


# ----------------------------------------------------------------------------- options and output paths


def _options(p: dict[str, Path], t: Path) -> dict[str, tuple[list[object], str]]:
    take = ["exam", "take", p["exam"], "--index", f"r={p['idx']}", "--llm", "offline/student", "--retrievers", "bm25"]
    ge0 = "Input should be greater than or equal to 0"
    return {
        "take-k-negative": ([*take, "--k", "-3", "--out", t / "o"], f"grid.k.0: {ge0} (got -3)"),
        "take-icl-negative": ([*take, "--icl", "-1", "--out", t / "o"], f"grid.icl.0: {ge0} (got -1)"),
        "take-limit-zero": ([*take, "--limit", "0", "--out", t / "o"], "--limit"),
        "take-k-text": ([*take, "--k", "x", "--out", t / "o"], "k"),
        "stopwords": (["index", p["docs_jsonl"], "--out", t / "o", "--no-dense", "--stopwords", "xx"], "stopwords"),
        "n-boot-zero": (["retrieval-eval", p["idx"], p["exam"], "-r", "bm25", "--n-boot", "0"], "--n-boot"),
        "compare-n-boot": (["compare", p["run"], "--all", "--n-boot", "0"], "--n-boot"),
        "search-k-text": (["search", p["idx"], "q", "-k", "abc"], "'-k'"),
        "dup-cosine": (
            ["exam", "generate", p["idx"], "--llm", "offline", "--out", t / "o.jsonl", "--dup-cosine", "5"],
            "--dup-cosine",
        ),
        "robust-limit": (["robust", "run", t / "x.jsonl", "--testbed", "noise", "--limit", "-1"], "--limit"),
        "robust-max-tokens": (
            ["robust", "run", t / "x.jsonl", "--testbed", "noise", "--max-tokens", "0"],
            "--max-tokens",
        ),
        "qa-max-tokens": (["qa", "answer", t / "x.jsonl", "--out", t / "o", "--max-tokens", "0"], "--max-tokens"),
        "qa-min-chars": (
            ["qa", "generate", p["idx"], "--llm", "offline", "--out", t / "o.jsonl", "--min-chars", "-1"],
            "--min-chars",
        ),
        "qa-prompt-missing": (
            ["qa", "generate", p["idx"], "--llm", "offline", "--out", t / "o.jsonl", "--prompt", t / "nonexistent.txt"],
            "nonexistent.txt",
        ),
        "exam-prompt-missing": (
            [
                "exam",
                "generate",
                p["idx"],
                "--llm",
                "offline",
                "--out",
                t / "o.jsonl",
                "--prompt",
                t / "nonexistent.txt",
            ],
            "nonexistent.txt",
        ),
        "qa-student-writes-nothing": (
            ["qa", "generate", p["idx"], "--llm", "offline/student", "--out", t / "o.jsonl"],
            "writes none",
        ),
        "chunk-size-zero": (["chunk", p["docs_jsonl"], "--out", t / "o.jsonl", "--size", "0"], "--size"),
        "chunk-min-size": (["chunk", p["docs_jsonl"], "--out", t / "o.jsonl", "--min-size", "-1"], "--min-size"),
        "irt-drop": (["irt", "improve", p["run"], "--drop", "2", "--out", t / "o"], "fraction"),
        "unknown-option": (["exam", "take", p["exam"], "--bogus"], "--bogus"),
        "unknown-verb": (["exam", "tkae"], "tkae"),
        "corpus-config-unknown-key": (["corpus", p["docs"], "--out", t / "o.jsonl", "--config", t / "c.toml"], "bogus"),
        "job-k-negative": (["run", t / "job.toml", "--out", t / "o"], "-1"),
        "corpus-out-missing-tree": (
            ["corpus", p["docs"], "--out", t / "missing" / "dir" / "x.jsonl"],
            "does not exist",
        ),
    }


def test_bad_options_one_line(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    (tmp_path / "c.toml").write_text("[corpus]\nbogus = 1\n", encoding="utf-8")
    (tmp_path / "job.toml").write_text(f'[corpus]\npaths = ["{base["docs"]}"]\n\n[sweep]\nk = [-1]\n', encoding="utf-8")
    failures = []
    for name, (argv, words) in _options(base, tmp_path).items():
        code, _, err = _run([str(a) for a in argv], capsys)
        try:
            _assert_user_error(code, err, words)
            assert not (tmp_path / "o.jsonl").exists()
            assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)


def test_bad_output_paths(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    for out in (folder, a_file / "x.jsonl"):
        for argv in (
            ["corpus", base["docs"], "--out", out],
            ["chunk", base["docs_jsonl"], "--out", out],
            ["exam", "generate", base["idx"], "--n", "3", "--llm", "offline", "--out", out],
            ["report", base["run"], "--out", out],
            ["compare", base["run"], "--all", "--out", out],
            ["retrieval-eval", base["idx"], base["exam"], "-r", "bm25", "--n-boot", "10", "--out", out],
        ):
            code, _, err = _run([str(a) for a in argv], capsys)
            _assert_user_error(code, err, str(out) if out == folder else str(a_file))
    assert [p.name for p in folder.iterdir()] == []
    for argv in (
        ["index", base["docs_jsonl"], "--out", a_file, "--no-dense"],
        ["exam", "take", base["exam"], "--index", f"r={base['idx']}", "--retrievers", "bm25", "--out", a_file],
    ):
        code, _, err = _run([str(a) for a in argv], capsys)
        _assert_user_error(code, err, str(a_file))
    assert a_file.read_text(encoding="utf-8") == "x"


def test_compare_on_unexpected_columns(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    import pandas as pd

    run = tmp_path / "run"
    shutil.copytree(base["run"], run)
    pd.DataFrame({"who": ["a", "b"], "score": [1, 0]}).to_parquet(run / "responses.parquet")
    for argv in (["compare", run, "--all", "--out", tmp_path / "c.json"], ["irt", "fit", run]):
        code, _, err = _run([str(a) for a in argv], capsys)
        _assert_user_error(code, err, "responses.parquet", "missing column")
    pd.DataFrame({"pipeline": ["a"], "question_id": ["q"], "correct": ["yes"]}).to_parquet(run / "responses.parquet")
    code, _, err = _run(["compare", run, "--all", "--out", tmp_path / "c.json"], capsys)
    _assert_user_error(code, err, "'correct' must hold 0/1")
    (run / "responses.parquet").write_bytes(b"garbage")
    for argv in (["compare", run, "--all", "--out", tmp_path / "c.json"], ["irt", "fit", run]):
        code, _, err = _run([str(a) for a in argv], capsys)
        _assert_user_error(code, err, "responses.parquet")
    assert not (tmp_path / "c.json").exists()


def test_written_files_keep_the_umask(tmp_path: Path) -> None:
    from ragrade.io import write_json

    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644


def test_compare_writes_comparisons_into_the_run_dir(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    run = tmp_path / "run"
    shutil.copytree(base["run"], run)
    code, out, _ = _run(["compare", run, "--all", "--n-boot", "50"], capsys)
    assert code == 0
    data = json.loads((run / "comparisons.json").read_text(encoding="utf-8"))
    assert len(data["comparisons"]) == 1 and f"comparisons written to {run / 'comparisons.json'}" in out


def test_dry_run_prints_only_the_estimates(base: dict[str, Path], tmp_path: Path, capsys: Cap) -> None:
    llm = ["--llm", "openai/m", "--llm-base-url", "http://127.0.0.1:9/v1"]
    code, out, err = _run(
        [
            "--dry-run",
            "exam",
            "take",
            base["exam"],
            "--index",
            f"r={base['idx']}",
            *llm,
            "--retrievers",
            "bm25",
            "--out",
            tmp_path / "run",
        ],
        capsys,
    )
    assert code == 0 and "ragrade: error" not in err and not (tmp_path / "run").exists()
    assert [json.loads(line)["dry_run"][0]["requests"] for line in out.splitlines()] == [4]  # no leaderboard
    code, out, err = _run(
        ["--dry-run", "exam", "generate", base["idx"], "--n", "2", *llm, "--out", tmp_path / "e.jsonl"], capsys
    )
    summary = json.loads(out.strip())["dry_run"][0]
    assert code == 0 and "ragrade: error" not in err and "ragrade-dry-run" not in err
    assert summary["requests"] == 3  # one round: ceil(2 x 1.3) candidates, no top-up rounds


def test_run_warns_before_mixing_into_another_commands_run(base: dict[str, Path]) -> None:
    from ragrade.api.job import foreign_layout_note

    note = foreign_layout_note(base["run"])  # `ragrade run` prints it as a warning before it runs
    assert note is not None and note.startswith(f"{base['run']} holds another command's run (responses.parquet")
    assert foreign_layout_note(base["idx"].parent / "no-such-run") is None
