"""Where the local embedding models run: ``auto`` (CUDA, else MPS, else the CPU) by the hf backend's rule,
a missing device refused in one line before any model loads, the device printed once and kept in the
index manifest. On this CPU-only test machine ``auto`` must pick the CPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import fact_chunks
from tests.support.typed import narrow

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.embedding import placement
from ragrade.embedding.embed import (
    OnnxSentenceEmbedder,
    SentenceTransformerEmbedder,
    create_embedder,
    plan_embedder,
)
from ragrade.errors import ConfigError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answers")
NOT_HERE = "device 'cuda' is not available here (available: cpu)"


@pytest.mark.parametrize("shortcut", [True, False])
def test_auto_picks_the_cpu_here(monkeypatch: pytest.MonkeyPatch, shortcut: bool) -> None:
    # with the no-GPU shortcut and through torch (the hf backend's resolve): the same answer
    monkeypatch.setattr(placement, "_no_accelerator_possible", lambda: shortcut)
    assert placement.embedding_device(None, "embedder x") == "cpu"
    assert placement.embedding_device("auto", "embedder x") == "cpu"
    assert placement.embedding_device("CPU", "embedder x") == "cpu"


def test_missing_and_unknown_devices_are_one_line_errors() -> None:
    with pytest.raises(ConfigError) as err:
        placement.embedding_device("cuda", "embedder minilm")
    assert str(err.value) == f"embedder minilm: {NOT_HERE}; use device auto or one of those"
    with pytest.raises(ConfigError, match=r"^unknown device 'tpu'; valid choices: auto, cpu, cuda, mps$"):
        placement.embedding_device("tpu", "embedder minilm")


def test_cuda_is_refused_before_the_model_loads(tiny_st_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sentence_transformers

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("the model was loaded before the device was checked")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", never)
    for spec in (f"st:{tiny_st_model}", "minilm", "minilm-st", f"onnx:{tiny_st_model}"):
        with pytest.raises(ConfigError, match=re.escape(NOT_HERE)):
            create_embedder(spec, device="cuda")
        with pytest.raises(ConfigError, match=re.escape(NOT_HERE)):
            plan_embedder(spec, "cuda")


def test_the_device_is_printed_once_and_described(tiny_st_model: str, capsys: pytest.CaptureFixture[str]) -> None:
    placement._shown.clear()
    first = narrow(create_embedder(f"st:{tiny_st_model}"), SentenceTransformerEmbedder)
    again = narrow(create_embedder(f"st:{tiny_st_model}", device="cpu"), SentenceTransformerEmbedder)
    err = capsys.readouterr().err
    assert err.count("runs on cpu") == 1 and f"embedder st:{tiny_st_model} runs on cpu" in err
    assert first.describe()["device"] == again.describe()["device"] == "cpu"
    assert first.describe()["asked_device"] == "auto" and again.describe()["asked_device"] == "cpu"
    assert first.cache_key == again.cache_key == f"st:{tiny_st_model}|st-fp32"  # the CPU key as before
    onnx = narrow(create_embedder(f"onnx:{tiny_st_model}", device="auto"), OnnxSentenceEmbedder)
    assert onnx.describe()["device"] == "cpu"


def test_index_records_the_device_and_refuses_a_missing_one(
    tmp_path: Path, tiny_st_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = tmp_path / "chunks.jsonl"
    write_chunks(chunks, fact_chunks())
    out = tmp_path / "idx"
    embedder = f"st:{tiny_st_model}"
    assert main(["index", str(chunks), "--out", str(out), "--embedder", embedder, "--device", "auto"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["embedder"]["describe"]["device"] == "cpu"
    capsys.readouterr()
    bad = tmp_path / "bad"
    assert main(["index", str(chunks), "--out", str(bad), "--embedder", embedder, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ragrade: error:")]
    assert len(lines) == 1 and NOT_HERE in lines[0] and "Traceback" not in err, err
    assert not bad.exists()  # refused before anything was written
