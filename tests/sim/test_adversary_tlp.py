"""`apply_tlp_overtakes` (the typed copy the engine runs, issue 31) and the generic `apply_overtakes` give
the same visibility order and the same surviving inversions, piece for piece, on the TLP runs of random
scenarios under random PCIe schedules: the copy exists only for mypyc's sake and must never drift."""

from __future__ import annotations

import random

import pytest

from epfuzz.encoding import codec
from epfuzz.ir.presets import PRESETS
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.sim import engine
from epfuzz.sim.adversary import QpStreams, apply_overtakes, apply_tlp_overtakes, surviving_tlps
from epfuzz.sim.packets import Packet, Tlp


def _pieces(order: list[Tlp]) -> list[tuple[int, int, int, int]]:
    return [(t.seq, t.n, t.off, t.length) for t in order]


def _passes(inv: list[tuple[Tlp, Tlp, str]]) -> list[tuple[int, int, int, str]]:
    return [(a.seq, b.seq, b.n, r) for a, b, r in inv]


def test_the_typed_copy_agrees_with_the_generic_adversary() -> None:
    rng = random.Random(11)
    names, presets = sorted(BUILTIN), list(PRESETS)
    compared = moved = 0
    for _ in range(300):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 96)), rng.choice(names), rng.choice(presets))
        proto = get_protocol(scn.protocol)
        form = engine.build_form(scn, proto)
        a = form.arrived(scn, engine.schedule_moves(scn)[1])
        window = scn.knobs.reorder_window
        for _ in range(3):
            moves = [(rng.randrange(1024), rng.randint(1, 64)) for _ in range(rng.randint(1, 5))]
            generic = apply_overtakes(a.tlps, moves, a.rule, window, QpStreams(a.tlps, window))
            typed = apply_tlp_overtakes(a.tlps, moves, a.rule, window, QpStreams(a.tlps, window))
            assert _pieces(typed[0]) == _pieces(generic[0])
            assert _passes(typed[1]) == _passes(generic[1])
            compared += 1
            moved += bool(generic[1])
    assert compared == 900 and moved > 200


TWINS = {"apply_tlp_overtakes": "apply_overtakes", "surviving_tlps": "surviving"}


