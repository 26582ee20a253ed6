"""The Scenario: the one IR that generation, replay, corpus and minimization share.

A scenario is a tree of frozen dataclasses whose fields carry their own schema
(range, choice list, tuple bounds) in `dataclasses.field(metadata=...)`. From that
single declaration we derive the byte decoder the fuzzer drives, the byte encoder
the corpus and the minimizer use, JSON load/dump with validation, and the list of
"simplest values" the shrinker moves towards. Keeping the schema in one place is
what makes `decode(encode(s)) == s` hold by construction rather than by care.

Every field's default is its simplest value (lowest integer, first choice, empty
tuple), which is also what an all-zero byte string decodes to.

Fields a protocol or a platform preset pins are *fixed*: the decoder draws no
bytes for them (so the fuzzer spends no effort on dead knobs) and JSON that
contradicts them is rejected with the name of the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from epfuzz.choices import ChoiceReader, ChoiceWriter
from epfuzz.errors import ScenarioError

# ---------------------------------------------------------------- schema helpers


def _int(lo: int, hi: int, doc: str, *, hi_from: str | None = None, log: bool = False,
         hi_fn: Any = None) -> Any:
    return field(default=lo, metadata={"kind": "int", "lo": lo, "hi": hi, "hi_from": hi_from, "log": log,
                                       "hi_fn": hi_fn, "doc": doc})


def _bool(doc: str) -> Any:
    return field(default=False, metadata={"kind": "bool", "doc": doc})


def _choice(options: tuple[Any, ...], doc: str) -> Any:
    return field(default=options[0], metadata={"kind": "choice", "options": options, "doc": doc})


def _ints(lo: int, hi: int, max_len: int, doc: str, *, len_from: str | None = None,
          hi_from: str | None = None, log: bool = False) -> Any:
    return field(default=(), metadata={"kind": "ints", "lo": lo, "hi": hi, "max_len": max_len,
                                       "len_from": len_from, "hi_from": hi_from, "log": log, "doc": doc})


def _items(cls: type, max_len: int, doc: str) -> Any:
    return field(default=(), metadata={"kind": "items", "cls": cls, "max_len": max_len, "doc": doc})


def _section(cls: type) -> Any:
    return field(default_factory=cls, metadata={"kind": "section", "cls": cls})


# ---------------------------------------------------------------- the IR


@dataclass(frozen=True, slots=True)
class Chunking:
    """How token bytes become RDMA WRITE work requests, packets and TLPs."""

    tokens_per_wr: int = _int(1, 8, "consecutive slots written by one WR")
    splits_per_token: int = _int(1, 4, "WRs one token is split into (when tokens_per_wr == 1)")
    mtu: int = _choice((4096, 2048, 1024, 512, 256), "IB path MTU: one packet carries at most this")
    max_payload: int = _choice((4096, 2048, 1024, 512, 256, 128), "PCIe max payload size per MemWr TLP")


#: Scenarios are bounded to about this many packets per run, so a typical run is
#: cheap; the bound acts on num_tokens (decoded last) and is stated in its range.
MAX_PACKETS = 256


def _token_budget(values: Mapping[str, Any]) -> int:
    """bounded by MAX_PACKETS = 256 packets a run over payload.epochs, the slot size (payload.*_bytes),
    chunking.mtu and chunking.splits_per_token"""
    tb = sum(-(-values[f"payload.{k}"] // 16) * 16 for k in ("hidden_bytes", "scale_bytes", "meta_bytes"))
    per_token = -(-tb // values["chunking.mtu"]) + values["chunking.splits_per_token"] - 1
    return max(1, MAX_PACKETS // (values["payload.epochs"] * per_token))


@dataclass(frozen=True, slots=True)
class Payload:
    """What travels: DeepEP slot layout (hidden | scales | metadata, each 16-byte padded)."""

    hidden_bytes: int = _int(16, 16384, "hidden-state bytes per token (7168 bf16 = 14336)", log=True)
    scale_bytes: int = _int(0, 1024, "FP8 scale-factor bytes per token", log=True)
    meta_bytes: int = _int(16, 256, "metadata bytes (topk idx/weights) at the END of the slot", log=True)
    epochs: int = _int(1, 4, "calls; receive slots are reused and payloads differ per epoch")
    num_tokens: int = _int(1, 64, "tokens sent to this receiver per epoch (at most MAX_PACKETS packets a run)",
                           log=True, hi_fn=_token_budget)


@dataclass(frozen=True, slots=True)
class Topology:
    """Channels (sender warps) and the QPs they post on."""

    num_channels: int = _int(1, 8, "sender channels; token t goes to channel t % num_channels")
    num_qps: int = _int(1, 8, "RC queue pairs to this receiver")
    channel_qp: tuple[int, ...] = _ints(0, 7, 8, "QP of channel i (missing: i % num_qps)",
                                        len_from="topology.num_channels", hi_from="topology.num_qps")


@dataclass(frozen=True, slots=True)
class Signal:
    """How the sender tells the receiver that slots are ready."""

    kind: str = _choice(("faa", "write", "write_imm", "send"),
                        "faa = VA signal (fetch-and-add on a tail word); write = RDMA WRITE of a flag")
    interval: int = _int(1, 16, "tokens between signals (DeepEP kScaleoutUpdateInterval)")
    at_end_only: bool = _bool("signal once, after the last token")
    other_qp: bool = _bool("post the signal on the next QP instead of the data QP")
    fence: bool = _bool("IBV_SEND_FENCE on the signal WR (waits for earlier READ/ATOMIC only)")
    encoding: str = _choice(("pack2", "counter"), "pack2 = DeepEP pack2(finish, tail); counter = plain tail")


@dataclass(frozen=True, slots=True)
class Knobs:
    """Ordering switches of the MR, the NIC and the fabric."""

    mr_relaxed: bool = _bool("MR registered with IBV_ACCESS_RELAXED_ORDERING (NCCL_WIN_DEFAULT)")
    nic_relaxed_ordering: bool = _bool("NIC actually sets the RO attribute when the MR allows it")
    atomic_mode: int = _choice((0, 4), "mlx5 PCI_ATOMIC_MODE: 0 = read-modify-write, 4 = PCIe AtomicOp")
    adaptive_routing: bool = _bool("fabric may deliver a QP's packets out of order")
    hca_o920: bool = _bool("HCA enforces IB o9-20: an atomic waits for the QP's earlier writes")
    ido: bool = _bool("ID-based ordering attribute set on the NIC's TLPs")
    num_functions: int = _int(1, 2, "PCIe requester IDs the QPs are spread over (IDO needs 2)")
    reorder_window: int = _int(0, 64, "how many earlier TLPs the root complex lets one TLP overtake (0 = none)")


@dataclass(frozen=True, slots=True)
class Spin:
    """A GPU-side spin (clock loop) before a channel posts its op number `before_op`."""

    channel: int = _int(0, 7, "channel that spins", hi_from="topology.num_channels")
    before_op: int = _int(0, 63, "index of the op in that channel's program")
    ns: int = _int(0, 65535, "spin length in ns", log=True)


@dataclass(frozen=True, slots=True)
class Faults:
    """Injected delays: GPU spins and NIC/port throttling."""

    spins: tuple[Spin, ...] = _items(Spin, 4, "GPU spins")
    qp_delay_ns: tuple[int, ...] = _ints(0, 65535, 8, "added network latency per QP",
                                         len_from="topology.num_qps", log=True)
    qp_rate_div: tuple[int, ...] = _ints(1, 16, 8, "per-QP throttle: link rate divided by this",
                                         len_from="topology.num_qps")
    port_delay_ns: int = _int(0, 65535, "added latency on the port", log=True)
    port_rate_div: int = _int(1, 16, "port throttle: link rate divided by this")
    rx_lag: int = _int(0, 32, "TLPs that land while the receiver is still reading what it accepted")


@dataclass(frozen=True, slots=True)
class Gpu:
    """The GPU form of the protocol (cuda backend); the sim ignores it.

    Decoded last, so adding it changed no canonical encoding (`to_bytes` ends before
    defaults); only raw inputs with bytes to spare decode differently.
    """

    path: str = _choice(("p2p", "same", "host"), "producer GPU0 -> peer GPU1 over NVLink, same GPU, or host-mapped")
    fence: str = _choice(("none", "threadfence", "threadfence_system"), "fence before the signal")
    store: str = _choice(("plain", "volatile", "release_sys"), "how a flag store is made (faa: atomicAdd_system)")
    signal_thread: str = _choice(("first", "last"), "which thread of the CTA raises the signal")
    no_sync: bool = _bool("skip __syncthreads between the CTA's data stores and the signal")
    spin_cycles: int = _int(0, 65535, "clock spin between the data and the signal", log=True)
    incantations: int = _int(0, 8, "extra CTAs making memory traffic while the producers run")
    # appended last: an input that ended before them decodes as before (one launch, no skew);
    # a raw fuzzer input with bytes to spare now spends them here (load_case catches such a case)
    launch_rounds: int = _choice((0, 1, 10, 100, 1000), "rounds per kernel launch pair (0: all in one)")
    launch_skew: int = _int(0, 1 << 20, "cycles of torch.cuda._sleep on one side's stream before each launch",
                            log=True)
    skew_consumer: bool = _bool("the launch skew delays the consumer instead of the producer")
    fresh_buffers: bool = _bool("map new buffers for the run, so its first rounds write TLB-cold pages")


@dataclass(frozen=True, slots=True)
class Overtake:
    """One deviation from arrival order, chosen by the adversary.

    `index` is taken modulo the number of packets (net) or TLPs (pcie) of the run,
    so every entry means something whatever the scenario's size.
    """

    stage: str = _choice(("pcie", "net"), "pcie = TLP visibility order; net = packet arrival (needs AR)")
    index: int = _int(0, 65535, "which packet/TLP, modulo their count")
    distance: int = _int(1, 64, "how many earlier ones to pass, as far as the rules allow")


@dataclass(frozen=True, slots=True)
class Scenario:
    protocol: str = field(default="deepep_v2_dispatch", metadata={"kind": "name"})
    preset: str = field(default="spec", metadata={"kind": "name"})
    # Codec order: the decisions that most often decide a verdict come first, so
    # the short inputs libFuzzer starts with already reach them.
    knobs: Knobs = _section(Knobs)
    signal: Signal = _section(Signal)
    schedule: tuple[Overtake, ...] = _items(Overtake, 16, "adversary's reorderings")
    topology: Topology = _section(Topology)
    chunking: Chunking = _section(Chunking)
    payload: Payload = _section(Payload)
    faults: Faults = _section(Faults)
    gpu: Gpu = _section(Gpu)

    # -------------------------------------------------------------- codecs
    @classmethod
    def from_bytes(cls, data: bytes, protocol: str, preset: str = "spec") -> Scenario:
        plan = _plan_for(protocol, preset)
        reader = ChoiceReader(data)
        return cls(protocol=protocol, preset=preset, **_run_plan(plan, reader, {}))

    def to_bytes(self) -> bytes:
        fixed = fixed_fields(self.protocol, self.preset)
        writer = ChoiceWriter()
        _encode_fields(self, "", writer, fixed, {})
        # missing bytes decode as zeros, so trailing zeros carry nothing: drop them
        return writer.getvalue().rstrip(b"\0")

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, obj: Any) -> Scenario:
        if not isinstance(obj, Mapping):
            raise ScenarioError("<root>", f"expected a JSON object, got {type(obj).__name__}")
        protocol = obj.get("protocol", "deepep_v2_dispatch")
        preset = obj.get("preset", "spec")
        if not isinstance(protocol, str):
            raise ScenarioError("protocol", "expected a string")
        if not isinstance(preset, str):
            raise ScenarioError("preset", "expected a string")
        fixed = fixed_fields(protocol, preset)  # raises for unknown names
        body = _load_fields(cls, "", obj, fixed, {}, skip_names=True)
        return cls(protocol=protocol, preset=preset, **body)

    @classmethod
    def from_json(cls, text: str | bytes) -> Scenario:
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ScenarioError("<root>", f"invalid JSON: {e}") from None
        return cls.from_dict(obj)

    def digest(self) -> str:
        """Stable short id: the corpus file name and the key findings are grouped by."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha1(canon.encode()).hexdigest()[:12]

    def replace(self, **changes: Any) -> Scenario:
        return dataclasses.replace(self, **changes)

    def with_path(self, path: str, value: Any) -> Scenario:
        """Copy with one dotted field changed (`knobs.atomic_mode`)."""
        head, _, rest = path.partition(".")
        if not rest:
            return dataclasses.replace(self, **{head: value})
        section = getattr(self, head)
        return dataclasses.replace(self, **{head: dataclasses.replace(section, **{rest: value})})

    def get_path(self, path: str) -> Any:
        obj: Any = self
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    def qp_of_channel(self, channel: int) -> int:
        cq = self.topology.channel_qp
        return cq[channel] if channel < len(cq) else channel % self.topology.num_qps


