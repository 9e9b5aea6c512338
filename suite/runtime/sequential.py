"""The evaluation that stops when the answer is known: a group-sequential paired non-inferiority test per task.

Design (why it is this one: docs/06-gate-and-statistics.md, "Stopping early"). A variant's items are scored in a
seeded random order (``item_order``) in K looks of equal size (``look_sizes``). At look k, over the n_k items scored
so far, the paired per-item differences d = variant - baseline give

    z_k = (mean(d) + m) / sqrt(s^2 / n_k)

for a margin m (the gate's max drop or non-inferiority margin). Pass when z_k >= c_k, fail when z_k <= -c_k, else
continue; at the last look what is still undecided is inconclusive, as the fixed-size gate says when its interval
straddles -m. The interim bounds c_k come from Lan-DeMets alpha spending with the O'Brien-Fleming-like function
alpha(t) = 2 (1 - Phi(z_{1-alpha/2} / sqrt(t))) at the information fraction t_k = n_k / N (N: the task's items),
computed exactly for Brownian motion on a grid (``boundaries``). Each direction spends alpha = 0.025, the one side of
the fixed gate's 95% two-sided interval; a fail stop only removes paths that could have passed, so computing the
pass bound without the fail bound (and vice versa) keeps each rate within its spending.

The last look, on every item, is the fixed-size test itself (``design_bounds``: z_{1-alpha}, and in the gate the
fixed-size interval), not the spending's last bound (2.014 for 4 looks): a task that is not stopped early gets exactly
the verdict it gets without looks, which is what lets stopped and full-data verdicts agree. The cost is a false-pass
rate above alpha by the paths that cross an interim bound and end below the fixed one: 0.0276 for 4 looks at
alpha 0.025 (at most alpha + alpha(t_{K-1}); tests/runtime/test_sequential.py measures it).

Two guards keep the normal approximation honest on few items and 0/1 scores:
- the variance carries one discordant pair each way (``PSEUDO_PAIRS``): s^2 = (SS + 2) / (n + 1), so an early look
  whose items all agree is not read as zero variance (an infinite z);
- no stop before ``MIN_STOP_ITEMS`` items: an earlier look continues whatever its z (it forgoes the alpha spent there,
  which only lowers the error rates).

``decide_paths`` is vectorised over many sequences at once, so the same code judges a real task (``run``), the
simulation that checks the error rates (tests/runtime/test_sequential.py), and the replay on recorded items
(tools/replay_sequential.py). numpy and scipy only: the evaluate stage and the gate both import it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

ALPHA = 0.025  # each direction: the fixed gate's 95% two-sided interval leaves 2.5% on either side
MIN_STOP_ITEMS = 30
PSEUDO_PAIRS = 1  # one discordant pair each way added to the variance (not the mean)
MAX_LOOKS = 20
PASS, FAIL, CONTINUE, INCONCLUSIVE = "pass", "fail", "continue", "inconclusive"
_CODES = {1: PASS, -1: FAIL, 0: CONTINUE}
_GRID_STEP = 0.005  # grid of the Brownian motion's value for the bounds' recursion
_GRID_LOW = -12.0  # below this the process has no mass worth counting (Phi(-12) ~ 2e-33)


def spent(t, alpha: float = ALPHA):
    """Lan-DeMets O'Brien-Fleming-like spending: the alpha spent by information fraction ``t`` (0 < t <= 1)."""
    t = np.asarray(t, dtype=float)  # the upper tail itself: 1 - cdf rounds to 0 below ~1e-16 (an early look of 14+)
    return 2.0 * stats.norm.sf(stats.norm.isf(alpha / 2.0) / np.sqrt(t))


def _check_fractions(fractions) -> tuple[float, ...]:
    t = tuple(float(x) for x in fractions)
    if not t or len(t) > MAX_LOOKS or any(not 0 < x <= 1 for x in t) or any(b <= a for a, b in zip(t, t[1:])):
        raise ValueError(f"information fractions {t!r}: need 1 to {MAX_LOOKS} increasing values in (0, 1]")
    return t


