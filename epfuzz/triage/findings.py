"""What a finding is on disk and on screen: a signature, a root cause, files, and a replay command.

A raw signature (every rule cell that fired, every knob's value) tells inputs apart;
one bug shows up under dozens of them. The root cause is made of the *minimized* finding:
its kind, the rule cells that fired, and every knob it needs (`epfuzz.triage.cause`); grouping
(`epfuzz.triage.group`) is bounded in steps, so it gives the same bugs on any machine.
On a nondeterministic backend that runs here (verbs, cuda) only the signature's knobs are
reduced, 5 runs a value: the same cause for a fraction of the runs.
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from epfuzz.backends import get_backend
from epfuzz.backends.base import Outcome
from epfuzz.cases.corpus import Case, file_stem, write_atomic
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols.base import Protocol
from epfuzz.triage.cause import knob_line
from epfuzz.triage.group import MAX_STEPS, Bug, Grouping, Progress, group

__all__ = ["KIND_MEANING", "Bug", "Grouping", "bug_table", "case_protocol", "file_stem", "group_findings",
           "replay_command", "root_cause", "signature", "triage_command", "write_bug_index", "write_finding"]


#: what each finding kind means, said beside it by `run` and `explain` (the summary line says what happened
#: to the bytes; this says what that means for the receiver)
KIND_MEANING = {
    "stale-accept": "the receiver accepted a range before all of this epoch's bytes had landed in it",
    "overwritten-while-read": "the receiver accepted a range whose bytes had all landed, but a later epoch's "
                              "write landed in it while the receiver was still reading it (the bytes counted "
                              "are the ones overwritten)",
    "hang": "the receiver never completed an epoch (done() stayed false)",
}


def signature(scn: Scenario, outcome: Outcome, proto: Protocol) -> str:
    """Findings with the same protocol, preset, kind, culprit rule cells and knob set are one bug;
    the backend that found it says which scenario fields make up the knob set."""
    return knob_line(scn, outcome, proto, lambda _k: True, "")


def _from_here(path: Path) -> str:
    """A path as typed from the working directory: relative below it, absolute elsewhere."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def epfuzz_command() -> str:
    """`epfuzz` where that name on PATH is this install, else this install's script (`.venv/bin/epfuzz`
    after `make install`), else this interpreter with `-m epfuzz`: a printed command must paste. In a PyInstaller
    bundle (an OSS-Fuzz fuzzer) sys.executable is the bundle, which is libFuzzer and takes no `-m`: the
    command is an installed epfuzz's (from a clone or its wheel: epfuzz is not on PyPI)."""
    if getattr(sys, "frozen", False):
        return "epfuzz"
    script = Path(sys.executable).parent / "epfuzz"
    found = shutil.which("epfuzz")
    if script.is_file():
        if found and Path(found).resolve() == script.resolve():
            return "epfuzz"
        rel = _from_here(script)
        return shlex.quote(rel if "/" in rel else f"./{rel}")
    return f"{shlex.quote(sys.executable)} -m epfuzz"


def replay_command(path: Path, backend: str = "sim", repeats: int = 1) -> str:
    """The one-line replay of a case; `repeats` runs where a nondeterministic backend needs them; a
    plug-in's case names its protocol with --protocol, since a case alone never imports code (issue 29.1)."""
    extra = ("" if backend == "sim" else f" --backend {backend}") + (f" --repeats {repeats}" if repeats > 1 else "")
    spec = case_protocol(path)
    if ":" in spec:
        extra += f" --protocol {shlex.quote(spec)}"
    return f"{epfuzz_command()} run {shlex.quote(_from_here(path))}{extra}"


def triage_command(run_dir: Path | None, protocol: str = "") -> str:
    """The `epfuzz triage RUN` that groups a run's findings, as the summary and report.md print it: the
    folder quoted (a run folder with a space pasted as two arguments), and `--protocol` when the findings
    are a plug-in's (`protocol`, the one a case names), which triage needs to import it (issue 29.1)."""
    where = shlex.quote(_from_here(run_dir)) if run_dir is not None else "RUN_FOLDER"
    named = f" --protocol {shlex.quote(protocol)}" if ":" in protocol else ""
    return f"{epfuzz_command()} triage {where}{named}"


def case_protocol(path: Path) -> str:
    """The protocol a case file names ("" for anything else: a raw input, a file that does not load)."""
    try:
        doc = json.loads(path.read_bytes()) if path.suffix == ".json" else None
        spec = doc.get("scenario", doc).get("protocol", "") if isinstance(doc, dict) else ""
    except (OSError, ValueError, AttributeError):
        return ""
    return spec if isinstance(spec, str) else ""