# ---------------------------------------------------------------- fixed fields


def fixed_fields(protocol: str, preset: str) -> dict[str, Any]:
    """Fields pinned by the protocol (how it registers/signals) and the preset (platform)."""
    from epfuzz.presets import get_preset
    from epfuzz.protocols import get_protocol

    out = dict(get_preset(preset).fixed)
    out.update(get_protocol(protocol).fixed)
    return out


def iter_leaf_fields(cls: type = Scenario, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field[Any]]]:
    """Every schema leaf as (dotted path, field), in codec order."""
    for f in dataclasses.fields(cls):
        kind = f.metadata.get("kind")
        path = f"{prefix}{f.name}"
        if kind == "section":
            yield from iter_leaf_fields(f.metadata["cls"], path + ".")
        elif kind != "name":
            yield path, f


# ---------------------------------------------------------------- walkers


def _mantissa_range(lo: int, hi: int, bits: int) -> tuple[int, int]:
    """Values with this bit length, within [lo, hi], as offsets from 2**(bits-1)."""
    if bits == 0:
        return 0, 0
    base = 1 << (bits - 1)
    return max(lo, base) - base, min(hi, 2 * base - 1) - base


def _draw_int(r: ChoiceReader, lo: int, hi: int, log: bool) -> int:
    """Log-scale fields draw a bit length, then the value within it: small sizes are as
    likely as large ones, which keeps typical runs cheap while 16 KiB stays reachable."""
    if not log:
        return r.draw(lo, hi)
    bits = r.draw(lo.bit_length(), hi.bit_length())
    mlo, mhi = _mantissa_range(lo, hi, bits)
    return ((1 << (bits - 1)) if bits else 0) + r.draw(mlo, mhi)