def _body(name: str) -> str:
    """A function's statements (docstring and every annotation dropped) as an AST dump."""
    import ast
    from pathlib import Path

    # the source, also where the compiled extension is what was imported
    tree = ast.parse((Path(__file__).resolve().parents[2] / "epfuzz" / "sim" / "adversary.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body

    class Strip(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:  # a typed copy calls the typed copy
            return ast.copy_location(ast.Name(id=TWINS.get(node.id, node.id), ctx=node.ctx), node)

        def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
            value = self.visit(node.value) if node.value else ast.Constant(None)
            return ast.copy_location(ast.Assign(targets=[self.visit(node.target)], value=value), node)

    return "\n".join(ast.dump(Strip().visit(s)) for s in body)


def test_the_typed_copies_are_the_generic_bodies_line_for_line():
    """The typed copies exist for mypyc only: a change to one body that the other lacks fails here at
    once (the random comparison above would catch it only where a schedule reaches the change)."""
    assert _body("apply_tlp_overtakes") == _body("apply_overtakes")
    assert _body("surviving_tlps") == _body("surviving")


def _surviving_by_sorted_seqs(order, inversions):
    """`surviving` as it was before issue 31 (the reference): each passed run's pieces found by bisecting the
    pieces' sorted first seqs, the passer's rank by identity."""
    from bisect import bisect_left

    if not inversions:
        return []
    rank = {id(x): i for i, x in enumerate(order)}
    starts = sorted((x.seq, i) for i, x in enumerate(order))
    keys = [s for s, _ in starts]
    out, seen = [], set()
    for a, b, r in inversions:
        ra = rank[id(a)]
        j = bisect_left(keys, b.seq)
        while j < len(keys) and keys[j] < b.seq + b.n:
            i = starts[j][1]
            if ra < i and (ra, i) not in seen:
                seen.add((ra, i))
                out.append((a, order[i], r))
            j += 1
    return out


def test_surviving_walks_the_pieces_the_sorted_search_found() -> None:
    """`surviving` finds a passed run's pieces by walking seqs from its first (a run is a union of pieces:
    splits only refine them); the search by sorted seqs it replaced is the reference, on the recorded passes
    of random scenarios' TLP runs (several moves: later ones split and undo earlier passes) and packets."""
    import importlib.util
    from pathlib import Path

    from epfuzz.sim.pass_rules import packet_pass_rule

    # a pure copy of the module (whatever path this process imported), whose final step is spied on
    path = Path(__file__).resolve().parents[2] / "epfuzz" / "sim" / "adversary.py"
    spec = importlib.util.spec_from_file_location("_adversary_pure", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen: list[tuple[list, list]] = []
    real = mod.surviving
    mod.surviving = lambda order, inv: seen.append((order, list(inv))) or real(order, inv)
    rng = random.Random(12)
    names, presets = sorted(BUILTIN), list(PRESETS)
    compared = 0
    for _ in range(200):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 96)), rng.choice(names), rng.choice(presets))
        form = engine.build_form(scn, get_protocol(scn.protocol))
        a = form.arrived(scn, engine.schedule_moves(scn)[1])
        window = scn.knobs.reorder_window
        for _ in range(3):
            seen.clear()
            moves = [(rng.randrange(1024), rng.randint(1, 64)) for _ in range(rng.randint(1, 6))]
            mod.apply_overtakes(a.tlps, moves, a.rule, window, QpStreams(a.tlps, window))
            mod.apply_overtakes(form.packets, moves, packet_pass_rule(True), 64)
            for order, inv in seen:
                want = [(id(x), id(y), r) for x, y, r in _surviving_by_sorted_seqs(order, inv)]
                assert [(id(x), id(y), r) for x, y, r in real(order, inv)] == want
                if order and isinstance(order[0], Tlp):  # the typed copy the engine runs, compiled or not
                    assert [(id(x), id(y), r) for x, y, r in surviving_tlps(order, inv)] == want
                compared += bool(inv)
    assert compared > 300


def test_the_packet_copy_agrees_with_the_generic_adversary() -> None:
    """`apply_packet_overtakes` (the engine's net moves) gives the generic body's order and surviving passes,
    packet for packet, on the send-order packets of random scenarios under random net schedules (windows
    small and large: the window check is the one branch the copy folds)."""
    from epfuzz.sim.netmoves import apply_packet_overtakes
    from epfuzz.sim.pass_rules import packet_pass_rule

    rng = random.Random(13)
    names, presets = sorted(BUILTIN), list(PRESETS)
    compared = moved = 0
    for _ in range(200):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 96)), rng.choice(names), rng.choice(presets))
        pkts = engine.build_form(scn, get_protocol(scn.protocol)).packets
        for window in (2, engine.NET_WINDOW):
            moves = [(rng.randrange(1024), rng.randint(1, 64)) for _ in range(rng.randint(1, 6))]
            generic = apply_overtakes(pkts, moves, packet_pass_rule(True), window)
            typed = apply_packet_overtakes(pkts, moves, packet_pass_rule(True), window)
            assert [p.seq for p in typed[0]] == [p.seq for p in generic[0]]
            assert [(id(a), id(b), r) for a, b, r in typed[1]] == [(id(a), id(b), r) for a, b, r in generic[1]]
            compared += 1
            moved += bool(generic[1])
    assert compared == 400 and moved > 100


def _streams_eagerly(items: list[Tlp]) -> dict[int, tuple[list[int], list[int], list[int]]]:
    """Every QP's stream, built at once as `QpStreams` did before it made them on first use (the reference)."""
    qps = sorted({t.qp for t in items if not t.local})
    out: dict[int, tuple[list[int], list[int], list[int]]] = {q: ([], [], []) for q in qps}
    count = dict.fromkeys(qps, 0)
    for t in sorted(items, key=lambda t: t.seq):
        for q in ([t.qp] if not t.local else qps):
            out[q][0].append(t.seq)
            out[q][1].append(t.n)
            out[q][2].append(count[q])
            count[q] += t.n
    return out


