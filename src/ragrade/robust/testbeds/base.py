"""The :class:`Testbed` protocol, a base class holding the shared behaviour, and the registry lookup.

A testbed decides, for every record of a data file, which documents the model sees at each noise
ratio (:meth:`Testbed.build`), what the model is asked (:meth:`Testbed.messages`), how one response
is labelled (:meth:`Testbed.label`), how labelled records become its metrics
(:meth:`Testbed.summarise`) and which cells it adds to the paper-shaped table
(:meth:`Testbed.table_cells`). Testbeds are registered under kind ``testbed`` with
:func:`ragrade.registry.register`; a name equals the ``--testbed`` string. A new testbed is one
file: subclass :class:`BaseTestbed`, override what differs, register the class.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragrade.io import JSONObject
from ragrade.robust.build import actual_ratio_notes, assemble, rgb_base_docs
from ragrade.robust.metrics import count_label, default_common, metric
from ragrade.robust.protocol import (
    BuildOptions,
    Cells,
    Doc,
    Instance,
    Metrics,
    Testbed,
    get_testbed,
    testbed_names,
)
from ragrade.robust.rgb_scoring import rgb_common
from ragrade.robust.table import pct

if TYPE_CHECKING:
    from ragrade.robust.data import RGBItem
    from ragrade.robust.detect import Detectors
    from ragrade.robust.prompts import LangPrompts


class BaseTestbed:
    """Shared behaviour: noise-robustness construction, the standard prompt, the scorers' labels,
    accuracy and rejection rate, and one table column per noise ratio (or ``table_columns``).

    Construction hooks (see :func:`ragrade.robust.build.assemble`): ``noise_only`` (every document
    is noise), ``pad_with_noise`` (a short positive pool is filled with noise), ``short_note`` (the
    flag when it is not), ``asks_closed_book`` (also ask without documents), ``strict_ratio_notes``
    (warn when any instance's actual ratio differs, not only the mean).
    """

    name: str = ""
    description: str = ""
    data_kinds: tuple[str, ...] = ("base",)
    data_file: str = "base"
    default_ratios: tuple[float, ...] = (0.0,)
    ratios_fixed: bool = False
    ratio_cap: float | None = None
    metrics: tuple[str, ...] = ("accuracy", "rejection_rate")
    judge_task: str | None = None
    table_columns: tuple[tuple[str, str], ...] = ()  # (label, metric key); empty: accuracy per noise ratio
    noise_only: bool = False
    pad_with_noise: bool = True
    short_note: str = "fewer documents"
    asks_closed_book: bool = False
    strict_ratio_notes: bool = False

    # ----------------------------------------------------------------- contexts
    def build(self, item: RGBItem, ratio: float, opts: BuildOptions, condition: str = "documents") -> Instance:
        """See :func:`ragrade.robust.build.assemble`."""
        return assemble(self, item, ratio, opts, condition)

    def build_instances(
        self, items: Sequence[RGBItem], ratios: Sequence[float], opts: BuildOptions, *, closed_book: bool
    ) -> list[Instance]:
        """Each item at each ratio; with ``asks_closed_book`` and ``closed_book``, each item without documents."""
        out = [self.build(item, r, opts) for r in ratios for item in items]
        if self.asks_closed_book and closed_book:
            out += [self.build(item, 0.0, opts, condition="no_documents") for item in items]
        return out

    def supporting_passages(self, item: RGBItem) -> int:
        """Passages that support the answer (compared with ``--min-positives``)."""
        return self.pool_size(item)

    def pool_size(self, item: RGBItem) -> int:
        """Documents the positives are drawn from."""
        return len(item.positive)

    def correct_count(self, opts: BuildOptions) -> int:
        """Uncorrupted positives asked for besides the positives (counterfactual only)."""
        return 0

    def plan(self, inst: Instance, want_noise: int, want_pos: int, opts: BuildOptions) -> tuple[int, int] | None:
        """Adjust the (noise, positive) counts, or skip the instance (set ``inst.skipped``, return None)."""
        return want_noise, want_pos

    def positives(self, item: RGBItem, count: int, n_correct: int) -> list[Doc]:
        """The first ``count`` positive documents."""
        return [Doc("positive", i, t) for i, t in enumerate(item.positive[:count])]

    def rgb_docs(
        self, item: RGBItem, rng: random.Random, n_docs: int, ratio: float, neg_num: int, correct_ratio: float
    ) -> list[Doc]:
        """The original benchmark's selection for this testbed (before the final shuffle)."""
        return rgb_base_docs(item, n_docs, ratio, neg_num)

    def ratio_notes(self, instances: Sequence[Instance]) -> list[str]:
        """See :func:`ragrade.robust.build.actual_ratio_notes` (none when every document is noise)."""
        if self.noise_only:
            return []
        return actual_ratio_notes(instances, self.name, strict=self.strict_ratio_notes)

    # ----------------------------------------------------------------- prompt and labels
    def messages(self, inst: Instance, lp: LangPrompts) -> tuple[tuple[str, str], ...]:
        """The answering prompt with the documents (the closed-book pair for ``no_documents``)."""
        from ragrade.robust.prompts import answer_messages

        docs = None if inst.condition == "no_documents" else [d.text for d in inst.docs]
        return answer_messages(lp, inst.item.query, docs, system=inst.system_prompt)

    def label(self, record: Mapping[str, Any], scoring: str, detectors: Detectors, lang: str) -> JSONObject:
        """Default labels (:func:`~ragrade.robust.metrics.label_response`) or the original scorer's."""
        from ragrade.robust.metrics import label_response
        from ragrade.robust.rgb_scoring import rgb_label_response

        response = None if record.get("failed") else record.get("response")
        if scoring == "rgb":
            return rgb_label_response(response, record["answer"], lang, error=record.get("error"))
        return label_response(
            response, record["answer"], detectors, record.get("fakeanswer") or (), error=record.get("error")
        )

    # ----------------------------------------------------------------- metrics
    def summarise(self, records: Sequence[Mapping[str, object]], scoring: str, seed: int = 0) -> Metrics:
        """The shared counts, then :meth:`aggregate_default` or :meth:`aggregate_rgb`."""
        if scoring == "rgb":
            out, docs, closed = rgb_common(records)
            self.aggregate_rgb(out, docs, closed)
        else:
            out, docs, closed = default_common(records)
            self.aggregate_default(out, docs, closed, seed)
        return out

    def aggregate_default(
        self, out: Metrics, docs: Sequence[Mapping[str, object]], closed: Sequence[Mapping[str, object]], seed: int
    ) -> None:
        """Accuracy and rejection rate over the answered records (default rules)."""
        out["accuracy"] = metric(count_label(docs, "correct"), len(docs))
        out["rejection_rate"] = metric(count_label(docs, "rejected"), len(docs))

    def aggregate_rgb(
        self, out: Metrics, docs: Sequence[Mapping[str, object]], closed: Sequence[Mapping[str, object]]
    ) -> None:
        """Accuracy under the original rules (correct items / items)."""
        out["accuracy"] = metric(count_label(docs, "correct"), len(docs))

    # ----------------------------------------------------------------- table
    def table_cells(self, metrics: Mapping[str, Any]) -> Cells:
        """``table_columns`` of the run, or its accuracy per noise ratio."""
        if self.table_columns:
            return {label: pct(metrics.get(key)) for label, key in self.table_columns}
        return {f"{g['noise_ratio']:g}": pct(g.get("accuracy")) for g in metrics["by_noise_ratio"]}

    def actual_cells(self, metrics: Mapping[str, Any]) -> Cells:
        """The mean actual noise ratio per noise-ratio column (none with ``table_columns``)."""
        if self.table_columns:
            return {}
        out: Cells = {}
        for g in metrics["by_noise_ratio"]:
            actual = g.get("noise_ratio_actual_mean")
            out[f"{g['noise_ratio']:g}"] = None if actual is None else round(float(actual), 3)
        return out


__all__ = ["BaseTestbed", "Cells", "Metrics", "Testbed", "get_testbed", "testbed_names"]
