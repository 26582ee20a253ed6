"""What a finding is on disk and on screen: a signature, a root cause, files, and a replay command.

A raw signature (every rule cell that fired, every knob's value) tells inputs apart;
one bug shows up under dozens of them. The root cause is the signature of the
*minimized* finding with only the knobs it needs: minimization moves every knob the
finding does not need to its simplest value, so what is left is what the bug needs.
On a nondeterministic backend that runs here (verbs, cuda) only the signature's knobs are
reduced, 5 runs a candidate: the same cause for a fraction of the runs.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from epfuzz.backends import get_backend
from epfuzz.backends.base import Outcome
from epfuzz.corpus import Case, write_atomic
from epfuzz.protocols.base import Protocol
from epfuzz.scenario import Scenario


def _cause_line(scn: Scenario, outcome: Outcome, proto: Protocol, keep_knob: Callable[[str], bool],
                empty: str) -> str:
    """protocol|preset|kind|cells|knobs: the one format of a signature and of a root cause."""
    v = outcome.violation
    kind = v.kind if v else "clean"
    names = get_backend(outcome.backend, require=False).signature_fields(proto)
    knobs = ",".join(f"{k.split('.')[-1]}={scn.get_path(k)}" for k in names if keep_knob(k))
    rules = "+".join(sorted(outcome.rules_fired)) or "in-order"
    return f"{scn.protocol}|{scn.preset}|{kind}|{rules}|{knobs or empty}"


def signature(scn: Scenario, outcome: Outcome, proto: Protocol) -> str:
    """Findings with the same protocol, preset, kind, culprit rule cells and knob set are one bug;
    the backend that found it says which scenario fields make up the knob set."""
    return _cause_line(scn, outcome, proto, lambda _k: True, "")


def _from_here(path: Path) -> str:
    """A path as typed from the working directory: relative below it, absolute elsewhere."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def epfuzz_command() -> str:
    """`epfuzz` where that name on PATH is this install, else this install's script (`.venv/bin/epfuzz`
    after `make install`), else this interpreter with `-m epfuzz`: a printed command must paste."""
    script = Path(sys.executable).parent / "epfuzz"
    found = shutil.which("epfuzz")
    if script.is_file():
        if found and Path(found).resolve() == script.resolve():
            return "epfuzz"
        rel = _from_here(script)
        return shlex.quote(rel if "/" in rel else f"./{rel}")
    return f"{shlex.quote(sys.executable)} -m epfuzz"


def replay_command(path: Path, backend: str = "sim") -> str:
    extra = "" if backend == "sim" else f" --backend {backend}"
    return f"{epfuzz_command()} run {shlex.quote(_from_here(path))}{extra}"


def file_stem(protocol: str) -> str:
    """A protocol name fit for a file name (plug-ins are module:Attr)."""
    return "".join(ch if ch.isalnum() or ch in "._-" else "." for ch in protocol)


def write_finding(folder: Path, scn: Scenario, data: bytes, outcome: Outcome, proto: Protocol) -> Path:
    """Write the finding as a regression case (JSON with scenario and input bytes)."""
    sig = signature(scn, outcome, proto)
    stem = file_stem(scn.protocol)
    case = Case(f"{stem}-{scn.digest()}", scn, data, "finding", outcome.backend,
                outcome.violation.summary() if outcome.violation else "", sig)
    path = folder / f"finding-{stem}-{scn.digest()}.json"
    write_atomic(path, case.to_json().encode())
    return path


def one_line_json(scn: Scenario) -> str:
    return json.dumps(scn.to_dict(), separators=(",", ":"))


def root_cause(scn: Scenario, outcome: Outcome, proto: Protocol, exhaustive: bool = False) -> str:
    """Protocol, preset, kind, the rule cells that fired, and the signature knobs away from their
    simplest value (what an empty input decodes to): on a 1-minimal scenario, what the bug needs.

    `exhaustive` (sim): a knob is kept only where explain's test (`explain.finding_survives`: explore,
    or the case's own schedule where explore cannot decide) finds no violation of the same kind with
    it at its simplest value. A 1-minimal case can hold a knob its own schedule needs that
    the bug does not (adaptive routing for one packet move, where any cross-QP interleaving does
    as well); the table then said "needs adaptive_routing=True" while `explain` said it does not
    matter, and one bug was listed once per such knob."""
    from epfuzz import codec
    from epfuzz.explain import finding_survives

    simplest = codec.decode(b"", scn.protocol, scn.preset)
    moved = [k for k in get_backend(outcome.backend, require=False).signature_fields(proto)
             if scn.get_path(k) != simplest.get_path(k)]
    if exhaustive and outcome.violation is not None:
        kind = outcome.violation.kind
        moved = [k for k in moved if not finding_survives(scn.with_path(k, simplest.get_path(k)), proto, kind,
                                                          EXPLORE_STATES)[0]]
    return _cause_line(scn, outcome, proto, lambda k: k in moved, "simplest knobs")


