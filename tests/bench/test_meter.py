"""bench/meter.py: the passes of several rates taken in turn, the fastest and the median pass, on a CPU clock
this test moves itself (each pass of work says how long it "took"), so nothing here depends on the machine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import meter  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_passes_are_taken_in_turn_and_the_fastest_and_median_are_kept(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(meter.time, "process_time", clock)
    order: list[str] = []

    def work(name: str, durations: list[float]):
        def one() -> int:
            order.append(name)
            clock.now += durations[len([x for x in order if x == name]) - 1]
            return 100
        return one

    a = meter.Meter(work("a", [1.0, 0.5, 2.0, 0.25, 1.0]))
    b = meter.Meter(work("b", [0.1, 0.1, 0.1, 0.1, 0.2]))
    meter.interleave([a, b], seconds=0.0, at_least=5)
    assert order == ["a", "b"] * 5
    assert (a.best, a.median) == pytest.approx((400.0, 100.0))
    assert (b.best, b.median) == pytest.approx((1000.0, 1000.0))


def test_passes_go_on_until_the_cpu_budget_is_spent(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(meter.time, "process_time", clock)

    def one() -> int:
        clock.now += 0.3
        return 1

    m = meter.Meter(one)
    meter.interleave([m], seconds=1.0, at_least=1)
    assert len(m.rates) == 4  # 0.3, 0.6, 0.9: under the budget; 1.2: spent
    few = meter.Meter(one)
    meter.interleave([few], seconds=0.0, at_least=3)
    assert len(few.rates) == 3  # no budget: the passes asked for