def finding_case(scn: Scenario, data: bytes, outcome: Outcome, proto: Protocol) -> Case:
    """The finding as a regression case (scenario and input bytes), named `<protocol>-<digest>`."""
    return Case(f"{file_stem(scn.protocol)}-{scn.digest()}", scn, data, "finding", outcome.backend,
                outcome.violation.summary() if outcome.violation else "", signature(scn, outcome, proto))


def write_finding(folder: Path, scn: Scenario, data: bytes, outcome: Outcome, proto: Protocol) -> Path:
    """Write the finding as a regression case (JSON with scenario and input bytes)."""
    path = folder / f"finding-{file_stem(scn.protocol)}-{scn.digest()}.json"
    write_atomic(path, finding_case(scn, data, outcome, proto).to_json().encode())
    return path


def one_line_json(scn: Scenario) -> str:
    return json.dumps(scn.to_dict(), separators=(",", ":"))


def root_cause(scn: Scenario, outcome: Outcome, proto: Protocol) -> str:
    """The root cause of a minimized finding on the sim (`epfuzz.triage.cause.root_cause`): the
    kind, the rule cells, and every signature knob the finding needs at its value."""
    from epfuzz.triage.cause import root_cause as cause

    return cause(scn, outcome, proto, get_backend(outcome.backend, require=False).signature_fields(proto))[0]


def group_findings(paths: list[Path], out_dir: Path, backend: str = "sim", max_steps: int = MAX_STEPS,
                   stop: Callable[[], bool] | None = None, progress: Progress | None = None,
                   cache: bool = True) -> Grouping:
    """Raw finding cases grouped by root cause (`epfuzz.triage.group`): bounded in steps, never in seconds."""
    return group(paths, out_dir, backend, max_steps=max_steps, stop=stop, progress=progress, cache=cache)


def write_bug_index(grouping: Grouping, path: Path) -> bool:
    """`bugs.csv` of a run: what `epfuzz report` shows, the same numbers as the fuzz summary; with
    `ungrouped.txt` beside it naming the raw findings left (the reason first). Both written
    atomically; True if either changed."""
    import io

    buf = io.StringIO()
    rows = [["root_cause", "count", "case", "minimized", "raw", "repeats", "rate"]]
    rows += [[b.cause, str(b.count), str(b.case), str(b.minimized), " ".join(p.name for p in b.raw),
              str(b.repeats), f"{b.rate:.3f}"] for b in grouping.bugs]
    csv.writer(buf).writerows(rows)
    left = path.with_name("ungrouped.txt")
    changed = _write_if_changed(path, buf.getvalue().encode())
    if grouping.left:
        changed |= _write_if_changed(left, "\n".join([grouping.why, *(p.name for p in grouping.left)]).encode() + b"\n")
    elif left.exists():
        left.unlink()
        changed = True
    return changed


def _write_if_changed(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    write_atomic(path, data)
    return True


def bug_table(grouping: Grouping, backend: str = "sim", run_dir: Path | None = None) -> list[str]:
    """The bug table: one row per root cause with its count, summary and replay line, then one line
    for the raw findings left ungrouped (with the command that groups them), if any."""
    bugs, out = grouping.bugs, []
    raw = sum(b.count for b in bugs)
    if bugs:
        of = f"{raw} of {raw + len(grouping.left)}" if grouping.left else f"{raw}"
        out += [f"{len(bugs)} bug(s) by root cause, from {of} raw finding(s) (raw cases: finding-*.json in the run "
                "folder)", "   #  count  root cause: protocol|preset|kind|rule cells|knobs it needs"]
    for i, b in enumerate(bugs, 1):
        out.append(f"  {i:2d}  {b.count:5d}  {b.cause}")
        out.append(f"             {b.note}")
        seen = f" (reproduced in {b.rate:.0%} of runs)" if b.repeats > 1 else ""
        out.append(f"             replay{' (minimized)' if b.minimized else ''}{seen}: "
                   f"{replay_command(b.case, backend, b.repeats)}")
    if any("[preset]" in b.cause or "[protocol]" in b.cause for b in bugs):
        out.append("  knob[preset], knob[protocol]: the finding needs it, and the preset or protocol pins it there")
    if grouping.left:
        out.append(f"{len(grouping.left)} raw finding(s) not grouped yet ({grouping.why}): "
                   f"{triage_command(run_dir, case_protocol(grouping.left[0]))} groups them")
    return out
