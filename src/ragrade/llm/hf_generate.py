"""Greedy generation of many requests in one padded batch for the hf backend.

A grid, a judge or ``qa answer`` hands an in-process model dozens of generation requests at once. One
``generate`` call per request leaves a GPU idle between tiny steps; here greedy requests (temperature 0) are
sorted by prompt length and decoded together: prompts left-padded to a common length with an attention
mask, one decoding loop for the group. Each row keeps its own budget of new tokens (decoding runs to the
largest in the group and every row is cut back to its own, which changes nothing for greedy decoding: the
first ``n`` tokens of a longer greedy run are the greedy run of ``n`` tokens), and its own end: tokens after
the first end-of-sequence token are padding.

Groups hold at most ``max_batch`` requests and ``budget`` token positions (prompt plus new tokens, padded). A
group that runs out of device memory is split in half and retried; a single request that still does not fit
gets an error (missing data, never a wrong answer). A group that fails otherwise is run again one request at a
time, so only the request that causes the error is missing. Sampled requests (temperature > 0) are not batched here:
each reseeds the generator, which one shared decoding loop cannot honour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragrade.llm.hf_tree import is_oom


@dataclass
class GenItem:
    """One greedy request: its position in the caller's list, prompt token ids and new-token budget."""

    index: int
    ids: list[int]
    max_new: int


@dataclass
class GenStats:
    """What batched generation did: groups decoded, requests in them, splits after out-of-memory errors."""

    groups: int = 0
    requests: int = 0
    oom_splits: int = 0
    sizes: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """The counts, for the scoring statistics of a run."""
        return {"groups": self.groups, "requests": self.requests, "oom_splits": self.oom_splits}


def plan_groups(items: Sequence[GenItem], max_batch: int, budget: int) -> list[list[GenItem]]:
    """Items sorted by prompt length, cut into groups of at most ``max_batch`` whose padded size
    (rows x (longest prompt + largest new-token budget)) stays within ``budget`` (a single item always
    forms a group, whatever its size)."""
    groups: list[list[GenItem]] = []
    cur: list[GenItem] = []
    for it in sorted(items, key=lambda i: (len(i.ids), i.max_new)):
        trial = [*cur, it]
        width = max(len(i.ids) for i in trial) + max(i.max_new for i in trial)
        if cur and (len(trial) > max_batch or width * len(trial) > budget):
            groups.append(cur)
            trial = [it]
        cur = trial
    if cur:
        groups.append(cur)
    return groups


class BatchGenerator:
    """Decodes groups of greedy requests on one transformers model (see module docstring)."""

    def __init__(
        self, lm: Any, torch: Any, device: str, *, pad_id: int, eos_ids: Sequence[int], empty_cache: Callable[[], None]
    ) -> None:
        self.lm, self.torch, self.device = lm, torch, device
        self.pad_id = pad_id
        self.eos_ids = frozenset(eos_ids)
        self.empty_cache = empty_cache
        self.stats = GenStats()

    def run(self, items: Sequence[GenItem], max_batch: int, budget: int) -> dict[int, list[int] | str]:
        """New token ids per item index (cut at the item's end and budget), or an error text."""
        out: dict[int, list[int] | str] = {}
        todo = plan_groups(items, max_batch, budget)
        while todo:
            group = todo.pop(0)
            try:
                rows = self.decode(group)
            except Exception as exc:  # one request's failure must not sink the others of its group
                oom = is_oom(exc)
                if oom:
                    self.empty_cache()
                if len(group) == 1:
                    it = group[0]
                    out[it.index] = (
                        f"out of memory generating from {len(it.ids)} prompt tokens"
                        if oom
                        else f"{type(exc).__name__}: {exc}"
                    )
                    continue
                if oom:  # halve the group; another error: each request alone, so only its cause fails
                    self.stats.oom_splits += 1
                    half = len(group) // 2
                    todo[:0] = [group[:half], group[half:]]
                else:
                    todo[:0] = [[it] for it in group]
                continue
            self.stats.groups += 1
            self.stats.requests += len(group)
            self.stats.sizes.append(len(group))
            for it, new in zip(group, rows, strict=True):
                out[it.index] = new
        return out

    def decode(self, group: Sequence[GenItem]) -> list[list[int]]:
        """One greedy decoding loop over ``group`` (left-padded); each row's new tokens, cut back."""
        torch = self.torch
        width = max(len(it.ids) for it in group)
        ids = [[self.pad_id] * (width - len(it.ids)) + it.ids for it in group]
        mask = [[0] * (width - len(it.ids)) + [1] * len(it.ids) for it in group]
        x = torch.tensor(ids, device=self.device)
        with torch.no_grad():
            gen = self.lm.generate(
                x,
                attention_mask=torch.tensor(mask, device=self.device),
                max_new_tokens=max(it.max_new for it in group),
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self.pad_id,
            )
        return [self._cut(row[width:].tolist(), it.max_new) for it, row in zip(group, gen, strict=True)]

    def _cut(self, new: list[int], max_new: int) -> list[int]:
        """A row's tokens up to and including its first end token, at most ``max_new`` of them."""
        new = new[:max_new]
        for n, tok in enumerate(new):
            if tok in self.eos_ids:
                return new[: n + 1]
        return new


def eos_ids(lm: Any, tokenizer: Any) -> list[int]:
    """The token ids that end a sequence for ``lm`` (its generation config's, else the tokenizer's)."""
    found = getattr(getattr(lm, "generation_config", None), "eos_token_id", None)
    if found is None:
        found = getattr(tokenizer, "eos_token_id", None)
    if found is None:
        return []
    return [int(found)] if isinstance(found, int) else [int(i) for i in found]


__all__ = ["BatchGenerator", "GenItem", "GenStats", "eos_ids", "plan_groups"]
