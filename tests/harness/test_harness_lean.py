"""On the sim the harness runs the emulator itself and makes the outcome only for a finding (`Harness.lean`: its
text summary and culprit rules were ~3% of a clean execution, issue 31). A finding's outcome must be the one
`SimBackend.run` gives, and the inputs it offers the sink the same; a backend of another class takes its own
`run` as before."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from epfuzz.backends.sim import SimBackend
from epfuzz.continuous.harness import Harness
from epfuzz.encoding import codec


def _offers(h: Harness, n: int) -> list[tuple[bytes, Any]]:
    got: list[tuple[bytes, Any]] = []

    def offer(scn: Any, data: bytes, outcome: Any) -> None:
        got.append((data, outcome))

    h.sink.offer = offer  # type: ignore[method-assign]
    rng = random.Random(11)
    for _ in range(n):
        h.test_one_input(bytes(rng.randrange(256) for _ in range(rng.randrange(96))))
    return got


def _fields(o: Any) -> tuple[Any, ...]:
    return (o.backend, o.violation, o.runs, o.hits, o.rules_fired, o.summary, o.extra)


def test_a_findings_outcome_is_the_backends(tmp_path: Path) -> None:
    h = Harness("deepep_v2_dispatch", keep_going=True, findings_dir=tmp_path)
    assert h.lean
    got = _offers(h, 400)
    assert len(got) >= 3
    for data, outcome in got:
        want = SimBackend().run(codec.decode(data, h.protocol, h.preset), h.proto)
        assert _fields(outcome) == _fields(want)


def test_a_backend_of_another_class_runs_its_own_run(tmp_path: Path) -> None:
    ran: list[int] = []

    class Counted(SimBackend):
        def run(self, scn: Any, proto: Any, repeats: int = 1) -> Any:
            ran.append(1)
            return super().run(scn, proto, repeats)

    lean = Harness("deepep_v2_dispatch", keep_going=True, findings_dir=tmp_path)
    h = Harness("deepep_v2_dispatch", keep_going=True, findings_dir=tmp_path)
    h.backend = Counted()
    h.lean = type(h.backend) is SimBackend
    assert not h.lean
    a, b = _offers(lean, 400), _offers(h, 400)
    assert len(ran) == 400 and a
    assert [(d, _fields(o)) for d, o in a] == [(d, _fields(o)) for d, o in b]
