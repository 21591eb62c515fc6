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
the actual ratio (counterfactual items are never padded with noise: with too
few corrupted passages they get fewer documents, as in the original
construction, so ratio 0 stays noise-free); ``skip`` leaves the item out of that ratio, counted as
skipped; ``fewer`` keeps every positive of a short pool and only as much noise as keeps the requested
ratio (:func:`fewer_noise`), so the ratio holds and the item has fewer documents. Nothing is changed
silently: every instance records the requested and
actual ratio, the counts, and each document's pool and index in prompt order.

``construction="rgb"`` reproduces the original benchmark's document selection
instead (see :func:`build_rgb_instance`), flagging every ratio it changes.

The testbed-specific parts (which positives, pool sizes, integration's one document per
answer part, noise-only negative rejection, the original selections) are hooks of each
testbed in :mod:`ragrade.robust.testbeds`; this module holds the shared procedure.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from fractions import Fraction

from ragrade.errors import ConfigError
from ragrade.robust.data import RGBItem
from ragrade.robust.protocol import (
    BuildOptions,
    Construction,
    Doc,
    Instance,
    SharedConstruction,
    Shortfall,
    Testbed,
    get_testbed,
)

RGB_SEED = 2333  # the original scripts reseed Python's generator with this before every item


def first_noise(item: RGBItem, n: int) -> list[Doc]:
    """The first ``n`` noise documents of ``item``, in pool order (fewer when the pool is short; none for n <= 0)."""
    return [Doc("negative", i, t) for i, t in enumerate(item.negative[: max(n, 0)])]


def noise_count(n_docs: int, ratio: float) -> int:
    """``ceil(n_docs * ratio)`` on the exact decimal value of ``ratio`` (no floating-point drift)."""
    return math.ceil(Fraction(repr(float(ratio))) * n_docs)


