"""One LLMOptions from the caller to the backend: create_llm(spec, options), what each backend can use, the limits.

The backends counted here are registered the way a plugin registers one (``register_llm``), so the count is
of real constructions through the registry, not of a patched function.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from tests.retrieval.retrieval_data import fact_docs

from ragrade.errors import ConfigError
from ragrade.llm import (
    LimitConfig,
    LLMOptions,
    check_llm,
    create_llm,
    options_for_llms,
    register_llm,
    unused_options,
)
from ragrade.llm.offline import OfflineExtractive

BUILT: list[tuple[str, LLMOptions]] = []  # (model, the options its factory was handed), one per construction


@register_llm("counted", options=("seed",))
def _counted(model: str, *, options: LLMOptions, **kw: Any) -> OfflineExtractive:
    """An offline reader (no model to load) that records each construction."""
    BUILT.append((model, options))
    return OfflineExtractive(model, semantic=False, cache=None, limits=options.limits(), **kw)


@pytest.fixture
def index(tmp_path: Path) -> Any:
    import ragrade as rg

    return rg.build_index(fact_docs(), tmp_path / "index", dense=False)


@pytest.mark.parametrize(
    ("query", "transform_llm", "built"),
    [
        (None, None, ["a"]),  # no transform: one model, none for rewriting
        ("hyde", None, ["a"]),  # the answering model rewrites: the same object
        ("hyde", "counted/a", ["a"]),  # named twice, still one
        (None, "counted/b", ["a"]),  # a rewriting model that nothing asks for is not built
        ("hyde", "counted/b", ["a", "b"]),  # a second model only when one is asked for
    ],
)
def test_ask_builds_each_model_once(index: Any, query: str | None, transform_llm: str | None, built: list[str]) -> None:
    import ragrade as rg

    BUILT.clear()
    assistant = rg.open_assistant(
        index, retriever="bm25", k=2, llm="counted/a", query=query, transform_llm=transform_llm
    )
    assert [model for model, _ in BUILT] == built  # one load of the weights, one limiter per model
    assert assistant.llm.name == "offline/a"


def test_the_options_object_reaches_the_factory_as_given() -> None:
    BUILT.clear()
    options = LLMOptions(concurrency=3, rpm=90, timeout=7.5, max_retries=2, backoff_s=0.25, seed=4)
    llm = create_llm("counted/x", options)
    assert (
        len(BUILT) == 1 and BUILT[0] == ("x", options) and BUILT[0][1] is options
    )  # the same object, not a dict rebuilt from it
    assert getattr(llm, "limits", None) == options.limits()


def test_limits_are_the_limiter_settings_of_the_options() -> None:
    limits = LLMOptions(concurrency=3, rpm=90, timeout=7.5, max_retries=2, backoff_s=0.25).limits()
    assert limits == LimitConfig(
        concurrency=3, rpm=90, timeout=7.5, max_retries=2, backoff_base_s=0.25, learn_timeout=False
    )
    default = LLMOptions().limits()  # a timeout left at its default is learned from the replies
    assert default.learn_timeout and default.timeout == 60.0 and default.concurrency == 16 and default.rpm is None
    offline = create_llm("offline/student", LLMOptions(concurrency=2, cache=False))
    assert getattr(offline, "limits", None) == LLMOptions(concurrency=2).limits()


@pytest.mark.parametrize(
    ("spec", "options", "api_key", "named"),
    [
        ("offline/student", {"device": "cpu"}, None, "device (for hf)"),
        ("openai/m", {"base_url": "http://127.0.0.1:9/v1", "n_ctx": 512}, None, "n_ctx (for llamacpp)"),
        ("hf/./m", {"base_url": "http://127.0.0.1:9/v1"}, None, "base_url (for openai)"),
        ("hf/./m", {}, "sk-test", "api_key (for openai)"),
        ("llamacpp/gemma-3-270m", {}, "sk-test", "api_key (for openai)"),
        ("offline/student", {"base_url": "http://127.0.0.1:9/v1"}, None, "base_url (for openai)"),
        ("replay/offline/student", {"replay_from": ".", "concurrency": 4}, None, "concurrency"),
        ("replay/offline/student", {"replay_from": ".", "cache_dir": "c"}, None, "cache_dir"),
        ("counted/x", {"device": "cpu"}, None, "device (for hf)"),  # a plugin that declared what it reads
    ],
)
def test_an_option_the_backend_cannot_use_is_refused_in_one_line(
    spec: str, options: dict[str, Any], api_key: str | None, named: str
) -> None:
    provider = spec.split("/", 1)[0]
    with pytest.raises(ConfigError) as err:
        create_llm(spec, LLMOptions(**options), api_key=api_key)
    assert str(err.value) == f"{spec}: the {provider} provider cannot use the LLM option(s) {named}; leave them out"


def test_a_grid_gives_each_llm_the_options_it_can_use(tmp_path: Path) -> None:
    shared = LLMOptions(base_url="http://127.0.0.1:9/v1", device="cpu", concurrency=4)
    assert unused_options("offline/student", shared) == ["device", "base_url"]
    mine = shared.for_llm("offline/student")
    assert mine.device is None and mine.base_url is None and mine.concurrency == 4
    assert shared.for_llm("openai/m") == shared.model_copy(update={"device": None})
    hf = f"hf/{tmp_path}"  # a model folder (checked, not loaded)
    per = options_for_llms(["openai/m", "offline/student", hf, "openai/m"], shared)
    assert list(per) == ["openai/m", "offline/student", hf] and per["offline/student"] == mine
    assert per[hf] == shared.model_copy(update={"base_url": None}) and per["openai/m"].device is None
    create_llm("offline/student", per["offline/student"])  # accepted as it is
    with pytest.raises(ConfigError, match=r"^openai/m: .* option\(s\) device \(for hf\); leave them out$"):
        options_for_llms(["openai/m", "offline/student"], shared)  # no LLM of this grid runs on a device
    assert options_for_llms([], shared) == {}


def test_replay_reads_its_run_from_the_options_and_refuses_other_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="replay_from = 'RUN_DIR'"):
        create_llm("replay/offline/student")
    with pytest.raises(ConfigError, match=r"replay_from: no run at .*missing"):
        check_llm("replay/offline/student", LLMOptions(replay_from=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match=r"unknown argument\(s\) semantic"):
        create_llm("replay/offline/student", LLMOptions(replay_from=str(tmp_path)), semantic=False)


def test_the_old_keywords_still_work_with_a_deprecation_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        llm = create_llm("offline/student", cache=False, concurrency=3, semantic=False)
    assert getattr(llm, "cache", "x") is None and getattr(llm, "limits", None) == LLMOptions(concurrency=3).limits()
    [warning] = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert "create_llm(spec, cache=, concurrency=...) is deprecated" in str(warning.message)
    assert warning.filename == __file__  # it points at the caller


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("llamacpp/./no-such.gguf", "llamacpp/./no-such.gguf: no such GGUF file"),
        ("hf/./no-such-folder", "hf/./no-such-folder: no model folder at no-such-folder"),
        ("offline/studnt", "offline/studnt: unknown offline baseline 'studnt'"),
        ("opanai/m", "unknown llm 'opanai'"),
        ("gpt-4o", "LLM spec 'gpt-4o' must look like PROVIDER/MODEL"),
    ],
)
def test_check_llm_names_a_bad_spec_without_loading_anything(spec: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_llm(spec)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_check_llm_reads_a_gguf_header(tmp_path: Path) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"PK\3\4 a zip, not a model")
    with pytest.raises(ConfigError, match=r"^llamacpp/.*weights.gguf: not a GGUF file"):
        check_llm(f"llamacpp/{fake}")
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("a.gguf", "b.gguf"):
        (folder / name).write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"a folder with 2 \.gguf files; name the file"):
        check_llm(f"llamacpp/{folder}")
    check_llm("offline/student")  # a good one passes