def test_streams_made_on_first_use_are_the_eager_ones() -> None:
    """`QpStreams.stream` builds a QP's stream when a move first asks for it: the same runs, unit counts and
    positions the eager construction made for every QP, in responder order and shuffled."""
    rng = random.Random(14)
    names, presets = sorted(BUILTIN), list(PRESETS)
    compared = 0
    for _ in range(150):
        scn = codec.decode(rng.randbytes(rng.randrange(0, 96)), rng.choice(names), rng.choice(presets))
        form = engine.build_form(scn, get_protocol(scn.protocol))
        tlps = form.arrived(scn, engine.schedule_moves(scn)[1]).tlps
        want = _streams_eagerly(tlps)
        top = max((t.seq + t.n for t in tlps), default=0)
        seqs = sorted({-1, top, *range(0, top, max(1, top // 64)), *(t.seq + t.n - 1 for t in tlps)})
        shuffled = list(tlps)
        rng.shuffle(shuffled)
        for items in (tlps, shuffled):
            s = QpStreams(items, 4)
            for q, stream in want.items():
                assert s.stream(q) == stream
                for seq in seqs:
                    assert s.position(q, seq) == _position(stream, seq)
                compared += 1
    assert compared > 300


def _position(stream: tuple[list[int], list[int], list[int]], seq: int) -> int:
    from bisect import bisect_right

    starts, lens, before = stream
    j = bisect_right(starts, seq) - 1
    return 0 if j < 0 else before[j] + min(seq - starts[j] + 1, lens[j])


def test_the_pair_memo_answers_as_the_table() -> None:
    """`tlp_pass_rule`'s memo of the last Attrs pair gives the table's verdict for every pair of the
    responder's Attrs, asked in a random order with repeats (a hit and a miss after each other)."""
    from epfuzz.sim.pass_rules import _PairMemo, _table_rule
    from epfuzz.sim.responder import RESPONDER_ATTRS

    rng = random.Random(15)
    memo = _PairMemo()
    pairs = [(a, b) for a in RESPONDER_ATTRS for b in RESPONDER_ATTRS]
    asked = [rng.choice(pairs) for _ in range(3000)]
    asked += [p for p in asked[:500] for _ in range(2)]
    assert all(memo.rule(a, b) == _table_rule(a, b) for a, b in asked)
    assert {_table_rule(a, b) for a, b in pairs} - {None}  # some pairs pass: the comparison is not all None


def _packet(seq: int) -> Packet:
    p = Packet()
    p.seq, p.epoch, p.qp, p.wr, p.psn = seq, 0, 0, seq, seq
    return p


def test_a_packet_passing_in_two_moves_keeps_one_pass_per_pair() -> None:
    """`apply_packet_overtakes` checks for a pass recorded twice only where a packet passes in two moves; here
    one does, over the same packet, with that packet put back in front between the two ("restore"): the pass
    survives once, as in the generic body."""
    from epfuzz.sim.netmoves import apply_packet_overtakes
    from epfuzz.sim.pass_rules import packet_pass_rule

    pkts = [_packet(i) for i in range(4)]
    moves = [(2, 1), (2, 1), (2, 1)]  # p2 passes p1; p1 back in front of p2 (restore); p2 passes p1 again
    generic = apply_overtakes(pkts, moves, packet_pass_rule(True), 64)
    typed = apply_packet_overtakes(pkts, moves, packet_pass_rule(True), 64)
    assert [p.seq for p in typed[0]] == [p.seq for p in generic[0]] == [0, 2, 1, 3]
    assert [(a.seq, b.seq, r) for a, b, r in typed[1]] == [(a.seq, b.seq, r) for a, b, r in generic[1]] \
        == [(2, 1, "AR")]


def test_the_seq_index_finds_positions_of_dense_and_sparse_seqs() -> None:
    """`SeqIndex` gives each seq's position by a list where the seqs are dense (the emulator's) and by a dict
    where they spread wide (no memory by the span)."""
    from epfuzz.sim.netmoves import SeqIndex

    for seqs in ([3, 0, 2, 1], [7, 5, 9], [0, 10**9, 12], [-4, 2, -1]):
        idx = SeqIndex(seqs)
        assert [idx.at(s) for s in seqs] == list(range(len(seqs)))
    assert SeqIndex([0, 10**9]).by is not None and SeqIndex([5, 3, 4]).by is None
    for seqs, missing in (([5, 3, 9], 4), ([5, 3, 9], 2), ([5, 3, 9], 10), ([0, 10**9], 7)):
        with pytest.raises(KeyError):
            SeqIndex(seqs).at(missing)
