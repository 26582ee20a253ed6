"""The compiled decoder records only the values a bound reads (`epfuzz.encoding.plancore.keep_read`, issue 31):
which paths those are, and that a bound whose reads are not declared keeps every value recorded."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from epfuzz.encoding import codec, plancore
from epfuzz.encoding.codec import _Plan, _plan_for
from epfuzz.ir.fields import IntField, IntsField, declare
from epfuzz.ir.scenario import _token_budget, iter_leaf_fields


def _steps(prog: plancore.Program) -> Iterator[plancore.Step]:
    for s in prog.steps:
        yield s
        if s.nested is not None:
            yield from _steps(s.nested)


class _Recording(Mapping[str, Any]):
    def __init__(self, values: dict[str, Any]) -> None:
        self.values, self.read = values, set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        self.read.update(self.values)
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def test_token_budget_reads_what_it_declares() -> None:
    """`_token_budget` reads exactly its `reads`, whatever the values (a read left out of them would decode
    `payload.num_tokens` against a stale or missing value)."""
    rng = random.Random(5)
    for _ in range(200):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 96)), "dispatch_any")
        values = {path: scn.get_path(path) for path, _ in iter_leaf_fields() if path.count(".") == 1}
        rec = _Recording(values)
        _token_budget(rec)
        assert rec.read == set(_token_budget.reads)  # type: ignore[attr-defined]


def test_scenario_programs_record_what_bounds_read() -> None:
    """A scenario's program records the paths named by `hi_from`, `len_from` and `_token_budget.reads`, no other."""
    want = {"topology.num_channels", "topology.num_qps", *_token_budget.reads}  # type: ignore[attr-defined]
    for name, preset in (("dispatch_any", "spec"), ("deepep_v2_dispatch", "spec"), ("dispatch_any", "nvlink")):
        kept = {s.path for s in _steps(_plan_for(name, preset).program()) if s.keep}
        assert kept == want


def test_undeclared_reads_keep_every_value() -> None:
    """A `hi_fn` without `reads` (it may read anything) keeps every value recorded; with them, only those."""

    def bound(v: Mapping[str, Any]) -> int:
        return int(v["n"]) + 1

    @dataclass(frozen=True)
    class Top:
        n: int = declare(IntField(0, 5, ""))
        other: int = declare(IntField(0, 5, ""))
        m: int = declare(IntField(0, 9, "", hi_fn=bound))
        xs: tuple[int, ...] = declare(IntsField(0, 3, 4, ""))

    prog = _Plan(Top, "", {}).program()
    plancore.keep_read(prog)
    assert all(s.keep for s in prog.steps)
    values: dict[str, Any] = {}
    assert prog.run(plancore.Cursor(bytes([3, 4, 2, 1, 0])), values) == Top(3, 4, 2, (0,))
    assert values == {"n": 3, "other": 4, "m": 2, "xs": (0,)}
    vars(bound)["reads"] = ("n",)
    plancore.keep_read(prog)
    assert [s.path for s in prog.steps if s.keep] == ["n"]
    values = {}
    assert prog.run(plancore.Cursor(bytes([3, 4, 2, 1, 0])), values) == Top(3, 4, 2, (0,))
    assert values == {"n": 3}


def test_compiled_token_budget_is_the_schema_s() -> None:
    """The decoder's own `token_budget` gives `_token_budget`'s value, from ints over the fields' ranges and
    beyond them, and 0 (the decoder then calls `_token_budget`) for values that are not plain ints (a bool, a
    float pinned by a plug-in)."""
    from epfuzz.encoding.plancore import token_budget

    rng = random.Random(7)
    paths = sorted(_token_budget.reads)  # type: ignore[attr-defined]
    for _ in range(2000):
        values = {p: rng.choice([rng.randint(1, 20000), 1 << rng.randint(0, 14), rng.randint(1, 4)]) for p in paths}
        assert token_budget(values) == _token_budget(values)
    odd = {p: 16 for p in paths} | {"payload.epochs": True, "chunking.mtu": 256.0}
    assert token_budget(odd) == 0
