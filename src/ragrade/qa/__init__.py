"""Free-text QA: synthetic question/reference/context triplets and free-text answers from pipelines."""

from __future__ import annotations

from ragrade.qa.files import QAItem, read_qa, write_qa

__all__ = ["QAItem", "read_qa", "write_qa"]
