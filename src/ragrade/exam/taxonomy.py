"""Question taxonomy: revised Bloom levels (multi-label) and the question word.

Bloom levels are found by keyword verbs after lemmatisation with a small,
rule-based English lemmatiser (suffix rules plus an irregular-verb table; no
downloads). A question matches every level one of whose keywords occurs as a
lemma among its tokens. A factual wh-question without any keyword (``What is
the default port of X?``) is tagged ``remember``.

The question word is the first interrogative *token* of the sentence that asks
the question (the last one ending with ``?``, else the whole text): ``show``
is not ``how`` and ``somewhat`` is not ``what``.

A cloze question (a blanked sentence: the offline generator's form) is ``remember``
only: filling a blank recalls a stated fact, whatever verbs the quoted sentence holds.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

BLOOM_LEVELS = ("remember", "understand", "apply", "analyze", "evaluate", "create")
QWORDS = ("what", "which", "how", "when", "why", "where", "who", "other")

# keyword verbs per level (lemmas); a verb may serve several levels, as in the revised taxonomy's tables
BLOOM_KEYWORDS: dict[str, frozenset[str]] = {
    "remember": frozenset(
        [
            "list",
            "identify",
            "name",
            "define",
            "state",
            "mention",
            "recall",
            "label",
            "repeat",
            "recognize",
            "recognise",
            "memorize",
            "retrieve",
            "locate",
            "match",
            "quote",
            "reproduce",
            "select",
        ]
    ),
    "understand": frozenset(
        [
            "explain",
            "describe",
            "summarize",
            "summarise",
            "predict",
            "interpret",
            "paraphrase",
            "translate",
            "illustrate",
            "rephrase",
            "clarify",
            "classify",
            "infer",
            "discuss",
            "estimate",
            "understand",
            "mean",
            "represent",
            "indicate",
            "exemplify",
            "outline",
            "characterize",
            "characterise",
        ]
    ),
    "apply": frozenset(
        [
            "apply",
            "use",
            "demonstrate",
            "solve",
            "show",
            "execute",
            "implement",
            "operate",
            "practice",
            "practise",
            "configure",
            "run",
            "calculate",
            "compute",
            "perform",
            "modify",
            "deploy",
            "install",
            "enable",
            "handle",
        ]
    ),
    "analyze": frozenset(
        [
            "analyze",
            "analyse",
            "distinguish",
            "compare",
            "contrast",
            "differentiate",
            "examine",
            "inspect",
            "investigate",
            "troubleshoot",
            "diagnose",
            "debug",
            "cause",
            "attribute",
            "organize",
            "organise",
            "relate",
            "deduce",
        ]
    ),
    "evaluate": frozenset(
        [
            "evaluate",
            "assess",
            "judge",
            "justify",
            "critique",
            "rate",
            "rank",
            "decide",
            "choose",
            "recommend",
            "verify",
            "validate",
            "prioritize",
            "prioritise",
            "measure",
            "weigh",
            "defend",
            "argue",
            "support",
            "appraise",
            "conclude",
        ]
    ),
    "create": frozenset(
        [
            "create",
            "design",
            "construct",
            "produce",
            "invent",
            "devise",
            "formulate",
            "compose",
            "generate",
            "develop",
            "build",
            "plan",
            "propose",
            "assemble",
            "customize",
            "customise",
            "write",
            "author",
            "combine",
        ]
    ),
}
_ALL_KEYWORDS = frozenset().union(*BLOOM_KEYWORDS.values())

# question words and the class they map to
_QWORD_MAP = {
    "what": "what",
    "whatever": "what",
    "which": "which",
    "whichever": "which",
    "how": "how",
    "however": None,  # "however" is a connective, never the question word
    "when": "when",
    "whenever": "when",
    "why": "why",
    "where": "where",
    "wherever": "where",
    "who": "who",
    "whom": "who",
    "whose": "who",
    "whoever": "who",
}

# irregular verb forms -> lemma (only forms whose lemma the rules cannot reach)
_IRREGULAR: dict[str, str] = {
    "am": "be",
    "is": "be",
    "are": "be",
    "was": "be",
    "were": "be",
    "been": "be",
    "being": "be",
    "has": "have",
    "had": "have",
    "having": "have",
    "does": "do",
    "did": "do",
    "done": "do",
    "ran": "run",
    "running": "run",
    "chose": "choose",
    "chosen": "choose",
    "wrote": "write",
    "written": "write",
    "writing": "write",
    "took": "take",
    "taken": "take",
    "made": "make",
    "built": "build",
    "found": "find",
    "thought": "think",
    "understood": "understand",
    "shown": "show",
    "drew": "draw",
    "drawn": "draw",
    "gave": "give",
    "given": "give",
    "got": "get",
    "gotten": "get",
    "went": "go",
    "gone": "go",
    "knew": "know",
    "known": "know",
    "saw": "see",
    "seen": "see",
    "set": "set",
    "setting": "set",
    "put": "put",
    "read": "read",
    "led": "lead",
    "meant": "mean",
    "said": "say",
    "told": "tell",
    "brought": "bring",
    "began": "begin",
    "begun": "begin",
    "sent": "send",
    "spent": "spend",
    "held": "hold",
    "kept": "keep",
    "left": "leave",
    "lost": "lose",
    "paid": "pay",
    "sold": "sell",
    "stood": "stand",
    "won": "win",
    "planning": "plan",
    "planned": "plan",
    "debugging": "debug",
    "debugged": "debug",
    "inferred": "infer",
    "inferring": "infer",
    "referred": "refer",
    "occurred": "occur",
    "stated": "state",
    "rated": "rate",
    "ranked": "rank",
    "named": "name",
    "used": "use",
    "uses": "use",
    "using": "use",
    "caused": "cause",
    "causes": "cause",
    "causing": "cause",
}
_VOWELS = set("aeiou")
_TOKEN_RE = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")


def _ends_cvc(stem: str) -> bool:
    """Consonant-vowel-consonant ending (not w, x, y): 'hop' in 'hoping' needs its e back ('hope')."""
    if len(stem) < 3:
        return False
    a, b, c = stem[-3], stem[-2], stem[-1]
    return a not in _VOWELS and b in _VOWELS and c not in _VOWELS and c not in "wxy"


def lemma_candidates(word: str) -> list[str]:
    """Possible lemmas of an English word form, most likely first (the word itself always included)."""
    w = word.lower().replace("’", "'")
    if "'" in w:
        w = w.split("'")[0]
    out: list[str] = []

    def add(x: str) -> None:
        if x and x not in out:
            out.append(x)

    if w in _IRREGULAR:
        add(_IRREGULAR[w])
    add(w)
    if len(w) <= 3:
        return out
    if w.endswith("ies") and len(w) > 4:
        add(w[:-3] + "y")
    if w.endswith("ied") and len(w) > 4:
        add(w[:-3] + "y")
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        add(w[:-2])
    if w.endswith("es"):
        add(w[:-1])
        add(w[:-2])
    if w.endswith("s") and not w.endswith("ss"):
        add(w[:-1])
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            stem = w[: -len(suffix)]
            if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                add(stem[:-1])  # running -> run, planned -> plan
            if _ends_cvc(stem) or stem.endswith(("at", "iz", "is", "bl", "us", "v", "c", "g", "rs", "ur")):
                add(stem + "e")  # described -> describe, using -> use, summarized -> summarize
            add(stem)
            add(stem + "e")
    return out


def _vowel_groups(stem: str) -> int:
    return len(re.findall(r"[aeiouy]+", stem))


# stem endings after which a removed suffix usually took a silent e with it (described, compared, evaluated)
_E_ENDINGS = ("at", "iz", "is", "bl", "ur", "ib", "uc", "ag", "iv", "ov", "ut", "ar", "rg", "ud", "id", "ag", "ok")


def _rule_lemma(w: str) -> str:
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 3:
        return w
    if w.endswith(("ies", "ied")) and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if len(stem) < 3 or not re.search(r"[aeiouy]", stem):
                return w  # bring, red, need-like short words stay as they are
            if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                return stem[:-1]
            if (_ends_cvc(stem) and _vowel_groups(stem) == 1) or stem.endswith(_E_ENDINGS):
                return stem + "e"
            return stem
    return w


def lemmatize(word: str, vocabulary: frozenset[str] | set[str] | None = None) -> str:
    """The lemma of ``word``: with a ``vocabulary``, the first candidate in it; else the rule-based guess."""
    if vocabulary is not None:
        for c in lemma_candidates(word):
            if c in vocabulary:
                return c
    w = word.lower().replace("’", "'").split("'")[0]
    return _rule_lemma(w)


_BLANK_RE = re.compile(r"(?<!_)_{4}(?!_)")


@lru_cache(maxsize=65536)
def _keyword_lemma(token: str) -> str | None:
    for cand in lemma_candidates(token):
        if cand in _ALL_KEYWORDS:
            return cand
    return None


def bloom_levels(text: str) -> list[str]:
    """Revised Bloom levels whose keyword verbs occur (lemmatised) in ``text``, lowest level first."""
    lemmas = {lem for tok in _TOKEN_RE.findall(text) if (lem := _keyword_lemma(tok.lower())) is not None}
    return [level for level in BLOOM_LEVELS if lemmas & BLOOM_KEYWORDS[level]]


def question_word(text: str) -> str:
    """The question word (what/which/how/when/why/where/who) by interrogative token, else ``other``."""
    sentences = [s for s in re.split(r"(?<=[.!?:])\s+", text.strip()) if s]
    asked = [s for s in sentences if s.rstrip().endswith("?")]
    scopes = [asked[-1]] if asked else []
    scopes.append(text)
    for scope in scopes:
        for tok in _TOKEN_RE.findall(scope):
            cls = _QWORD_MAP.get(tok.lower())
            if cls is not None:
                return cls
    return "other"


def is_cloze(text: str) -> bool:
    """True for a fill-in-the-blank question (a ``____`` blank to fill: the offline cloze form)."""
    return _BLANK_RE.search(text) is not None


def tag_question(text: str) -> dict[str, Any]:
    """Taxonomy tags of a question: ``{"bloom": [levels...], "qword": "what"|...|"other"}``.

    A cloze question (a sentence of the corpus with one term blanked) asks to recall a stated fact,
    whatever the verbs of the quoted sentence: it is ``remember`` only, as its form can test no other level.
    """
    qword = question_word(text)
    if is_cloze(text):
        return {"bloom": ["remember"], "qword": qword}
    bloom = bloom_levels(text)
    if not bloom and qword in ("what", "which", "who", "when", "where"):
        bloom = ["remember"]
    return {"bloom": bloom, "qword": qword}


__all__ = [
    "BLOOM_KEYWORDS",
    "BLOOM_LEVELS",
    "QWORDS",
    "bloom_levels",
    "is_cloze",
    "lemma_candidates",
    "lemmatize",
    "question_word",
    "tag_question",
]
