"""Adaptive, IRT-driven evaluation of a pipeline grid: the scheduler (no I/O).

Each round, every pipeline still running gets the ``batch`` items with the
highest Fisher information at its current ability estimate (chosen at random
among near-ties, optionally balanced over topics or Bloom levels); the answers
update its ability (EAP or MAP, with a standard error), pooled across the grid
under the additive model (:mod:`ragrade.adaptive.pool`). A pipeline stops when its SE reaches ``target_se``
(after at least ``min_items`` answers and ``min_share`` of the exam), at its item cap, when the global request
budget (by default a share of the full grid, at most ``default_items`` requests per pipeline on average) runs
out, under a budget once it is surely not the best (the simultaneous bounds of elimination, margin 0), or once
the run is decided: under the same bounds no pipeline can beat the leader by more than ``margin``
(:meth:`Scheduler._stop_if_settled`: what further answers could still change is smaller than the margin, so
they are not bought); elimination drops a pipeline once its upper bound plus ``margin`` is below another's
lower bound (paired questions: once the difference's bound is), with bounds simultaneous over pipelines and
rounds (:func:`~ragrade.adaptive.estimate.elimination_z`), never on fewer than
``min_items`` answers and ``min_audit`` audit answers. No decision stops a pipeline whose accuracy SD is
above :data:`STOP_MAX_SD` (a minimum sample size; only the cap and the budget do). Under a budget, a
pipeline whose probability of being the best is below ``stop_p_best`` (and whose SD is at most
``pause_max_sd``, looser than a stop's) is *paused*: it gets no requests while a contender is running, is
reconsidered every round, and is never stopped for it. With the factorial
shortcut only a designed subset of the grid is measured; the others are
*predicted* from the additive model.

A share of every batch (``audit_share``) is the *audit sample*: items drawn
uniformly from those the pipeline was not asked. Every pipeline gets a
full-grid accuracy estimate: its observed answers plus an estimate of the
rest, the IRT-expected score corrected by the audit residuals, or the sampled
answers alone when there is no model (``audit_share = 1``, the ``sample`` mode,
also what a run falls back to when the check on its calibration file's
responses warns: :func:`~ragrade.adaptive.calibration.misfit_fallback`); see
:mod:`ragrade.adaptive.estimate`. The misfit check runs at the end in every mode:
on the run's own answers under the model (file, reference, cold: the residual
eigenvalue and the audit biases by component, :meth:`RunState.check_fit`), or,
without a model, on a fit of the sampled answers (:meth:`Scheduler._wrap_up`).

A failed request is missing data: the item counts as spent (never asked again
for that pipeline) and adds nothing to the estimates. The scheduler is
deterministic for a fixed seed and the same answers, which is what makes a run
resumable: replaying the journal's answers round by round gives the same plan.
:mod:`ragrade.adaptive.runner` drives it on a run directory; the benchmark
drives it on simulated answers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.adaptive.estimate import MisfitResult, calibration_check, elimination_z, pair_gaps, prob_best, sig4
from ragrade.adaptive.state import ELIMINATED, F64, FAILED, ItemParams, RunState, stable_rng
from ragrade.irt import cat
from ragrade.run.adaptive_config import AdaptiveConfig

# The largest SD of a full-exam accuracy estimate at which a pipeline may stop (target SE, elimination, surely not
# the best, the others eliminated): a minimum sample size in the estimate's own terms. At 0.04 an error of more
# than 0.15 is a 3.75-SD event (about 2 in 10,000 per pipeline, normal estimates), where a pipeline stopped on
# 20-30 answers (SD 0.08-0.11) errs by more than 0.15 about once in ten (issue 39: 37 points from 20 answers).
# Only the item cap and the global budget stop a pipeline that is less precise.
STOP_MAX_SD = 0.04


class Scheduler(RunState):
    """The adaptive scheduler over ``pipelines`` x ``params.items`` (see the module docstring).

    ``factors`` gives each pipeline's factor levels (for pooling and the factorial shortcut);
    ``groups`` each item's topic / Bloom group (for balance); ``refit`` re-fits the items on the
    answers so far every ``refit_every`` rounds (in-run calibration).
    """

    def __init__(
        self,
        params: ItemParams,
        pipelines: Sequence[str],
        cfg: AdaptiveConfig,
        *,
        factors: Sequence[Mapping[str, object]] | None = None,
        groups: Sequence[str] | None = None,
        seed: int = 0,
        refit: Callable[[Scheduler], ItemParams] | None = None,
        calibration_fit: MisfitResult | None = None,
    ) -> None:
        self.refit = refit
        super().__init__(
            params, pipelines, cfg, factors=factors, groups=groups, seed=seed, calibration_fit=calibration_fit
        )
        self.paused = np.zeros(len(self.pipelines), dtype=bool)  # served only when no contender is running

    # ------------------------------------------------------------------ planning
    def plan(self) -> dict[int, list[int]]:
        """The items each running pipeline is asked this round (empty: the run is over)."""
        cfg = self.cfg
        active = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        left = None if self.budget is None else self.budget - self.spent
        if left is not None and left <= 0:  # spent before a round ends (reference answers); finish_round ends the rest
            if self._stop_on_budget():
                self._wrap_up()
            return {}
        served = [p for p in active if not self.paused[p]]
        active = served or active  # the contenders first; paused pipelines once no contender is running
        n_asked = self.n_asked
        want = {p: min(cfg.batch, self.cap - int(n_asked[p])) for p in active}
        if left is not None and sum(want.values()) > left:  # the last round: shared out, least asked first
            order = sorted(active, key=lambda q: (int(n_asked[q]), -self.se[q], q))
            share = dict.fromkeys(active, 0)
            while left > 0 and any(share[p] < want[p] for p in order):
                for p in order:
                    if left > 0 and share[p] < want[p]:
                        share[p] += 1
                        left -= 1
            want = share
        info = None
        if active and self.use_model:
            info = cat.information_at(self.theta[active], self.params.d, self.params.b, self.params.g)
        out: dict[int, list[int]] = {}
        for col, p in enumerate(active):
            if want[p] <= 0:
                continue
            audit = self._audit_pick(p, self._n_audit(p, want[p], int(n_asked[p])))
            picked = list(audit)
            if info is not None and want[p] > len(audit):
                picked += self._select(p, info[:, col], want[p] - len(audit), audit)
            if picked:
                out[p] = sorted(picked)
        return out

    def _n_audit(self, p: int, k: int, n_asked: int) -> int:
        """Audit items of this batch: the audit share of everything asked, front-loaded to ``min_audit``."""
        if not self.use_model:
            return k
        m = int(self.audit[p].sum())
        share = math.ceil(self.cfg.audit_share * (n_asked + k)) - m
        return max(0, min(k, max(share, self.cfg.min_audit - m)))

    def _audit_pick(self, p: int, k: int) -> list[int]:
        """Extend ``p``'s audit along its random order by ``k`` new requests.

        The audit is always a prefix of the order, i.e. a simple random sample of the whole exam: an item
        on the way that the model already chose joins the audit at no cost (its answer is known), and its
        share of the log-likelihood moves to the audit's (the held-out abilities never see audit answers).
        """
        self.__dict__.pop("_acc_cache", None)
        picked: list[int] = []
        order, pos = self.order[p], int(self.audit_pos[p])
        while len(picked) < k and pos < len(order):
            i = int(order[pos])
            pos += 1
            self.audit[p, i] = True
            if not self.asked[p, i]:
                picked.append(i)
            elif self.y[p, i] >= 0:
                self._ll_audit[p] += self._logP[i] if self.y[p, i] == 1 else self._logQ[i]
        self.audit_pos[p] = pos
        return picked

    @property
    def excluded(self) -> npt.NDArray[np.bool_]:
        """Items the model never chooses (negative discrimination, when excluded); the audit may still draw them."""
        neg = self.params.negative
        if neg is None or not self.cfg.exclude_negative:
            return np.zeros(len(self.params.items), dtype=bool)
        return np.asarray(neg, dtype=bool)

    def _select(self, p: int, info: F64, k: int, taken: Sequence[int] = ()) -> list[int]:
        score = np.where(self.asked[p] | self.excluded, -np.inf, info)
        score[list(taken)] = -np.inf
        n_free = int(np.isfinite(score).sum())
        k = min(k, n_free)
        if k <= 0:
            return []
        rng = stable_rng(self.seed, "select", self.round, self.pipelines[p])
        if self.groups is None:
            return self._near_ties(score, k, rng)
        picked: list[int] = []
        counts = {gname: int((self.groups[self.asked[p]] == gname).sum()) for gname in np.unique(self.groups)}
        share = {gname: float((self.groups == gname).mean()) for gname in counts}
        total = int(self.asked[p].sum())
        for _ in range(k):
            open_groups = [gname for gname in counts if np.isfinite(score[self.groups == gname]).any()]
            gname = max(open_groups, key=lambda x: (share[x] * (total + 1) - counts[x], x))
            masked = np.where(self.groups == gname, score, -np.inf)
            i = self._near_ties(masked, 1, rng)[0]
            picked.append(i)
            score[i] = -np.inf
            counts[gname] += 1
            total += 1
        return picked

    def _near_ties(self, score: F64, k: int, rng: np.random.Generator) -> list[int]:
        order = np.argsort(-score, kind="stable")
        kth = score[order[k - 1]]
        pool = order[: max(k, int((score >= kth * (1.0 - self.cfg.near_tie)).sum()))]
        pool = pool[np.isfinite(score[pool])]
        return sorted(int(i) for i in rng.choice(pool, size=k, replace=False))

    # ------------------------------------------------------------------ between rounds
    def finish_round(self) -> dict[str, Any]:
        """Re-estimate, stop and eliminate; returns this round's log record."""
        self.round += 1
        if self.refit is not None and self.use_model and self.round % self.cfg.refit_every == 0:
            self._refit()
        self.reestimate()
        _, sd = self.accuracy(sampling_only=True)
        batch_floor = min(self.cfg.batch, self.cap)
        n_answered, n_asked = self.n_answered, self.n_asked
        acc0, sd0 = self.accuracy()
        racing = self._contenders(acc0, sd0)
        settled = sd0 <= STOP_MAX_SD  # precise enough to stop on anything but the item cap or the budget
        race_cap = self.race_cap
        for p in range(len(self.pipelines)):
            if self.status[p] != "active":
                continue
            precise = self.se[p] <= self.cfg.target_se or sd[p] <= (self.cfg.target_accuracy_se or -1.0)
            if n_answered[p] == 0 and n_asked[p] >= batch_floor:
                self.status[p], self.reason[p] = FAILED, "every request failed"
            elif (
                n_answered[p] >= self.min_items
                and precise
                and settled[p]
                and (p not in racing or n_asked[p] >= race_cap)
            ):
                self._stop(p, "target SE")
            elif n_asked[p] >= self.cap:
                self._stop(p, "item cap")
        acc, sd_all = self.accuracy()
        eliminated = self._eliminate(acc, sd_all) if self.cfg.eliminate else []
        self._stop_unlikely(acc, sd_all)
        self._stop_if_settled(acc, sd_all)
        self._stop_if_decided()
        if self.budget is not None and self.spent >= self.budget:
            self._stop_on_budget()  # here, so that the round's record carries the final check (misfit_p)
        alive = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        if not alive:
            self._wrap_up()
        return {
            "round": self.round,
            "requests": self.spent,
            "budget": self.budget,  # the run's cap on requests (None: the stopping rules alone)
            "asked_this_round": None,
            "alive": len(alive),
            "eliminated": [self.pipelines[p] for p in eliminated],
            "max_se": float(self.se[alive].max()) if alive else None,
            "median_se": float(np.median(self.se[alive])) if alive else None,
            "se": {self.pipelines[p]: round(float(self.se[p]), 4) for p in alive},
            "tau": self.pool_info.get("tau"),
            "audit_bias_sd": round(self.tau, 5),
            "misfit_p": None if self.misfit is None else sig4(self.misfit.p_value),
            "paused": int(self.paused.sum()),
        }

    @property
    def race_cap(self) -> int:
        """How far a contender races past its target SE: ``race_items`` (default: the item cap).

        A cap at the budget's share of the exam was tried (8 seeds of ``bench_adaptive.py`` per 63 x 1,000
        scenario, ``BENCH_CFG='{"race_items": 250}'``): the share of the grid's requests fell from 0.19 to 0.15
        on average (worst seed 0.24 to 0.19), but the pick lost: mean regret rose from 0-0.06 to 0.14-0.43
        points and one two-ability seed picked a pipeline significantly worse than the best. Left to the user.
        """
        return min(self.cap, self.cfg.race_items or self.cap)

    def _wrap_up(self) -> None:
        """At the end of the run: the last re-fit (the final estimates use every answer) and the misfit check.

        Without a model (``sample``), the items are fitted once on the answers (``refit``, when given) and the
        check of :func:`~ragrade.adaptive.estimate.calibration_check` runs on them: every pipeline answered
        the same random questions, a complete matrix like a calibration run's. Its warning changes no
        estimate (they are design-based already); it says the calibration this run writes is one-dimensional
        in name only.
        """
        if not self.use_model:
            if self.refit is not None and self.misfit is None:
                self.misfit = self._sample_check()
            return
        if self.refit is not None and self.round % self.cfg.refit_every != 0:
            self._refit()
            self.reestimate()
        self.check_fit(own_fit=self.refit is not None)  # at the end (the bootstrap is the costly part)

    def _sample_check(self) -> MisfitResult | None:
        assert self.refit is not None
        rows = self.n_answered > 0
        if rows.sum() < 3:
            return None
        params = self.refit(self)
        cols = (self.y[rows] >= 0).any(axis=0)
        R = self.y[np.ix_(rows, cols)]
        d, b, g = params.d[cols], params.b[cols], params.g[cols]
        res = calibration_check(R, d, b, g, alpha=self.cfg.misfit_alpha, seed=self.seed)
        z = np.zeros(len(self.pipelines))
        z[rows] = res.z  # per pipeline, aligned with the grid (pipelines never answered: 0)
        res.z = z
        return res

    def _refit(self) -> None:
        assert self.refit is not None
        t0 = time.perf_counter()
        self.set_params(self.refit(self))
        self.refit_seconds += time.perf_counter() - t0

    def _contenders(self, acc: F64, sd: F64) -> set[int]:
        """Pipelines (running) whose 95% interval overlaps the current best's: candidates for the top.

        Empty when nothing overlaps the best: a race needs two. (A leader alone used to count as racing and
        went on to the item cap after its estimate was precise: on a 4 x 1,500 sampled grid whose leader was
        14 points ahead it spent the whole 25% budget, where stopping at the target SE spends about half.)
        """
        if not self.cfg.race:
            return set()
        live = np.isin(self.status, ["active", "stopped"]) & (self.n_answered > 0)
        if live.sum() < 2:
            return set()
        best = int(np.flatnonzero(live)[np.argmax(acc[live])])
        floor = acc[best] - 1.96 * sd[best]
        near = live & (acc + 1.96 * sd >= floor)
        if near.sum() < 2:  # a leader nobody overlaps is in no race (it used to race alone to the item cap)
            return set()
        return {int(p) for p in np.flatnonzero(near) if self.status[p] == "active"}

    def _stop_on_budget(self) -> bool:
        """Stop every running pipeline: the budget is spent (the paused ones say so). True if any was running."""
        active = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        for p in active:
            self._stop(p, "budget (paused: not a contender)" if self.paused[p] else "budget")
        return bool(active)

    def _stop(self, p: int, why: str) -> None:
        self.status[p], self.reason[p] = "stopped", why

    def _eliminate(self, acc: F64, sd: F64) -> list[int]:
        """Drop a pipeline whose upper bound (plus the margin) is below another's lower bound.

        The bounds are simultaneous over pipelines and rounds (:func:`elimination_z`), so neither
        choosing the leader nor looking after every round can drop the best but with probability
        ``1 - confidence``.
        """
        cfg = self.cfg
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        ok = (self.n_answered >= self.min_items) & (m_audit >= cfg.min_audit)
        ok &= np.isin(self.status, ["active", "stopped"])
        if ok.sum() < 2:
            return []
        z = elimination_z(1.0 - cfg.confidence, len(self.pipelines), max(1, self.round))
        gap = pair_gaps(acc, sd, z, self.paired_corr())  # [p, q]: how far q is surely above p
        gap = np.where(ok[None, :] & ~np.eye(len(acc), dtype=bool), gap, -np.inf)
        out = []
        for p in np.flatnonzero(ok):
            q = int(np.argmax(gap[p]))
            if self.status[p] == "active" and gap[p, q] > cfg.margin and sd[p] <= STOP_MAX_SD:
                self.status[p], self.reason[p] = ELIMINATED, f"worse than {self.pipelines[q]}"
                out.append(int(p))
        return out

    def _stop_unlikely(self, acc: F64, sd: F64) -> None:
        """Under a budget, stop asking pipelines that are surely not the best (the requests go to the contenders).

        Also sets :attr:`paused`: pipelines with enough answers, an accuracy SD of at most ``pause_max_sd``
        and a probability of being the best below ``stop_p_best`` get no requests while a contender is running
        (the budget goes where it can still change the decision); they are not stopped. ``pause_max_sd`` (0.08)
        is looser than the :data:`STOP_MAX_SD` of a stop: a pause is no decision, and on small grids a floor of
        0.04 left nothing to pause (every pipeline of a 20 x 300 grid spent its 75 answers alike). In
        ``bench_adaptive.py`` (40 seeds each, the 12 scenarios of 300-question grids of 4 to 20 pipelines), 0.08
        against 0.04: mean regret of the pick 0.20-0.66 accuracy points against 0.03-1.42 (0.39 against 0.72 on
        average), top-1 0.85 against 0.77, coverage 0.97-1.00 both; the price is the paused pipelines'
        precision: largest error of any estimate 0.13-0.21 against 0.10-0.17, mean absolute error 0.039 against
        0.035, Kendall tau over the grid 0.81 against 0.84, and in 1 of the 480 runs the best was paused when
        the budget ran out (an unlucky 50-answer estimate, 2 SDs low; the pick was 1.7 points below it). At 63 x
        1,000 (a 25% budget) the two agree (regret 0-0.02, top-1 0.97-1.00, largest error 0.10-0.15).
        ``pause_max_sd = 0.04`` restores the old balance.

        A pipeline stops when its simultaneous upper bound is below another's simultaneous lower bound: the
        bounds of :meth:`_eliminate` (:func:`~ragrade.adaptive.estimate.elimination_z`, Bonferroni over
        pipelines, ``alpha / (r (r + 1))`` at round ``r``), with margin 0, and its probability of being the
        best is below ``stop_p_best``. Both stopping and elimination need some interval to fail at some round
        for the best to go, and every interval holds at every round with probability at least ``confidence``
        together, so the best is neither stopped nor eliminated but with probability ``1 - confidence``, over
        both rules together (a point probability alone, "P(best) < 0.01", has no such control: it is
        recomputed after every round and its normal approximation is least trustworthy on few answers). A
        stopped pipeline keeps its estimate and interval.
        """
        self.paused = np.zeros(len(self.pipelines), dtype=bool)
        if self.budget is None or self.cfg.stop_p_best <= 0:
            return
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        ok = (self.n_answered >= self.min_items) & (m_audit >= self.cfg.min_audit)
        ok &= np.isin(self.status, ["active", "stopped"])
        if ok.sum() < 2:
            return
        corr = self.paired_corr()
        z = elimination_z(1.0 - self.cfg.confidence, len(self.pipelines), max(1, self.round))
        gap = pair_gaps(acc, sd, z, corr)
        gap = np.where(ok[None, :] & ~np.eye(len(acc), dtype=bool), gap, -np.inf)
        pb = prob_best(np.where(ok, acc, np.nan), sd, seed=self.seed + self.round, draws=4000, corr=corr)
        for p in np.flatnonzero(ok & (self.status == "active")):
            if gap[p].max() > 0.0 and pb[p] < self.cfg.stop_p_best and sd[p] <= STOP_MAX_SD:
                self._stop(int(p), f"surely not the best (simultaneous {self.cfg.confidence:.0%} bounds)")
        # a pause is no decision: recomputed every round, it only orders the spending (a paused pipeline whose
        # probability rises again is served again; all are served once no contender is running)
        self.paused = ok & (self.status == "active") & (pb < self.cfg.stop_p_best) & (sd <= self.cfg.pause_max_sd)

    def _stop_if_settled(self, acc: F64, sd: F64) -> None:
        """Stop every running pipeline once no further answer can move the pick by more than ``margin``.

        The pick is the leader (highest estimate among the pipelines still standing); for every other
        standing pipeline ``q`` the simultaneous upper bound of ``acc[q] - acc[leader]`` (the bounds of
        :meth:`_eliminate`: Bonferroni over pipelines, union over rounds; paired differences in ``sample``
        mode) must be at most ``margin``. Then, but with probability ``1 - confidence`` over the whole run,
        the leader is within ``margin`` of the best, whatever the remaining budget would buy: spending it
        could only reorder pipelines closer than that (an indifference zone, as in epsilon-best selection).
        Needs every standing pipeline to have ``min_items`` and ``min_audit`` answers; a running pipeline
        whose SD is above :data:`STOP_MAX_SD` goes on (the precision floor is a promise about every estimate,
        not only the pick), and stops here once it is below.
        """
        if not self.cfg.eliminate:
            return
        standing = np.isin(self.status, ["active", "stopped"])
        running = standing & (self.status == "active")
        if standing.sum() < 2 or not running.any():
            return
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        ready = (self.n_answered >= self.min_items) & (m_audit >= self.cfg.min_audit)
        if not ready[standing].all():
            return
        lead = int(np.flatnonzero(standing)[np.argmax(acc[standing])])
        z = elimination_z(1.0 - self.cfg.confidence, len(self.pipelines), max(1, self.round))
        gap = pair_gaps(acc, sd, z, self.paired_corr())  # gap[q, lead]: lower bound of acc[lead] - acc[q]
        others = standing & (np.arange(len(acc)) != lead)
        if (gap[others, lead] < -self.cfg.margin).any():
            return
        why = f"decided: none can beat the leader by more than {self.cfg.margin:g} (simultaneous bounds)"
        for p in np.flatnonzero(running & (sd <= STOP_MAX_SD)):
            self._stop(int(p), why)

    def _stop_if_decided(self) -> None:
        """Stop the last pipeline standing once every other measured one is eliminated."""
        if not self.cfg.eliminate:
            return
        standing = np.flatnonzero(np.isin(self.status, ["active", "stopped"]))
        if not (self.status == ELIMINATED).any() or len(standing) != 1:
            return
        last = int(standing[0])
        _, sd = self.accuracy()
        if self.status[last] == "active" and self.n_answered[last] >= self.min_items and sd[last] <= STOP_MAX_SD:
            self._stop(last, "the others are eliminated")


def run_rounds(sched: Scheduler, ask: Any, on_round: Any = None, max_rounds: int = 100_000) -> list[dict[str, Any]]:
    """Drive ``sched`` to the end: ``ask(plan) -> {p: answers}`` per round; returns the round log.

    ``answers`` are aligned with the plan's items (1, 0, or None for a failed request).
    """
    log = []
    for _ in range(max_rounds):
        plan = sched.plan()
        if not plan:
            break
        answers = ask(plan)
        for p, items in plan.items():
            sched.record(p, items, answers[p])
        rec = sched.finish_round()
        rec["asked_this_round"] = sum(len(v) for v in plan.values())
        log.append(rec)
        if on_round is not None:
            on_round(rec)
        if sched.done:
            break
    return log


__all__ = ["STOP_MAX_SD", "Scheduler", "run_rounds"]
