"""The agreement table: what the sim predicts (nvlink and the RDMA presets) against what the GPUs show.

Every protocol of the zoo (bad and fixed), the DeepEP ones and the plug-in example, in two GPU forms:
`weak` (no fence before a signal, plain flag stores) and `sys` (__threadfence_system before every signal
and at every Flush). Three steps, run where each can run:

    python bench/cuda_agreement.py sim  bench/cuda/agreement-sim.jsonl --jobs 24   # sim verdicts (CPU)
    python bench/cuda_agreement.py cuda OUT/agreement-cuda.jsonl --rounds 100000 --budget 480   # GPU machine
    python bench/cuda_agreement.py table bench/cuda/agreement-sim.jsonl bench/cuda/agreement-cuda.jsonl \
        --verbs bench/cuda/agreement-verbs.jsonl   # from bench/verbs_agreement.py in the guest

The sim's verdict is a possibility (exhaustive exploration of a small scenario with the same shape, or a
search of random schedules where exploration does not model the protocol); the cuda cell is k stale (or
hung) rounds of R, per 100,000, on path p2p with and without 7 stress CTAs. Rows are written as they
finish, so a time cap leaves a partial but usable file.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError  # noqa: E402
from epfuzz.ir.presets import PRESETS  # noqa: E402
from epfuzz.ir.scenario import Overtake, Scenario  # noqa: E402
from epfuzz.protocols import ZOO, get_protocol  # noqa: E402

DEEPEP = ("deepep_v2_dispatch", "deepep_v2_dispatch_fixed", "write_imm_signal")
PLUGIN = ("examples.seqflag:SeqFlag", "examples.seqflag:SeqFlagAtomic")
FORMS = {"weak": {"fence": "none", "store": "plain"}, "sys": {"fence": "threadfence_system", "store": "plain"}}
RDMA = tuple(p for p in PRESETS if PRESETS[p].model == "pcie")
FREE = {"knobs.nic_relaxed_ordering": (True, False), "knobs.hca_o920": (False, True),
        "knobs.adaptive_routing": (False, True), "knobs.atomic_mode": (0, 4)}
STRESS = 7
#: GPU spins (ns) both backends interpret: channels 1 and 2 start late, channels 0 and 1 pause after their
#: first signal. Timing only (no order is changed by them), they give a receiver that accepts too early
#: time to read a slot before it lands: on the H200 pair the consumer's snapshot otherwise trails the
#: producers by more than one token's stores, and logic bugs (stale epochs, a shared counter) stay hidden.
SPINS = [{"channel": 1, "before_op": 0, "ns": 4000}, {"channel": 2, "before_op": 0, "ns": 8000},
         {"channel": 0, "before_op": 3, "ns": 8000}, {"channel": 1, "before_op": 3, "ns": 8000}]


#: the issue's "done when" patterns first, so a time cap on the GPU leaves the others
FIRST = ("flag_write_signal", "shared_counter", "stale_epoch_counter", "early_credit_release", "geometry_index")


def protocols(order: str = "table") -> list[str]:
    out = list(DEEPEP)
    for _, _, bad, fixed in ZOO:
        out += [bad, fixed]
    out = list(dict.fromkeys(out + list(PLUGIN)))
    if order == "run":
        out.sort(key=lambda n: (n.removesuffix("_fixed") not in FIRST, n in DEEPEP + PLUGIN))
    return out


def _doc(name: str, payload: dict[str, int], extra: dict[str, Any]) -> dict[str, Any]:
    proto = get_protocol(name)
    # a signal "on another QP" needs a second QP (the GPU has none: its cells do not change)
    qps = 2 if proto.fixed.get("signal.other_qp") else 1
    doc: dict[str, Any] = {"protocol": name, "payload": payload, "topology": {"num_channels": 3, "num_qps": qps},
                           "signal": {"interval": 2}, **extra}
    doc.setdefault("faults", {})["spins"] = SPINS
    for path in proto.fixed:  # pinned by the protocol: leave them to it
        section, field = path.split(".")
        doc.get(section, {}).pop(field, None)
    return doc


def gpu_scenario(name: str, form: str, incant: int) -> Scenario:
    """9 DeepEP-sized tokens (14,336 hidden bytes) on 3 channels, a signal every 2 tokens."""
    doc = _doc(name, {"num_tokens": 9, "hidden_bytes": 14336, "meta_bytes": 16},
               {"gpu": {"path": "p2p", **FORMS[form], "incantations": incant}})
    return codec.load_dict(doc)


def sim_scenario(name: str, preset: str, form: str, knobs: dict[str, Any]) -> Scenario:
    """The same shape, small enough to explore: 6 tokens of 3 TLPs each, two epochs."""
    proto = get_protocol(name)
    extra: dict[str, Any] = {"preset": preset, "chunking": {"max_payload": 128},
                             "knobs": {"reorder_window": 64, **{k.split(".")[1]: v for k, v in knobs.items()}},
                             "gpu": {"path": "p2p", **FORMS[form]}}
    if proto.release_at_accept:
        extra["faults"] = {"rx_lag": 8}  # the sim's receiver reads for 8 more TLPs; the GPU's snapshot takes time
    doc = _doc(name, {"num_tokens": 6, "hidden_bytes": 256, "epochs": 2}, extra)
    for path in list(PRESETS[preset].fixed) + list(proto.fixed):
        section, field = path.split(".")
        doc.get(section, {}).pop(field, None)
    return codec.load_dict(doc)


#: exploration's state budget and the random search's size (rows record the ones they used)
BUDGET = {"max_states": 150_000, "searches": 1500}


def sim_verdict(scn: Scenario) -> str:
    """'finding' (and how), or 'safe' when exploration was exhaustive, or 'none found' after a search."""
    from epfuzz.sim.engine import simulate
    from epfuzz.sim.explore import explore

    first = simulate(scn, get_protocol(scn.protocol)).violation
    if first is not None:
        return f"finding ({first.kind}, arrival order)"
    try:
        v = explore(scn, get_protocol(scn.protocol), max_states=BUDGET["max_states"]).violation
        return f"finding ({v.kind})" if v is not None else "safe"
    except InputError:
        pass
    rng = random.Random(1)
    for _ in range(BUDGET["searches"]):
        moves = tuple(Overtake("pcie", rng.randrange(4096), rng.randrange(1, 64)) for _ in range(rng.randint(1, 3)))
        v = simulate(scn.replace(schedule=moves), get_protocol(scn.protocol)).violation
        if v is not None:
            return f"finding ({v.kind}, search)"
    return "none found (search)"


def preset_verdict(name: str, preset: str, form: str) -> str:
    """Under a preset: a finding for some setting of its free platform knobs (as the safety table)."""
    free = {k: v for k, v in FREE.items() if k not in PRESETS[preset].fixed}
    verdicts = []
    for values in itertools.product(*free.values()):
        try:
            scn = sim_scenario(name, preset, form, dict(zip(free, values)))
        except Exception:  # noqa: BLE001 - the protocol pins a knob this setting contradicts: skip it
            continue
        v = sim_verdict(scn)
        if v.startswith("finding"):
            return v
        verdicts.append(v)
    return "safe" if verdicts and all(v == "safe" for v in verdicts) else (verdicts[0] if verdicts else "n/a")


def sim_row(name: str) -> dict[str, Any]:
    row: dict[str, Any] = {"protocol": name, "expect": get_protocol(name).expect}
    t = time.time()
    for form in FORMS:
        row[f"nvlink-{form}"] = preset_verdict(name, "nvlink", form)
    for preset in RDMA:
        row[preset] = preset_verdict(name, preset, "weak")
    row["seconds"] = round(time.time() - t, 1)
    row["budget"] = dict(BUDGET)
    return row


def cmd_sim(out: Path, jobs: int) -> None:
    """One process per protocol when `jobs` > 1; rows already in `out` are kept (a resumed run)."""
    import multiprocessing

    done = {json.loads(line)["protocol"] for line in out.read_text().splitlines()} if out.exists() else set()
    todo = [n for n in protocols() if n not in done]
    with out.open("a") as f, multiprocessing.get_context("fork").Pool(max(1, jobs)) as pool:
        for row in pool.imap_unordered(sim_row, todo):
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")
            f.flush()


def cmd_cuda(out: Path, rounds: int, weak_rounds: int, budget: float, only: list[str]) -> None:
    from epfuzz.backends.cuda import CudaBackend

    b = CudaBackend()
    print(b.availability(), flush=True)
    deadline = time.monotonic() + budget
    with out.open("a") as f:
        for name in only or protocols("run"):
            for form, incant in itertools.product(FORMS, (0, STRESS)):
                n = weak_rounds if form == "weak" else rounds
                row: dict[str, Any] = {"protocol": name, "form": form, "stress": incant, "rounds": n}
                if time.monotonic() > deadline:
                    row["note"] = "time cap"
                else:
                    try:
                        o = b.run(gpu_scenario(name, form, incant), get_protocol(name), repeats=n)
                        row.update({"runs": o.runs, "hits": o.hits, "summary": o.summary,
                                    **{k: o.extra.get(k) for k in ("stale_rounds", "hang_rounds", "overflow",
                                                                   "seconds", "gpu_seconds")},
                                    "example": (o.extra.get("examples") or [None])[0]})
                    except Exception as e:  # noqa: BLE001 - a row that cannot run says why
                        row["note"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                print(json.dumps({k: v for k, v in row.items() if k != "example"}), flush=True)
                f.write(json.dumps(row) + "\n")
                f.flush()


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if "hits" not in row:
        return row.get("note", "-")
    runs, hits = row["runs"], row["hits"]
    hang = f", {row['hang_rounds']} hung" if row.get("hang_rounds") else ""
    return f"{hits:,} of {runs:,} ({hits / runs * 100_000:,.1f}){hang}"


#: why a bug the RDMA presets find cannot show on soft-RoCE (rxe copies with the CPU: no PCIe, one in-order
#: wire) or the verbs runner does not stage, shown next to its verbs cell; protocols absent here need nothing
#: rxe lacks
RXE_NA = {"deepep_v2_dispatch": "n/a: rxe has no PCIe (PCI atomic mode, relaxed ordering)",
          "flag_write_signal": "n/a: rxe has no PCIe (relaxed ordering)",
          "inband_tag": "n/a: rxe has no PCIe (relaxed ordering)",
          "flush_other_qp": "n/a: rxe completes a WRITE only after placing it (no PCIe)",
          "gdr_no_flush": "n/a: rxe has no PCIe or GPU memory",
          "signal_reset_race": "n/a: the verbs runner makes the receiver's reset stores before the epoch's posts",
          "examples.seqflag:SeqFlag": "n/a: rxe has no PCIe and no adaptive routing"}


def _verbs_cell(name: str, row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    cell = f"{row['hits']} of {row['runs']}" if "hits" in row else row.get("note", "-")
    return f"{cell} ({RXE_NA[name]})" if name in RXE_NA else cell


def cmd_table(sim: Path, cuda: list[Path], verbs: Path | None = None) -> str:
    vrows = {r["protocol"]: r for r in map(json.loads, verbs.read_text().splitlines())} if verbs else {}
    sims = {r["protocol"]: r for r in map(json.loads, sim.read_text().splitlines())}
    gpu: dict[tuple[str, str, int], dict[str, Any]] = {}
    for p in cuda:
        for r in map(json.loads, p.read_text().splitlines()):
            if "hits" in r or (r["protocol"], r["form"], r["stress"]) not in gpu:
                gpu[(r["protocol"], r["form"], r["stress"])] = r
    head = ["protocol", "expect", "sim nvlink weak", "cuda p2p weak", f"weak + {STRESS} stress CTAs",
            "sim nvlink sys", "cuda p2p sys", f"sys + {STRESS} stress CTAs", *RDMA, "verbs (guest)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in protocols():
        s = sims.get(name, {})
        cells = [name, s.get("expect", "-")]
        for form in FORMS:
            cells += [s.get(f"nvlink-{form}", "-"), _cell(gpu.get((name, form, 0))),
                      _cell(gpu.get((name, form, STRESS)))]
        cells += [s.get(p, "-") for p in RDMA] + [_verbs_cell(name, vrows.get(name))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("sim", "cuda", "table"))
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--weak-rounds", type=int, default=50_000, help="rounds of the unfenced (weak) form")
    ap.add_argument("--budget", type=float, default=480.0)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--verbs", type=Path, help="table: rows from bench/verbs_agreement.py (guest)")
    ap.add_argument("--jobs", type=int, default=1, help="sim: protocols explored at once")
    ap.add_argument("--max-states", type=int, default=BUDGET["max_states"])
    ap.add_argument("--searches", type=int, default=BUDGET["searches"])
    a = ap.parse_args()
    BUDGET.update(max_states=a.max_states, searches=a.searches)
    if a.step == "sim":
        cmd_sim(a.files[0], a.jobs)
    elif a.step == "cuda":
        cmd_cuda(a.files[0], a.rounds, a.weak_rounds, a.budget, a.only)
    else:
        print(cmd_table(a.files[0], a.files[1:], a.verbs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
