"""The demo corpus narrowed to chosen standard-library topics: filtering, topic names, errors, the CLI option."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.corpus.demo import DEMO_TOPICS, build_demo_corpus
from ragrade.corpus.files import read_documents
from ragrade.errors import ConfigError
from ragrade.io import read_jsonl


def test_topics_keep_only_the_chosen_packages() -> None:
    docs = build_demo_corpus(topics=["json", "email"])
    every = build_demo_corpus()
    wanted = [d for d in every if str(d.metadata["module"]).split(".")[0] in {"json", "email"}]
    assert [d.id for d in docs] == [d.id for d in wanted]  # same documents, same order, nothing else
    assert {d.metadata["topic"] for d in docs} == {"json", "email"}
    assert {d.metadata["module"] for d in docs} >= {"json", "email.message", "email.mime.text"}


def test_topic_is_the_most_specific_chosen_name() -> None:
    docs = build_demo_corpus(topics=["xml", "xml.etree"])
    topics = {str(d.metadata["module"]): d.metadata["topic"] for d in docs}
    assert topics["xml.etree.ElementTree"] == "xml.etree"
    assert topics["xml.dom.minidom"] == "xml"
    assert not any(m.startswith("xmlrpc") for m in topics)  # a prefix of the name is not a package


def test_limit_spreads_over_the_chosen_topics() -> None:
    docs = build_demo_corpus(40, topics=DEMO_TOPICS)
    counts = Counter(d.metadata["topic"] for d in docs)
    assert len(docs) == 40 and set(counts) == set(DEMO_TOPICS)
    assert max(counts.values()) - min(counts.values()) <= 1  # round robin over the eight topics


def test_demo_topics_are_big_enough_for_a_per_topic_chart() -> None:
    counts = Counter(d.metadata["topic"] for d in build_demo_corpus(topics=DEMO_TOPICS))
    assert set(counts) == set(DEMO_TOPICS) and min(counts.values()) >= 20


def test_unknown_topic_is_a_config_error_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"unknown demo topic 'emial'.*Did you mean 'email'"):
        build_demo_corpus(topics=["json", "emial"])
    with pytest.raises(ConfigError, match="at least one"):
        build_demo_corpus(topics=[" "])


def test_cli_demo_topics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.jsonl"
    assert main(["corpus", "--demo", "--demo-topics", "json,logging", "--demo-topics", "http", "--out", str(out)]) == 0
    docs = read_documents(out)
    assert {d.metadata["topic"] for d in docs} == {"json", "logging", "http"}
    header, _ = read_jsonl(out)
    assert header is not None and dig(header.meta, "demo", "topics") == ["json", "logging", "http"]
    capsys.readouterr()
    assert main(["corpus", str(tmp_path), "--demo-topics", "json", "--out", str(out)]) == 2
    assert "--demo-topics needs --demo" in capsys.readouterr().err
    assert main(["corpus", "--demo", "--demo-topics", "jsno", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Did you mean 'json'" in err[0]
