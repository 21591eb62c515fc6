"""Prefix-tree rows: many log-likelihood requests scored in a few padded forward passes.

A request is a context and its continuations, as token ids. Every (context + continuation) sequence is a
path from the root of a prefix tree; the tree's nodes are the token positions a model must compute, once
each, however many paths share them. One *row* of a forward batch holds a forest of such trees, its
nodes laid out in depth-first pre-order. Node ``k`` then has its subtree in the positions
``k .. end[k]-1``, so the row's attention mask is one comparison, ``k <= q < end[k]`` (``q`` attends to
``k`` exactly when ``k`` is ``q`` or one of its ancestors), and node ``k`` gets position id ``depth[k]``:
every position sees exactly the keys, values and rotary positions it would see alone, so the scores equal
scoring each request on its own up to floating-point rounding.

Sorting paths lexicographically lays a tree out in pre-order, and each path then shares with the tree
exactly its longest common prefix with the path before it; that is how :func:`layout_row` builds a row
in one pass. :func:`plan_rows` groups requests into rows (requests whose contexts share a long prefix go
into one row, up to a size cap; others get a row each) and :func:`plan_batches` groups rows into forward
passes under a token budget (padded rows x length).

The last token of a continuation is never an input (nothing is predicted from it), so a request of
context length C and continuations c_1..c_n costs C + sum(len(c_i) - 1) positions, against
sum(C + len(c_i) - 1) when each continuation runs with its own copy of the context (lm-evaluation-harness's
way, the *plain* count of :class:`TreeStats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: a request joins a row of requests sharing its context's prefix when the shared part is at least this
#: share of its own positions (and at least MIN_SHARED tokens): less sharing does not pay for the longer row
SHARE_FRACTION = 0.25
MIN_SHARED = 8


@dataclass(frozen=True)
class Item:
    """One request's token ids: the context (start token included) and each continuation."""

    ctx: tuple[int, ...]
    conts: tuple[tuple[int, ...], ...]

    @property
    def cost(self) -> int:
        """Positions computed for this request alone (its continuations share the context)."""
        return len(self.ctx) + sum(max(0, len(c) - 1) for c in self.conts)

    @property
    def plain(self) -> int:
        """Positions computed when every continuation is run after its own copy of the context."""
        return sum(len(self.ctx) + len(c) - 1 for c in self.conts if c)


@dataclass
class Row:
    """One row of a forward batch: a forest of prefix trees in pre-order."""

    tokens: list[int]
    depth: list[int]
    end: list[int]
    items: list[int]  # indices of the requests whose paths are in this row
    # per request in ``items``, per continuation: (row position whose logits predict the token, token id)
    targets: list[list[list[tuple[int, int]]]]

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class TreeStats:
    """What the batched scorer computed: forward passes, token positions (real and padded) and the plain
    count of positions that one full sequence per continuation would have computed."""

    requests: int = 0
    forward_passes: int = 0
    token_positions: int = 0
    padded_positions: int = 0
    plain_positions: int = 0
    oom_splits: int = 0
    failed_passes: int = 0  # passes that failed for another reason than memory (their requests are missing)
    batch_sizes: list[int] = field(default_factory=list)
    #: host seconds by step: encode (tokenizer), plan (rows and passes), launch (preparing and queueing passes;
    #: on the CPU the computation itself), wait (blocked on a device's results)
    seconds: dict[str, float] = field(default_factory=dict)
    #: host seconds from each call's start until its first pass was queued (the device's wait for the host),
    #: summed over calls; overlaps the steps above
    lead: float = 0.0

    def add_seconds(self, step: str, secs: float) -> None:
        """Add ``secs`` to the host seconds of ``step``."""
        self.seconds[step] = self.seconds.get(step, 0.0) + secs

    def as_dict(self) -> dict[str, int | float]:
        """JSON for the manifest (batch sizes summarised)."""
        sizes = self.batch_sizes
        return {
            "requests": self.requests,
            "forward_passes": self.forward_passes,
            "token_positions": self.token_positions,
            "padded_positions": self.padded_positions,
            "plain_positions": self.plain_positions,
            "saved_vs_plain": round(1 - self.token_positions / self.plain_positions, 4)
            if self.plain_positions
            else 0.0,
            "out_of_memory_splits": self.oom_splits,
            "failed_passes": self.failed_passes,
            "largest_batch_requests": max(sizes, default=0),
            "mean_batch_requests": round(sum(sizes) / len(sizes), 2) if sizes else 0.0,
            **{f"{step}_s": round(secs, 3) for step, secs in sorted(self.seconds.items())},
            **({"lead_s": round(self.lead, 3)} if self.forward_passes else {}),
        }


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def subtree_ends(depth: Sequence[int]) -> list[int]:
    """For nodes in pre-order with these depths, the index just past each node's subtree."""
    n = len(depth)
    end = [n] * n
    stack: list[int] = []
    for k, d in enumerate(depth):
        while stack and depth[stack[-1]] >= d:
            end[stack.pop()] = k
        stack.append(k)
    return end


