"""The catalogue of protocol edits `epfuzz repair` searches: each a named, documented transformation.

An edit changes what the protocol posts (a transform of each channel's op list), what it
pins on the platform (a scenario field, e.g. the window registered strict), or how its
receiver behaves (a `Protocol` attribute or a documented receiver option). It is applied by
wrapping the protocol (`epfuzz.repair.wrap.Repaired`), never by editing its source, and each
names the real fix it mirrors. Whether an edit *helps* is never assumed here: the proof
(`epfuzz.repair.proof`) decides. A Flush before a signal on another QP, for instance, is in the
catalogue although a flush is local completion only (IB-local-only): the proof shows where it
does not suffice.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from epfuzz.ir import ops
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Layout, Protocol

#: one epoch's programs, a list of ops per channel
Programs = list[list[ops.Op]]
#: (programs, scenario, layout, protocol under repair) -> programs
Transform = Callable[[Programs, Scenario, Layout, Protocol], Programs]

SIGNAL_OPS = (ops.WriteValue, ops.AtomicAdd, ops.WriteImm, ops.Send)


@dataclass(frozen=True)
class Edit:
    """One named change. `ops`, `scenario` and `attrs` say what it does; `cost` what it adds."""

    name: str
    doc: str
    mirrors: str
    cost: str
    ops: Transform | None = None
    scenario: dict[str, Any] = field(default_factory=dict)   # dotted field -> value, pinned by the repair
    attrs: dict[str, Any] = field(default_factory=dict)      # Protocol attribute -> value
    ordered_prologue: bool = False                           # the receiver's own stores behind the barrier
    receiver_option: str = ""                                # a receiver's documented boolean option, set True
    #: the scenario must be one where the edit's fields matter (the sim ignores `gpu.*` off nvlink)
    relevant: Callable[[Scenario, Protocol], bool] | None = None


def is_signal(op: ops.Op) -> bool:
    """A WR that tells the receiver something is ready: a flag, an add, a WRITE_WITH_IMM or a SEND."""
    return isinstance(op, SIGNAL_OPS)


def _flush_before_signal(programs: Programs, scn: Scenario, lay: Layout, proto: Protocol) -> Programs:
    out: Programs = []
    for prog in programs:
        new: list[ops.Op] = []
        dirty: list[int] = []  # data QPs written since the last signal (or flush of them), in first-write order
        for op in prog:
            if isinstance(op, ops.Flush) and op.qp in dirty:
                dirty.remove(op.qp)
            elif is_signal(op):
                new += [ops.Flush(q) for q in dirty]
                dirty = []
            if isinstance(op, ops.Write) and op.region == ops.DATA and op.qp not in dirty:
                dirty.append(op.qp)
            new.append(op)
        out.append(new)
    return out


def _signal_on_data_qp(programs: Programs, scn: Scenario, lay: Layout, proto: Protocol) -> Programs:
    out: Programs = []
    for prog in programs:
        new: list[ops.Op] = []
        data_qp = -1
        for op in prog:
            if isinstance(op, ops.Write) and op.region == ops.DATA:
                data_qp = op.qp
            if is_signal(op) and data_qp >= 0 and op.qp != data_qp:  # type: ignore[union-attr]
                op = dataclasses.replace(op, qp=data_qp)  # type: ignore[arg-type]
            new.append(op)
        out.append(new)
    return out


def _atomic_signal(programs: Programs, scn: Scenario, lay: Layout, proto: Protocol) -> Programs:
    """A flag WRITE of value v becomes an add of v minus the word's value before it: the receiver reads
    the same words. Only where the words start each epoch at zero (`reset_signals`) and each word has
    one writer: otherwise the add would not leave what the write left, and the edit does not apply."""
    writers: dict[int, set[int]] = {}
    for c, prog in enumerate(programs):
        for op in prog:
            if isinstance(op, (ops.WriteValue, ops.AtomicAdd)) and op.region == ops.SIGNAL:
                writers.setdefault(op.offset, set()).add(c)
    if not proto.reset_signals or any(len(w) > 1 for w in writers.values()):
        return programs
    out: Programs = []
    for prog in programs:
        word: dict[int, int] = {}
        new: list[ops.Op] = []
        for op in prog:
            if isinstance(op, ops.WriteValue) and op.region == ops.SIGNAL:
                old = word.get(op.offset, 0)
                new.append(ops.AtomicAdd(op.qp, ops.SIGNAL, op.offset, op.value - old, fence=op.fence))
                word[op.offset] = op.value
                continue
            if isinstance(op, ops.AtomicAdd) and op.region == ops.SIGNAL:
                word[op.offset] = word.get(op.offset, 0) + op.delta
            new.append(op)
        out.append(new)
    return out


def _fence_signal(programs: Programs, scn: Scenario, lay: Layout, proto: Protocol) -> Programs:
    return [[dataclasses.replace(op, fence=True) if is_signal(op) else op for op in prog]  # type: ignore[arg-type]
            for prog in programs]


def _receiver_slot(programs: Programs, scn: Scenario, lay: Layout, proto: Protocol) -> Programs:
    return [[ops.Write(op.qp, op.region, op.offset + op.shift, op.length, fence=op.fence)
             if isinstance(op, ops.Write) and op.shift else op for op in prog] for prog in programs]


def _nvlink(scn: Scenario, proto: Protocol) -> bool:
    from epfuzz.sim.nvlink import is_nvlink

    return is_nvlink(scn)


CATALOGUE: tuple[Edit, ...] = (
    Edit("strict-window", "register the window with strict ordering: no PCIe relaxed ordering on its writes",
         "DeepEP #674 (NCCL_WIN_STRICT_ORDERING)", "no extra ops; the window's writes lose relaxed ordering",
         scenario={"knobs.mr_relaxed": False}),
    Edit("signal-on-data-qp", "post each signal on the QP of the data WR before it",
         "NCCL 2.30.5 strong signals on the puts' context (nccl#2302)", "no extra ops",
         ops=_signal_on_data_qp),
    Edit("atomic-signal", "raise the word by a fetch-and-add instead of an RDMA WRITE of the flag",
         "DeepEP 458cdcb (nvshmemx_signal_op ADD)", "no extra ops; the responder executes it in PSN order",
         ops=_atomic_signal),
    Edit("fence-signal", "set IBV_SEND_FENCE on each signal WR", "ibv_post_send(3) IBV_SEND_FENCE",
         "no extra ops; a signal waits for the QP's earlier ATOMICs' responses", ops=_fence_signal),
    Edit("flush-before-signal", "Flush every QP that carried data since the last signal before posting the signal "
         "(wait for the data WRs' completion)", "DeepEP gpu_barrier; a wait for the WRITE completions",
         "one Flush per signal and data QP: a round trip (the ACK) before each signal", ops=_flush_before_signal),
    Edit("receiver-slot", "compute each token's slot with the receiver's slot function (no geometry-dependent "
         "stride)", "mori #625, DeepEP #700", "no extra ops", ops=_receiver_slot),
    Edit("system-fence", "__threadfence_system (fence.sc.sys) before each signal", "DeepEP #715",
         "one system-scope fence per signal", scenario={"gpu.fence": "threadfence_system"}, relevant=_nvlink),
    Edit("release-signal", "make the flag store st.release.sys", "PTX release store at system scope",
         "a release store instead of a plain one", scenario={"gpu.store": "release_sys"}, relevant=_nvlink),
    Edit("flush-on-accept", "after a signal, read through the data's PCIe path (a flush read) before using the data",
         "NCCL ncclIbIflush, NVSHMEM #75", "one PCIe read round trip per accept", attrs={"flush_on_accept": True}),
    Edit("credit-after-read", "return a slot's credit only after the receiver has read it", "DeepEP #642",
         "the sender waits for the read before reusing the slot", attrs={"release_at_accept": False}),
    Edit("ordered-reset", "order the receiver's own stores at a call's start (its resets) before the barrier "
         "that releases the sender", "UCCL-EP #993", "a barrier after the receiver's resets", ordered_prologue=True),
    Edit("reset-signals", "zero the signal words and CQ behind each call's barrier, so no call reads the last "
         "one's value", "UCCL-EP #903 (epoch-separated signals)", "a reset per call behind the barrier",
         attrs={"reset_signals": True}),
)


def init_defaults(cls: type) -> list[tuple[str, Any]]:
    """(name, default) of each parameter of `cls.__init__` that has one, as its source declares them.

    A class mypyc compiled (the built-in receivers, `epfuzz.core.native.COMPILED`) shows the interpreter an
    `__init__` of `(*args, **kwargs)`: there the signature is read from the module's source (beside the
    extension), walking the classes in method resolution order to the first whose source defines `__init__`,
    as the interpreter would. A bundle without sources yields none."""
    for klass in cls.__mro__:
        own = vars(klass).get("__init__")
        if own is None or klass is object:
            continue
        if inspect.isfunction(own):
            return [(n, p.default) for n, p in inspect.signature(own).parameters.items()
                    if p.default is not inspect.Parameter.empty]
        found = _source_init_defaults(klass)
        if found is not None:
            return found
    return []


def _source_class(klass: type) -> Any:
    """The `ast.ClassDef` of `klass` in its module's source, or None (no source: a frozen bundle)."""
    import ast

    for node in ast.walk(_parsed(klass.__module__)):
        if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
            return node
    return None


