"""The agreement table: what the sim predicts (nvlink and the RDMA presets) against what the GPUs show.

Every protocol of the zoo (bad and fixed), the DeepEP ones and the plug-in example, in two GPU forms:
`weak` (no fence before a signal, plain flag stores) and `sys` (__threadfence_system before every signal
and at every Flush). Three steps, run where each can run:

    python bench/cuda_agreement.py sim  bench/cuda/agreement-sim.jsonl --jobs 24   # sim verdicts (CPU)
    python bench/cuda_agreement.py cuda OUT/agreement-cuda.jsonl --rounds 100000 --budget 480   # GPU machine
    python bench/cuda_agreement.py table bench/cuda/agreement-sim.jsonl bench/cuda/agreement-cuda.jsonl \
        bench/cuda/agreement-cuda-plan.jsonl --verbs bench/cuda/agreement-verbs.jsonl   # verbs: in the guest

A protocol without a row (a new pair) gets every cell with one command, here, on the CPU:

    python bench/cuda_agreement.py add PROTOCOL...   # sim row, cuda plan, verbs (guest), agreement.md
    python bench/cuda_agreement.py md                # agreement.md again from the committed rows
    python bench/cuda_agreement.py add --redo NAME   # its rows again (a backend learnt its ops, say)

`add` computes the sim row, asks the cuda interpreter whether it can express the protocol (its
refusal, or "not run (needs nvidia-h200-x2)": the GPU rows are measured on the H200 pair), runs the
verbs row in the soft-RoCE guest unless verbs refuses the ops on the host (then its reason), and
rewrites bench/cuda/agreement.md. Rows already in a file are kept as they are.

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

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import InputError, Unsupported  # noqa: E402
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


#: families the table leaves out: the deep sets are search-difficulty benchmarks (zoo patterns behind a
#: trailer check or another defence), and `dispatch_any` is the safety table's litmus space, not a protocol
#: with one expected verdict
LEFT_OUT = ("epfuzz.protocols.deep", "epfuzz.protocols.deep2")


def protocols(order: str = "table") -> list[str]:
    """DeepEP's, the zoo's and the plug-in example's rows, then every other family's (issue 30's breadth and
    any family added later) in registration order."""
    from epfuzz.protocols import FAMILY_PROTOCOLS

    out = list(DEEPEP)
    for _, _, bad, fixed in ZOO:
        out += [bad, fixed]
    out += list(PLUGIN)
    out += [n for m, names in FAMILY_PROTOCOLS.items() if m not in LEFT_OUT for n in names if n != "dispatch_any"]
    out = list(dict.fromkeys(out))
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
    for section, fields in SHAPE.get(name, {}).items():
        doc.setdefault(section, {}).update(fields)
    for path in list(PRESETS[preset].fixed) + list(proto.fixed):
        section, field = path.split(".")
        doc.get(section, {}).pop(field, None)
    return codec.load_dict(doc)


#: sim rows whose bug the common shape cannot hold, with what each needs besides (issue 30's pairs; every
#: earlier row has the common shape): DeepEP direct mode's signal on context 0 and the flush READ on a QP of
#: its own need a second QP (the common shape has one unless the protocol pins `signal.other_qp`); the stale
#: quiet needs a token of two 4 KiB packets, the clear landing between them (tests/zoo/test_gpu_zoo.py)
SHAPE: dict[str, dict[str, dict[str, Any]]] = {
    **{n: {"topology": {"num_qps": 2}} for n in ("deepep_direct", "deepep_direct_fixed", "read_flush_other_qp",
                                                 "read_flush_other_qp_fixed")},
    **{n: {"payload": {"hidden_bytes": 7168}} for n in ("stale_quiet", "stale_quiet_fixed")},
}


def shape_note() -> str:
    """The table's line naming the rows of a shape of their own."""
    by: dict[str, list[str]] = {}
    for name, shape in SHAPE.items():
        what = ", ".join(f"{s}.{f}={v}" for s, fields in shape.items() for f, v in fields.items())
        by.setdefault(what, []).append(name)
    return "Sim rows of a shape of their own (what their bug needs): " + "; ".join(
        f"{', '.join(names)}: {what}" for what, names in by.items()) + "."


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
    home = get_protocol(name).home_preset
    if home not in RDMA and home != "nvlink":  # its bug lives under a preset with no column: that one too
        row[home] = preset_verdict(name, home, "weak")
    row["seconds"] = round(time.time() - t, 1)
    row["budget"] = dict(BUDGET)
    if name in SHAPE:
        row["shape"] = SHAPE[name]
    return row


def _done(out: Path) -> set[str]:
    return {json.loads(line)["protocol"] for line in out.read_text().splitlines()} if out.exists() else set()


def cmd_sim(out: Path, jobs: int, only: list[str] | None = None) -> None:
    """One process per protocol when `jobs` > 1; rows already in `out` are kept (a resumed run)."""
    import multiprocessing

    done = _done(out)
    todo = [n for n in only or protocols() if n not in done]
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    with out.open("a") as f:
        for row in pool.imap_unordered(sim_row, todo) if pool else map(sim_row, todo):
            print(json.dumps(row), flush=True)
            f.write(json.dumps(row) + "\n")
            f.flush()
    if pool:
        pool.close()
        pool.join()


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


