"""MyST's file directives in Markdown pages of a Sphinx project: ``{include}`` and ``{literalinclude}`` inlined.

````{include} ../CHANGES.md```` inserts the file's Markdown where the directive stands (``:literal:``
/ ``:code:`` as a code block); ````{literalinclude} ../examples/app.py```` becomes one code block in its
``:language:`` with its ``:caption:`` above. Both take Sphinx's cutting options (``:start-after:``,
``:end-before:``, ``:lines:``, ``:pyobject:`` ..., see :func:`ragrade.corpus.rst_include.cut`), given
as ``:name: value`` lines or a ``---`` YAML block. Paths are resolved as for reST includes: relative
to the page (then to the file that includes), a leading ``/`` against the docs source root. A missing
file, a cut that matches nothing and an include cycle each leave a one-line warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ragrade.corpus.roles import fenced
from ragrade.corpus.site import PageContext

_OPTION_RE = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
_MAX_DEPTH = 16


def directive_options(content: str) -> dict[str, Any]:
    """The options of a MyST directive: leading ``:name: value`` lines or a ``---`` YAML block."""
    lines = content.split("\n")
    if lines and lines[0].strip() == "---":
        end = next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), 0)
        try:
            import yaml

            data = yaml.safe_load("\n".join(lines[1:end])) if end else None
        except Exception:
            data = None
        return {str(k): "" if v is None else v for k, v in data.items()} if isinstance(data, dict) else {}
    options: dict[str, Any] = {}
    for line in lines:
        m = _OPTION_RE.match(line.strip())
        if m is None:
            break
        value = m.group(2).strip()
        if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]  # MyST reads option values as YAML scalars: quotes are not part of the value
        options[m.group(1)] = value
    return options


def file_directive(name: str, arg: str, content: str, ctx: PageContext, render: Callable[[str], str]) -> str:
    """The text ``{include}`` / ``{literalinclude}`` of ``arg`` stands for ("" with a warning when there is none)."""
    from ragrade.corpus.rst_include import RstContext, cut, read_include, resolve

    current = ctx.includes[-1] if ctx.includes else ctx.page
    root = ctx.site.root if ctx.site is not None else None
    rctx = RstContext(page=current, root=root, max_bytes=ctx.max_bytes, encodings=ctx.encodings)
    where = f" (in {current.name})" if current is not None else ""
    path = resolve(rctx, arg.strip(), "")
    if path is None:
        ctx.warn(f"{name} file not found, left out: {arg.strip()}{where}")
        return ""
    chain = [p for p in (ctx.page.resolve() if ctx.page else None, *ctx.includes) if p is not None]
    if path in chain or len(chain) > _MAX_DEPTH:
        ctx.warn(f"include cycle, left out: {' -> '.join(p.name for p in (*chain, path))}")
        return ""
    text = read_include(rctx, name, path)
    ctx.warnings.extend(w for w in rctx.warnings if w not in ctx.warnings)
    if text is None:
        return ""
    options = directive_options(content)
    try:
        lines = cut(text, options)
    except ValueError as exc:
        ctx.warn(f"{name} {path} left out: {exc}")
        return ""
    body = "\n".join(lines)
    if name == "literalinclude" or "literal" in options or "code" in options:
        language = str(options.get("language") or options.get("code") or "")
        caption = str(options.get("caption") or "").strip() or (path.name if "caption" in options else "")
        return "\n\n".join(p for p in (caption, fenced(language, body)) if p)
    ctx.includes.append(path)
    try:
        return render(body)
    finally:
        ctx.includes.pop()


__all__ = ["directive_options", "file_directive"]
