"""The offline generator: fact-based cloze questions, no LLM.

From one sentence of a chunk a key term is removed (a number, a date, a
capitalised name or a code identifier) and replaced by one blank ``____``.
Three distractors of the same kind come from *other* chunks; they are ranked
by the embedding similarity of their chunk to the blanked sentence, by shared
words around the term, by format (a year for a year, a percentage for a
percentage) and by length, so they are plausible and the correct answer does
not stand out. A term that also occurs in the source chunk or the question is
never a distractor, so exactly one candidate is supported by the source.

By default the question quotes the whole blanked sentence and names the
document title as its subject (with the section holding the sentence when the
page has sections: "About Retry policy (Queue options), which ..."), which lets a lexical retriever match it almost
verbatim. ``stem_window`` keeps only that many words on each side of the blank
(cut sides marked ``...``) and ``stem_subject`` names the topic (or nothing)
instead, so a retriever has to find the passage from a partial, less specific
cue. Nothing inside a URL or e-mail address is asked about.

Stem rules (documentation corpora): a blank is set aside, with a reason counted in the exam funnel, when its
sentence cannot stand on its own or its answer is not a fact. ``placeholder``: the sentence is lorem-ipsum
filler (:mod:`ragrade.exam.placeholder`; its terms are no distractors either); ``boilerplate``: the sentence
occurs (case, punctuation and markup aside) on at least :data:`BOILERPLATE_DOCS` documents of the distractor pool (the
corpus, or a sample of it), an admonition or a footer; ``ends_with_colon``: it introduces a code block or a
list the stem does not show; ``refers_to_example``: it points at an example, a listing or "the following"
without including it; ``issue_reference``: the answer is an issue or pull-request number (``#1234``,
``org/repo#1234``, ``issue 1234``, ``gh-1234``) or a bare bracketed reference number; ``link_or_path``: the
answer is part of a URL, a domain, a file path or a linked page name.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragrade.corpus.types import Chunk
from ragrade.embedding.base import Embedder
from ragrade.errors import ConfigError
from ragrade.exam.placeholder import is_placeholder
from ragrade.exam.subject import section_of, subject_of
from ragrade.exam.text import derived_seed, normalise_choice, prose_mask, split_sentences, words

#: a sentence on at least this many documents of the corpus is template boilerplate (an admonition, a footer)
BOILERPLATE_DOCS = 3
#: why a candidate blank is set aside by the stem rules, in the order they are checked
STEM_RULES = ("placeholder", "boilerplate", "ends_with_colon", "refers_to_example", "issue_reference", "link_or_path")

BLANK = "____"
NAME = "offline/cloze"
OFFLINE_EXAM_NOTE = (
    "the questions were written offline (offline/cloze): each quotes a sentence of the corpus word for word with "
    "one term blanked, so lexical overlap with the source favours lexical retrieval (BM25) over dense and hybrid; "
    "natural-language questions can rank retrievers differently. For a ranking that reflects your users' "
    "questions, write the exam with a real LLM (`ragrade exam generate INDEX --llm openai/MODEL`, or "
    '`[exam] llm = "openai/MODEL"` in a job config).'
)


def is_offline_exam(meta: dict[str, Any]) -> bool:
    """True when an exam file's header says the offline cloze generator wrote it."""
    gen = meta.get("generator")
    return isinstance(gen, dict) and str(gen.get("name", "")).startswith("offline")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


