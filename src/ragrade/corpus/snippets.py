"""pymdownx.snippets ``--8<--`` lines inlined as ``mkdocs build`` inlines them.

``--8<-- "file.md"`` (a line of its own, indented or not, inside a code fence too) is replaced by
the file's lines, each indented as the marker line; the block form lists one file per line
between two ``--8<--`` lines (a line starting with ``;`` is a comment there). A name may select
part of the file: ``file.md:name`` the lines between ``--8<-- [start:name]`` and
``--8<-- [end:name]``, ``file.py:3:8`` (or ``:3``, ``::8``, ``1:3,7:9``) lines by number from 1.
Section marker lines never reach the text, ``;--8<--`` is an escaped marker shown without its
``;``, and included files are read for their own snippets (a cycle is left out).

Files are looked for as pymdownx looks for them: under each ``base_path`` of the site's
``pymdownx.snippets`` options (default: the folder of ``mkdocs.yml``, where ``mkdocs build``
runs), and only inside that folder (``restrict_base_path``); without a ``mkdocs.yml``, under the
loaded folder and the folder above it. A file that is not found, a section that is not in it
and a remote URL (never fetched) each leave a one-line warning for the load report, never the
marker line itself. The ``auto_append`` files of the site's snippets options are added at the end of
every page, as pymdownx adds them (one warning for the site when one is missing).
"""

from __future__ import annotations

import re
from pathlib import Path

from ragrade.corpus.clean import decode_bytes
from ragrade.corpus.site import PageContext

_LINE_RE = re.compile(r"^(?P<space>[ \t]*)(?P<escape>;*)-+8<-+[ \t]+(?P<q>[\"'])(?P<name>.+?)(?P=q)[ \t]*$")
_BLOCK_RE = re.compile(r"^(?P<space>[ \t]*)(?P<escape>;*)-+8<-+[ \t]*$")
_SECTION_RE = re.compile(r"^.*?-+8<-+[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([\w-]+)[ \t]*\].*$")
_RANGES_RE = re.compile(r"^\d*(?::\d*)?(?:,\d*(?::\d*)?)*$")
_MAX_DEPTH = 16
_MAX_SNIPPETS = 500


def inline_snippets(text: str, ctx: PageContext) -> str:
    """``text`` with every snippet marker replaced by the lines it names (warnings in ``ctx``), and the site's
    ``auto_append`` files after it (a missing one is warned once for the site, not here)."""
    appended = [p for p in (ctx.site.auto_append if ctx.site is not None else []) if p != ctx.page]
    for path in appended:
        more = _read(path, ctx)
        if more is not None:
            text = f"{text.rstrip()}\n\n{more}"
    if "8<" not in text:
        return text
    chain = (ctx.page.resolve(),) if ctx.page is not None else ()
    return "\n".join(_expand(text.split("\n"), ctx, chain, [0]))


def _unescape(line: str) -> str:
    return line.replace(";", "", 1)


def _expand(lines: list[str], ctx: PageContext, chain: tuple[Path, ...], count: list[int]) -> list[str]:
    out: list[str] = []
    block_space: str | None = None
    for line in lines:
        if block_space is not None:
            m = _BLOCK_RE.match(line)
            if m and not m.group("escape"):
                block_space = None
            elif line.strip() and not line.strip().startswith(";"):
                out.extend(_insert(line.strip(), block_space, ctx, chain, count))
            continue
        m = _LINE_RE.match(line)
        if m:
            if m.group("escape"):
                out.append(_unescape(line))
            else:
                out.extend(_insert(m.group("name"), m.group("space"), ctx, chain, count))
            continue
        m = _BLOCK_RE.match(line)
        if m:
            if m.group("escape"):
                out.append(_unescape(line))
            else:
                block_space = m.group("space")
            continue
        if "8<" in line and _SECTION_RE.match(line):
            continue
        out.append(line)
    return out


def _where(ctx: PageContext, chain: tuple[Path, ...]) -> str:
    return f" (in {chain[-1].name})" if chain else ""


def _insert(name: str, space: str, ctx: PageContext, chain: tuple[Path, ...], count: list[int]) -> list[str]:
    """The lines snippet ``name`` stands for, indented by ``space``; [] with a warning when there are none."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", name, re.I):
        ctx.warn(f"snippet {name} left out: remote snippets are not fetched{_where(ctx, chain)}")
        return []
    file_name, part = _split(name)
    path = _find(file_name, ctx)
    if path is None:
        ctx.warn(f"snippet file not found, left out: {file_name}{_where(ctx, chain)}")
        return []
    if path in chain or len(chain) > _MAX_DEPTH:
        ctx.warn(f"snippet cycle, left out: {' -> '.join(p.name for p in (*chain, path))}")
        return []
    count[0] += 1
    if count[0] > _MAX_SNIPPETS:
        ctx.warn(f"more than {_MAX_SNIPPETS} snippets in one page; the rest left out")
        return []
    text = _read(path, ctx)
    if text is None:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if part:
        picked = _select(lines, part)
        if picked is None:
            ctx.warn(f"snippet {name} left out: no section or lines {part!r} in {path.name}{_where(ctx, chain)}")
            return []
        lines = picked
    lines = _expand(lines, ctx, (*chain, path), count)
    return [space + line if line.strip() else "" for line in lines]


def _split(name: str) -> tuple[str, str]:
    """``file.md:section`` / ``file.py:3:8`` as ``(file, part)`` (``part`` empty for the whole file)."""
    head, sep, rest = name.partition(":")
    if not sep:
        return name, ""
    if _RANGES_RE.match(rest) or re.fullmatch(r"[\w-]+", rest):
        return head, rest
    return name, ""


def _select(lines: list[str], part: str) -> list[str] | None:
    """The lines of a section (``name``) or of line ranges (``3:8,10:``); None when it selects nothing."""
    if not _RANGES_RE.match(part):
        inside, out, seen = False, [], False
        for line in lines:
            m = _SECTION_RE.match(line) if "8<" in line else None
            if m and m.group(2) == part:
                inside, seen = m.group(1) == "start", True
            elif inside:
                out.append(line)
        return out if seen else None
    out = []
    for span in part.split(","):
        start, _, end = span.partition(":")
        first = max(int(start or 1), 1)
        last = int(end) if end else (len(lines) if ":" in span else first)
        out.extend(lines[first - 1 : last])
    return out or None


def _find(name: str, ctx: PageContext) -> Path | None:
    bases = ctx.site.snippet_bases if ctx.site is not None else []
    if not bases and ctx.page is not None:
        bases = [ctx.page.parent.resolve()]
    restrict = ctx.site.restrict_snippets if ctx.site is not None else True
    for base in bases:
        if base.is_file():
            if base.name == name:
                return base
            continue
        candidate = (base / name).resolve()
        if restrict and not candidate.is_relative_to(base):
            continue
        if candidate.is_file():
            return candidate
    return None


def _read(path: Path, ctx: PageContext) -> str | None:
    try:
        size = path.stat().st_size
        if size > ctx.max_bytes:
            ctx.warn(f"snippet file {path} left out: too large ({size:,} bytes > max {ctx.max_bytes:,})")
            return None
        return decode_bytes(path.read_bytes(), ctx.encodings)[0]
    except OSError as exc:
        ctx.warn(f"snippet file {path} left out: cannot read ({exc.strerror or exc})")
        return None


__all__ = ["inline_snippets"]
