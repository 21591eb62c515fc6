"""The question-answering assistant behind ``ragrade ask``: retrieve, then answer with citations.

With an LLM the answer is generated from the numbered passages and cites them as
``[n]``; the reply lists which chunk id and source file each number stands for.
Only citations the model wrote count: a reply that repeats the prompt (a base model
continues it: the instructions again, the passages, ``Question: ... Answer:``) has the
repeated part cut out (:func:`ragrade.llm.replies.cut_echo`), with a note, and a marker
``[n]`` counts only outside it and when passage ``n`` was given. A reply with nothing of
its own is no answer: it fails as an LLM error does.
Without one, the ``offline/extractive`` reader picks the best sentence of the
passages (or refuses), and the output says it is an extractive baseline.
The prompt is a template with ``{question}`` and ``{passages}``; ``--prompt-file``
replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError, render_settings
from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.passages import shown_passages

if TYPE_CHECKING:
    from ragrade.llm.base import LLM
    from ragrade.retrieval.base import Retriever
    from ragrade.retrieval.index import Index
    from ragrade.retrieval.transforms import RetrievalPipeline

DEFAULT_PROMPT = """You answer questions using only the numbered passages below, which come from the user's documents.

Rules:
- Base every statement on the passages; do not add outside knowledge.
- After each statement, cite the passage numbers that support it in square brackets, e.g. [1] or [2][3].
- If the passages do not contain the answer, say that the documents do not cover it, and nothing else.
- Be brief: a few sentences at most.

Passages:
{passages}

