"""The question-writing prompt (overridable from a file) and the structured-output schema."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError

SYSTEM_PROMPT = (
    "You are an examiner who writes multiple-choice questions to check whether someone can find and use "
    "the facts in a body of {domain} documents. You answer with the question only, in the format asked for."
)

USER_PROMPT = """\
Read the {domain} material below and write ONE demanding multiple-choice question that can be answered \
from it.

Requirements:
1. A reader who has never seen this material must understand the question on its own. Never refer to \
"the text", "the passage", "the document", "the documentation", "the article", "the paper" or to a title \
in quotes; name the product, module, organisation or subject instead.
2. Give exactly four options, labelled A to D. Exactly one of them is right according to the material.
3. The three wrong options must sound believable to someone who has not read the material, yet be clearly \
wrong once it is read. They must not be rewordings or partial versions of the right option.
4. Make the four options alike in length, style and level of detail, so the right one does not stand out.
5. Prefer a question that needs a specific fact, value, name or step from the material over general knowledge.

Material (from {title}):
<<<
{document}
>>>

Reply with a single JSON object and nothing else:
{{"question": "...", "choices": ["...", "...", "...", "..."], "answer": "A"}}
where "answer" is the letter of the right option. If you cannot reply in JSON, use exactly this layout:
Question: <the question>
A) <option>
B) <option>
C) <option>
D) <option>
Correct Answer: <letter>
"""

#: JSON schema passed to backends that support structured output
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "choices": {"type": "array", "items": {"type": "string"}, "minItems": 4, "maxItems": 4},
        "answer": {"type": "string", "enum": ["A", "B", "C", "D"]},
    },
    "required": ["question", "choices", "answer"],
    "additionalProperties": False,
}

PLACEHOLDERS = ("{document}", "{domain}", "{title}")


def read_prompt_file(path: str | Path, *, placeholder: str | None = None, also: Sequence[str] = ()) -> str:
    """The text of the prompt file ``path``; ConfigError naming the file when it is unreadable, not UTF-8, empty,
    or lacks ``placeholder`` (the one placeholder it must hold; ``also``: the optional ones, named in the error).

    The one check of the prompt files of ``exam generate --prompt/--system-prompt`` and ``qa generate --prompt``.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the prompt file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: the prompt file is not UTF-8 text") from exc
    if not text.strip():
        raise ConfigError(f"{p}: the prompt file is empty")
    if placeholder is not None and placeholder not in text:
        more = f" (also available: {', '.join(also)})" if also else ""
        raise ConfigError(f"{p}: the prompt must contain the placeholder {placeholder}{more}")
    return text


def load_template(path: str | Path | None, default: str, *, require_document: bool) -> str:
    """A prompt template: ``default`` or the text of ``path``; ConfigError when unreadable or incomplete."""
    if path is None:
        return default
    return read_prompt_file(path, placeholder="{document}" if require_document else None, also=PLACEHOLDERS[1:])


def render(template: str, *, document: str, domain: str, title: str) -> str:
    """Fill the placeholders of ``template`` (literal braces elsewhere are kept; ``{{``/``}}`` unescaped)."""
    marker = "\x00DOC\x00"
    out = template.replace("{document}", marker).replace("{domain}", domain).replace("{title}", title)
    out = out.replace("{{", "{").replace("}}", "}")
    return out.replace(marker, document)


__all__ = [
    "PLACEHOLDERS",
    "QUESTION_SCHEMA",
    "SYSTEM_PROMPT",
    "USER_PROMPT",
    "load_template",
    "read_prompt_file",
    "render",
]
