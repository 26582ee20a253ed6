"""The Scenario: the one IR that generation, replay, corpus and minimization share.

A scenario is a tree of frozen dataclasses whose fields carry their own schema
(an `epfuzz.ir.fields` spec: range, choice list, tuple bounds). From that single
declaration `epfuzz.encoding.codec` derives the byte decoder the fuzzer drives, the byte
encoder the corpus and the minimizer use, and JSON loading with validation.
Keeping the schema in one place is what makes `decode(encode(s)) == s` hold by
construction rather than by care.

Every field's default is its simplest value (lowest integer, first choice, empty
tuple), which is also what an all-zero byte string decodes to.

This module is pure data: it knows nothing of protocols or presets, so the
protocol registry can build on it. The fields a protocol or preset pins are
looked up in `epfuzz.encoding.pins` and applied by `epfuzz.encoding.codec`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from epfuzz.ir.fields import (
    BoolField,
    ChoiceField,
    FieldSpec,
    IntField,
    IntsField,
    ItemsField,
    NameField,
    SectionField,
    declare,
    iter_leaves,
)
from epfuzz.ir.slotinit import fast_init

# ---------------------------------------------------------------- schema helpers


def _int(lo: int, hi: int, doc: str, *, hi_from: str | None = None, log: bool = False,
         hi_fn: Callable[[Mapping[str, Any]], int] | None = None) -> Any:
    return declare(IntField(lo, hi, doc, hi_from=hi_from, log=log, hi_fn=hi_fn))


def _bool(doc: str) -> Any:
    return declare(BoolField(doc))


def _choice(options: tuple[Any, ...], doc: str) -> Any:
    return declare(ChoiceField(options, doc))


def _ints(lo: int, hi: int, max_len: int, doc: str, *, len_from: str | None = None,
          hi_from: str | None = None, log: bool = False) -> Any:
    return declare(IntsField(lo, hi, max_len, doc, len_from=len_from, hi_from=hi_from, log=log))


def _items(cls: type, max_len: int, doc: str) -> Any:
    return declare(ItemsField(cls, max_len, doc))


def _section(cls: type) -> Any:
    return declare(SectionField(cls))


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


def _reads(*paths: str) -> Callable[[Callable[[Mapping[str, Any]], int]], Callable[[Mapping[str, Any]], int]]:
    """Declare the values a `hi_fn` reads (its `reads`): the compiled decoder records only values some bound
    reads (`epfuzz.encoding.plancore.keep_read`); tests/scenario/test_decoder.py holds each to its reads."""
    def mark(fn: Callable[[Mapping[str, Any]], int]) -> Callable[[Mapping[str, Any]], int]:
        vars(fn)["reads"] = paths
        return fn
    return mark


@_reads("payload.hidden_bytes", "payload.scale_bytes", "payload.meta_bytes", "chunking.mtu",
        "chunking.splits_per_token", "payload.epochs")
def _token_budget(values: Mapping[str, Any]) -> int:
    """bounded by MAX_PACKETS = 256 packets a run over payload.epochs, the slot size (payload.*_bytes),
    chunking.mtu and chunking.splits_per_token"""
    # the three paths spelled out: no f-string and generator per call (every decode of a free num_tokens calls it)
    tb = (-(-values["payload.hidden_bytes"] // 16) * 16 + -(-values["payload.scale_bytes"] // 16) * 16
          + -(-values["payload.meta_bytes"] // 16) * 16)
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
    reorder_window: int = _int(0, 64, "how many earlier TLPs of its own QP (and receiver stores) the root complex "
                               "lets one TLP overtake (0 = none); other QPs' TLPs interleave freely (IB orders no "
                               "QPs), as in explore")


@dataclass(frozen=True, slots=True)
class SpinFault:
    """A GPU-side spin (clock loop) before a channel posts its op number `before_op`."""

    channel: int = _int(0, 7, "channel that spins", hi_from="topology.num_channels")
    before_op: int = _int(0, 63, "index of the op in that channel's program")
    ns: int = _int(0, 65535, "spin length in ns", log=True)


@dataclass(frozen=True, slots=True)
class Faults:
    """Injected delays: GPU spins and NIC/port throttling."""

    spins: tuple[SpinFault, ...] = _items(SpinFault, 4, "GPU spins")
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
    protocol: str = declare(NameField(value="deepep_v2_dispatch"))
    preset: str = declare(NameField(value="spec"))
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

    # -------------------------------------------------------------- plain data
    # (bytes and JSON *loading* need the pinned fields: see epfuzz.encoding.codec)

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

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


def iter_leaf_fields(cls: type = Scenario, prefix: str = "") -> Iterator[tuple[str, FieldSpec]]:
    """Every schema leaf as (dotted path, spec), in codec order."""
    return iter_leaves(cls, prefix)


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [_to_plain(x) for x in obj]
    return obj


# the sections' and overtakes' __init__ without a generic attribute set per field (same signature and
# effect, `epfuzz.ir.slotinit`): every fresh scenario decodes each of them (issue 31); Scenario keeps its
# own (its sections' defaults are factories)
for _cls in (Chunking, Payload, Topology, Signal, Knobs, SpinFault, Faults, Gpu, Overtake):
    fast_init(_cls)