def _write_int(w: ChoiceWriter, lo: int, hi: int, log: bool, v: int) -> None:
    if not log:
        w.write(lo, hi, v)
        return
    if not lo <= v <= hi:
        raise ValueError(f"{v} outside [{lo}, {hi}]")
    bits = v.bit_length()
    w.write(lo.bit_length(), hi.bit_length(), bits)
    mlo, mhi = _mantissa_range(lo, hi, bits)
    w.write(mlo, mhi, v - ((1 << (bits - 1)) if bits else 0))


def _resolve(meta: Mapping[str, Any], values: Mapping[str, Any], key: str, default: int) -> int:
    fn = meta.get(f"{key}_fn")
    if fn is not None:
        return max(meta["lo"], min(default, fn(values)))
    ref = meta.get(f"{key}_from")
    if ref is None:
        return default
    n = int(values[ref])
    return min(default, n - 1) if key == "hi" else min(default, n)


# A decode plan is the schema walk done once per (protocol, preset): a list of
# (name, path, kind, meta, fixed value or _FREE, sub-plan, class). It is what makes
# decoding cheap enough to sit in the fuzzer's hot loop; `_encode_fields` walks the
# same schema the other way (the round-trip property test keeps them in step).
_FREE = object()
_plans: dict[tuple[str, str], list[tuple[Any, ...]]] = {}