#: a GPU row not measured: the interpreter could express the protocol, but no GPU pair ran it
NOT_RUN = "not run (needs nvidia-h200-x2)"


def cmd_plan(out: Path, only: list[str]) -> None:
    """Without a GPU: what the cuda backend says of each GPU row the `cuda` step would run (its own
    refusal when the interpreter cannot express the ops, else NOT_RUN). Rows already in `out` are kept."""
    from epfuzz.backends import cuda_interp

    done = _done(out)
    with out.open("a") as f:
        for name in only or protocols():
            if name in done:
                continue
            for form, incant in itertools.product(FORMS, (0, STRESS)):
                row: dict[str, Any] = {"protocol": name, "form": form, "stress": incant, "planned": True}
                try:
                    cuda_interp.plan(gpu_scenario(name, form, incant), get_protocol(name))
                    row["note"] = NOT_RUN
                except Unsupported as e:
                    row["note"] = f"n/a: {str(e).splitlines()[0]}"
                print(json.dumps(row), flush=True)
                f.write(json.dumps(row) + "\n")


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
          "examples.seqflag:SeqFlag": "n/a: rxe has no PCIe and no adaptive routing",
          # issue 30's pairs (the verbs runner's own refusals are rows of their own: `note`)
          "deepep_combine": "n/a: rxe has no PCIe (PCI atomic mode, relaxed ordering)",
          "deepep_ll_dispatch": "n/a: rxe has no PCIe (relaxed ordering)",
          "deepep_ll_combine": "n/a: rxe has no PCIe (PCI atomic mode, relaxed ordering)",
          "deepep_direct": "n/a: rxe completes a WRITE only after placing it (no PCIe)",
          "signal_baseline": "n/a: the verbs runner makes the receiver's barrier store before the epoch's posts",
          "init_zeroing": "n/a: the verbs runner makes the receiver's memset before the epoch's posts",
          "flush_before_poll": "n/a: rxe has no PCIe or GPU memory",
          "read_flush_unfenced": "n/a: rxe places a QP's requests in order and the flag is on the data's QP "
                                 "(no PCIe, no adaptive routing)",
          "read_flush_other_qp": "n/a: rxe places a QP's requests in order and the flag is on the data's QP "
                                 "(no PCIe, no adaptive routing)",
          "ro_only_strict_mr": "n/a: rxe has no PCIe (relaxed-only keys, PCI atomic mode)"}


