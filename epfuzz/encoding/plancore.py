"""A (protocol, preset) decode plan as data, and the loop that runs it: mypyc compiles this module (issue 31.3).

`epfuzz.encoding.codec_compile` turns a plan into straight-line Python per (protocol, preset): cheap for the
interpreter, but still ~70 bytecode lines a field. Code generated per plan cannot be compiled ahead of time
(a plug-in protocol's pins are only known when it is registered), so the compiled form is this one fixed
loop instead, and the plan becomes its data: one `Step` per field, with the field's bounds, its pinned value
or the program of its nested class. A plug-in protocol pins values, which are data here, so its decoder is
exact and pays nothing of its own; a field spec of a kind this loop does not know (any class other than the
built-in ones, subclasses included) is drawn by its own `draw` through a `ChoiceReader` (`SPEC`).

The loop makes exactly the draws of `_Plan.walk_decode` in the same order, records the same `values` (a
bound read through `hi_fn` may read any of them) and builds the same objects: tests/scenario/test_decoder.py
compares it with the walk for every protocol and preset. It serves `codec.decode` (bytes in, scenario out);
`codec.decoder_for` keeps the generated decoder, whose calls of the reader's `draw` are what
`search.context.field_bounds` records (`codec_compile._ints_lines`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from epfuzz.ir.choices import ChoiceReader
from epfuzz.ir.scenario import MAX_PACKETS, _token_budget

_TOKEN_BUDGET: Final = _token_budget  # `num_tokens`' hi_fn: `_hi` runs it compiled (`token_budget`)
_MAX_PACKETS: Final = MAX_PACKETS

FIXED: Final = 0    # pinned: the constant, no bytes
INT: Final = 1      # IntField, linear
LOG: Final = 2      # IntField on a log scale (`fields.draw_int`)
BOOL: Final = 3
CHOICE: Final = 4
INTS: Final = 5     # IntsField
ITEMS: Final = 6    # ItemsField: a count, then the item program per item
SECTION: Final = 7  # SectionField: the nested program, no bytes of its own
SPEC: Final = 8     # any other spec: its own `draw`

_new: Final = object.__new__  # a C static in the compiled module (`epfuzz.ir.opmake` says why)


class Step:
    """One field of a program: what `Program.run` draws for it (unused parts keep their defaults)."""

    def __init__(self, kind: int, path: str, *, lo: int = 0, hi: int = 0, log: bool = False,
                 hi_from: str | None = None, hi_fn: Callable[[dict[str, Any]], int] | None = None,
                 len_from: str | None = None, max_len: int = 0, options: tuple[Any, ...] = (),
                 fixed: Any = None, nested: Program | None = None, spec: Any = None, spec_nested: Any = None) -> None:
        self.kind = kind
        self.path = path
        self.lo = lo
        self.hi = hi
        self.log = log
        self.hi_from = hi_from
        self.hi_fn = hi_fn
        self.len_from = len_from
        self.max_len = max_len
        self.options = options
        self.fixed = fixed
        self.nested = nested
        self.spec = spec                # SPEC: the field spec, drawn with
        self.spec_nested = spec_nested  # ... the codec's nested plan (`fields.Nested`)
        #: `Program.run` records the value in `values` (`keep_read` clears it where no bound reads the path)
        self.keep = True
        #: an INT whose bounds are its own (no `hi_fn`, no `hi_from`): `Program.run` draws it in place, without
        #: `_draw_step`'s, `_draw_int`'s and `_hi`'s calls (as BOOL and CHOICE)
        self.plain = kind == INT and hi_fn is None and hi_from is None


class Program:
    """The steps of one dataclass under one set of pins, and how its instance is made from their values:
    `cls(*values)` where the steps are its parameters in order, else by keyword (`names`); where the steps
    are every field of a plain frozen dataclass in order (`fields`, `epfuzz.ir.slotinit.settable_fields`),
    `object.__new__` and a set per field, without the call of its interpreted `__init__`.

    Past the end of the input every draw is its range's lowest value whatever its bounds (a draw reads
    zeros there: `lo`; on a log scale the bit length of `lo`, then `lo` itself; the first option, False, an
    empty list), so the rest of an instance is a constant of the program, and the values recorded from
    there on bound no draw that takes a byte. `run` stops there: the fields left take `rest[i]` (for step
    i on), a section left whole is its program's `tail`, built once, shared (the IR is frozen). A canonical
    input (`codec.encode` strips trailing zeros) ends before its default sections, so this is the common
    case, not a benchmark's. A program with a `SPEC` step (its draw is the spec's own) has no tail (`None`)
    and runs every step; so does every program above it."""

    def __init__(self, cls: Any, steps: list[Step], names: tuple[str, ...] | None,
                 fields: tuple[str, ...] | None = None) -> None:
        self.cls = cls
        self.steps = steps
        self.names = names
        self.fields = fields if names is None and fields is not None and len(fields) == len(steps) else None
        self.rest: list[list[Any]] = []
        self.tail: Any = None
        if all(s.kind != SPEC and (s.nested is None or s.nested.tail is not None) for s in steps):
            ends = [_end_value(s) for s in steps]
            self.rest = [ends[i:] for i in range(len(steps) + 1)]
            self.tail = self.make(ends)

    def make(self, args: list[Any]) -> Any:
        fields = self.fields
        if fields is not None:
            o = _new(self.cls)
            for name, v in zip(fields, args):
                object.__setattr__(o, name, v)
            return o
        names = self.names
        if names is None:
            return self.cls(*args)
        return self.cls(**dict(zip(names, args)))

    def decode(self, data: bytes) -> Any:
        """The instance `data` decodes to (missing bytes read as zeros, as `ChoiceReader`'s)."""
        return self.run(Cursor(data), {})

    def run(self, cur: Cursor, values: dict[str, Any]) -> Any:
        """The instance decoded from `cur` on; `values` records what the fields a bound reads decoded to (the
        steps marked `keep`: every field where some bound's reads are unknown), up to where the input ends
        (where there is a `tail`)."""
        tail = self.tail is not None
        if tail and cur.pos >= cur.end:
            return self.tail
        args: list[Any] = []
        for i, s in enumerate(self.steps):
            if tail and cur.pos >= cur.end:
                args.extend(self.rest[i])
                break
            k = s.kind  # the one-draw kinds in place (`_draw_step`'s draws, the same order and bytes)
            if k == FIXED:
                v = s.fixed
            elif s.plain:
                v = cur.draw(s.lo, s.hi)
            elif k == BOOL:
                v = cur.draw(0, 1) != 0
            elif k == CHOICE:
                v = s.options[cur.draw(0, len(s.options) - 1)]
            else:
                v = _draw_step(s, cur, values)
            if s.keep:
                values[s.path] = v
            args.append(v)
        return self.make(args)


def keep_read(root: Program) -> None:
    """Have `root`'s loop record only the values a bound reads (`hi_from`, `len_from`, a `hi_fn`'s declared
    `reads`): `values` is the bounds' input and nothing else's (`codec.decode` drops it), and a fresh scenario's
    ~45 stores into a growing dict were a fifth of decoding it (issue 31, callgrind). Where a bound's reads
    are not known (a `hi_fn` without `reads`, a `SPEC` step's own draw) every value stays recorded. `root`
    must be the whole scenario's program: a path read by a step outside the program would be lost."""
    steps: list[Step] = []
    todo = [root]
    while todo:
        prog = todo.pop()
        for s in prog.steps:
            steps.append(s)
            if s.nested is not None:
                todo.append(s.nested)
    read: set[str] = set()
    for s in steps:
        if s.kind == SPEC:
            return
        if s.hi_fn is not None:
            fn_reads: tuple[str, ...] | None = getattr(s.hi_fn, "reads", None)
            if fn_reads is None:
                return
            read.update(fn_reads)
        for path in (s.hi_from, s.len_from):
            if path is not None:
                read.add(path)
    for s in steps:
        s.keep = s.path in read


def _end_value(s: Step) -> Any:
    """What step `s` decodes to past the end of the input (`Program` says why it is a constant)."""
    k = s.kind
    if k == FIXED:
        return s.fixed
    if k in (INT, LOG):
        return s.lo
    if k == BOOL:
        return False
    if k == CHOICE:
        return s.options[0]
    if k == SECTION:
        assert s.nested is not None
        return s.nested.tail
    assert k in (INTS, ITEMS), k
    return ()


class Cursor:
    """`ChoiceReader`'s stream and draw, as a compiled class."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)

    def draw(self, lo: int, hi: int) -> int:
        """`ChoiceReader.draw`: the bytes to cover the span, big-endian, zeros past the end, modulo the span."""
        span = hi - lo + 1
        if span <= 1:
            return lo
        pos = self.pos
        if span <= 256:
            self.pos = pos + 1
            return lo + (self.data[pos] % span if pos < self.end else 0)
        stop = pos + _width(span)
        raw = 0
        for i in range(pos, stop):
            raw = raw * 256 + (self.data[i] if i < self.end else 0)
        self.pos = stop
        return lo + raw % span


def _width(span: int) -> int:
    """`choices._width` for a span over 256: the fewest bytes n with span - 1 < 256**n."""
    n, top = 2, (span - 1) >> 16
    while top:
        top >>= 8
        n += 1
    return n


def _hi(s: Step, values: dict[str, Any]) -> int:
    """`IntField.hi_for` / `IntsField.hi_for`."""
    fn = s.hi_fn
    if fn is _TOKEN_BUDGET:
        budget = token_budget(values)
        if budget:
            return max(s.lo, min(s.hi, budget))
    if fn is not None:
        return max(s.lo, min(s.hi, fn(values)))
    if s.hi_from is None:
        return s.hi
    return min(s.hi, int(values[s.hi_from]) - 1)


def token_budget(values: dict[str, Any]) -> int:
    """`epfuzz.ir.scenario._token_budget`, compiled, where its reads are ints (0 where not: `_hi` calls it then):
    every decode of a free `num_tokens` ran it, an interpreted frame and six dict reads (~1.8k instructions,
    issue 31). tests/scenario/test_decoder_keep.py holds the two to the same value."""
    h, sc, m = values["payload.hidden_bytes"], values["payload.scale_bytes"], values["payload.meta_bytes"]
    mtu, splits, epochs = values["chunking.mtu"], values["chunking.splits_per_token"], values["payload.epochs"]
    if (type(h) is not int or type(sc) is not int or type(m) is not int or type(mtu) is not int
            or type(splits) is not int or type(epochs) is not int):
        return 0
    tb = -(-h // 16) * 16 + -(-sc // 16) * 16 + -(-m // 16) * 16
    per_token = -(-tb // mtu) + splits - 1
    return max(1, _MAX_PACKETS // (epochs * per_token))


def _draw_int(cur: Cursor, lo: int, hi: int, log: bool) -> int:
    """`fields.draw_int`: on a log scale, a bit length, then the value within it (`fields._mantissa_range`)."""
    if not log:
        return cur.draw(lo, hi)
    bits = cur.draw(lo.bit_length(), hi.bit_length())
    if bits == 0:
        return cur.draw(0, 0)
    base = 1 << (bits - 1)
    return base + cur.draw(max(lo, base) - base, min(hi, 2 * base - 1) - base)


def _draw_step(s: Step, cur: Cursor, values: dict[str, Any]) -> Any:
    k = s.kind
    if k in (INT, LOG):
        return _draw_int(cur, s.lo, _hi(s, values), k == LOG)
    if k == BOOL:
        return cur.draw(0, 1) != 0
    if k == CHOICE:
        return s.options[cur.draw(0, len(s.options) - 1)]
    if k == SECTION:
        assert s.nested is not None
        return s.nested.run(cur, values)
    if k == ITEMS:
        nested = s.nested
        assert nested is not None
        items = [nested.run(cur, values) for _ in range(cur.draw(0, s.max_len))]
        return tuple(items)
    if k == INTS:
        top = s.max_len if s.len_from is None else min(s.max_len, int(values[s.len_from]))
        n = cur.draw(0, top)
        hi = _hi(s, values)
        xs = [_draw_int(cur, s.lo, hi, s.log) for _ in range(n)]
        return tuple(xs)
    r = ChoiceReader(cur.data)  # SPEC: the spec's own draw, at the cursor
    r.pos = cur.pos
    v = s.spec.draw(r, values, s.spec_nested)
    cur.pos = r.pos
    return v
