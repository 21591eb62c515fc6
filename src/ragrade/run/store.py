"""The exam sweep's journal: :mod:`ragrade.journal`, the durable store every stage's per-item results go to.

Kept as the sweep's import path; the store itself (and its rules: failed rows kept but not
done, fingerprint refusal) lives below the stages, in :mod:`ragrade.journal`.
"""

from __future__ import annotations

from ragrade.journal import JOURNAL_FILE, JOURNAL_FILES, Journal, JournalMismatch

__all__ = ["JOURNAL_FILE", "JOURNAL_FILES", "Journal", "JournalMismatch"]
