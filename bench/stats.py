"""Time-to-bug statistics as FuzzBench and Magma report them (no scipy needed).

- Kaplan-Meier restricted mean survival time (RMST): the area under the survival
  curve up to the budget, so trials that end without a find count for what they
  show (the bug took at least the budget) instead of being dropped or imputed.
- Mann-Whitney U, two-sided, normal approximation with tie and continuity
  corrections (FuzzBench's test per benchmark); censored trials enter as the budget,
  tied with each other, which is conservative for the faster fuzzer.
- Vargha-Delaney A12: P(X < Y) + P(X = Y) / 2 with X the fuzzer's and Y the
  baseline's time-to-bug (lower is better here, so > 0.5 means X is faster;
  FuzzBench's thresholds: 0.556 small, 0.638 medium, 0.714 large).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def km_rmst(times: Sequence[float], found: Sequence[bool], horizon: float) -> float:
    """Restricted mean time-to-bug up to `horizon` from (time, event) pairs."""
    pairs = sorted((min(t, horizon), bool(f) and t <= horizon) for t, f in zip(times, found))
    at_risk = len(pairs)
    surv, last, area = 1.0, 0.0, 0.0
    i = 0
    while i < len(pairs):
        t = pairs[i][0]
        events = sum(1 for tt, e in pairs[i:] if tt == t and e)
        ties = sum(1 for tt, _ in pairs[i:] if tt == t)
        area += surv * (t - last)
        last = t
        if at_risk:
            surv *= 1 - events / at_risk
        at_risk -= ties
        i += ties
    return area + surv * (horizon - last)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda k: values[k])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of Mann-Whitney U (normal approximation, tie-corrected)."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        return float("nan")
    allv = list(x) + list(y)
    r = _ranks(allv)
    u1 = sum(r[:n1]) - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    counts: dict[float, int] = {}
    for v in allv:
        counts[v] = counts.get(v, 0) + 1
    tie = sum(c ** 3 - c for c in counts.values())
    var = n1 * n2 / 12 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def a12(x: Sequence[float], y: Sequence[float]) -> float:
    """Vargha-Delaney A12 that x is *lower* (faster) than y."""
    if not x or not y:
        return float("nan")
    wins = sum((a < b) + 0.5 * (a == b) for a in x for b in y)
    return wins / (len(x) * len(y))
