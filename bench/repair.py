#!/usr/bin/env python3
"""`epfuzz repair` on every zoo and deep-zoo bad protocol: bug, proposed edits, proof size, time (issue 32).

For each bad protocol the case is a small finding (`small_case`: its deep-zoo corner shape, its
smallest seed scenario that `explore` calls reachable, or the sampler's first finding, minimized).
Repair then searches single edits, and pairs where no
single edit survives. The fixed form is run on the same shape and must have nothing to repair.
Times are wall-clock seconds of this process (they depend on the machine and its load, so they
are reported, never asserted); sizes are states and executions (they do not).

    .venv/bin/python bench/repair.py                  # writes bench/repair.json, then docs/repair.md
    .venv/bin/python bench/repair.py --doc            # docs/repair.md from bench/repair.json only
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epfuzz.cases.corpus import write_atomic  # noqa: E402
from epfuzz.continuous.seeds import seed_scenarios  # noqa: E402
from epfuzz.encoding import codec  # noqa: E402
from epfuzz.infra.errors import InputError  # noqa: E402
from epfuzz.ir.scenario import Scenario  # noqa: E402
from epfuzz.protocols import ZOO, get_protocol  # noqa: E402
from epfuzz.protocols.base import Protocol  # noqa: E402
from epfuzz.protocols.deep import DEEP_ZOO  # noqa: E402
from epfuzz.repair import repair  # noqa: E402
from epfuzz.search.sampler import SamplerSearch  # noqa: E402
from epfuzz.sim.engine import build, simulate  # noqa: E402
from epfuzz.sim.explore import explore  # noqa: E402
from epfuzz.triage.minimize import minimize  # noqa: E402

OUT = ROOT / "bench" / "repair.json"
DOC = ROOT / "docs" / "repair.md"
CAMPAIGN_EXECS = 1000
MAX_STATES = 100_000
FIND_STATES = 20_000


#: the deep zoo's corner shapes that explore decides (the SMALL table of tests/zoo/test_deep_zoo.py)
_RO = {"nic_relaxed_ordering": True, "reorder_window": 64}
CORNERS: dict[str, dict[str, Any]] = {
    "deep_flag_write": {"knobs": {**_RO, "reorder_window": 4}, "chunking": {"tokens_per_wr": 1, "splits_per_token": 2},
                        "payload": {"num_tokens": 1}},
    "deep_other_qp": {"knobs": {**_RO, "reorder_window": 4}, "signal": {"interval": 2},
                      "topology": {"num_channels": 1, "num_qps": 2}, "payload": {"num_tokens": 3}},
    "deep_imm_other_qp": {"knobs": {**_RO, "reorder_window": 1}, "topology": {"num_channels": 3, "num_qps": 2},
                          "payload": {"num_tokens": 3}},
    "deep_gdr": {"knobs": {**_RO, "reorder_window": 4}, "signal": {"interval": 2}, "payload": {"num_tokens": 3}},
}
SAMPLER_EXECS = 20_000


def _reachable(s: Scenario, proto: Protocol, max_states: int) -> bool:
    try:
        return explore(s, proto, max_states=max_states).violation is not None
    except InputError:
        return False


def small_case(bad: str, max_states: int = FIND_STATES) -> tuple[Scenario, str] | None:
    """(a small finding of the bad protocol that explore decides, where it came from): its deep-zoo corner
    shape, else its smallest seed scenario explore calls reachable, else the sampler's first finding
    (seed 1, at most SAMPLER_EXECS executions), minimized."""
    proto = get_protocol(bad)
    if bad in CORNERS:
        s = codec.load_dict({"protocol": bad, **CORNERS[bad]})
        if _reachable(s, proto, max_states):
            return s, "deep-zoo corner shape"
    seeds = sorted(seed_scenarios(bad), key=lambda s: (sum(t.n for t in build(s, proto).tlps), s.digest()))
    for s in seeds:
        if _reachable(s, proto, max_states):
            return s, "seed scenario"
    search = SamplerSearch(bad, proto, 1)
    for _ in range(SAMPLER_EXECS):
        s = search.next_scenario()
        if simulate(s, proto).violation is not None:
            return minimize(s, proto).result, "sampler finding, minimized"
    return None


def same_shape(case: Scenario, bad: str, fixed: str) -> Scenario:
    """The case under the fixed protocol: the fields the bad one pins are left to the fixed one's pins."""
    d = case.to_dict()
    for path in get_protocol(bad).fixed:
        head, _, rest = path.partition(".")
        if rest and head in d:
            d[head].pop(rest, None)
    return codec.load_dict({**d, "protocol": fixed})


