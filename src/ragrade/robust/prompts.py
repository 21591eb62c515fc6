"""Prompts of the robustness testbeds (English and Chinese), overridable from a TOML or JSON file.

The answering prompt tells the model to answer from the documents, to reply
with a fixed rejection sentence when they do not hold the answer, and to
start with a fixed error sentence when they contain factual errors. The
English sentences are the shared constants of ``ragrade.llm.phrases`` (the
offline extractive reader says them too). Every built-in sentence contains
the original benchmark's key words ("insufficient information" / "信息不足",
"factual errors" / "事实性错误"), so both scorers recognise them;
:func:`sentence_warnings` says when a custom sentence would not be.

An override file has one table per language, each key optional::

    [en]
    system = "..."           # may use {rejection} and {error}
    user = "Documents:\\n{documents}\\n\\nQuestion: {question}"
    document = "[{index}] {text}"
    closed_system = "..."    # no-document condition (counterfactual Acc)
    closed_user = "Question: {question}"
    rejection_sentence = "..."
    error_sentence = "..."

    [judge]
    rejection = "... {question} ... {response} ..."
    error = "... {question} ... {response} ..."
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError
from ragrade.robust.detect import ERROR_SENTENCE_ZH, REJECTION_SENTENCE_ZH, Detectors

LANGS = ("en", "zh")
_LANG_KEYS = ("system", "user", "document", "closed_system", "closed_user", "rejection_sentence", "error_sentence")
_PLACEHOLDERS = {
    "system": {"rejection", "error"},
    "user": {"documents", "question"},
    "document": {"index", "text"},
    "closed_system": {"rejection", "error"},
    "closed_user": {"question"},
    "rejection_sentence": set(),
    "error_sentence": set(),
}

_EN_SYSTEM = (
    "You answer questions using only the documents supplied with each question. Some documents may be "
    "irrelevant to the question, and some may state things that are not true. If the documents contain the "
    "answer, give it briefly and precisely. If none of the documents contains the answer, reply with exactly "
    'this sentence and nothing else: "{rejection}" If you notice that the documents contain factual errors, '
    'first write exactly this sentence: "{error}" and then give the correct answer.'
)
_ZH_SYSTEM = (
    "请只根据每个问题附带的文档来回答问题。部分文档可能与问题无关，也可能包含不真实的内容。"
    "如果文档中有答案，请简洁、准确地给出答案。如果所有文档都不包含答案，请只回复这句话：“{rejection}”"
    "如果你发现文档中存在事实性错误，请先写出这句话：“{error}”，然后给出正确答案。"
)
_EN_CLOSED = "Answer the question briefly and precisely from what you know."
_ZH_CLOSED = "请根据你自己的知识简洁、准确地回答问题。"

JUDGE_REJECTION = (
    "You are checking whether an assistant declined to answer a question. Below are the question and the "
    "assistant's reply. Say yes if the reply states that it cannot answer, or that the available information "
    "is not enough to answer; say no if the reply gives an answer (right or wrong), even a hedged one.\n\n"
    "Question: {question}\nReply: {response}\n\n"
    'Answer with a JSON object only: {{"verdict": "yes"}} or {{"verdict": "no"}}, optionally with a short '
    '"reason".'
)
JUDGE_ERROR = (
    "You are checking whether an assistant pointed out that the documents it was given contain factual "
    "errors. Below are the question and the assistant's reply. Say yes if the reply says the documents (or "
    "some of them) are wrong, inaccurate or contradicted by facts; say no otherwise. Do not judge whether the "
    "reply itself is true.\n\nQuestion: {question}\nReply: {response}\n\n"
    'Answer with a JSON object only: {{"verdict": "yes"}} or {{"verdict": "no"}}, optionally with a short '
    '"reason".'
)
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
    "required": ["verdict"],
}


@dataclass(frozen=True)
class LangPrompts:
    """The templates of one language."""

    system: str
    user: str
    document: str
    closed_system: str
    closed_user: str
    rejection_sentence: str
    error_sentence: str


@dataclass(frozen=True)
class PromptSet:
    """Templates per language plus the judge prompts."""

    langs: dict[str, LangPrompts]
    judge_rejection: str = JUDGE_REJECTION
    judge_error: str = JUDGE_ERROR
    source: str = "builtin"
    extra: dict[str, Any] = field(default_factory=dict)

    def lang(self, lang: str) -> LangPrompts:
        """The templates of ``lang`` (ConfigError when missing)."""
        if lang not in self.langs:
            raise ConfigError(f"no prompts for language '{lang}'; available: {', '.join(sorted(self.langs))}")
        return self.langs[lang]


def default_prompts() -> PromptSet:
    """Our built-in English and Chinese prompts."""
    from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE

    en = LangPrompts(
        _EN_SYSTEM,
        "Documents:\n{documents}\n\nQuestion: {question}",
        "[{index}] {text}",
        _EN_CLOSED,
        "Question: {question}",
        REJECTION_SENTENCE,
        ERROR_SENTENCE,
    )
    zh = LangPrompts(
        _ZH_SYSTEM,
        "文档：\n{documents}\n\n问题：{question}",
        "[{index}] {text}",
        _ZH_CLOSED,
        "问题：{question}",
        REJECTION_SENTENCE_ZH,
        ERROR_SENTENCE_ZH,
    )
    return PromptSet({"en": en, "zh": zh})


def _check_template(text: Any, allowed: set[str], where: str) -> str:
    if not isinstance(text, str):
        raise ConfigError(f"{where} must be a string")
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise ConfigError(f"{where}: malformed template ({exc}); write literal braces as {{{{ and }}}}") from exc
    unknown = {n for n in names if n} - allowed
    if unknown or "" in names:
        bad = ", ".join(sorted(unknown)) or "{}"
        raise ConfigError(f"{where}: unknown placeholder(s) {bad}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    return text


def load_prompts(path: str | Path | None) -> PromptSet:
    """The built-in prompts, overridden by the TOML or JSON file at ``path`` when given."""
    base = default_prompts()
    if path is None:
        return base
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: prompt file not found")
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    else:
        from ragrade.config import load_toml

        raw = load_toml(path)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: expected a table per language")
    langs = dict(base.langs)
    judge_rej, judge_err = base.judge_rejection, base.judge_error
    for section, values in raw.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{path}: [{section}] must be a table")
        if section == "judge":
            for key, value in values.items():
                if key not in ("rejection", "error"):
                    raise ConfigError(f"{path}: [judge] has unknown key '{key}'; valid: rejection, error")
                checked = _check_template(value, {"question", "response"}, f"{path}: [judge].{key}")
                judge_rej, judge_err = (checked, judge_err) if key == "rejection" else (judge_rej, checked)
            continue
        if section not in LANGS:
            raise ConfigError(f"{path}: unknown section [{section}]; valid: {', '.join((*LANGS, 'judge'))}")
        updates: dict[str, str] = {}
        for key, value in values.items():
            if key not in _LANG_KEYS:
                raise ConfigError(f"{path}: [{section}] has unknown key '{key}'; valid: {', '.join(_LANG_KEYS)}")
            updates[key] = _check_template(value, _PLACEHOLDERS[key], f"{path}: [{section}].{key}")
        langs[section] = replace(langs[section], **updates)
    return PromptSet(langs, judge_rej, judge_err, source=str(path))


def format_documents(p: LangPrompts, docs: Sequence[str]) -> str:
    """The documents block: one formatted line per document, numbered from 1."""
    return "\n".join(p.document.format(index=i + 1, text=d) for i, d in enumerate(docs))


def answer_messages(
    p: LangPrompts, question: str, docs: Sequence[str] | None, *, system: bool = True
) -> tuple[tuple[str, str], ...]:
    """(role, content) messages: with documents, or the closed-book pair when ``docs`` is None.

    ``system=False`` leaves the system instruction out (the original script does
    so when a question has no document at all).
    """
    if docs is None:
        closed = p.closed_system.format(rejection=p.rejection_sentence, error=p.error_sentence)
        return (("system", closed), ("user", p.closed_user.format(question=question)))
    user = ("user", p.user.format(documents=format_documents(p, docs), question=question))
    if not system:
        return (user,)
    return (("system", p.system.format(rejection=p.rejection_sentence, error=p.error_sentence)), user)


def sentence_warnings(p: LangPrompts, lang: str, scoring: str, detectors: Detectors) -> list[str]:
    """Why the instructed rejection/error sentences of ``p`` would go unrecognised; empty when they would not.

    Under ``rgb`` scoring a refusal must contain "insufficient information" or
    "信息不足" and an error report "factual errors" or "事实性错误" (exact case;
    Chinese runs drop ASCII spaces first); under the default scoring the
    detectors must find them. The system instruction must also ask for them.
    """
    from ragrade.robust.rgb_scoring import RGB_ERROR, RGB_REFUSAL, rgb_label_response

    system = p.system.format(rejection=p.rejection_sentence, error=p.error_sentence)
    checks = (
        ("rejection", p.rejection_sentence, RGB_REFUSAL, "rejected", detectors.rejection),
        ("error", p.error_sentence, RGB_ERROR, "error_detected", detectors.error),
    )
    out: list[str] = []
    for what, sentence, phrases, label, detector in checks:
        if scoring == "rgb":
            ok = bool(rgb_label_response(sentence, [["\x00"]], lang)[label])
            lacks = " or ".join(f'"{x}"' for x in phrases)
        else:
            ok, lacks = detector(sentence), "any of the configured phrases"
        if not ok:
            out.append(
                f'the {what} sentence "{sentence}" ({lang}) will not be recognised by the {scoring} '
                f"scoring: it lacks {lacks}"
            )
        if sentence not in system:
            out.append(f'the {lang} system instruction does not ask for the {what} sentence "{sentence}"')
    return out


def judge_prompt(prompts: PromptSet, task: str, question: str, response: str) -> str:
    """The judge's prompt for ``task`` ("rejection" or "error")."""
    template = prompts.judge_rejection if task == "rejection" else prompts.judge_error
    return template.format(question=question, response=response)


__all__ = [
    "JUDGE_ERROR",
    "JUDGE_REJECTION",
    "JUDGE_SCHEMA",
    "LANGS",
    "LangPrompts",
    "PromptSet",
    "answer_messages",
    "default_prompts",
    "format_documents",
    "judge_prompt",
    "load_prompts",
    "sentence_warnings",
]
