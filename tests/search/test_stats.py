"""The benchmark's statistics against hand-computed values."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("bench_stats", Path(__file__).resolve().parents[2] / "bench" / "stats.py")
stats = importlib.util.module_from_spec(spec)
assert spec.loader is not None
spec.loader.exec_module(stats)


def test_rmst_without_censoring_is_the_mean():
    assert stats.km_rmst([1, 2, 3], [True] * 3, 10) == pytest.approx(2.0)


def test_rmst_counts_censored_trials_as_at_least_the_horizon():
    # one find at 2, one run cut at 10: S = 1 until 2, 0.5 after -> 2 + 0.5 * 8
    assert stats.km_rmst([2, 10], [True, False], 10) == pytest.approx(6.0)
    assert stats.km_rmst([10, 10], [False, False], 10) == pytest.approx(10.0)


def test_rmst_censoring_before_the_horizon_keeps_its_weight():
    # censored at 1, then a find at 3 among the one left at risk: S(3) = 0
    assert stats.km_rmst([1, 3], [False, True], 5) == pytest.approx(3.0)


def test_a12_extremes_and_ties():
    assert stats.a12([1, 2], [3, 4]) == 1.0
    assert stats.a12([3, 4], [1, 2]) == 0.0
    assert stats.a12([5, 5], [5, 5]) == 0.5


def test_mann_whitney_separated_samples_are_significant():
    x = list(range(20))
    y = list(range(100, 120))
    p = stats.mann_whitney_p(x, y)
    assert p < 1e-6
    # scipy.stats.mannwhitneyu(x, y, method="asymptotic") gives 6.8e-08 for these
    assert math.isclose(p, 6.8e-08, rel_tol=0.1)
    assert stats.mann_whitney_p([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
