"""Text cleaning shared by every corpus reader.

:func:`clean_text` turns extracted text into the canonical form that chunk
offsets refer to:

1. line ends unified to ``\\n`` (``\\r\\n``, ``\\r``, form feeds, vertical tabs,
   Unicode line/paragraph separators);
2. Unicode NFC normalisation;
3. control characters removed (C0/C1 controls except newline and tab, lone
   surrogates, byte-order marks, zero-width spaces, soft hyphens);
4. user line filters: every line matching one of the ``drop_patterns``
   regular expressions (``re.search``) is removed;
5. whitespace normalised: tabs and runs of horizontal space (including
   no-break and other Unicode spaces) become one space, lines are stripped,
   runs of blank lines collapse into one blank line (a paragraph break), and
   the text is stripped. Lines inside fenced code blocks (```` ``` ```` or
   ``~~~``) keep their indentation and inner spacing (only trailing space goes).
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Iterable, Sequence

from ragrade.corpus.types import Skip
from ragrade.errors import ConfigError

# format characters that carry no text and break tokenisation or search
_INVISIBLE = "\ufeff\u200b\u00ad\u2060\u180e"
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff" + _INVISIBLE + "]")
_NEWLINES_RE = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# horizontal whitespace: everything str.isspace() accepts except the newline
_HSPACE_RE = re.compile(r"[^\S\n]+")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def compile_patterns(patterns: Iterable[str] | None) -> list[re.Pattern[str]]:
    """Compile line-filter regexes, with a ConfigError naming a bad one."""
    compiled: list[re.Pattern[str]] = []
    for pat in patterns or []:
        try:
            compiled.append(re.compile(pat))
        except re.error as exc:
            raise ConfigError(f"$drop_patterns: {pat!r} is not a valid regular expression ({exc})") from exc
    return compiled


def drop_lines(text: str, patterns: Sequence[re.Pattern[str]]) -> tuple[str, int]:
    """Remove lines matching any of ``patterns``; returns the text and the number of lines dropped."""
    if not patterns:
        return text, 0
    kept: list[str] = []
    dropped = 0
    for line in text.split("\n"):
        if any(p.search(line) for p in patterns):
            dropped += 1
        else:
            kept.append(line)
    return "\n".join(kept), dropped


def normalize_whitespace(text: str) -> str:
    """Collapse horizontal whitespace, strip lines, keep at most one blank line between paragraphs."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE_RE.match(line)
        if fence is not None:
            lines.append(line.rstrip())
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
                lines[-1] = _HSPACE_RE.sub(" ", line).strip()
            continue
        if m:
            fence = m.group(1)
        lines.append(_HSPACE_RE.sub(" ", line).strip())
    text = _BLANK_LINES_RE.sub("\n\n", "\n".join(lines))
    return text.strip()


def clean_text(text: str, drop_patterns: Sequence[re.Pattern[str]] | None = None) -> str:
    """The cleaned form of ``text`` (see the module docstring for the steps)."""
    return clean_text_counted(text, drop_patterns)[0]


def clean_text_counted(text: str, drop_patterns: Sequence[re.Pattern[str]] | None = None) -> tuple[str, int]:
    """Like :func:`clean_text`, also returning how many lines the drop patterns removed."""
    text = _NEWLINES_RE.sub("\n", text)
    text = unicodedata.normalize("NFC", text)
    text = _CONTROL_RE.sub("", text)
    dropped = 0
    if drop_patterns:
        text, dropped = drop_lines(text, drop_patterns)
    return normalize_whitespace(text), dropped


def looks_binary(data: bytes, sample: int = 8192) -> bool:
    """True when ``data`` looks like a binary file (NUL bytes or many control bytes)."""
    head = data[:sample]
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13))
    return controls / len(head) > 0.05


def implausible_text(text: str) -> bool:
    """True when decoded text is mostly symbols, as happens when a binary file decodes by accident."""
    if not text:
        return False
    sample = text[:20000]
    letters = sum(1 for ch in sample if ch.isalnum() or ch.isspace())
    return letters / len(sample) < 0.6


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_bytes(data: bytes, fallbacks: Sequence[str]) -> tuple[str, str | None]:
    """Decode ``data``: BOM, then UTF-8, then each fallback; returns the text and the fallback used.

    Raises :class:`Skip` for binary data or bytes no encoding fits.
    """
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(enc), None
            except UnicodeDecodeError as exc:
                raise Skip("encoding", f"has a {enc} byte-order mark but is not valid {enc} ({exc.reason})") from exc
    if looks_binary(data):
        raise Skip("binary", "binary file (NUL or control bytes), not text")
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        first = f"invalid UTF-8 byte 0x{data[exc.start]:02x} at offset {exc.start}"
    for enc in fallbacks:
        try:
            text = data.decode(enc)
        except (UnicodeDecodeError, LookupError):
            continue
        if not implausible_text(text):
            return text, enc
    tried = ", ".join(fallbacks) or "none"
    raise Skip("encoding", f"not valid UTF-8 ({first}) and no fallback encoding fits (tried: {tried})")


__all__ = [
    "clean_text",
    "clean_text_counted",
    "compile_patterns",
    "decode_bytes",
    "drop_lines",
    "implausible_text",
    "looks_binary",
    "normalize_whitespace",
]
