"""Chat templates for local GGUF models: render ``messages`` into the prompt text a model expects.

A GGUF file usually carries its chat template (Jinja source under ``tokenizer.chat_template``);
:func:`render` runs it in a sandboxed Jinja environment with the variables Hugging Face templates
use (``messages``, ``bos_token``, ``eos_token``, ``add_generation_prompt``, ``raise_exception``).

Some files leave the template out; the embedded Gemma 3 270M base model is one. For the Gemma
family, whose vocabulary has dedicated turn markers (``<start_of_turn>`` / ``<end_of_turn>``),
:func:`fallback_template` supplies a template of that family's documented turn layout (a system
message is folded into the first user turn, ``assistant`` turns are written as ``model``), so chat
requests read the same way whether the file carries the template or not. Other architectures without
a template get :func:`plain_prompt` (``role: content`` lines), the same layout the ``hf`` backend uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragrade.llm.base import Message

# The Gemma turn layout, written for text-only messages: <bos><start_of_turn>user\n...<end_of_turn>\n
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(prefix='') %}"
    "{% set turns = messages %}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set ns.prefix = messages[0]['content'] + '\\n\\n' %}"
    "{% set turns = messages[1:] %}"
    "{% endif %}"
    "{% for m in turns %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' }}"
    "{% if loop.first %}{{ ns.prefix }}{% endif %}"
    "{{ m['content'] | trim }}{{ '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


class TemplateError(ValueError):
    """A chat template refused the messages (``raise_exception``) or could not be rendered."""


def fallback_template(architecture: str | None, vocabulary_has: Any) -> tuple[str, str] | None:
    """``(source label, template)`` for a model without its own template, or None.

    ``vocabulary_has(text)`` tells whether ``text`` is one token of the model's vocabulary.
    """
    arch = (architecture or "").lower()
    if arch.startswith("gemma") and vocabulary_has("<start_of_turn>") and vocabulary_has("<end_of_turn>"):
        return "builtin:gemma", GEMMA_TEMPLATE
    return None


def _raise(message: str) -> None:
    raise TemplateError(message)


def render(
    template: str,
    messages: Sequence[Message],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text of ``messages`` under the Jinja ``template`` (sandboxed); TemplateError on failure."""
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.globals["raise_exception"] = _raise
    try:
        compiled = env.from_string(template)
        return compiled.render(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
        )
    except JinjaError as exc:
        raise TemplateError(f"chat template failed: {exc}") from exc


def plain_prompt(messages: Sequence[Message]) -> str:
    """``role: content`` lines followed by ``assistant:``, for models without a chat template."""
    return "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant:"


__all__ = ["GEMMA_TEMPLATE", "TemplateError", "fallback_template", "plain_prompt", "render"]