KINDS = ("date", "number", "name", "code")
SUBJECTS = ("title", "topic", "none")  # what names the question's subject
_MONTHS = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
)
_MONTH_WORDS = _wordset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday"
)
_PATTERNS: list[tuple[str, str, re.Pattern[str]]] = [
    # `x` or ``x`` (reStructuredText); never the text between two literals (``a`` or ``b``)
    ("code", "backtick", re.compile(r"(?<!`)(`{1,2})(?=[^`\s])([^`\n]{2,40})(?<=[^`\s])\1(?!`)")),
    ("code", "call", re.compile(r"(?<![\w./-])[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\(\)")),
    ("code", "dotted", re.compile(r"(?<![\w./-])[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?![\w(])")),
    ("code", "snake", re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+(?![\w.])")),
    ("code", "camel", re.compile(r"(?<![\w./-])[a-z]+[A-Z][A-Za-z0-9]*(?![\w.])")),
    ("code", "flag", re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")),
    (
        "date",
        "full_date",
        re.compile(
            rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b|\b\d{{1,2}}\s+{_MONTHS}\.?,?\s+\d{{4}}\b"
            r"|\b\d{4}-\d{2}-\d{2}\b"
        ),
    ),
    ("date", "month_year", re.compile(rf"\b{_MONTHS}\s+\d{{4}}\b")),
    (
        "number",
        "number",
        re.compile(
            r"(?<![\w.$€£/-])[$€£]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?(?![\w]|[.,]\d)"
            r"|(?<![\w.$€£/-])[$€£]?\d+(?:\.\d+)?%?(?![\w]|[.,]\d)"
        ),
    ),
]
_YEAR_CUES = _wordset(
    "in since by from until till of during before after around circa year early late mid between and to "
    "as spring summer autumn fall winter"
)
_STARTERS = _wordset(
    "the a an this that these those it its in on at for if when while to by as with you we they he she "
    "our your each every all some many most after before since because however also then there here use "
    "note see i one both no not what which how why where who do does is are can will should first finally "
    "other such unlike like although once during from of or and but so yes let"
)
_WEAK_START = {"it", "this", "that", "these", "those", "they", "he", "she", "its", "their", "such", "his", "her"}
_NAME_TOKEN = re.compile(r"(?!(?:True|False|None|NaN|TODO|NOTE)\b)[A-Z][A-Za-z0-9&'’+-]*")
_SIGNATURE = re.compile(r"^\s*(?:(?:class|module|def)\s+)?[\w.]+\s*\(|^\s*(?:class|module)\s+[\w.]+\s*$")
_CONNECTORS = {"of", "de", "for", "and", "&", "von", "van", "du", "la"}
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+|[\w.+-]+@[\w-]+\.[\w.-]+")  # never asked about
_POSSESSIVE = re.compile(r"['’]s?$")  # "Message's", "Subject'": not a name on its own
_NOUN = {"date": "date", "number": "number", "name": "name", "code": "identifier"}

# a phrase pointing at something shown before or after the sentence (a code example, a list, a table)
_REFERS = re.compile(
    r"\b(?:the\s+following|as\s+follows|"
    r"(?:shown|seen|given|listed|illustrated|demonstrated|see)\s+(?:below|above|here)|"
    r"(?:example|snippet|code|command|output|listing|sample|configuration)\s+(?:below|above)|"
    r"(?:this|these|the\s+(?:above|previous|preceding|next|following))\s+"
    r"(?:examples?|snippets?|code\s+(?:blocks?|samples?|examples?)|listings?|samples?)|"
    r"here\s+is|here['’]s|like\s+(?:this|so)\b)",
    re.IGNORECASE,
)
# the word before an issue or pull-request number ("issue 12", "PR #34", "org/repo#56", "(#78)")
_ISSUE_BEFORE = re.compile(r"(?:#|\b(?:issues?|bugs?|tickets?|prs?|pull\s+requests?|pulls?|gh|bpo)[\s#:]*)$", re.I)
_ISSUE_TERM = re.compile(r"(?:#|gh-|bpo-|(?:issue|pr)\s*#?\s*)\d+", re.IGNORECASE)
_PAGE_FILE = re.compile(r"\.(?:md|rst|html?|txt|ipynb|pdf|com|org|net|io|dev|edu|gov)$", re.IGNORECASE)


def sentence_key(sentence: str) -> str:
    """A sentence's comparison key for boilerplate: its lower-case words (punctuation and markup aside)."""
    return " ".join(words(sentence))


def _sentence_rule(sentence: str) -> str | None:
    """Why ``sentence`` cannot stand on its own as a stem (a :data:`STEM_RULES` name), or None."""
    if sentence.rstrip(" \t*_`)]").endswith(":"):
        return "ends_with_colon"
    for m in _REFERS.finditer(sentence):
        colon = sentence.find(":", m.end())
        if colon < 0 or len(words(sentence[colon + 1 :])) < 2:  # "... the following: a, b and c" shows it
            return "refers_to_example"
    return None


def _answer_rule(text: str, t: KeyTerm) -> str | None:
    """Why ``t`` is no fact to ask about: an issue/PR number or a URL, domain or path fragment; else None."""
    s0, s1 = t.sentence
    before = text[max(s0, t.start - 20) : t.start]
    after = text[t.end : min(s1, t.end + 2)]
    if t.fmt == "backtick":  # the code span's own delimiters
        before, after = before.rstrip("`"), after.lstrip("`")
    if _ISSUE_TERM.fullmatch(t.text):
        return "issue_reference"
    if t.kind == "number" and re.fullmatch(r"\d+", t.text):
        if _ISSUE_BEFORE.search(before):
            return "issue_reference"
        # "(1234)", "[12]": a changelog's issue number (a reST :issue: role) or a citation
        if (before.endswith("[") and after.startswith("]")) or (
            len(t.text) >= 3 and before.endswith("(") and after.startswith(")")
        ):
            return "issue_reference"
    if re.search(r"[/\\]", t.text) or _PAGE_FILE.search(t.text):
        return "link_or_path"
    if before[-1:] in ("/", "\\", "#", "@") or after[:1] in ("/", "\\", "@") or re.match(r"#\w", after):
        return "link_or_path"
    return None


@dataclass(frozen=True)
class KeyTerm:
    """A candidate key term in a chunk: ``text`` at ``chunk.text[start:end]`` inside ``sentence``."""

    text: str
    kind: str
    fmt: str
    start: int
    end: int
    sentence: tuple[int, int]


def _number_fmt(term: str) -> str:
    if term.endswith("%"):
        return "percent"
    if term[0] in "$€£":
        return "money"
    if "." in term:
        return "decimal"
    digits = len(term.replace(",", ""))
    return "integer_small" if digits == 1 else f"integer_{min(digits, 5)}"


def _prev_word(text: str, pos: int) -> str:
    m = re.search(r"(\w+)\W*$", text[max(0, pos - 30) : pos])
    return m.group(1).lower() if m else ""


def _spaces(gap: str) -> bool:
    return bool(gap) and not gap.strip() and "\n" not in gap


def _names(text: str, s0: int, s1: int) -> list[tuple[int, int]]:
    """Spans of runs of capitalised tokens in ``text[s0:s1]`` (a single sentence-initial word is skipped)."""
    toks = [(m.start() + s0, m.end() + s0, m.group(0)) for m in re.finditer(r"[\w&'’+-]+", text[s0:s1])]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(toks):
        start_tok = i
        if _NAME_TOKEN.fullmatch(toks[i][2]) and toks[i][2].lower() not in _MONTH_WORDS:
            j = i
            while j + 1 < len(toks) and _spaces(text[toks[j][1] : toks[j + 1][0]]):
                nxt = toks[j + 1][2]
                if _NAME_TOKEN.fullmatch(nxt) and nxt.lower() not in _MONTH_WORDS:
                    j += 1
                elif (
                    nxt.lower() in _CONNECTORS
                    and j + 2 < len(toks)
                    and _NAME_TOKEN.fullmatch(toks[j + 2][2])
                    and _spaces(text[toks[j][1] : toks[j + 1][0]])
                    and _spaces(text[toks[j + 1][1] : toks[j + 2][0]])
                    and toks[j + 2][2].lower() not in _MONTH_WORDS
                ):
                    j += 2
                else:
                    break
            first = toks[start_tok][2]
            at_start = start_tok == 0
            if at_start and first.lower() in _STARTERS:
                start_tok += 1
                while start_tok <= j and toks[start_tok][2].lower() in _CONNECTORS:
                    start_tok += 1
            if start_tok <= j:
                single = start_tok == j
                word = toks[start_tok][2]
                acronym = word.isupper() and len(word) >= 2
                if (
                    not (single and start_tok == 0 and not acronym)
                    and not (single and len(word) < 2)
                    and (word.lower() not in _STARTERS or not single)
                ):
                    spans.append((toks[start_tok][0], toks[j][1]))
            i = j + 1
        else:
            i += 1
    return spans


def extract_terms(text: str, *, in_code: bool = False) -> list[KeyTerm]:
    """Key-term candidates of ``text``, one per span (code > date > number > name when they overlap).

    Only prose sentences are read (:func:`~ragrade.exam.text.prose_mask`: no fenced code, headings, table rows
    or list markers); ``in_code`` says the text starts inside a code block (a chunk continuing a split one).
    """
    out: list[KeyTerm] = []
    for s0, s1 in split_sentences(prose_mask(text, in_code=in_code)):
        taken: list[tuple[int, int]] = [(m.start(), m.end()) for m in _URL.finditer(text, s0, s1)]

        def free(a: int, b: int, taken: list[tuple[int, int]] = taken) -> bool:
            return all(b <= x or a >= y for x, y in taken)

        found: list[KeyTerm] = []
        for kind, fmt, pat in _PATTERNS:
            for m in pat.finditer(text, s0, s1):
                a, b = (m.start(2), m.end(2)) if fmt == "backtick" else (m.start(), m.end())
                if not free(a, b):
                    continue
                term = text[a:b]
                k, f = kind, fmt
                if kind == "number":
                    plain = term.replace(",", "")
                    if (
                        re.fullmatch(r"1[6-9]\d\d|20\d\d", plain)
                        and "," not in term
                        and (_prev_word(text, a) in _YEAR_CUES or text[b : b + 1] in ")")
                    ):
                        k, f = "date", "year"
                    else:
                        f = _number_fmt(term)
                    if a == s0 and re.match(r"\d+[.)]\s", text[a : a + 4]):
                        continue  # a list marker, not a fact
                taken.append((a, b))
                found.append(KeyTerm(term, k, f, a, b, (s0, s1)))
        for a, b in _names(text, s0, s1):
            term = text[a:b]
            if free(a, b) and not _POSSESSIVE.search(term):
                fmt = "acronym" if term.isupper() else ("multi" if " " in term else "single")
                taken.append((a, b))
                found.append(KeyTerm(term, "name", fmt, a, b, (s0, s1)))
        out.extend(sorted(found, key=lambda t: t.start))
    return out


def _occurs(term: str, text: str) -> bool:
    """Whether ``term`` occurs in ``text`` as a whole token sequence (case-insensitive)."""
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE) is not None


def _count(term: str, text: str) -> int:
    return len(re.findall(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE))


def _numeric_key(term: str) -> str:
    return re.sub(r"[,$€£%]", "", term).lstrip("0") or "0"


def _term_score(chunk_text: str, t: KeyTerm, subject: str) -> float:
    """How good ``t`` is as the asked-for fact (0 = unusable)."""
    sentence = chunk_text[t.sentence[0] : t.sentence[1]]
    n_words = len(words(sentence))
    if n_words < 7 or n_words > 60 or len(sentence) > 420 or BLANK in sentence or len(t.text) > 40:
        return 0.0
    if _count(t.text, sentence) != 1 or (subject and (_occurs(t.text, subject) or _occurs(subject, t.text))):
        return 0.0
    if sum(ch in "{}[];=<>|" for ch in sentence) > 3 or _SIGNATURE.match(sentence):
        return 0.0  # code, tables, markup: not a statement
    score = {"date": 1.0, "number": 0.9, "name": 0.8, "code": 1.0}[t.kind]
    if t.fmt == "integer_small":
        score *= 0.4
    first = (words(sentence) or [""])[0]
    if first in _WEAK_START:
        score *= 0.5
    if 10 <= n_words <= 35:
        score *= 1.2
    return score


_TOKEN = re.compile(r"\S+")


def stem_context(before: str, after: str, window: int) -> tuple[str, str]:
    """At most ``window`` words of ``before`` (its end) and of ``after`` (its start); cut sides get ``...``.

    Tokens are whitespace-separated; a token without a letter or digit (a dash,
    a bullet) does not count as a word but is kept when inside the window.
    """
    left = list(_TOKEN.finditer(before))
    counted = [m for m in left if re.search(r"\w", m.group(0))]
    if len(counted) > window:
        before = "... " + before[counted[-window].start() :]
    right = list(_TOKEN.finditer(after))
    counted = [m for m in right if re.search(r"\w", m.group(0))]
    if len(counted) > window:
        after = after[: counted[window - 1].end()].rstrip(",;:") + " ..."
    return before, after


@dataclass(frozen=True)
class _PoolEntry:
    text: str
    kind: str
    fmt: str
    chunk: int
    window: frozenset[str]


def _window(text: str, t: KeyTerm, width: int = 6) -> frozenset[str]:
    before = words(text[max(t.sentence[0], t.start - 80) : t.start])[-width:]
    after = words(text[t.end : min(t.sentence[1], t.end + 80)])[:width]
    return frozenset(before + after)


def boilerplate_sentences(chunks: Iterable[Chunk], min_docs: int = BOILERPLATE_DOCS) -> frozenset[str]:
    """Keys (:func:`sentence_key`) of the prose sentences found on at least ``min_docs`` documents."""
    docs: dict[str, set[str]] = defaultdict(set)
    for c in chunks:
        text = prose_mask(c.text, in_code=bool(c.metadata.get("fence_open")))
        for a, b in split_sentences(text):
            key = sentence_key(c.text[a:b])
            if key.count(" ") >= 3 and len(seen := docs[key]) < min_docs:
                seen.add(c.doc_id)
    return frozenset(k for k, seen in docs.items() if len(seen) >= min_docs)


class _CaseStats:
    """How often each word is written capitalised vs lower-case in a corpus (a truecasing cue)."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.lower: Counter[str] = Counter()
        self.upper: Counter[str] = Counter()
        for text in texts:
            for w in re.findall(r"(?<![\w.])[A-Za-z][a-z]+(?![\w])", text):
                (self.upper if w[0].isupper() else self.lower)[w.lower()] += 1

    def plausible(self, t: KeyTerm) -> bool:
        """False for a single capitalised word that is mostly written in lower case (``Return``, ``Either``)."""
        if t.kind != "name" or t.fmt == "acronym":
            return True
        for word in t.text.split():
            if word.lower() in _CONNECTORS or re.search(r"[A-Z0-9]", word[1:]) or not word.isalpha():
                continue  # CamelCase, digits, acronyms: identifier-like names (TarInfo, OSError, IMAP4)
            key = word.lower()
            if self.lower[key] * 4 > self.upper[key]:
                return False
        return True


class ClozeGenerator:
    """Writes one cloze question per chunk; distractors are drawn from ``pool_chunks``."""

    def __init__(
        self,
        pool_chunks: Sequence[Chunk],
        embedder: Embedder,
        *,
        seed: int = 0,
        topic_field: str | None = None,
        stem_window: int | None = None,
        stem_subject: str = "title",
    ) -> None:
        self.chunks = list(pool_chunks)
        self.embedder = embedder
        self.seed = seed
        self.topic_field = topic_field
        self.stem_window: int | None = None
        self.stem_subject = "title"
        self.set_stem(stem_window, stem_subject)
        self._index = {c.id: i for i, c in enumerate(self.chunks)}
        self._case = _CaseStats(c.text for c in self.chunks)
        self.terms: list[list[KeyTerm]] = [self._extract(c) for c in self.chunks]
        self.boilerplate = boilerplate_sentences(self.chunks)  # the pool: the whole corpus, or a sample of it
        self.set_aside: dict[str, Counter[str]] = {}  # chunk id -> stem rule -> candidate blanks set aside
        pool: dict[str, dict[str, _PoolEntry]] = defaultdict(dict)
        for ci, (chunk, terms) in enumerate(zip(self.chunks, self.terms, strict=True)):
            for t in terms:
                if _answer_rule(chunk.text, t) is not None or is_placeholder(chunk.text[t.sentence[0] : t.sentence[1]]):
                    continue  # an issue number, a path or a number in filler text is no plausible distractor either
                key = _numeric_key(t.text) if t.kind == "number" else normalise_choice(t.text)
                pool[t.kind].setdefault(key, _PoolEntry(t.text, t.kind, t.fmt, ci, _window(chunk.text, t)))
        self.pool = {k: list(v.values()) for k, v in pool.items()}
        self._chunk_vecs: np.ndarray | None = None

    def _extract(self, chunk: Chunk) -> list[KeyTerm]:
        """The plausible key terms of the prose of ``chunk``."""
        in_code = bool(chunk.metadata.get("fence_open"))
        return [t for t in extract_terms(chunk.text, in_code=in_code) if self._case.plausible(t)]

    def set_stem(self, window: int | None, subject: str = "title") -> None:
        """How questions are worded: ``window`` words each side of the blank (None: the whole sentence), and
        the subject named in the lead (``title``, ``topic`` or ``none``)."""
        if window is not None and window < 1:
            raise ConfigError(f"stem_window must be at least 1 word, got {window}")
        if subject not in SUBJECTS:
            raise ConfigError(f"stem_subject must be one of {', '.join(SUBJECTS)}, got '{subject}'")
        self.stem_window = window
        self.stem_subject = subject

    def stem_rule(self, text: str, t: KeyTerm) -> str | None:
        """Why the blank ``t`` of ``text`` is set aside (a :data:`STEM_RULES` name), or None when it may be asked."""
        sentence = text[t.sentence[0] : t.sentence[1]]
        if is_placeholder(sentence):
            return "placeholder"
        if sentence_key(sentence) in self.boilerplate:
            return "boilerplate"
        return _sentence_rule(sentence) or _answer_rule(text, t)

    def set_aside_counts(self) -> dict[str, int]:
        """Candidate blanks set aside per stem rule, over the chunks asked about so far."""
        total: Counter[str] = Counter()
        for counts in self.set_aside.values():
            total.update(counts)
        return {r: total[r] for r in STEM_RULES if total[r]}

    def _vecs(self) -> np.ndarray:
        if self._chunk_vecs is None:
            self._chunk_vecs = np.asarray(self.embedder.embed([c.text for c in self.chunks]), dtype=np.float64)
        return self._chunk_vecs

    def _candidates(self, chunk: Chunk, t: KeyTerm, question: str) -> list[_PoolEntry]:
        akey = _numeric_key(t.text) if t.kind == "number" else normalise_choice(t.text)
        out = []
        chunk_low, q_low = chunk.text.lower(), question.lower()
        for e in self.pool.get(t.kind, []):
            ekey = _numeric_key(e.text) if e.kind == "number" else normalise_choice(e.text)
            if ekey == akey or self.chunks[e.chunk].id == chunk.id:
                continue
            low = e.text.lower()
            if (low in chunk_low and _occurs(e.text, chunk.text)) or (low in q_low and _occurs(e.text, question)):
                continue
            if normalise_choice(e.text) in normalise_choice(t.text) or normalise_choice(t.text) in normalise_choice(
                e.text
            ):
                continue
            out.append(e)
        return out

    def _plan(self, chunk: Chunk) -> dict[str, Any]:
        """Pick the key term (seeded, weighted by quality) among those with enough same-kind distractors."""
        rng = random.Random(derived_seed(self.seed, "cloze", chunk.id))
        subject = subject_of(chunk, self.topic_field, prefer=self.stem_subject)
        terms = self.terms[self._index[chunk.id]] if chunk.id in self._index else self._extract(chunk)
        order: list[tuple[float, KeyTerm]] = []
        set_aside: Counter[str] = Counter()
        for t in terms:
            if (s := _term_score(chunk.text, t, self._subject(chunk, t, subject))) <= 0:
                continue
            if why := self.stem_rule(chunk.text, t):
                set_aside[why] += 1
            else:
                order.append((s, t))
        self.set_aside[chunk.id] = set_aside
        if not order:
            if set_aside:  # every usable blank broke a stem rule: the most frequent one is the reason
                why = max(STEM_RULES, key=lambda r: (set_aside[r], -STEM_RULES.index(r)))
                detail = ", ".join(f"{r} {n}" for r, n in sorted(set_aside.items()))
                return {"failure": why, "detail": f"every candidate blank was set aside ({detail})"}
            return {"failure": "no_key_term"}
        while order:
            pick = rng.choices(range(len(order)), weights=[s * s for s, _ in order], k=1)[0]
            _, t = order.pop(pick)
            q = self._question(chunk, t, self._subject(chunk, t, subject))
            cands = self._candidates(chunk, t, q)
            if len(cands) >= 3:
                return {"chunk": chunk, "term": t, "question": q, "cands": cands}
        return {"failure": "no_distractors"}

    def generate_many(self, chunks: Sequence[Chunk]) -> list[dict[str, Any]]:
        """Raw questions ``{"question", "choices", "answer", "generator"}`` or ``{"failure": reason}``, in order.

        The blanked sentences of all chunks are embedded in one call.
        """
        plans = [self._plan(c) for c in chunks]
        todo = [p for p in plans if "failure" not in p]
        if todo:
            qvecs = np.asarray(self.embedder.embed([p["question"].split("? ", 1)[-1] for p in todo]), dtype=np.float64)
            for p, qv in zip(todo, qvecs, strict=True):
                p["chosen"] = self._rank(p["chunk"].text, p["term"], qv, p["cands"])
        out: list[dict[str, Any]] = []
        for p in plans:
            if "failure" in p:
                out.append({k: p[k] for k in ("failure", "detail") if k in p})
                continue
            chosen, t = p["chosen"], p["term"]
            if len(chosen) < 3:
                out.append({"failure": "no_distractors"})
                continue
            out.append(
                {
                    "question": p["question"],
                    "choices": [t.text, *[e.text for e in chosen]],
                    "answer": 0,
                    "generator": {
                        "name": NAME,
                        "kind": t.kind,
                        "format": t.fmt,
                        "seed": self.seed,
                        "distractor_chunks": [self.chunks[e.chunk].id for e in chosen],
                        **self._stem_params(),
                    },
                }
            )
        return out

    def _stem_params(self) -> dict[str, Any]:
        """The stem options, recorded with each question when they differ from the defaults."""
        out: dict[str, Any] = {}
        if self.stem_window is not None:
            out["stem_window"] = self.stem_window
        if self.stem_subject != "title":
            out["stem_subject"] = self.stem_subject
        return out

    def generate(self, chunk: Chunk) -> dict[str, Any]:
        """The raw question for one chunk (see :meth:`generate_many`)."""
        return self.generate_many([chunk])[0]

    def _subject(self, chunk: Chunk, t: KeyTerm, page: str) -> str:
        """The question's subject for the blank ``t``: with ``stem_subject="title"`` the section holding the
        sentence and the page (``Retry policy (Queue options)``) when the page has sections, else ``page``."""
        if self.stem_subject != "title" or not page:
            return page
        section = section_of(chunk, t.start)
        if not section or section == page:
            return page
        return f"{section} ({page})" if len(section) + len(page) <= 110 else section[:80]

    def _question(self, chunk: Chunk, t: KeyTerm, subject: str) -> str:
        s0, s1 = t.sentence
        before, after = chunk.text[s0 : t.start], chunk.text[t.end : s1]
        if t.fmt == "backtick":  # the blank stands for the inline code, its backticks included
            before, after = before.rstrip("`"), after.lstrip("`")
        if self.stem_window is not None:
            before, after = stem_context(before, after, self.stem_window)
        sentence = re.sub(r"\s+", " ", before + BLANK + after).strip()
        noun = _NOUN[t.kind]
        if t.fmt == "percent":
            noun = "percentage"
        elif t.fmt == "money":
            noun = "amount"
        elif t.fmt == "year":
            noun = "year"
        lead = (
            f"About {subject}, which {noun} correctly fills the blank?"
            if subject
            else (f"Which {noun} correctly fills the blank?")
        )
        return f"{lead} {sentence}"

    def _rank(self, chunk_text: str, t: KeyTerm, qv: np.ndarray, cands: list[_PoolEntry]) -> list[_PoolEntry]:
        """The three most plausible distinct distractors (``qv``: embedding of the blanked sentence)."""
        window = _window(chunk_text, t)
        cheap = []
        for e in cands:
            fmt = 1.0 if e.fmt == t.fmt else 0.0
            overlap = len(window & e.window) / max(1, len(window | e.window))
            length = abs(len(e.text) - len(t.text)) / max(len(e.text), len(t.text))
            cheap.append(0.6 * fmt + 0.6 * overlap - 0.5 * length)
        top = np.argsort(-np.asarray(cheap), kind="stable")[:60]
        vecs = self._vecs()
        scored = []
        for i in top:
            e = cands[int(i)]
            scored.append((cheap[int(i)] + float(vecs[e.chunk] @ qv), int(i)))
        scored.sort(key=lambda x: (-x[0], x[1]))
        chosen: list[_PoolEntry] = []
        for _, i in scored:
            e = cands[i]
            key = normalise_choice(e.text)
            if any(key in normalise_choice(c.text) or normalise_choice(c.text) in key for c in chosen):
                continue
            chosen.append(e)
            if len(chosen) == 3:
                break
        return chosen

    def absurd_distractors(self, chunk: Chunk, kind: str, answer: str, question: str, k: int = 3) -> list[str]:
        """``k`` terms of other kinds from the chunks least similar to ``chunk`` (an unrelated-text sanity check)."""
        rng = random.Random(derived_seed(self.seed, "absurd", chunk.id))
        others = [
            e
            for kd, entries in self.pool.items()
            if kd != kind
            for e in entries
            if not _occurs(e.text, chunk.text)
            and not _occurs(e.text, question)
            and normalise_choice(e.text) != normalise_choice(answer)
        ]
        if not others:
            return []
        vecs = self._vecs()
        src = self._index.get(chunk.id)
        if src is not None:
            sims = vecs @ vecs[src]
            others.sort(key=lambda e: (float(sims[e.chunk]), e.text))
            others = others[: max(k * 10, 30)]
        rng.shuffle(others)
        out: list[str] = []
        for e in others:
            if normalise_choice(e.text) not in {normalise_choice(x) for x in out}:
                out.append(e.text)
            if len(out) == k:
                break
        return out


__all__ = [
    "BLANK",
    "BOILERPLATE_DOCS",
    "KINDS",
    "NAME",
    "OFFLINE_EXAM_NOTE",
    "STEM_RULES",
    "SUBJECTS",
    "ClozeGenerator",
    "KeyTerm",
    "boilerplate_sentences",
    "extract_terms",
    "is_offline_exam",
    "sentence_key",
    "stem_context",
    "subject_of",
]