def _plan_for(protocol: str, preset: str) -> list[tuple[Any, ...]]:
    key = (protocol, preset)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _make_plan(Scenario, "", fixed_fields(protocol, preset), skip_names=True)
    return plan


def _make_plan(cls: type, prefix: str, fixed: Mapping[str, Any], skip_names: bool = False) -> list[tuple[Any, ...]]:
    plan = []
    for f in dataclasses.fields(cls):
        m = f.metadata
        kind = m.get("kind")
        path = f"{prefix}{f.name}"
        if kind == "name" and skip_names:
            continue
        sub = None
        if kind == "section" or kind == "items":
            sub = _make_plan(m["cls"], path + ".", fixed)
        plan.append((f.name, path, kind, m, fixed.get(path, _FREE), sub, m.get("cls")))
    return plan


def _run_plan(plan: list[tuple[Any, ...]], r: ChoiceReader, values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, path, kind, m, fixed, sub, cls in plan:
        if kind == "section":
            out[name] = cls(**_run_plan(sub, r, values))
            continue
        if fixed is not _FREE:
            v = fixed
        elif kind == "bool":
            v = bool(r.draw(0, 1))
        elif kind == "int":
            v = _draw_int(r, m["lo"], _resolve(m, values, "hi", m["hi"]), m["log"])
        elif kind == "choice":
            opts = m["options"]
            v = opts[r.draw(0, len(opts) - 1)]
        elif kind == "ints":
            n = r.draw(0, _resolve(m, values, "len", m["max_len"]))
            hi = _resolve(m, values, "hi", m["hi"])
            v = tuple(_draw_int(r, m["lo"], hi, m["log"]) for _ in range(n))
        else:  # items
            n = r.draw(0, m["max_len"])
            v = tuple(cls(**_run_plan(sub, r, values)) for _ in range(n))
        values[path] = v
        out[name] = v
    return out


def _encode_fields(obj: Any, prefix: str, w: ChoiceWriter, fixed: Mapping[str, Any],
                   values: dict[str, Any]) -> None:
    for f in dataclasses.fields(obj):
        m = f.metadata
        kind = m.get("kind")
        path = f"{prefix}{f.name}"
        v = getattr(obj, f.name)
        if kind == "name":
            continue
        if kind == "section":
            _encode_fields(v, path + ".", w, fixed, values)
            continue
        values[path] = v
        if path in fixed:
            continue
        if kind == "int":
            _write_int(w, m["lo"], _resolve(m, values, "hi", m["hi"]), m["log"], v)
        elif kind == "bool":
            w.write(0, 1, int(v))
        elif kind == "choice":
            w.write(0, len(m["options"]) - 1, m["options"].index(v))
        elif kind == "ints":
            w.write(0, _resolve(m, values, "len", m["max_len"]), len(v))
            hi = _resolve(m, values, "hi", m["hi"])
            for x in v:
                _write_int(w, m["lo"], hi, m["log"], x)
        elif kind == "items":
            w.write(0, m["max_len"], len(v))
            for item in v:
                _encode_fields(item, path + ".", w, fixed, values)


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [_to_plain(x) for x in obj]
    return obj


def _bound(meta: Mapping[str, Any], values: Mapping[str, Any], hi: int) -> str:
    """Why the upper bound is lower than the field's own: the field (or rule) that sets it."""
    if hi >= meta["hi"]:
        return ""
    if meta.get("hi_fn") is not None:
        return f" ({' '.join((meta['hi_fn'].__doc__ or 'bounded by other fields').split())})"
    ref = meta.get("hi_from")
    return f" (bounded by {ref} = {values[ref]})" if ref else ""


def _check_int(path: str, v: Any, lo: int, hi: int, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScenarioError(path, f"expected an integer, got {json.dumps(v)}")
    if not lo <= v <= hi:
        raise ScenarioError(path, f"{v} is out of range [{lo}, {hi}]{why}")
    return v


def _load_fields(cls: type, prefix: str, obj: Any, fixed: Mapping[str, Any], values: dict[str, Any],
                 skip_names: bool = False) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise ScenarioError(prefix.rstrip(".") or "<root>", f"expected an object, got {json.dumps(obj)}")
    known = {f.name for f in dataclasses.fields(cls)}
    for key in obj:
        if key not in known:
            raise ScenarioError(f"{prefix}{key}", "unknown field")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        m = f.metadata
        kind = m.get("kind")
        path = f"{prefix}{f.name}"
        if kind == "name" and skip_names:
            continue
        if kind == "section":
            sub = obj.get(f.name, {})
            out[f.name] = m["cls"](**_load_fields(m["cls"], path + ".", sub, fixed, values))
            continue
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        raw = obj.get(f.name, fixed.get(path, default))
        if kind == "int":
            hi = _resolve(m, values, "hi", m["hi"])
            v: Any = _check_int(path, raw, m["lo"], hi, _bound(m, values, hi))
        elif kind == "bool":
            if not isinstance(raw, bool):
                raise ScenarioError(path, f"expected true or false, got {json.dumps(raw)}")
            v = raw
        elif kind == "choice":
            if raw not in m["options"] or isinstance(raw, bool):
                raise ScenarioError(path, f"{json.dumps(raw)} is not one of {list(m['options'])}")
            v = raw
        elif kind == "ints":
            if not isinstance(raw, (list, tuple)):
                raise ScenarioError(path, f"expected a list, got {json.dumps(raw)}")
            max_len = _resolve(m, values, "len", m["max_len"])
            if len(raw) > max_len:
                raise ScenarioError(path, f"{len(raw)} entries, at most {max_len} allowed")
            hi = _resolve(m, values, "hi", m["hi"])
            v = tuple(_check_int(f"{path}[{i}]", x, m["lo"], hi, _bound(m, values, hi)) for i, x in enumerate(raw))
        elif kind == "items":
            if not isinstance(raw, (list, tuple)):
                raise ScenarioError(path, f"expected a list, got {json.dumps(raw)}")
            if len(raw) > m["max_len"]:
                raise ScenarioError(path, f"{len(raw)} entries, at most {m['max_len']} allowed")
            sub = m["cls"]
            v = tuple(sub(**_load_fields(sub, f"{path}.", x, fixed, values)) for x in raw)
        else:  # pragma: no cover
            raise AssertionError(kind)
        if path in fixed and v != fixed[path]:
            raise ScenarioError(path, f"{json.dumps(v)} contradicts the value {json.dumps(fixed[path])} "
                                      "fixed by the protocol or preset")
        values[path] = v
        out[f.name] = v
    return out