#: states `root_cause` lets explore spend on one knob of a minimized case (small: it is a few TLPs)
EXPLORE_STATES = 20_000


@dataclass
class Bug:
    """One root cause: how many raw findings share it, and one (minimized on sim) case to replay."""

    cause: str
    case: Path
    note: str
    minimized: bool
    raw: list[Path] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.raw)


def _representative(path: Path, out_dir: Path, backend: str, max_seconds: float) -> tuple[str, Path, str, bool]:
    """(root cause, case to replay, its summary, minimized?) of one raw finding.

    sim: the cause of the minimized case. A nondeterministic backend that runs here (verbs in
    the guest or on an RDMA host, cuda on a GPU): full minimization would cost minutes of device
    time per finding, so only the signature's knobs are reduced (`minimize.reduce_knobs`, 5 runs a
    candidate), which is what the cause is made of. Elsewhere, or past the budget ("raw"): the raw
    signature."""
    from epfuzz import codec
    from epfuzz.backends.base import Where
    from epfuzz.corpus import load_case
    from epfuzz.errors import EpfuzzError
    from epfuzz.minimize import minimize, reduce_knobs
    from epfuzz.protocols import get_protocol

    case = load_case(path)
    raw = case.signature, path, case.note, False
    if backend == "raw":
        return raw
    proto = get_protocol(case.scenario.protocol)
    b = get_backend(backend, require=False)
    try:
        if b.deterministic:
            mz = minimize(case.scenario, proto, backend=backend, max_seconds=max_seconds)
            scn, outcome, minimized = mz.result, mz.outcome, mz.complete  # out of time: not called minimized
        elif b.where() is Where.HERE:
            got = reduce_knobs(case.scenario, proto, b, b.signature_fields(proto), max_seconds=max_seconds)
            if got is None:  # does not reproduce in 2 of 5 runs now: it stays as it was found
                return raw
            scn, outcome, minimized = got[0], got[1], False
        else:
            return raw
    except EpfuzzError:  # does not reproduce here (another backend's case): keep it as it is
        return raw
    cause = root_cause(scn, outcome, proto, exhaustive=minimized and b.deterministic)
    note = outcome.violation.summary() if outcome.violation else ""
    name = f"{file_stem(scn.protocol)}-{hashlib.sha1(cause.encode()).hexdigest()[:10]}"
    out = out_dir / f"{name}.json"
    if not out.exists():
        write_atomic(out, Case(name, scn, codec.encode(scn), "finding", backend, note, cause).to_json().encode())
    return cause, out, note, minimized


def group_findings(paths: list[Path], out_dir: Path, backend: str = "sim",
                   max_seconds: float = 20.0, budget: float = 120.0,
                   stop: Callable[[], bool] | None = None) -> list[Bug]:
    """Group raw finding cases by root cause, most frequent first; minimized cases go to `out_dir`.

    Minimizing takes well under a second of CPU on sim (#661 findings: 0.08 s median, 0.45 s the
    most); each gets `max_seconds` of wall time so a loaded machine still finishes it (one cut short
    is grouped by a partly minimized cause and loses "(minimized)"); past `budget` seconds the rest
    are grouped by their raw signature instead, so a summary never waits long; so are they once
    `stop()` says a signal asked the run to end (the summary is still written)."""
    from epfuzz.errors import InputError

    bugs: dict[str, Bug] = {}
    deadline = time.monotonic() + budget
    for path in paths:
        how = backend if time.monotonic() < deadline and not (stop and stop()) else "raw"
        left = min(max_seconds, max(0.5, deadline - time.monotonic()))  # the budget bounds the one in progress too
        try:
            cause, case, note, minimized = _representative(path, out_dir, how, left)
        except InputError:
            continue
        bugs.setdefault(cause, Bug(cause, case, note, minimized)).raw.append(path)
    return sorted(bugs.values(), key=lambda b: -b.count)


def write_bug_index(bugs: list[Bug], path: Path) -> None:
    """`bugs.csv` of a run: what `epfuzz report` shows, the same numbers as the fuzz summary."""
    rows = [["root_cause", "count", "case", "minimized", "raw"]]
    rows += [[b.cause, str(b.count), str(b.case), str(b.minimized), " ".join(p.name for p in b.raw)] for b in bugs]
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)


def bug_table(bugs: list[Bug], backend: str = "sim") -> list[str]:
    if not bugs:
        return []
    raw = sum(b.count for b in bugs)
    out = [f"{len(bugs)} bug(s) by root cause, from {raw} raw finding(s) (raw cases: finding-*.json in the run "
           "folder)", "   #  count  root cause: protocol|preset|kind|rule cells|knobs it needs"]
    for i, b in enumerate(bugs, 1):
        out.append(f"  {i:2d}  {b.count:5d}  {b.cause}")
        out.append(f"             {b.note}")
        out.append(f"             replay{' (minimized)' if b.minimized else ''}: {replay_command(b.case, backend)}")
    return out
