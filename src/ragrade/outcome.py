"""One per-item result between a backend and a stage's records: an answer, a failure with its reason, or a skip.

Every stage that turns an LLM (or external system) reply into a per-item record
goes through :class:`Outcome` at that seam (:meth:`Outcome.of` a completion),
and counts failures by reading records back as outcomes. The type enforces the
rule the summaries rely on: *a failed request is missing, never a wrong
answer* — a failed or skipped outcome has no value, and it always says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Status = Literal["answer", "failed", "skipped"]
NO_TEXT = "no text returned"


class Reply(Protocol):
    """What :meth:`Outcome.of` reads of a completion (:class:`ragrade.llm.base.Completion` has both)."""

    @property
    def text(self) -> str | None:
        """The reply's text, if any."""
        ...

    @property
    def error(self) -> str | None:
        """Why the request failed, if it did."""
        ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """``answer`` with a ``value`` (``None``: the backend answered nothing, which counts as a wrong answer),
    ``failed`` with a ``reason`` and no value, or ``skipped`` with a ``reason`` and no value."""

    status: Status
    value: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in ("answer", "failed", "skipped"):
            raise ValueError(f"unknown outcome status {self.status!r}")
        if self.status == "answer" and self.reason is not None:
            raise ValueError("an answer has no failure reason")
        if self.status != "answer" and (self.value is not None or not self.reason):
            raise ValueError(f"a {self.status} outcome has a reason and no value")

    @classmethod
    def answer(cls, value: str | None) -> Outcome:
        """An answer (``None``: an empty one)."""
        return cls("answer", value)

    @classmethod
    def failure(cls, reason: str | None) -> Outcome:
        """A failed request, with why (a generic reason when the backend gave none)."""
        return cls("failed", None, reason or "failed")

    @classmethod
    def skip(cls, reason: str) -> Outcome:
        """An item not asked, with why."""
        return cls("skipped", None, reason)

    @classmethod
    def of(cls, reply: Reply) -> Outcome:
        """The outcome of one completion: its text, or a failure (an error, or no text at all)."""
        if reply.error is None and reply.text is not None:
            return cls.answer(reply.text)
        return cls.failure(reply.error or NO_TEXT)

    @property
    def ok(self) -> bool:
        """True for an answer."""
        return self.status == "answer"

    @property
    def failed(self) -> bool:
        """True for a failed request."""
        return self.status == "failed"

    @property
    def skipped(self) -> bool:
        """True for an item not asked."""
        return self.status == "skipped"

    @property
    def error(self) -> str | None:
        """The failure reason (``None`` for answers and skips), as records store it in ``error``."""
        return self.reason if self.failed else None


def count_failed(outcomes: list[Outcome]) -> int:
    """How many of ``outcomes`` failed."""
    return sum(1 for o in outcomes if o.failed)


__all__ = ["NO_TEXT", "Outcome", "Reply", "Status", "count_failed"]