Question: {question}
Answer:"""


def load_prompt(path: str | Path | None) -> str:
    """The prompt template: the default, or a file that must contain ``{question}`` and ``{passages}``."""
    if path is None:
        return DEFAULT_PROMPT
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: prompt file not found")
    text = p.read_text(encoding="utf-8")
    missing = [f for f in ("{question}", "{passages}") if f not in text]
    if missing:
        raise ConfigError(f"{p}: the prompt template needs the placeholders {' and '.join(missing)}")
    return text


def format_passages(hits: list[Hit], shown: Sequence[str] | None = None) -> str:
    """Numbered passages with their source, one block each (``shown``: the text shown for each hit)."""
    blocks = []
    for n, h in enumerate(hits, start=1):
        src = f" (source: {h.source})" if h.source else ""
        text = shown[n - 1] if shown is not None else h.text
        blocks.append(f"[{n}]{src}\n{text.strip()}")
    return "\n\n".join(blocks)


@dataclass
class Answer:
    """One answered question."""

    question: str
    answer: str
    hits: list[Hit]
    llm: str
    extractive: bool
    cited: list[int] = field(default_factory=list)
    error: str | None = None
    transform_error: str | None = None  # a query rewrite / post-processing step that failed and fell back
    shown: list[str] = field(default_factory=list)  # the passage texts the LLM saw (fences balanced, headings)
    reply: str | None = None  # the model's whole reply, when ``answer`` is only its own part of it
    echoed_words: int = 0  # words of the reply that repeat the prompt (cut out of ``answer``)
    uncounted: list[int] = field(default_factory=list)  # citation numbers of passages not given

    def notes(self) -> list[str]:
        """What was left out of the answer and its citations, one line each."""
        notes = []
        if self.echoed_words:
            notes.append(
                f"the model repeated its prompt ({self.echoed_words} words of its instructions or passages); "
                "that part is not shown and its citations are not counted"
            )
        if self.uncounted:
            marks = " ".join(f"[{n}]" for n in self.uncounted)
            given = len(self.hits)
            notes.append(
                f"{marks} cite{'s' if len(self.uncounted) == 1 else ''} no passage given "
                f"({given} passage{'' if given == 1 else 's'}); not counted"
            )
        return notes

    def citations(self) -> list[JSONObject]:
        """The passages the answer cites: the markers the model wrote (none when it wrote none or failed)."""
        if self.error is not None:
            return []
        return [
            {
                "n": n,
                "chunk_id": self.hits[n - 1].chunk_id,
                "doc_id": self.hits[n - 1].doc_id,
                "source": self.hits[n - 1].source,
            }
            for n in self.cited
            if 1 <= n <= len(self.hits)
        ]

    def shown_text(self, i: int) -> str:
        """The text of passage ``i`` (from 0) as the LLM saw it."""
        return self.shown[i] if i < len(self.shown) else self.hits[i].text

    def to_dict(self) -> JSONObject:
        """A JSON-ready dict."""
        return {
            "question": self.question,
            "answer": self.answer,
            "llm": self.llm,
            "mode": "extractive-baseline" if self.extractive else "generated",
            "error": self.error,
            "transform_error": self.transform_error,
            "citations": self.citations(),
            "notes": self.notes(),
            **({"reply": self.reply} if self.reply is not None else {}),
            "passages": [
                {
                    "rank": h.rank,
                    "chunk_id": h.chunk_id,
                    "doc_id": h.doc_id,
                    "source": h.source,
                    "score": h.score,
                    "text": h.text,
                    **({"spans": [list(s) for s in h.spans]} if h.spans is not None else {}),
                    **({"shown": s} if (s := self.shown_text(i)) != h.text else {}),
                }
                for i, h in enumerate(self.hits)
            ],
        }


_CITE = re.compile(r"\[(\d{1,3})\]")


class Assistant:
    """Retriever + LLM answering questions from an index.

    ``chunks`` maps a chunk id to its chunk (``Index.chunk``): passages are then shown with the fences of a
    split code block balanced, and after their heading path when ``headings`` is set.
    """

    def __init__(
        self,
        retriever: Retriever | RetrievalPipeline,
        llm: LLM,
        *,
        k: int = 5,
        prompt: str = DEFAULT_PROMPT,
        max_tokens: int = 400,
        chunks: Callable[[str], Chunk] | None = None,
        headings: bool = False,
    ) -> None:
        if k <= 0:
            raise ConfigError(f"k must be a positive integer, got {k}")
        self.retriever = retriever
        self.llm = llm
        self.k = k
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.chunks = chunks
        self.headings = headings
        self.extractive = bool(getattr(llm, "is_baseline", False))

    def ask(self, question: str) -> Answer:
        """Retrieve passages for ``question`` and answer from them."""
        from ragrade.llm.base import GenerationRequest, Message, generate
        from ragrade.llm.replies import cut_echo
        from ragrade.schemas import MAX_QUESTION_CHARS, size_error

        question = question.strip()
        if not question:
            raise ConfigError("the question is empty")
        too_long = size_error("the question", question, MAX_QUESTION_CHARS)
        if too_long is not None:
            raise ConfigError(too_long)
        tx_error = None
        if hasattr(self.retriever, "run"):  # a RetrievalPipeline: also reports failed rewrites
            got = self.retriever.run([question], self.k)[0]
            hits, tx_error = got.hits, got.error
        else:
            hits = self.retriever.retrieve([question], self.k)[0]
        shown = shown_passages(hits, self.chunks, headings=self.headings)
        text = self.prompt.replace("{passages}", format_passages(hits, shown) or "(no passages)")
        text = text.replace("{question}", question)
        req = GenerationRequest(
            messages=(Message("user", text),),
            temperature=0.0,
            max_tokens=self.max_tokens,
            question=question,
            passages=tuple(shown),
            task="answer",
        )
        comp = generate(self.llm, [req])[0]
        name = str(getattr(self.llm, "name", "llm"))
        if not comp.ok:
            return Answer(
                question, "", hits, name, self.extractive, error=comp.error, transform_error=tx_error, shown=shown
            )
        reply = (comp.text or "").strip()
        if self.extractive:  # the reader quotes a passage sentence: cite the passage it came from
            cited = [n for n, p in enumerate(shown, start=1) if reply and reply in p][:1]
            return Answer(question, reply, hits, name, True, cited=cited, transform_error=tx_error, shown=shown)
        cut = cut_echo(reply, text, [*shown, question])
        numbers = [int(m) for m in dict.fromkeys(_CITE.findall(cut.text))]
        ans = Answer(
            question,
            cut.text,
            hits,
            name,
            False,
            cited=[n for n in numbers if 1 <= n <= len(hits)],
            transform_error=tx_error,
            shown=shown,
            reply=reply if cut.echoed else None,
            echoed_words=cut.echoed_words,
            uncounted=[n for n in numbers if not 1 <= n <= len(hits)],
        )
        if cut.only_echo:
            ans.error = (
                "the model gave no answer of its own: its reply only repeats the prompt (as a base model "
                "continuing the text does; an instruction-tuned model answers)"
            )
        return ans


def warm_up(index: Index, retriever: str, llm: LLM, report: Callable[[str], None]) -> float:
    """Load the models answering needs before the first question, saying what each is and how long it took.

    The query embedder (dense, hybrid and rerank retrievers) and the offline reader's sentence embedder are
    one process-wide instance (MiniLM is loaded once, whoever asks first); a remote or in-process LLM loads
    on its first request. Returns the seconds spent. One ``ask`` session keeps all of it warm: give several
    questions on standard input (one per line) or interactively, rather than one ``ask`` per question.
    """
    import time

    start = time.perf_counter()
    if retriever.strip().lower() != "bm25":
        emb = index.embedder()
        t0 = time.perf_counter()
        emb.embed(["warm up"])
        report(f"loaded the query embedder {emb.name} ({type(emb).__name__}) in {time.perf_counter() - t0:.1f} s")
    if getattr(llm, "is_baseline", False) and getattr(llm, "semantic", False):
        from ragrade.embedding.embed import default_embedder

        t0 = time.perf_counter()
        default_embedder().embed(["warm up"])
        report(f"loaded the {llm.name} reader's sentence embedder (MiniLM, shared) in {time.perf_counter() - t0:.1f} s")
    elif not getattr(llm, "is_baseline", False):
        _check_server(llm)
        report(f"{getattr(llm, 'name', 'the LLM')}: loaded or connected on the first question")
    return time.perf_counter() - start


def _check_server(llm: LLM) -> None:
    """BackendError when the LLM's server (a ``base_url`` given) takes no connection: said before the first
    question in milliseconds, where the question's request was retried for half a minute."""
    from ragrade.errors import BackendError
    from ragrade.llm.reach import unreachable

    url = getattr(llm, "base_url", None)
    why = unreachable(url) if isinstance(url, str) and url else None
    if why is not None:
        raise BackendError(
            f"{getattr(llm, 'name', 'the LLM')}: server unreachable: {url} takes no connection ({why}); "
            "start the server or fix $llm_base_url"
        )