def layout_row(items: Sequence[Item], members: Sequence[int]) -> Row:
    """The row holding the requests ``members`` (indices into ``items``), nodes shared and in pre-order."""
    paths: list[tuple[tuple[int, ...], int, int]] = []  # (input tokens, member slot, continuation or -1)
    for slot, i in enumerate(members):
        it = items[i]
        paths.append((it.ctx, slot, -1))
        for j, c in enumerate(it.conts):
            if len(c) > 1:
                paths.append((it.ctx + c[:-1], slot, j))
    paths.sort(key=lambda p: p[0])
    tokens: list[int] = []
    depth: list[int] = []
    prev: tuple[int, ...] = ()
    prev_nodes: list[int] = []
    nodes_of: dict[tuple[int, int], list[int]] = {}
    for path, slot, j in paths:
        shared = _lcp(prev, path)
        start = len(tokens)
        nodes = prev_nodes[:shared] + list(range(start, start + len(path) - shared))
        tokens.extend(path[shared:])
        depth.extend(range(shared, len(path)))
        prev, prev_nodes = path, nodes
        nodes_of[(slot, j)] = nodes
    targets: list[list[list[tuple[int, int]]]] = []
    for slot, i in enumerate(members):
        it = items[i]
        n = len(it.ctx)
        per: list[list[tuple[int, int]]] = []
        for j, c in enumerate(it.conts):
            nodes = nodes_of[(slot, j)] if len(c) > 1 else nodes_of[(slot, -1)]
            per.append([(nodes[n - 1 + k], tok) for k, tok in enumerate(c)])
        targets.append(per)
    return Row(tokens, depth, subtree_ends(depth), list(members), targets)


def plan_rows(items: Sequence[Item], row_cap: int, share: bool = True) -> list[Row]:
    """Requests grouped into rows: in context order, a request joins the current row when it shares a long
    enough prefix with the request before it and the row stays within ``row_cap`` positions (a request
    larger than the cap gets a row of its own); ``share=False`` gives every request its own row."""
    order = sorted(range(len(items)), key=lambda i: items[i].ctx)
    groups: list[list[int]] = []
    size = 0
    prev: tuple[int, ...] | None = None
    for i in order:
        it = items[i]
        shared = _lcp(prev, it.ctx) if prev is not None and share else 0
        joins = shared >= max(MIN_SHARED, SHARE_FRACTION * it.cost) and size + it.cost - shared <= row_cap
        if groups and joins:
            groups[-1].append(i)
            size += it.cost - shared
        else:
            groups.append([i])
            size = it.cost
        prev = it.ctx
    return [layout_row(items, g) for g in groups]


def plan_batches(rows: Sequence[Row], token_budget: int, max_rows: int | None = None) -> list[list[Row]]:
    """Rows grouped into forward passes, longest first: a pass holds rows while rows x longest row stays
    within ``token_budget`` (a row longer than the budget goes alone), at most ``max_rows`` rows."""
    ordered = sorted(rows, key=len, reverse=True)
    batches: list[list[Row]] = []
    for row in ordered:
        if batches:
            cur = batches[-1]
            width = len(cur[0])
            if (len(cur) + 1) * width <= token_budget and (max_rows is None or len(cur) < max_rows):
                cur.append(row)
                continue
        batches.append([row])
    return batches


__all__ = ["Item", "Row", "TreeStats", "layout_row", "plan_batches", "plan_rows", "subtree_ends"]
