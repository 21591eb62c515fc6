"""Testbed construction: which documents each question gets, seeded and recorded.

For ``n`` documents and noise ratio ``r``, ``ceil(n * r)`` documents are noise
(computed on the exact decimal, so 0.6 x 5 is 3) and the rest come from the
positives: the corrupted positives for counterfactual items, one document per
group of positives first (round-robin) for integration items. Documents are taken in
pool order (the files list them by retrieval rank, so the hardest noise comes
first and the documents at a lower ratio are a subset of those at a higher one)
and then shuffled with a generator seeded by (seed, item id, ratio).

When a pool is too small the item is flagged, and ``shortfall`` decides:
``pad`` fills the gap from the other pool (or uses fewer documents) and records
the actual ratio; ``skip`` leaves the item out of that ratio, counted as
skipped. Nothing is changed silently: every instance records the requested and
actual ratio, the counts, and each document's pool and index in prompt order.

``construction="rgb"`` reproduces the original benchmark's document selection
instead (see :func:`build_rgb_instance`), flagging every ratio it changes.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from ragrade.errors import ConfigError
from ragrade.robust.data import RGBItem

Shortfall = Literal["pad", "skip"]
Construction = Literal["ragrade", "rgb"]
RGB_SEED = 2333  # the original scripts reseed Python's generator with this before every item


@dataclass(frozen=True)
class BuildOptions:
    """How instances are built: documents per question, shortfall policy, construction, seed."""

    n_docs: int = 5
    shortfall: Shortfall = "pad"
    construction: Construction = "ragrade"
    seed: int = 0
    correct_ratio: float = 0.0  # counterfactual: share of documents that are uncorrupted positives

    def __post_init__(self) -> None:
        if self.n_docs < 1:
            raise ConfigError(f"--docs must be at least 1, got {self.n_docs}")
        if self.shortfall not in ("pad", "skip"):
            raise ConfigError(f"--shortfall must be 'pad' or 'skip', got '{self.shortfall}'")
        if self.construction not in ("ragrade", "rgb"):
            raise ConfigError(f"--construction must be 'ragrade' or 'rgb', got '{self.construction}'")
        if not 0.0 <= self.correct_ratio <= 1.0:
            raise ConfigError(f"--correct-ratio must be within [0, 1], got {self.correct_ratio}")


@dataclass(frozen=True)
class Doc:
    """One prompt document: its pool (positive, negative, positive_wrong), index in the pool, group."""

    pool: str
    index: int
    text: str
    group: int | None = None

    def to_record(self) -> dict[str, Any]:
        """JSON form."""
        rec: dict[str, Any] = {"pool": self.pool, "index": self.index, "text": self.text}
        if self.group is not None:
            rec["group"] = self.group
        return rec


@dataclass
class Instance:
    """One question as presented to the model under one condition."""

    item: RGBItem
    testbed: str
    noise_ratio: float
    condition: str = "documents"  # or "no_documents" (closed book, counterfactual Acc)
    docs: list[Doc] = field(default_factory=list)
    skipped: str | None = None  # reason, when the item is left out of this ratio
    flags: list[str] = field(default_factory=list)
    system_prompt: bool = True  # False: asked without the system instruction (original construction, no document)

    @property
    def key(self) -> str:
        """Unique key of this instance within a run."""
        return f"{self.item.id}|{self.noise_ratio:g}|{self.condition}"

    @property
    def n_noise(self) -> int:
        """Number of noise documents."""
        return sum(d.pool == "negative" for d in self.docs)

    @property
    def n_positive(self) -> int:
        """Number of documents from a positive pool (corrupted ones included)."""
        return len(self.docs) - self.n_noise

    @property
    def noise_ratio_actual(self) -> float | None:
        """Share of noise among the documents presented (None without documents)."""
        return self.n_noise / len(self.docs) if self.docs else None


def noise_count(n_docs: int, ratio: float) -> int:
    """``ceil(n_docs * ratio)`` on the exact decimal value of ``ratio`` (no floating-point drift)."""
    return math.ceil(Fraction(repr(float(ratio))) * n_docs)


def _rng(seed: int, item_id: str, ratio: float, condition: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{item_id}\x00{ratio!r}\x00{condition}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _round_robin(groups: tuple[tuple[str, ...], ...], count: int) -> list[Doc]:
    docs: list[Doc] = []
    depth = 0
    while len(docs) < count and any(depth < len(g) for g in groups):
        for gi, g in enumerate(groups):
            if depth < len(g) and len(docs) < count:
                docs.append(Doc("positive", depth, g[depth], group=gi))
        depth += 1
    return docs


def _positives(item: RGBItem, testbed: str, count: int, n_correct: int) -> list[Doc]:
    if testbed == "integration":
        return _round_robin(item.positive_groups, count)
    if testbed == "counterfactual":
        wrong = [Doc("positive_wrong", i, t) for i, t in enumerate(item.positive_wrong[:count])]
        used = {d.index for d in wrong}
        spare = [i for i in range(len(item.positive)) if i not in used]
        return wrong + [Doc("positive", i, item.positive[i]) for i in spare[:n_correct]]
    return [Doc("positive", i, t) for i, t in enumerate(item.positive[:count])]


def _pool_sizes(item: RGBItem, testbed: str) -> int:
    if testbed == "integration":
        return sum(len(g) for g in item.positive_groups)
    if testbed == "counterfactual":
        return len(item.positive_wrong)
    return len(item.positive)


def build_instance(item: RGBItem, testbed: str, ratio: float, opts: BuildOptions,
                   condition: str = "documents") -> Instance:
    """The documents for ``item`` at noise ``ratio`` under ``opts`` (see the module docstring)."""
    inst = Instance(item=item, testbed=testbed, noise_ratio=ratio, condition=condition)
    if condition == "no_documents":
        return inst
    if opts.construction == "rgb":
        return build_rgb_instance(item, testbed, ratio, opts.n_docs, opts.correct_ratio, condition)
    n = opts.n_docs
    want_noise = n if testbed == "negative" else noise_count(n, ratio)
    want_correct = noise_count(n, opts.correct_ratio) if testbed == "counterfactual" else 0
    want_pos = max(0, n - want_noise - want_correct)
    if testbed == "negative":
        if not item.negative:
            inst.skipped = "no noise documents"
            return inst
    elif _pool_sizes(item, testbed) == 0:
        inst.skipped = "no positive documents"
        return inst
    if testbed == "integration":
        empty = [i + 1 for i, g in enumerate(item.positive_groups) if not g]
        if empty:
            inst.skipped = f"answer part(s) {empty} have no positive documents"
            return inst
        if want_pos < len(item.positive_groups):
            msg = f"needs one document per answer part ({len(item.positive_groups)}) but the ratio leaves {want_pos}"
            if opts.shortfall == "skip":
                inst.skipped = msg
                return inst
            inst.flags.append(msg + "; raised the positives")
            want_noise -= len(item.positive_groups) - want_pos
            want_pos = len(item.positive_groups)
    positives = _positives(item, testbed, want_pos, want_correct) if want_pos or want_correct else []
    negatives = [Doc("negative", i, t) for i, t in enumerate(item.negative[:want_noise])]
    short_pos = want_pos + want_correct - len(positives)
    short_neg = want_noise - len(negatives)
    if short_pos or short_neg:
        msg = (f"pool too small: {len(positives)} of {want_pos + want_correct} positive and "
               f"{len(negatives)} of {want_noise} noise documents")
        if opts.shortfall == "skip":
            inst.skipped = msg
            return inst
        if short_pos and testbed != "negative":
            extra = item.negative[want_noise : want_noise + short_pos]
            negatives += [Doc("negative", want_noise + i, t) for i, t in enumerate(extra)]
        if short_neg and testbed != "negative":
            more = _positives(item, testbed, want_pos + short_neg, want_correct)
            positives = more
        inst.flags.append(msg + "; padded")
    docs = positives + negatives
    _rng(opts.seed, item.id, ratio, condition).shuffle(docs)
    inst.docs = docs
    actual = inst.noise_ratio_actual
    if actual is not None and abs(actual - ratio) > 1e-9 and testbed != "negative":
        inst.flags.append(f"actual noise ratio {actual:.3g} instead of {ratio:g}")
    if len(docs) < n:
        inst.flags.append(f"{len(docs)} documents instead of {n}")
    if testbed != "negative" and not any(d.pool != "negative" for d in docs):
        inst.flags.append("no positive document at this ratio")
    return inst


def build_rgb_instance(item: RGBItem, testbed: str, ratio: float, n_docs: int, correct_ratio: float = 0.0,
                       condition: str = "documents") -> Instance:
    """Documents chosen exactly as the original benchmark's script chose them.

    Its rules, in our words: the generator is reseeded with 2333 before every
    item; ``ceil(n * r)`` noise documents, in floating point. Base items: at
    ratio 1 every document is noise; otherwise, when there are too few noise
    documents the gap is filled with positives, else when there are too few
    positives it is filled with noise (the ratio silently changes), and the
    first documents of each pool are used. Integration items: each answer
    group is shuffled, the first document of every group is taken even when
    the ratio asks for fewer positives, then round-robin until the positive
    count is reached, and the remaining slots are filled with the first noise
    documents. Counterfactual items: a random sample of corrupted positives,
    optionally some uncorrupted ones, then the first noise documents, with no
    padding (fewer documents when a pool is short). Finally the documents are
    shuffled. An item left with no document at all (a negative-rejection item
    without noise documents) is asked as the original script asks it: an empty
    document block and no system instruction. Differences from the requested
    ratio are recorded as flags here.
    """
    inst = Instance(item=item, testbed=testbed, noise_ratio=ratio, condition=condition)
    rng = random.Random(RGB_SEED)
    ratio = 1.0 if testbed == "negative" else ratio
    neg_num = math.ceil(n_docs * ratio)
    docs: list[Doc]
    try:
        if testbed == "integration":
            docs = _rgb_integration_docs(item, rng, n_docs, n_docs - neg_num)
        elif testbed == "counterfactual":
            docs = _rgb_counterfactual_docs(item, rng, n_docs, neg_num, correct_ratio)
        else:
            docs = _rgb_base_docs(item, n_docs, ratio, neg_num)
    except (IndexError, ValueError) as exc:  # the original script would raise here and drop the item
        inst.skipped = f"the original construction fails on this item ({type(exc).__name__}: {exc})"
        return inst
    rng.shuffle(docs)
    inst.docs = docs
    if not docs:
        inst.system_prompt = False
        inst.flags.append("no document: asked with an empty document block and no system instruction "
                          "(original construction)")
    actual = inst.noise_ratio_actual
    if actual is not None and abs(actual - ratio) > 1e-9:
        inst.flags.append(f"actual noise ratio {actual:.3g} instead of {ratio:g} (original construction)")
    if len(docs) != n_docs:
        inst.flags.append(f"{len(docs)} documents instead of {n_docs} (original construction)")
    return inst


def _rgb_integration_docs(item: RGBItem, rng: random.Random, n_docs: int, pos_num: int) -> list[Doc]:
    """Original integration selection: first of each shuffled group, round-robin to ``pos_num``, then noise."""
    orders = []
    for g in item.positive_groups:
        order = list(range(len(g)))
        rng.shuffle(order)
        orders.append(order)
    groups = item.positive_groups
    docs = [Doc("positive", o[0], g[o[0]], group=gi) for gi, (g, o) in enumerate(zip(groups, orders,
                                                                                     strict=True))]
    if len(docs) < pos_num:
        maxnum = max(len(g) for g in groups)
        for i in range(1, maxnum):
            for gi, g in enumerate(groups):
                if len(g) > i:
                    docs.append(Doc("positive", orders[gi][i], g[orders[gi][i]], group=gi))
                    if len(docs) == pos_num:
                        break
            if len(docs) == pos_num:
                break
    neg_num = n_docs - len(docs)
    if neg_num > 0:
        docs += [Doc("negative", i, t) for i, t in enumerate(item.negative[:neg_num])]
    return docs


def _rgb_counterfactual_docs(item: RGBItem, rng: random.Random, n_docs: int, neg_num: int,
                             correct_ratio: float) -> list[Doc]:
    """Original counterfactual selection: sampled corrupted positives, optional correct ones, first noise."""
    correct_num = math.ceil(n_docs * correct_ratio)
    pos_num = n_docs - neg_num - correct_num
    indexes = list(range(len(item.positive)))
    selected = rng.sample(indexes, min(len(indexes), pos_num))
    docs = [Doc("positive_wrong", i, item.positive_wrong[i]) for i in selected]
    remain = [i for i in indexes if i not in selected]
    if correct_num > 0 and remain:
        docs += [Doc("positive", i, item.positive[i]) for i in rng.sample(remain, min(len(remain),
                                                                                      correct_num))]
    if neg_num > 0:
        docs += [Doc("negative", i, t) for i, t in enumerate(item.negative[:neg_num])]
    return docs


def _rgb_base_docs(item: RGBItem, n_docs: int, ratio: float, neg_num: int) -> list[Doc]:
    """Original base selection: the first documents of each pool, a short pool filled from the other."""
    pos_num = n_docs - neg_num
    if ratio == 1:
        neg_num, pos_num = n_docs, 0
    elif neg_num > len(item.negative):
        neg_num = len(item.negative)
        pos_num = n_docs - neg_num
    elif pos_num > len(item.positive):
        pos_num = len(item.positive)
        neg_num = n_docs - pos_num
    docs = [Doc("positive", i, t) for i, t in enumerate(item.positive[:pos_num])]
    docs += [Doc("negative", i, t) for i, t in enumerate(item.negative[:neg_num])]
    return docs


__all__ = [
    "RGB_SEED",
    "BuildOptions",
    "Construction",
    "Doc",
    "Instance",
    "Shortfall",
    "build_instance",
    "build_rgb_instance",
    "noise_count",
]