@lru_cache(maxsize=32)
def _parsed(module: str) -> Any:
    """A compiled module's source, parsed once per process (a catalogue reads a receiver's options and
    docstring from it, three reads per receiver); an empty module where there is no source."""
    import ast

    from epfuzz.core.native import source

    path = source(module)
    return ast.parse(path.read_text(), str(path)) if path.exists() else ast.Module(body=[], type_ignores=[])


def _source_init_defaults(klass: type) -> list[tuple[str, Any]] | None:
    """`init_defaults` from the source of a compiled class; None where the class's source defines no
    `__init__` (or there is no source)."""
    import ast

    node = _source_class(klass)
    for fn in node.body if node is not None else ():
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            a = fn.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            return [(arg.arg, d.value if isinstance(d, ast.Constant) else d) for arg, d in pairs]
    return None


def class_doc(cls: type) -> str:
    """`cls.__doc__`, or for a compiled class (mypyc keeps no class docstring) the one in its source."""
    if cls.__doc__:
        return cls.__doc__
    import ast

    node = _source_class(cls)
    return (ast.get_docstring(node, clean=False) or "") if node is not None else ""


def receiver_options(proto: Protocol) -> tuple[Edit, ...]:
    """The boolean options a `DispatchProtocol`'s receiver documents and the protocol leaves off, as edits:
    "what the receiver would check if told to" (its own vocabulary, read off its signature)."""
    cls = getattr(proto, "receiver_cls", None)
    opts = getattr(proto, "receiver_opts", None)
    if cls is None or opts is None:
        return ()
    out = []
    for name, default in init_defaults(cls):
        if default is False and not opts.get(name):
            doc = (class_doc(cls).strip().splitlines() or [""])[0]
            out.append(Edit(f"receiver:{name}", f"the receiver's option {name}=True ({cls.__name__}: {doc})",
                            "the protocol's own receiver option", "what the option checks, per poll",
                            receiver_option=name))
    return tuple(out)


def catalogue(proto: Protocol) -> tuple[Edit, ...]:
    """Every edit considered for `proto`: the generic ones, then its receiver's own options."""
    return CATALOGUE + receiver_options(proto)