def boundaries(fractions, alpha: float = ALPHA) -> np.ndarray:
    """The one-sided critical z c_k at each look: P(Z_j < c_j for j < k, Z_k >= c_k) = alpha(t_k) - alpha(t_{k-1})
    under no drift, Z_k = B(t_k) / sqrt(t_k) for a standard Brownian motion B."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha {alpha!r}: need 0 < alpha < 0.5")
    return np.array(_boundaries(_check_fractions(fractions), float(alpha)))


def design_bounds(fractions, alpha: float = ALPHA) -> np.ndarray:
    """The bounds the suite judges by: Lan-DeMets O'Brien-Fleming at the interim looks, and at a last look on every
    item (fraction 1) the fixed-size test's z_{1-alpha}, so a task scored to the end gets the fixed-size gate's
    verdict. The price: a false-pass rate of at most alpha + alpha(t_{K-1}), by Brownian simulation 0.0254 (2 looks),
    0.0276 (4), 0.0296 (10) for alpha 0.025 (the module docstring)."""
    c = boundaries(fractions, alpha)
    if float(fractions[-1]) == 1.0:
        c[-1] = float(stats.norm.isf(alpha))
    return c


@lru_cache(maxsize=256)
def _boundaries(t: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    inc = np.diff(np.concatenate([[0.0], spent(np.array(t), alpha)]))
    bounds = [float(stats.norm.isf(inc[0]))]
    b = bounds[0] * math.sqrt(t[0])  # on the B scale
    x = np.arange(_GRID_LOW, b, _GRID_STEP)
    f = stats.norm.pdf(x, scale=math.sqrt(t[0]))  # sub-density of B(t_1) on the paths not yet stopped
    for k in range(1, len(t)):
        sd = math.sqrt(t[k] - t[k - 1])

        def crossing(bk, x=x, f=f, sd=sd):
            return float(np.sum(f * stats.norm.sf((bk - x) / sd)) * _GRID_STEP)

        mass = crossing(-50.0)  # what is left to cross: an increment larger than that cannot be spent
        target = min(float(inc[k]), mass * (1 - 1e-12))
        if target <= 0:
            bk = 50.0 * math.sqrt(t[k])
        else:
            bk = optimize.brentq(lambda v: crossing(v) - target, -50.0, 50.0, xtol=1e-10)
        bounds.append(bk / math.sqrt(t[k]))
        f = _next_density(f, len(np.arange(_GRID_LOW, bk, _GRID_STEP)), sd)
        x = _GRID_LOW + _GRID_STEP * np.arange(len(f))
    return tuple(bounds)


def _next_density(f: np.ndarray, size: int, sd: float) -> np.ndarray:
    """The sub-density on the first ``size`` grid points after a N(0, sd^2) increment: f convolved with the normal
    kernel (both on one grid from _GRID_LOW, so the convolution is a discrete one; the kernel cut at 10 sd)."""
    half = math.ceil(10 * sd / _GRID_STEP)
    kernel = stats.norm.pdf(np.arange(-half, half + 1) * _GRID_STEP / sd) / sd * _GRID_STEP
    full = np.convolve(np.pad(f, (0, max(0, size - len(f)))), kernel)
    return full[half:half + size]


def look_sizes(n_items: int, looks: int) -> list[int]:
    """Items scored by the end of each of ``looks`` equally spaced looks (the last is every item)."""
    if n_items < 1 or not 1 <= looks <= MAX_LOOKS:
        raise ValueError(f"{n_items} items in {looks} looks: need at least 1 item and 1 to {MAX_LOOKS} looks")
    sizes = sorted({max(1, math.ceil(n_items * k / looks)) for k in range(1, looks + 1)})
    return sizes


def order_index(n_items: int, seed: int) -> np.ndarray:
    """The scoring order of ``n_items`` items in their sorted order: a permutation from a generator seeded with
    ``seed``."""
    return np.random.default_rng(seed).permutation(n_items)


def item_order(keys, seed: int) -> list:
    """``keys`` (any sortable item identifiers) sorted, then put in ``order_index``'s order: the order the items are
    scored in, the same wherever it is asked for."""
    ordered = sorted(keys)
    return [ordered[i] for i in order_index(len(ordered), seed)]


def z_statistic(total, sumsq, n, margin: float):
    """(mean(d) + margin) / se at each entry, from the running sum and sum of squares of d over n items (arrays)."""
    total, sumsq, n = (np.asarray(a, dtype=float) for a in (total, sumsq, n))
    mean = total / n
    ss = np.maximum(sumsq - total * mean, 0.0) + 2.0 * PSEUDO_PAIRS
    se = np.sqrt(ss / (n - 1 + 2 * PSEUDO_PAIRS) / n)
    return (mean + margin) / se


def decide_paths(totals, sumsqs, sizes, n_items: int, margin: float, alpha: float = ALPHA):
    """For P sequences judged at the same looks: ``sizes`` are the design's items counts at its K looks, and
    ``totals``/``sumsqs`` (P x J, J <= K) the running sum and sum of squares of d at the first J of them (J < K: the
    data stop before the design's last look). Returns (z, bounds, decision, look): z (P x J) and the bounds (K);
    decision +1 pass, -1 fail, 0 continue (undecided: inconclusive when J == K); look the 0-based look that decided
    (J - 1 when none did)."""
    sizes = np.asarray(sizes, dtype=float)
    c = design_bounds(sizes / n_items, alpha)
    totals, sumsqs = np.atleast_2d(np.asarray(totals, dtype=float)), np.atleast_2d(np.asarray(sumsqs, dtype=float))
    j = totals.shape[1]
    if not 1 <= j <= len(sizes) or sumsqs.shape != totals.shape:
        raise ValueError(f"{totals.shape} sums for {len(sizes)} looks")
    z = z_statistic(totals, sumsqs, sizes[None, :j], margin)
    may_stop = (sizes[:j] >= MIN_STOP_ITEMS) | (np.arange(j) == len(sizes) - 1)
    up = (z >= c[None, :j]) & may_stop[None, :]
    down = (z <= -c[None, :j]) & may_stop[None, :]
    hit = up | down
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), j - 1)
    rows = np.arange(hit.shape[0])
    decision = np.where(up[rows, first], 1, np.where(down[rows, first], -1, 0))
    return z, c, decision, first


@dataclass
class Look:
    items: int
    delta: float  # mean(d) over the items so far
    z: float
    bound: float  # pass when z >= bound, fail when z <= -bound
    decision: str  # pass, fail, continue (or inconclusive at the last look)


@dataclass
class SequentialResult:
    margin: float
    alpha: float
    n_items: int  # the task's items (all looks)
    items_used: int
    decision: str  # pass, fail, inconclusive (the last look undecided), or continue (the data end before it)
    looks: list[Look] = field(default_factory=list)

    @property
    def items_saved(self) -> int:
        return self.n_items - self.items_used

    def as_dict(self) -> dict:
        return asdict(self) | {"items_saved": self.items_saved}


def run(diffs_in_order, margin: float, looks: int, alpha: float = ALPHA, n_items: int | None = None
        ) -> SequentialResult:
    """Judge one task: ``diffs_in_order`` are the paired differences in scoring order (as many as were scored; the
    task has ``n_items``, default all of them), looked at after each of ``looks`` equal parts. Data that end before
    the design's last look is reached, undecided, give ``continue``."""
    d = np.asarray(diffs_in_order, dtype=float)
    n_items = len(d) if n_items is None else n_items
    if len(d) > n_items or not np.isfinite(d).all() or not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"{len(d)} differences for {n_items} items, margin {margin!r}: need finite differences, "
                         "no more than the items, and a margin >= 0")
    sizes = look_sizes(n_items, looks)
    reached = [n for n in sizes if n <= len(d)]
    out = SequentialResult(margin, alpha, n_items, 0, CONTINUE)
    if not reached:
        return out
    cum, cum2 = np.cumsum(d), np.cumsum(d * d)
    idx = np.array(reached) - 1
    z, c, decision, first = decide_paths(cum[idx][None, :], cum2[idx][None, :], sizes, n_items, margin, alpha)
    stop = int(first[0])
    for k in range(stop + 1):
        n = reached[k]
        verdict = _CODES[int(decision[0])] if k == stop else CONTINUE
        if verdict == CONTINUE and k == len(sizes) - 1:
            verdict = INCONCLUSIVE
        out.looks.append(Look(n, float(cum[n - 1] / n), float(z[0, k]), float(c[k]), verdict))
    out.items_used, out.decision = reached[stop], out.looks[-1].decision
    return out


