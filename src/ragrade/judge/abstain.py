"""Abstaining answers: a reply that declines to answer makes no claim.

An answer abstains when it holds one of the refusal sentences the robustness
detectors recognise (our ``REJECTION_SENTENCE``, which the offline extractive
reader writes, its Chinese counterpart, and "insufficient information"), or
when it opens by declining ("I'm sorry, I can't ...", as the exam writers'
refusal check reads it) or by saying it does not know ("I don't know", "There
is no information ...", "The passages do not say ..."). The claims diagnosis
counts such an answer apart: it has no claims to be precise, faithful or
hallucinated about, and it recalls none of the reference's claims.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_NO_ANSWER = re.compile(
    r"^\W*(?:i\s+(?:do\s+not|don'?t|don’t)\s+know|i\s+(?:do\s+not|don'?t|don’t)\s+have\s+(?:enough\s+)?information"
    r"|(?:there\s+is|there'?s)\s+(?:no|not\s+enough|insufficient)\s+information"
    r"|no\s+(?:relevant\s+)?information"
    r"|(?:the\s+)?(?:provided\s+|given\s+)?(?:context|documents?|passages?|sources?)\s+(?:do|does)\s+not\s+"
    r"(?:contain|provide|mention|say|include)"
    r"|(?:this|the)\s+question\s+cannot\s+be\s+answered|unanswerable\b)",
    re.IGNORECASE,
)


@lru_cache(maxsize=1)
def _rejection() -> Any:
    from ragrade.robust.detect import PhraseDetector, default_rejection_phrases

    return PhraseDetector(default_rejection_phrases())


def is_abstention(answer: str | None) -> bool:
    """True when ``answer`` declines to answer (see the module docstring); False for None or empty text."""
    if not answer or not answer.strip():
        return False
    from ragrade.exam.writers import is_refusal

    return bool(_rejection()(answer)) or is_refusal(answer) or bool(_NO_ANSWER.match(answer.strip()))


__all__ = ["is_abstention"]
