"""Seed corpora and pinned regression cases, generated from readable scenario literals.

Seeds are small, diverse scenarios encoded to bytes (one file per input, named by
sha1 as libFuzzer names its corpus). Regression cases pin verdicts that the
research notes and the issues require: the DeepEP #661 overtake, its fixes, and
the cross-QP signal. Run `python -m epfuzz.continuous.seeds` to (re)write both, and each
harness folder's manifest of expected verdicts (`corpus/<harness>.verdicts`); files
are only written when missing or different, atomically.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from epfuzz.backends import get_backend
from epfuzz.cases.corpus import LIBFUZZER_SHA1, Case, read_input, sha1, write_atomic, write_manifest
from epfuzz.encoding import codec
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol
from epfuzz.triage.findings import signature

ROOT = Path(__file__).resolve().parent.parent.parent

#: the DeepEP #661 shape at its smallest: one token, one channel, one QP; the
#: schedule moves the fetch-and-add's AtomicOp one TLP earlier, past the data
SEED_661: dict[str, Any] = {
    "protocol": "deepep_v2_dispatch", "preset": "mlx5-pci-atomic",
    "payload": {"hidden_bytes": 7168, "num_tokens": 1},
    "chunking": {"max_payload": 512},
    "knobs": {"reorder_window": 16},
    "schedule": [{"stage": "pcie", "index": 15, "distance": 16}],
}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `base` with sections merged (not replaced) by `changes`."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in changes.items():
        if isinstance(value, dict):
            out[key] = {**out.get(key, {}), **value}
        else:
            out[key] = value
    return out


def regression_cases() -> list[tuple[str, dict[str, Any], str, str]]:
    """(name, scenario dict, expected verdict, why)."""
    fixed = _with(SEED_661, protocol="deepep_v2_dispatch_fixed")
    cross = {"protocol": "dispatch_any", "preset": "spec",
             "payload": {"hidden_bytes": 4096, "num_tokens": 1},
             "topology": {"num_qps": 2},
             "signal": {"kind": "faa", "other_qp": True},
             "faults": {"qp_delay_ns": [2000]}}
    cases = [
        ("deepep661-c2b", SEED_661, "finding", "RO AtomicOp passes RO MemWr (C2b), PCI_ATOMIC_MODE=4"),
        ("deepep674-fixed", fixed, "clean", "strict-ordering MR: the same overtake is not allowed"),
        ("deepep661-mode0", _with(SEED_661, preset="mlx5-default"), "clean",
         "PCI_ATOMIC_MODE=0: the RMW's read cannot pass posted writes (B2a)"),
        ("deepep661-o920", _with(SEED_661, preset="ib-o9-20", knobs={"atomic_mode": 4}), "clean",
         "an HCA enforcing o9-20 holds the atomic behind the QP's writes"),
        ("write-imm-ro", _with(SEED_661, protocol="write_imm_signal", preset="spec",
                               knobs={"mr_relaxed": True, "nic_relaxed_ordering": True}), "clean",
         "the WRITE_WITH_IMM CQE is a strict MemWr: it cannot pass the data (A2a)"),
    ]
    for preset in ("spec", "mlx5-pci-atomic", "mlx5-default", "ib-o9-20", "no-ro"):
        cases.append((f"cross-qp-{preset}", _with(cross, preset=preset), "finding",
                      "signal on another QP, data QP delayed: no ordering between QPs (nccl#2302)"))
    return cases


def deep_seeds(protocol: str) -> list[Scenario]:
    """Small scenarios within a deep-zoo protocol's pins (the grid below sets fields those pin; a field
    the protocol pins itself, deep2_packed's one QP, is left to its pin)."""
    pinned = set(REGISTRY.items[protocol].fixed)
    out = []
    for tokens, channels, qps in ((1, 1, 1), (3, 2, 2), (7, 1, 1), (4, 3, 2)):
        topology = {"num_channels": channels, "num_qps": qps}
        out.append(codec.load_dict({"protocol": protocol, "payload": {"num_tokens": tokens},
                                    "topology": {k: v for k, v in topology.items() if f"topology.{k}" not in pinned},
                                    "knobs": {"reorder_window": 16}}))
    return out