def look_items(keys, seed: int, looks: int) -> list[list]:
    """The items each look adds, in scoring order: ``keys`` (the task's items, e.g. (subtask, doc_id) as the
    baseline's per-item records name them) in ``item_order``, cut at ``look_sizes``. What an evaluation scores at
    look k is ``look_items(...)[k]``: grouped by subtask, lm-eval's ``samples={subtask: [doc_id, ...]}``."""
    order = item_order(keys, seed)
    edges = [0, *look_sizes(len(order), looks)]
    return [order[a:b] for a, b in zip(edges, edges[1:])]


def stopped_look(scored, keys, seed: int, looks: int) -> int:
    """The 0-based look whose items are exactly ``scored``: a stopped evaluation must have scored the first n_k
    items of the seeded order, no other subset (else its items could have been picked). ValueError when ``scored``
    is no look's prefix, naming how it differs."""
    scored, order = set(scored), item_order(keys, seed)
    sizes = look_sizes(len(order), looks)
    if not scored <= set(order):
        raise ValueError(f"{len(scored - set(order))} scored items are not among the task's {len(order)}")
    for k, n in enumerate(sizes):
        if n == len(scored):
            missing = len(set(order[:n]) - scored)
            if missing:
                raise ValueError(f"{missing} of the first {n} items of the order (seed {seed}) are not scored: "
                                 "the items scored are not a look's")
            return k
    raise ValueError(f"{len(scored)} items scored: no look of {looks} ends there ({sizes})")
