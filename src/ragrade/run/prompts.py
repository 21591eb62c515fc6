"""The multiple-choice prompt: instructions, few-shot examples, passages, question, lettered choices.

The built-in template can be replaced per pipeline by a file: a ``.toml`` file
overrides any of the keys below, any other file replaces ``user``. Placeholders
(Python ``str.format`` fields):

- ``user``: ``{examples}``, ``{context}``, ``{question}``, ``{choices}``, ``{answer_prefix}``
- ``passage``: ``{n}``, ``{text}``; ``example``: ``{question}``, ``{choices}``, ``{letter}``, ``{answer_prefix}``
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ragrade.errors import ConfigError
from ragrade.exam.files import LETTERS, Question

_SYSTEM = (
    "You are taking a multiple-choice test. Exactly one of the four options is right. "
    "Base your choice on the reference passages when they are given."
)
_USER = "{examples}{context}Question: {question}\n{choices}\n{answer_prefix}"
_PASSAGE = "[{n}] {text}"
_EXAMPLE = "Question: {question}\n{choices}\n{answer_prefix} {letter}\n\n"
_CONTEXT_HEADER = "Reference passages:\n"
_EXAMPLES_HEADER = "Worked examples:\n\n"
_ANSWER_PREFIX = "Answer:"
_GENERATE_SUFFIX = "Reply with the letter of the right option (A, B, C or D) and nothing else."

_KEYS = (
    "system",
    "user",
    "passage",
    "example",
    "context_header",
    "examples_header",
    "answer_prefix",
    "generate_suffix",
)


@dataclass(frozen=True)
class PromptTemplate:
    """The pieces of the multiple-choice prompt (every one overridable from a file)."""

    name: str = "default"
    system: str = _SYSTEM
    user: str = _USER
    passage: str = _PASSAGE
    example: str = _EXAMPLE
    context_header: str = _CONTEXT_HEADER
    examples_header: str = _EXAMPLES_HEADER
    answer_prefix: str = _ANSWER_PREFIX
    generate_suffix: str = _GENERATE_SUFFIX

    @property
    def digest(self) -> str:
        """A short hash of the template text (recorded in the manifest)."""
        blob = "\0".join(getattr(self, k) for k in _KEYS)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def _check(self) -> None:
        probe = {
            "examples": "",
            "context": "",
            "question": "q",
            "choices": "c",
            "answer_prefix": "a",
            "n": 1,
            "text": "t",
            "letter": "A",
        }
        for key in ("user", "passage", "example"):
            try:
                getattr(self, key).format(**probe)
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(f"prompt '{self.name}': bad placeholder in '{key}' ({exc!r})") from exc


DEFAULT_TEMPLATE = PromptTemplate()


def load_template(name: str, path: str | Path) -> PromptTemplate:
    """A template from ``path`` (``.toml``: any of the keys; other files: the ``user`` part)."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read prompt template ({exc.strerror})") from exc
    if p.suffix == ".toml":
        try:
            data = tomllib.loads(raw)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: invalid TOML ({exc})") from exc
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise ConfigError(f"{p}: unknown prompt keys {unknown}; valid: {', '.join(_KEYS)}")
        tpl = replace(DEFAULT_TEMPLATE, name=name, **{k: str(v) for k, v in data.items()})
    else:
        tpl = replace(DEFAULT_TEMPLATE, name=name, user=raw)
    tpl._check()
    return tpl


def resolve_template(name: str, files: Mapping[str, str]) -> PromptTemplate:
    """The template called ``name``: the built-in one for ``default``, else the file in ``files``."""
    if name == "default" and name not in files:
        return DEFAULT_TEMPLATE
    if name not in files:
        raise ConfigError(f"prompt '{name}' has no template file")
    return load_template(name, files[name])


def format_choices(choices: Sequence[str]) -> str:
    """``A. ...`` lines."""
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def render_prompt(
    tpl: PromptTemplate,
    question: Question,
    passages: Sequence[str],
    examples: Sequence[Question] = (),
    *,
    for_generation: bool = False,
) -> tuple[str, str]:
    """``(system, user)`` texts for ``question`` with ``passages`` and few-shot ``examples``."""
    context = ""
    if passages:
        body = "\n".join(tpl.passage.format(n=i + 1, text=t.strip()) for i, t in enumerate(passages))
        context = f"{tpl.context_header}{body}\n\n"
    shots = ""
    if examples:
        shots = tpl.examples_header + "".join(
            tpl.example.format(
                question=ex.question,
                choices=format_choices(ex.choices),
                letter=LETTERS[ex.answer],
                answer_prefix=tpl.answer_prefix,
            )
            for ex in examples
        )
    prefix = tpl.answer_prefix
    if for_generation:
        prefix = f"{tpl.generate_suffix}\n{tpl.answer_prefix}"
    user = tpl.user.format(
        examples=shots,
        context=context,
        question=question.question,
        choices=format_choices(question.choices),
        answer_prefix=prefix,
    )
    return tpl.system, user


__all__ = [
    "DEFAULT_TEMPLATE",
    "PromptTemplate",
    "format_choices",
    "load_template",
    "render_prompt",
    "resolve_template",
]