def _verbs_cell(name: str, row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    note = row.get("note", "-")
    if note.startswith("Unsupported: "):  # the backend's own refusal (verbs.refusal), asked before any run
        note = "n/a: " + note.removeprefix("Unsupported: ")
    cell = f"{row['hits']} of {row['runs']}" if "hits" in row else note
    return f"{cell} ({RXE_NA[name]})" if name in RXE_NA else cell


def _expect(rule: str | dict[str, str]) -> str:
    """A protocol's promise; one that depends on the preset (Protocol.expect as a mapping) in words."""
    if isinstance(rule, str):
        return rule
    named = ", ".join(f"{v} under {k}" for k, v in rule.items() if k != "*")
    return f"{named}, else {rule['*']}" if "*" in rule else named


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
    homes = []
    for name in protocols():
        s = sims.get(name, {})
        cells = [name, _expect(s.get("expect", "-"))]
        first = ""
        for form in FORMS:
            cells.append(s.get(f"nvlink-{form}", "-"))
            for incant in (0, STRESS):
                cell = _cell(gpu.get((name, form, incant)))
                # a refusal is said once a row: the interpreter refuses the protocol, not a form of it
                cells.append("n/a (same reason)" if cell.startswith("n/a") and cell == first else cell)
                first = first or cell
        cells += [s.get(p, "-") for p in RDMA] + [_verbs_cell(name, vrows.get(name))]
        lines.append("| " + " | ".join(cells) + " |")
        homes += [(name, p, s[p]) for p in PRESETS if p in s and p not in RDMA]
    if homes:  # bugs that live under a preset with no column (Protocol.home_preset): the sim's verdict there
        lines += ["", "Under their home preset (the preset `epfuzz fuzz` uses for them; not a column above), "
                  "weak form, same shape and budget:", "", "| protocol | home preset | sim |", "| --- | --- | --- |"]
        lines += [f"| {n} | {p} | {v} |" for n, p, v in homes]
    if any(n in sims for n in SHAPE):
        lines += ["", shape_note()]
    return "\n".join(lines)


BENCH = Path(__file__).resolve().parent / "cuda"
SIM, CUDA, PLAN, VERBS = (BENCH / f"agreement-{k}.jsonl" for k in ("sim", "cuda", "cuda-plan", "verbs"))
#: the budget of every sim row after the first six (bench/cuda/agreement.md says which rows used which)
ADD_BUDGET = {"max_states": 30_000, "searches": 300}


def write_md(md: Path | None = None) -> None:
    """The table in bench/cuda/agreement.md under its hand-written header (kept), written atomically."""
    md = md or BENCH / "agreement.md"
    head = md.read_text().split("\n| protocol |")[0].rstrip("\n") + "\n\n" if md.exists() else ""
    write_atomic(md, (head + cmd_table(SIM, [CUDA, PLAN], VERBS) + "\n").encode())


def _drop(path: Path, names: set[str]) -> None:
    """`path` without the rows of `names`, written atomically."""
    if path.exists():
        keep = [x for x in path.read_text().splitlines() if json.loads(x)["protocol"] not in names]
        write_atomic(path, "".join(x + "\n" for x in keep).encode())


def cmd_add(names: list[str], jobs: int, guest: bool, redo: bool = False) -> None:
    """Every cell of the rows these protocols lack (rows already there are kept, unless `redo`: then their
    sim, cuda plan and verbs rows are made again; measured GPU rows are never dropped), then agreement.md."""
    import subprocess

    from bench.verbs_agreement import verbs_scenario
    from epfuzz.backends.verbs import refusal

    for n in names:
        get_protocol(n)  # an unknown name stops here, before any work
        if n not in protocols():
            raise InputError(f"{n} is not a row of the table: the rows are protocols() (every family of "
                             "epfuzz.protocols.FAMILY_PROTOCOLS but the deep sets, and no dispatch_any); a new "
                             "pair's family goes in FAMILY_PROTOCOLS")
    if redo:
        for path in (SIM, PLAN, VERBS):
            _drop(path, set(names))
    cmd_sim(SIM, jobs, names)
    cmd_plan(PLAN, names)
    done, run = _done(VERBS), []
    with VERBS.open("a") as f:
        for n in (n for n in names if n not in done):
            scn, doc = verbs_scenario(n)
            why = refusal(scn, get_protocol(n))
            if not why:
                run.append(n)
                continue
            row = {"protocol": n, "repeats": 0, "scenario": doc, "note": f"Unsupported: {why}", "seconds": 0.0}
            f.write(json.dumps(row) + "\n")
    cmd = [sys.executable, "-m", "epfuzz", "vm", "run", "--", "python3", "bench/verbs_agreement.py", "10", *run]
    if run and guest:
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        rows = [x for x in out.stdout.splitlines() if x.startswith("{")]
        with VERBS.open("a") as f:
            f.writelines(x + "\n" for x in rows)
        if len(rows) < len(run):
            print(f"the guest gave {len(rows)} of {len(run)} verbs rows (exit {out.returncode}): "
                  + " | ".join((out.stdout + out.stderr).splitlines()[-4:]), file=sys.stderr)
    elif run:
        print("verbs rows not run (--no-guest); in the guest: " + " ".join(cmd[2:]) + " | grep '^{' >> "
              + str(VERBS.relative_to(Path.cwd()) if VERBS.is_relative_to(Path.cwd()) else VERBS))
    write_md()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("sim", "cuda", "plan", "table", "add", "md"))
    ap.add_argument("files", nargs="*", help="sim/cuda/plan: the output file; table: sim and cuda files; "
                    "add: protocol names; md: none (rewrites bench/cuda/agreement.md from the committed rows)")
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--weak-rounds", type=int, default=50_000, help="rounds of the unfenced (weak) form")
    ap.add_argument("--budget", type=float, default=480.0)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--verbs", type=Path, help="table: rows from bench/verbs_agreement.py (guest)")
    ap.add_argument("--jobs", type=int, default=1, help="sim: protocols explored at once")
    ap.add_argument("--max-states", type=int, help=f"exploration's states (default {BUDGET['max_states']:,}; "
                    f"add: {ADD_BUDGET['max_states']:,})")
    ap.add_argument("--searches", type=int, help=f"random schedules (default {BUDGET['searches']:,}; "
                    f"add: {ADD_BUDGET['searches']:,})")
    ap.add_argument("--no-guest", action="store_true", help="add: print the guest command for the verbs rows")
    ap.add_argument("--redo", action="store_true", help="add: make the named protocols' sim, cuda plan and verbs "
                    "rows again (after a backend or the protocol changed); measured GPU rows are kept")
    a = ap.parse_args()
    base = ADD_BUDGET if a.step == "add" else BUDGET
    BUDGET.update(max_states=a.max_states or base["max_states"], searches=a.searches or base["searches"])
    files = [Path(f) for f in a.files]
    if not files and a.step != "md":
        ap.error(f"{a.step} needs its files (or protocol names)")
    try:
        if a.step == "sim":
            cmd_sim(files[0], a.jobs, a.only)
        elif a.step == "cuda":
            cmd_cuda(files[0], a.rounds, a.weak_rounds, a.budget, a.only)
        elif a.step == "plan":
            cmd_plan(files[0], a.only)
        elif a.step == "add":
            cmd_add(a.files, a.jobs, not a.no_guest, a.redo)
        elif a.step == "md":
            write_md()
        else:
            print(cmd_table(files[0], files[1:], a.verbs))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