def render(ans: Answer) -> str:
    """Human-readable output of one answer."""
    lines: list[str] = []
    if ans.extractive:
        lines.append("Extractive baseline (no LLM configured; pass --llm PROVIDER/MODEL for generated answers)")
    if ans.transform_error:
        lines.append(f"Warning: {ans.transform_error}")
    if ans.error:
        lines.append(f"Answer failed: {render_settings(ans.error)}")  # an LLM error may name settings ($timeout)
    else:
        lines.append(f"Answer: {ans.answer}")
    lines.extend(f"Note: {note}" for note in ans.notes())
    cites = ans.citations()
    if cites:
        lines.append("Cited:")
        lines.extend(f"  [{c['n']}] {c['chunk_id']}  ({c['source'] or c['doc_id']})" for c in cites)
    lines.append("Passages:")
    for n, h in enumerate(ans.hits, start=1):
        snippet = " ".join(ans.shown_text(n - 1).split())
        snippet = snippet if len(snippet) <= 240 else snippet[:237] + "..."
        lines.append(f"  [{n}] {h.chunk_id}  {h.source or h.doc_id}  score={h.score:.4f}")
        lines.append(f"      {snippet}")
    if not ans.hits:
        lines.append("  (none)")
    return "\n".join(lines)


__all__ = ["DEFAULT_PROMPT", "Answer", "Assistant", "format_passages", "load_prompt", "render", "warm_up"]