def seed_scenarios(protocol: str) -> list[Scenario]:
    if protocol.startswith(("deep_", "deep2_")):  # their pins (slot size, MTU, max payload) are set by the grid below
        return deep_seeds(protocol)
    fixed_keys = set(REGISTRY.items[protocol].fixed)
    out = []
    for tokens, hidden, mps, qps, kind, other in itertools.product(
            (1, 3), (16, 7168), (4096, 256), (1, 2), ("faa", "write", "write_imm", "send"), (False, True)):
        d: dict[str, Any] = {"protocol": protocol,
                             "payload": {"num_tokens": tokens, "hidden_bytes": hidden},
                             "chunking": {"max_payload": mps},
                             "topology": {"num_channels": min(tokens, 2), "num_qps": qps},
                             "signal": {}, "knobs": {"reorder_window": 8}}
        if "signal.kind" not in fixed_keys:
            d["signal"]["kind"] = kind
        elif kind != "faa":
            continue
        if "signal.other_qp" not in fixed_keys:
            d["signal"]["other_qp"] = other and qps > 1
        elif other:
            continue
        out.append(codec.load_dict(d))
    if protocol == "dispatch_any":  # the GPU message-passing litmus, for the cuda backend (64K words)
        out.append(codec.load_dict({"protocol": protocol, "signal": {"kind": "write", "at_end_only": True},
                                    "payload": {"num_tokens": 16, "hidden_bytes": 16384}}))
    if getattr(REGISTRY.items[protocol], "rx_map", "coherent") != "coherent":  # a stale L2 line needs a second epoch
        out.append(codec.load_dict({"protocol": protocol, "payload": {"num_tokens": 3, "epochs": 2},
                                    "topology": {"num_channels": 2}}))
    pinned = {k.split(".")[1]: v for k, v in REGISTRY.items[protocol].fixed.items() if k.startswith("knobs.")}
    out.append(codec.load_dict(_with(SEED_661, protocol=protocol, preset="spec",
                                     knobs={"reorder_window": 16, **pinned})))
    return out


def write_manifests(root: Path = ROOT, preset: str | None = None) -> list[Path]:
    """Pin the sim verdict of every input of every harness folder (what `make replay` checks):
    a raw input carries no verdict of its own, and a buggy protocol's inputs may be either. Each under
    `preset`, else its protocol's home preset, the one its harness decodes the seeds under: the nvlink
    and device protocols' manifests held spec verdicts, so `make replay` checked their seeds as no harness
    runs them (operator trial 1205, item 3)."""
    out = []
    for name in REGISTRY.items:
        folder = root / "corpus" / f"{name}_fuzzer"
        if folder.is_dir():
            where = preset or get_protocol(name).home_preset
            out.append(write_manifest(folder, where, seed_verdicts(name, folder, where)))
    return out


def seed_verdicts(protocol: str, folder: Path, preset: str) -> dict[str, str]:
    """{sha1: sim verdict} of the inputs in `folder` (files named by a sha1, as libFuzzer and `make seeds` name
    them: the only ones `replay` reads from a folder), each decoded under `preset` as `replay` decodes it."""
    sim, proto = get_backend("sim"), get_protocol(protocol)
    verdicts = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and LIBFUZZER_SHA1.fullmatch(path.name):
            data = read_input(path)
            verdicts[sha1(data)] = sim.run(codec.decode(data, protocol, preset), proto).verdict
    return verdicts


def plugin_manifest(protocol: str, folder: Path, preset: str | None) -> tuple[Path, dict[str, str]]:
    """`epfuzz corpus manifest`: write `folder`'s seed manifest (FOLDER.verdicts beside it, atomically), the
    sim verdict of each input under `preset` (else the protocol's home preset, where `replay` decodes raw
    inputs): a plug-in's seeds had no way to get one, so a protocol whose `expect` is a mapping or
    "finding" replayed them UNCHECKED and `replay --strict` failed (an author's trial, L2)."""
    from epfuzz.cases.replay import raw_preset

    where = raw_preset(protocol, preset)
    verdicts = seed_verdicts(protocol, folder, where)
    by = f"`epfuzz corpus manifest --protocol {protocol}`, checked by `epfuzz replay --strict`"
    return write_manifest(folder, where, verdicts, by), verdicts


def write_all(root: Path = ROOT) -> list[Path]:
    written = []
    for name in REGISTRY.items:
        folder = root / "corpus" / f"{name}_fuzzer"
        for scn in seed_scenarios(name):
            data = codec.encode(scn)
            path = folder / sha1(data)
            if not path.exists():
                write_atomic(path, data)
                written.append(path)
    write_manifests(root)
    sim = get_backend("sim")
    for name, d, expect, why in regression_cases():
        scn = codec.load_dict(d)
        proto = get_protocol(scn.protocol)
        out = sim.run(scn, proto)
        case = Case(name, scn, codec.encode(scn), expect, "sim", why, signature(scn, out, proto))
        path = root / "corpus" / "regressions" / f"{name}.json"
        text = case.to_json().encode()
        if not path.exists() or path.read_bytes() != text:
            write_atomic(path, text)
            written.append(path)
    return written


if __name__ == "__main__":
    for p in write_all():
        print(p)
