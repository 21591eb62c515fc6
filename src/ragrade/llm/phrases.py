"""Fixed answer phrases shared by the offline extractive reader and the robustness detectors.

Defined once here so that the reader (which emits them) and the detectors
(which recognise them) can never drift apart.
"""

from __future__ import annotations

#: The exact sentence a reader answers with when the passages do not support an answer. It holds the phrase
#: "insufficient information" (and ERROR_SENTENCE "factual errors") so the original RGB scorer recognises it too.
REJECTION_SENTENCE = "The provided documents contain insufficient information to answer this question."
#: The exact sentence a reader answers with when it detects factual errors in the passages.
ERROR_SENTENCE = "The provided documents contain factual errors."

__all__ = ["ERROR_SENTENCE", "REJECTION_SENTENCE"]