def row(num: int, title: str, bad: str, fixed: str, zoo: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    found = small_case(bad)
    if found is None:
        return {"zoo": zoo, "pattern": num, "bug": title, "bad": bad, "fixed": fixed, "case": None,
                "note": f"no small finding within {SAMPLER_EXECS} sampled executions"}
    case, origin = found
    find_s = time.perf_counter() - t0
    rep = None
    for k in (1, 2):
        rep = repair(case, get_protocol(bad), max_edits=k, campaign_execs=CAMPAIGN_EXECS, max_states=MAX_STATES)
        if rep.repairs:
            break
    assert rep is not None
    fixed_case = same_shape(case, bad, fixed)
    fixed_rep = repair(fixed_case, get_protocol(fixed), max_edits=1, campaign_execs=0, max_states=MAX_STATES)
    return {
        "zoo": zoo, "pattern": num, "bug": title, "bad": bad, "fixed": fixed,
        "case": case.to_dict(), "origin": origin, "finding": rep.finding, "method": rep.method,
        "applicable": rep.applicable,
        "repairs": [{"edits": [e.name for e in c.edits], "status": c.proof.status_text, "states": c.proof.states,
                     "scenarios": len(c.proof.checks), "executions": c.proof.campaign_execs,
                     "undecided": [k.label for k in c.proof.checks if k.verdict == "undecided"],
                     "adaptive_routing": c.proof.ar_held or "explored on and off",
                     "extra_ops": c.extra_ops, "round_trips": c.round_trips} for c in rep.repairs],
        "refuted": [" + ".join(e.name for e in c.edits) for c in rep.refuted],
        "refuted_on": {" + ".join(e.name for e in c.edits): c.proof.refuted_on[0] for c in rep.refuted},
        "max_edits": rep.max_edits, "seconds": round(rep.seconds, 1), "find_seconds": round(find_s, 1),
        "fixed_nothing_to_repair": fixed_rep.nothing_to_repair, "fixed_method": fixed_rep.method,
    }


def measure() -> dict[str, Any]:
    rows = [row(n, t, b, f, "zoo") for n, t, b, f in ZOO] + [row(n, t, b, f, "deep") for n, t, b, f in DEEP_ZOO]
    machine = f"{platform.node()} ({platform.processor() or platform.machine()}, Python {platform.python_version()})"
    return {"date": datetime.date.today().isoformat(), "machine": machine, "campaign_execs": CAMPAIGN_EXECS,
            "max_states": MAX_STATES, "rows": rows}


def doc(data: dict[str, Any]) -> str:
    lines = [
        "# `epfuzz repair`: the smallest protocol change that makes a finding impossible",
        "",
        "`epfuzz repair CASE [--max-edits K]` searches a catalogue of named protocol edits "
        "(`epfuzz/repair/catalogue.py`), one edit at a time and then pairs, applied by wrapping the protocol "
        "(its source is never edited). A candidate counts only if `explore` finds no allowed visibility "
        "order that accepts an unfinished buffer, on the case and on its neighbourhood (the case's shape "
        "grown and shrunk one field at a time: tokens +1, x2, -1; hidden bytes x2, /2; splits +1; tokens "
        "per WR +1; channels +1, -1; QPs +1, -1; epochs +1, where the pins allow), and a guided campaign "
        "bounded in executions, on the case's platform and signal fields, finds nothing. A scenario "
        "explore cannot decide within its state budget makes the repair *not proven*, with that bound. "
        "Nothing is claimed outside the scenarios a proof lists. Each repair is printed with its edits, "
        "their cost (ops added, round trips), what its proof held fixed and the command that replays it.",
        "",
        "The platform is the case's (a repair is for the platform the finding was on: `the proof held fixed` "
        "lists its knobs), but for adaptive routing. Where the case has it off and neither the preset nor the "
        "protocol pins it, the campaign that found the bug could draw it, so the proof explores every scenario "
        "again with it on and its guided campaign draws it too: a flag WRITE moved onto the data QP "
        "(`signal-on-data-qp`) is refuted there, since adaptive routing may place the flag's packet before the "
        "data's (a campaign that finds the flag on another QP may find that form as a second bug). A repair "
        "whose only undecided scenarios are ones with adaptive routing on is *proven, adaptive routing in "
        "part*, with how many of them were undecided (*N of M scenarios with it on undecided*: the others were "
        "proven, for `shared_counter` the case's among them). Where a preset (the `mlx5-*` and NVLink ones) or the "
        "protocol pins it off, the proof says so and holds it off.",
        "",
        "The proof lists the scenarios it could not decide grouped by why, each group with its remedy: over the "
        "state budget, raise `--max-states`; over the packets an epoch that explore enumerates with adaptive "
        "routing on (7) or over the TLPs an epoch it takes, no option raises the limit: where the case itself "
        "is over it, a smaller case is the remedy (`epfuzz minimize`), and where only neighbours are (tokens x 2 "
        "of a minimal case often is), there is none.",
        "",
        "## The catalogue",
        "",
        "| edit | what it does | mirrors |",
        "|---|---|---|",
    ]
    from epfuzz.repair import CATALOGUE

    lines += [f"| `{e.name}` | {e.doc} | {e.mirrors} |" for e in CATALOGUE]
    lines += ["| `receiver:NAME` | a boolean option the protocol's receiver class documents and the protocol "
              "leaves off | the protocol's own receiver |", ""]
    lines += [f"## Zoo and deep zoo ({data['date']}, {data['machine']})", "",
              f"Generated by `bench/repair.py` from `bench/repair.json`: budgets {data['max_states']:,} states "
              f"per explored scenario, {data['campaign_execs']:,} guided executions per candidate. The case is "
              "a small finding of the bad protocol (`small_case`: a deep-zoo corner shape, a seed scenario, or the "
              "sampler's first finding, minimized); *fixed form* is repair "
              "on the fixed protocol with the same shape.", "",
              "| bug | bad protocol | proposed edits (status) | proof size | time | fixed form |",
              "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if r["case"] is None:
            lines.append(f"| {r['bug']} | `{r['bad']}` | {r['note']} | | | |")
            continue
        props = "; ".join(f"`{' + '.join(p['edits'])}` ({p['status']})" for p in r["repairs"]) or \
            f"none within {r['max_edits']} edit(s)"
        size = "; ".join(f"{p['scenarios']} scenarios, {p['states']:,} states, {p['executions']:,} execs"
                         for p in r["repairs"][:1]) or "-"
        fixed = "nothing to repair" if r["fixed_nothing_to_repair"] else "a finding: see bench/repair.json"
        if r["fixed_nothing_to_repair"] and r["fixed_method"] != "exhaustive":
            fixed += " (its own schedule only: explore over budget)"
        lines.append(f"| {r['bug']} | `{r['bad']}` | {props} | {size} | {r['seconds']} s | {fixed} |")
    lines += ["", "A repair is judged by the oracle on the scenarios its proof lists, on the case's platform knobs: "
              "`receiver:shared` on `deep_reset_race` (the receiver trusts the slot trailers alone and no longer "
              "waits for an empty channel's word) is safe only where no relaxed-ordering trailer can pass the "
              "data, which is what the case's knobs say; read each proposal as \"safe there\", not as the "
              "protocol's intended semantics.", "",
              "Limits: the catalogue is finite and generic; a bug whose fix is a receiver rule the protocol "
              "does not offer as an option (a checksum, a total to wait for) is repaired only if one of the "
              "generic edits also closes it, and is otherwise reported as having no repair within K edits. "
              "Proofs hold for the platform knobs of the case (adaptive routing on and off, where it is free, in "
              "the scenarios explore decided with it on), as `explore`'s bounds say.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", action="store_true", help="only regenerate docs/repair.md from bench/repair.json")
    a = ap.parse_args()
    if not a.doc:
        data = measure()
        write_atomic(OUT, (json.dumps(data, indent=1) + "\n").encode())
    data = json.loads(OUT.read_text())
    DOC.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(DOC, doc(data).encode())
    print(f"wrote {OUT.name} and {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
