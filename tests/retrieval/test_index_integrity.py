"""A damaged index is found when it is opened, before a run folder exists (issue 52, item 3).

The build records each component file's size in the index manifest; opening the index checks them (an
index built before sizes were recorded is checked for the files every index has). A file deleted or cut
off fails with one line naming it, and ``exam take`` writes nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.cli.test_failed_requests import _exam
from tests.retrieval.retrieval_data import fact_chunks

from ragrade.cli.main import main
from ragrade.errors import DataError
from ragrade.retrieval.index import IndexConfig, build_index, load_index


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("integrity") / "index"
    build_index(fact_chunks(), out, IndexConfig(dense=False))
    return out


def _copy(index: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "index"
    shutil.copytree(index, dest)
    return dest


def test_the_build_records_every_component_file_with_its_size(bm25_index: Path) -> None:
    files = json.loads((bm25_index / "manifest.json").read_text())["files"]
    on_disk = {p.relative_to(bm25_index).as_posix(): p.stat().st_size for p in (bm25_index / "bm25").iterdir()}
    assert files == on_disk and "bm25/vocab.index.json" in files
    assert len(load_index(bm25_index)) == len(fact_chunks())  # an intact index opens


def test_a_deleted_bm25_file_fails_when_the_index_is_opened(bm25_index: Path, tmp_path: Path) -> None:
    index = _copy(bm25_index, tmp_path)
    (index / "bm25" / "vocab.index.json").unlink()
    with pytest.raises(DataError, match=r"damaged BM25 index: bm25/vocab.index.json is missing; rebuild it"):
        load_index(index)


def test_a_cut_off_file_fails_with_the_sizes(bm25_index: Path, tmp_path: Path) -> None:
    index = _copy(bm25_index, tmp_path)
    target = index / "bm25" / "data.csc.index.npy"
    size = target.stat().st_size
    target.write_bytes(target.read_bytes()[: size // 2])
    with pytest.raises(DataError, match=rf"bm25/data.csc.index.npy has {size // 2:,} bytes, its build wrote {size:,}"):
        load_index(index)


def test_an_index_built_before_sizes_were_recorded_is_checked_by_name(bm25_index: Path, tmp_path: Path) -> None:
    index = _copy(bm25_index, tmp_path)
    manifest = json.loads((index / "manifest.json").read_text())
    del manifest["files"]
    (index / "manifest.json").write_text(json.dumps(manifest))
    assert len(load_index(index)) == len(fact_chunks())
    (index / "bm25" / "params.index.json").unlink()
    with pytest.raises(DataError, match=r"damaged BM25 index: bm25/params.index.json is missing"):
        load_index(index)


def test_exam_take_on_a_damaged_index_writes_no_run_folder(
    bm25_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = _copy(bm25_index, tmp_path)
    (index / "bm25" / "indptr.csc.index.npy").unlink()
    exam, out = _exam(tmp_path, 20), tmp_path / "run"
    argv = ["exam", "take", str(exam), "--index", str(index), "--out", str(out), "--llm", "offline/student",
            "--retrievers", "bm25"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged BM25 index: bm25/indptr.csc.index.npy is missing" in err
    assert not out.exists()  # before: journal.sqlite and manifest.json in a new run folder
