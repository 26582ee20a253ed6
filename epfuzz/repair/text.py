"""What `epfuzz repair` prints: each surviving repair with its edits, cost, proof and replay command."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from epfuzz.repair.proof import Proof, undecided_groups
from epfuzz.repair.search import Candidate, RepairReport, repair


def replay(case_path: str, cand: Candidate, campaign_execs: int, max_states: int, loads: str = "") -> str:
    """The command that re-runs exactly this proof (deterministic: bounded in states and executions);
    `loads`: the options that load the case as this run did (`loading_options`)."""
    from epfuzz.triage.findings import epfuzz_command

    return (f"{epfuzz_command()} repair {shlex.quote(case_path)}{loads} --edits "
            f"{','.join(e.name for e in cand.edits)} --campaign-execs {campaign_execs} --max-states {max_states}")


def loading_options(a: argparse.Namespace, protocol: str) -> str:
    """The options a pasted replay needs to load the case as this run did: the user's own (--protocol,
    --preset, --raw, --allow-plugins), and --protocol for a plug-in's case, which a case never imports
    by itself (a replay line without it failed when pasted: an author's trial). No --preset the user did not give:
    a raw input then decodes under its protocol's home preset again, and `--preset ''` was refused (review 1205)."""
    out = []
    if a.protocol or (":" in protocol and not a.allow_plugins):
        out += ["--protocol", a.protocol or protocol]
    if a.preset:
        out += ["--preset", a.preset]
    if a.raw:
        out.append("--raw")
    for path in a.allow_plugins:
        out += ["--allow-plugins", path]
    return "".join(f" {shlex.quote(w)}" for w in out)


def proof_lines(p: Proof) -> list[str]:
    """A proof's scenarios, those explore could not decide grouped by why (each group with its remedy), what it
    did with adaptive routing where it explored it on as well, and what it held fixed."""
    again = ""
    if any(k.adaptive for k in p.checks):
        again = " (each again with adaptive routing on" + (
            f", but {', '.join(p.ar_missing)}: adaptive routing makes no valid scenario there)" if p.ar_missing
            else ")")
    out = [f"  proof: {p.size()}; neighbourhood: " + ", ".join(k.label for k in p.checks if not k.adaptive) + again]
    for why, remedy, labels in undecided_groups(p):
        out.append(f"    not decided, {why}, for {len(labels)} scenario(s): {', '.join(labels)}; remedy: {remedy}")
    if p.ar_explored:
        out.append(f"  adaptive routing: {p.ar_explored}")
    out.append("  the proof held fixed: " + "; ".join(p.bounds))
    return out


def render(r: RepairReport, case_path: str, campaign_execs: int, max_states: int, loads: str = "") -> list[str]:
    if r.nothing_to_repair:
        return [f"nothing to repair: no finding for {r.protocol} on this case ({r.method})"]
    out = [f"finding: {r.finding} ({r.method})",
           f"edits that change something here: {', '.join(r.applicable) or 'none'}"]
    if not r.repairs:
        out.append(f"no repair of at most {r.max_edits} edit(s) in the catalogue survives its proof")
    for i, c in enumerate(r.repairs, 1):
        out.append("")
        out.append(f"repair {i}: {c.names} [{c.proof.status_text}]")
        for e in c.edits:
            out.append(f"  {e.name}: {e.doc} (as {e.mirrors})")
        out.append(f"  cost: {c.cost()}")
        out += proof_lines(c.proof)
        out.append(f"  replay the proof: {replay(case_path, c, campaign_execs, max_states, loads)}")
    if r.refuted:
        out.append("")
        out.append("refuted:")
        for c in r.refuted:
            where, what = c.proof.refuted_on
            out.append(f"  {c.names}: still reachable on {where}: {what}")
    out.append("")
    out.append(f"{r.seconds:.1f} s; safe is claimed only for the scenarios each proof lists")
    return out


def command(a: argparse.Namespace) -> int:
    """`epfuzz repair`: 0 when there is nothing to repair or some repair survives its proof, 1 otherwise."""
    from epfuzz.cases.replay import load_any
    from epfuzz.protocols import get_protocol

    case = load_any(Path(a.path), a.protocol, a.preset, a.raw)
    only = [e.strip() for e in a.edits.split(",") if e.strip()] if a.edits else None
    r = repair(case.scenario, get_protocol(case.scenario.protocol), a.max_edits, only, a.campaign_execs,
               a.max_states)
    print("\n".join(render(r, a.path, a.campaign_execs, a.max_states, loading_options(a, case.scenario.protocol))))
    return 0 if r.nothing_to_repair or r.repairs else 1
