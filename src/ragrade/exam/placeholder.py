"""Placeholder text (lorem ipsum and its pseudo-Latin kin): filler a page shows, never a fact to ask about.

Theme demos and documentation of typography, grids and admonitions fill their examples with
pseudo-Latin. A question quoting it asks nothing a reader could learn, so the offline generators
never take a sentence of it as a stem, a reference or a distractor source. A sentence is placeholder
text when it says "lorem ipsum", or when at least half of its longer words (four letters or more,
at least three of them) are words of the filler vocabulary below, which leaves out the Latin words
that English prose also uses (``integer``, ``magna``, ``via``, ``data``).
"""

from __future__ import annotations

import re

_VOCABULARY = """
    lorem ipsum dolor amet consectetur consectetuer adipiscing adipisicing elit eiusmod tempor incididunt labore
    dolore aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo consequat duis
    aute irure reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat
    proident sunt culpa officia deserunt mollit anim laborum purus varius luctus vestibulum donec mauris nunc
    aliquam eget sapien tellus tortor justo pellentesque quam felis lectus metus neque orci odio augue erat lacus
    libero ligula massa nibh urna viverra vitae turpis tincidunt risus sagittis porttitor suspendisse morbi fusce
    praesent curabitur maecenas phasellus proin etiam quisque cras aenean sollicitudin ultrices ultricies semper
    faucibus elementum eleifend fermentum dictum dignissim egestas euismod facilisis feugiat gravida hendrerit
    imperdiet interdum lobortis malesuada mattis molestie ornare placerat posuere pretium pulvinar rhoncus rutrum
    scelerisque sodales suscipit tristique vehicula venenatis vulputate blandit bibendum condimentum congue
    convallis cursus dapibus efficitur finibus iaculis lacinia laoreet accumsan aliquet arcu auctor diam fringilla
    nisl pharetra tempus ullamcorper volutpat sagittis nullam vivamus porta tellus mollis aliquet dapibus
    tincidunt dolore sollicitudin nascetur ridiculus penatibus magnis parturient montes natoque sociis
"""
_FILLER = frozenset(_VOCABULARY.split())
_WORD_RE = re.compile(r"[^\W\d_]{4,}")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def is_placeholder(sentence: str) -> bool:
    """True when ``sentence`` is lorem-ipsum-style filler (see the module docstring)."""
    low = sentence.lower()
    if "lorem ipsum" in low:
        return True
    long_words = _WORD_RE.findall(low)
    if len(long_words) < 3:
        return False
    return 2 * sum(w in _FILLER for w in long_words) >= len(long_words)


def is_placeholder_text(text: str) -> bool:
    """True when ``text`` (a chunk) is filler: at least three quarters of its sentences that have three longer
    words (a chunk mixing filler with facts keeps its facts to ask about)."""
    sentences = [s for s in _SENTENCE_RE.split(text) if len(_WORD_RE.findall(s)) >= 3]
    return bool(sentences) and 4 * sum(is_placeholder(s) for s in sentences) >= 3 * len(sentences)


__all__ = ["is_placeholder", "is_placeholder_text"]