def _rng(seed: int, item_id: str, ratio: float, condition: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{item_id}\x00{ratio!r}\x00{condition}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def supporting_passages(item: RGBItem, testbed: str | Testbed) -> int:
    """Passages that support the answer: positives, corrupted positives, or the smallest group (integration)."""
    return _hooks(testbed).supporting_passages(item)


def check_min_positives(items: Sequence[RGBItem], testbed: Testbed, min_positives: int, source: str) -> None:
    """ConfigError when ``--min-positives`` is above the supporting passages of every question in ``items`` (read
    from ``source``), as ``robust build`` refuses one above ``--max-positive``: every question would be skipped.

    Testbeds that build their own documents, and noise-only ones (which ignore the setting), are not checked.
    """
    if min_positives < 1 or not isinstance(testbed, SharedConstruction) or testbed.noise_only:
        return
    most = max((testbed.supporting_passages(item) for item in items), default=0)
    if min_positives > most:
        raise ConfigError(
            f"$min_positives must be between 0 and {most} (the most supporting passages of a question in {source} "
            f"for the {testbed.name} testbed), got {min_positives}: every question would be skipped"
        )


def build_instance(
    item: RGBItem, testbed: str | Testbed, ratio: float, opts: BuildOptions, condition: str = "documents"
) -> Instance:
    """The documents for ``item`` at noise ``ratio`` under ``opts``: the testbed's :meth:`~Testbed.build`."""
    return get_testbed(testbed).build(item, ratio, opts, condition)


def assemble(
    tb: SharedConstruction, item: RGBItem, ratio: float, opts: BuildOptions, condition: str = "documents"
) -> Instance:
    """The shared construction (see the module docstring), shaped by the testbed's hooks."""
    inst = Instance(item=item, testbed=tb.name, noise_ratio=ratio, condition=condition)
    if condition == "no_documents":
        return inst
    support = tb.supporting_passages(item)
    if not tb.noise_only and support < opts.min_positives:
        inst.skipped = f"{support} supporting passage(s), fewer than --min-positives {opts.min_positives}"
        return inst
    if opts.construction == "rgb":
        return build_rgb_instance(item, tb, ratio, opts.n_docs, opts.correct_ratio, condition)
    n = opts.n_docs
    want_noise = n if tb.noise_only else noise_count(n, ratio)
    want_correct = tb.correct_count(opts)
    want_pos = max(0, n - want_noise - want_correct)
    if tb.noise_only:
        if not item.negative:
            inst.skipped = "no noise documents"
            return inst
    elif tb.pool_size(item) == 0:
        inst.skipped = "no positive documents"
        return inst
    planned = tb.plan(inst, want_noise, want_pos, opts)
    if planned is None:
        return inst
    want_noise, want_pos = planned
    positives = tb.positives(item, want_pos, want_correct) if want_pos or want_correct else []
    negatives = first_noise(item, want_noise)
    short_pos = want_pos + want_correct - len(positives)
    short_neg = want_noise - len(negatives)
    if short_pos or short_neg:
        msg = (
            f"pool too small: {len(positives)} of {want_pos + want_correct} positive and "
            f"{len(negatives)} of {want_noise} noise documents"
        )
        if opts.shortfall == "skip":
            inst.skipped = msg
            return inst
        fewer = bool(short_pos and opts.shortfall == "fewer" and positives)
        if fewer:
            kept = fewer_noise(len(positives), len(negatives), ratio)
            negatives = negatives[:kept]
            inst.flags.append(msg + f"; fewer documents: {len(positives)} positive and {kept} noise")
        elif short_pos and tb.pad_with_noise:
            extra = item.negative[want_noise : want_noise + short_pos]
            negatives += [Doc("negative", want_noise + i, t) for i, t in enumerate(extra)]
        if short_neg and not tb.noise_only and not fewer:
            positives = tb.positives(item, want_pos + short_neg, want_correct)
        if not fewer:
            inst.flags.append(msg + (f"; {tb.short_note}" if short_pos and not tb.pad_with_noise else "; padded"))
    docs = positives + negatives
    _rng(opts.seed, item.id, ratio, condition).shuffle(docs)
    inst.docs = docs
    actual = inst.noise_ratio_actual
    if actual is not None and abs(actual - ratio) > 1e-9 and not tb.noise_only:
        inst.flags.append(f"actual noise ratio {actual:.3g} instead of {ratio:g}")
    if len(docs) < n:
        inst.flags.append(f"{len(docs)} documents instead of {n}")
    if not tb.noise_only and not any(d.pool != "negative" for d in docs):
        inst.flags.append("no positive document at this ratio")
    return inst


def fewer_noise(n_pos: int, n_noise: int, ratio: float) -> int:
    """Noise documents beside ``n_pos`` positives whose share comes closest to ``ratio`` (at most ``n_noise``;
    the fewer on a tie): ``shortfall = "fewer"`` keeps the requested ratio with fewer documents instead of
    padding a short positive pool with noise (2 positives at ratio 0: no noise; at 0.6: 3 noise)."""
    target = Fraction(repr(float(ratio)))
    return min(range(n_noise + 1), key=lambda m: (abs(Fraction(m, n_pos + m) - target), m))


RATIO_TOLERANCE = 0.05  # a mean actual noise ratio further than this from the requested one is warned about


def ratio_notes(instances: Sequence[Instance], testbed: str | Testbed) -> list[str]:
    """The testbed's warnings about actual noise ratios (see :func:`actual_ratio_notes`)."""
    return get_testbed(testbed).ratio_notes(instances)


def actual_ratio_notes(instances: Sequence[Instance], testbed: str, *, strict: bool = False) -> list[str]:
    """One line (said once) naming every requested ratio whose instances' actual noise ratio differs from it.

    A ratio is named when its mean actual ratio is more than :data:`RATIO_TOLERANCE` away, and with ``strict``
    (the counterfactual testbed) whenever any instance differs. The line says why: a pool too small (with the
    options that change it), or, when every differing item kept fewer documents (``--shortfall fewer``), that
    the share its supporting passages allow is the nearest one to the requested ratio.
    """
    parts: list[str] = []
    fewer_only = True
    for ratio in sorted({i.noise_ratio for i in instances}):
        group = [
            i
            for i in instances
            if i.noise_ratio == ratio
            and i.condition == "documents"
            and not i.skipped
            and i.noise_ratio_actual is not None
        ]
        if not group:
            continue
        actual = [float(i.noise_ratio_actual or 0.0) for i in group]
        mean = sum(actual) / len(actual)
        differing = [i for i, a in zip(group, actual, strict=True) if abs(a - ratio) > 1e-9]
        if abs(mean - ratio) > RATIO_TOLERANCE or (strict and differing):
            head = f"{testbed} at noise ratio {ratio:g}: the actual noise ratio is" if not parts else f"at {ratio:g}:"
            parts.append(f"{head} {mean:.2f} on average ({len(differing)} of {len(group)} items differ)")
            fewer_only = fewer_only and all(any("fewer documents" in f for f in i.flags) for i in differing)
    if not parts:
        return []
    if fewer_only:
        why = (
            "these questions keep all their supporting passages and the noise share nearest the requested one "
            "(with P passages a share is m/(P+m) for m noise documents), so the ratios the corpus supports are "
            "the actual ones; --min-positives N keeps only questions with N supporting passages"
        )
    else:
        why = (
            "a document pool is too small; --shortfall fewer keeps the ratio with fewer documents, --shortfall "
            "skip leaves such items out, --min-positives N keeps only items with N supporting passages"
        )
    return ["; ".join(parts) + ": " + why]


def build_rgb_instance(
    item: RGBItem,
    testbed: str | Testbed | SharedConstruction,
    ratio: float,
    n_docs: int,
    correct_ratio: float = 0.0,
    condition: str = "documents",
) -> Instance:
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
    ratio are recorded as flags here. Each testbed's selection is its ``rgb_docs``.
    """
    tb = _hooks(testbed)
    inst = Instance(item=item, testbed=tb.name, noise_ratio=ratio, condition=condition)
    rng = random.Random(RGB_SEED)
    ratio = 1.0 if tb.noise_only else ratio
    neg_num = math.ceil(n_docs * ratio)
    try:
        docs = tb.rgb_docs(item, rng, n_docs, ratio, neg_num, correct_ratio)
    except (IndexError, ValueError) as exc:  # the original script would raise here and drop the item
        inst.skipped = f"the original construction fails on this item ({type(exc).__name__}: {exc})"
        return inst
    rng.shuffle(docs)
    inst.docs = docs
    if not docs:
        inst.system_prompt = False
        inst.flags.append(
            "no document: asked with an empty document block and no system instruction (original construction)"
        )
    actual = inst.noise_ratio_actual
    if actual is not None and abs(actual - ratio) > 1e-9:
        inst.flags.append(f"actual noise ratio {actual:.3g} instead of {ratio:g} (original construction)")
    if len(docs) != n_docs:
        inst.flags.append(f"{len(docs)} documents instead of {n_docs} (original construction)")
    return inst


def rgb_base_docs(item: RGBItem, n_docs: int, ratio: float, neg_num: int) -> list[Doc]:
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
    return docs + first_noise(item, neg_num)


def _hooks(testbed: str | Testbed | SharedConstruction) -> SharedConstruction:
    """The registered testbed, which must use the shared construction (have its hooks, as a ``BaseTestbed`` does)."""
    tb = testbed if isinstance(testbed, SharedConstruction) else get_testbed(testbed)
    if not isinstance(tb, SharedConstruction):
        raise ConfigError(f"the {tb.name} testbed builds its own documents; it has no shared construction")
    return tb


__all__ = [
    "RATIO_TOLERANCE",
    "RGB_SEED",
    "BuildOptions",
    "Construction",
    "Doc",
    "Instance",
    "Shortfall",
    "actual_ratio_notes",
    "assemble",
    "build_instance",
    "build_rgb_instance",
    "check_min_positives",
    "first_noise",
    "noise_count",
    "ratio_notes",
    "rgb_base_docs",
    "supporting_passages",
]
