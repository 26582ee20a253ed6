"""What every campaign engine shares: the run folder's progress columns, the summary.

`epfuzz fuzz` has three engines (the guided engine of epfuzz.search, the default on the sim;
libFuzzer jobs here; libFuzzer jobs in the guest); each reads its run folder back into one
`Summary`, so the bug table and its replay lines are printed the same way whichever ran.
"""

from __future__ import annotations

import csv
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from epfuzz.cases.corpus import load_case
from epfuzz.infra.diskspace import NoSpace, is_no_room
from epfuzz.infra.errors import EpfuzzError, InputError
from epfuzz.infra.shipped import docs_page
from epfuzz.triage.findings import Bug, Grouping, bug_table, group_findings, replay_command, write_bug_index

#: where runs go unless --run-dir says otherwise: beside the user (the current directory), not in
#: the install tree (a plug-in's author runs epfuzz from their own project)
RUNS = Path("runs")
PROGRESS_HEADER = "seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n"


def plugin_name(protocol: str) -> str:
    """The harness name a plug-in protocol (module:Attr) runs under."""
    return protocol.replace(":", ".").replace("/", "_") + "_fuzzer"


def log_start(log: object, backend: str, **fields: object) -> None:
    """The run's start line, with which emulator the sim backend runs; on the pure one a warning that says
    why and how to build the compiled one (a user trial fuzzed at half speed after a plain pip install and
    nothing but `epfuzz list` said so)."""
    if backend != "sim":
        log.info("fuzz.start", **fields)  # type: ignore[attr-defined]
        return
    from epfuzz.core import native

    path = native.running()
    log.info("fuzz.start", emulator=path, **fields)  # type: ignore[attr-defined]
    if path == "pure":
        log.warning("fuzz.slower_emulator", detail=native.describe())  # type: ignore[attr-defined]


@dataclass
class Summary:
    harness: str
    run_dir: Path
    elapsed: float
    execs: int
    cov: int
    corpus: int
    harness_errors: int
    findings: list[tuple[str, Path, str]]   # (signature, case path, summary)
    bugs: list[Bug] = field(default_factory=list)   # the findings grouped by root cause
    interrupted: int = 0                    # the signal that stopped the run early, if one did
    backend: str = "sim"                    # where the findings replay (their replay lines name it)
    error: str = ""                         # the first harness error's exception line (and where)
    #: inputs that ran past a per-input limit, (kind "hang"|"oom", raw artifact, replay command): findings too
    resource: list[tuple[str, Path, str]] = field(default_factory=list)
    disk_full: str = ""                     # the write that found no room, when a full disk ended the run
    #: raw findings of scenarios their protocol promises clean for: a bug in the model, or in the promise
    false_alarms: list[Path] = field(default_factory=list)
    left: list[Path] = field(default_factory=list)  # raw findings not grouped yet (see `why`)
    why: str = ""
    #: the bound that ended the fuzzing where nothing else did: "time" (--time) or "execs" (--max-execs, or
    #: libFuzzer's -runs, reached by every job)
    bound: str = "time"

    @property
    def exec_per_s(self) -> float:
        return self.execs / self.elapsed if self.elapsed > 0 else 0.0

    def render(self) -> str:
        out = [f"epfuzz fuzz {self.harness}: {self.elapsed:.0f} s, {self.execs} execs "
               f"({self.exec_per_s:.0f} exec/s), features {self.cov}, corpus {self.corpus}, "
               f"{len(self.bugs)} bug(s) in {len(self.findings)} raw finding(s), "
               f"{self.harness_errors} harness error(s)"
               + (f", stopped early by signal {self.interrupted}" if self.interrupted else "")
               + (", stopped early: the disk is full" if self.disk_full else ""),
               f"run folder: {self.run_dir}"]
        if self.error:
            out.append(f"first harness error: {self.error}" + (
                "" if "(input: " in self.error else " (job logs in the run folder have the traceback)"))
        if self.false_alarms:
            out.append(f"{len(self.false_alarms)} finding(s) where the protocol promises clean (its `expect`): a bug "
                       f"in the model or in the promise, e.g. {self.false_alarms[0]}")
        return "\n".join(out + bug_table(Grouping(self.bugs, self.left, self.why), self.backend, self.run_dir)
                         + resource_table(self.resource))


def false_alarms(paths: list[Path]) -> list[Path]:
    """The finding cases whose protocol promises "clean" for their scenario (Protocol.expected, per
    preset: a fixed form under nvlink without a fence promises nothing, and is no false alarm)."""
    from epfuzz.protocols import get_protocol

    out = []
    for p in paths:
        try:
            scn = load_case(p).scenario
            if get_protocol(scn.protocol).expected(scn) == "clean":
                out.append(p)
        except EpfuzzError:
            continue
    return out


def resource_findings(found: list[tuple[str, str]], protocol: str, preset: str) -> list[tuple[str, Path, str]]:
    """(kind, artifact, replay command) of the inputs a campaign's per-input limits stopped (libFuzzer's
    timeout-*/oom-* artifacts, or the guided engine's): raw inputs, replayed with their protocol and preset."""
    from epfuzz.triage.findings import epfuzz_command

    out = []
    for kind, path in found:
        p = Path(path)
        out.append((kind, p, f"{epfuzz_command()} run --protocol {shlex.quote(protocol)} --preset "
                             f"{shlex.quote(preset)} {shlex.quote(str(p))}"))
    return out


def resource_table(resource: list[tuple[str, Path, str]]) -> list[str]:
    if not resource:
        return []
    out = [f"{len(resource)} input(s) ran past a per-input limit (hang: time, oom: memory), each a finding "
           f"about the protocol's code ({docs_page('hardening.md')}):"]
    for kind, path, replay in resource:
        out += [f"  {kind:4s}  {path}", f"        replay: {replay}"]
    return out


#: wall seconds the grouping goes on after a signal asked the run to end (a container's grace period
#: is 10-30 s; grouping already took up to 65 s there): what is grouped by then is the summary, the
#: rest is listed as not grouped yet, never as bugs, so only how many are grouped depends on the clock
SIGNAL_GRACE = 1.5


def until_grace(signalled: Callable[[], bool]) -> Callable[[], bool]:
    """A stop test that turns true `SIGNAL_GRACE` seconds after `signalled()` first does."""
    first: list[float] = []

    def stop() -> bool:
        if not first and signalled():
            first.append(time.monotonic())
        return bool(first) and time.monotonic() - first[0] > SIGNAL_GRACE

    return stop


class GroupingProgress:
    """N of M findings grouped, bugs so far: a line rewritten on a terminal, a log line every 5 s off one.

    The grouping counts a finding it leaves (a signal's grace ran out) as done, so after Ctrl-C its last line
    said 39 of 39 while the summary said 27 of 39 (cf trial 10): with `final=False` the last line is left to
    `end`, which takes the counts from the grouping the summary prints."""

    def __init__(self, log: object, tty: bool | None = None, final: bool = True) -> None:
        from epfuzz.infra.log import json_lines

        self.log, self.last, self.final = log, 0.0, final
        # a JSON log is read by a program, on a terminal too: events, not a rewritten line
        self.tty = sys.stderr.isatty() and not json_lines() if tty is None else tty

    def end(self, grouping: Grouping) -> None:
        """The last line: grouped raw findings of all, as the summary's bug table counts them, and those left."""
        done = sum(b.count for b in grouping.bugs)
        total, left = done + len(grouping.left), len(grouping.left)
        if not total:
            return
        if self.tty:
            sys.stderr.write(f"\r[grouping] {done} of {total} finding(s), {len(grouping.bugs)} bug(s)"
                             + (f", {left} not grouped yet ({grouping.why})" if left else "") + "   \n")
            sys.stderr.flush()
        else:
            self.log.info("fuzz.grouping", done=done, total=total, bugs=len(grouping.bugs),  # type: ignore[attr-defined]
                          left=left, **({"why": grouping.why} if left else {}))

    def __call__(self, done: int, total: int, bugs: int) -> None:
        now = time.monotonic()
        if done == total and not self.final:
            return
        if self.tty:
            sys.stderr.write(f"\r[grouping] {done} of {total} finding(s), {bugs} bug(s) so far   "
                             + ("\n" if done == total else ""))
            sys.stderr.flush()
        elif now - self.last >= 5 or done == total:
            self.log.info("fuzz.grouping", done=done, total=total, bugs=bugs)  # type: ignore[attr-defined]
            self.last = now


def read_findings(run_dir: Path, backend: str, log: object, grouped_at: str | None = None,
                  stop: Callable[[], bool] | None = None, progress: bool = True,
                  ) -> tuple[list[tuple[str, Path, str]], Grouping]:
    """A finished run folder's raw findings, (signature, case, summary) each (a file that does not load
    is logged and skipped), and the bugs they make by root cause, indexed in `bugs.csv` with this
    host's paths. `grouped_at`: the run folder's path where the campaign ran (the guest's), whose
    `bugs.csv` already groups the findings (on verbs only the guest can rerun them to group them)."""
    findings = []
    for path in sorted(run_dir.glob("finding-*.json")):
        try:
            c = load_case(path)
            findings.append((c.signature, path, c.note))
        except InputError as e:
            log.error("fuzz.bad_finding_file", error=str(e))  # type: ignore[attr-defined]
    paths = [p for _, p, _ in findings]
    bugs = _index(run_dir, grouped_at, paths) if grouped_at else []
    seen = {p for b in bugs for p in b.raw}
    shown = GroupingProgress(log, final=False) if progress else None
    got = group_findings([p for p in paths if p not in seen], run_dir / "bugs", backend if not grouped_at else "raw",
                         stop=stop, progress=shown)
    got.bugs = sorted(bugs + got.bugs, key=lambda b: (-b.count, b.cause))
    if shown is not None and len(paths) > len(seen):
        shown.end(got)
    try:
        write_bug_index(got, run_dir / "bugs.csv")
    except (OSError, NoSpace) as e:  # a full disk: the summary on stdout still has the table
        if not is_no_room(e):
            raise
        log.error("fuzz.no_room", error=str(e if isinstance(e, NoSpace)  # type: ignore[attr-defined]
                                             else NoSpace(run_dir / "bugs.csv", e)))
    return findings, got


def _index(run_dir: Path, grouped_at: str, paths: list[Path]) -> list[Bug]:
    """The bugs of a `bugs.csv` written where the campaign ran, with this run folder's paths (only
    findings that are here: a row without any is dropped)."""
    index = run_dir / "bugs.csv"
    if not index.exists():
        return []
    here = {p.name: p for p in paths}
    bugs = []
    with index.open(newline="") as f:
        for row in csv.DictReader(f):
            raw = [here[n] for n in (row.get("raw") or "").split() if n in here]
            case = Path(row["case"].replace(grouped_at.rstrip("/"), str(run_dir), 1))
            if not raw or not case.is_file():
                continue
            try:
                note = load_case(case).note
            except InputError:
                continue
            bugs.append(Bug(row["root_cause"], case, note, row["minimized"] == "True", raw,
                            int(row.get("repeats") or 1), float(row.get("rate") or 1.0)))
    return bugs


def log_end(log: object, summary: Summary, jobs: int = 1) -> None:
    """The end of a campaign in the log, whichever engine ran it: each bug once, with the replay line
    the summary prints, then the totals. One schema for every engine (the guided engine said `features`,
    libFuzzer `cov` and `harness_errors`, `--jobs N` `jobs`: ops trial 1205 item 5): `features` is what the
    text summary says features (the guided engine's distinct features, the most of any job's; libFuzzer's
    `cov`, its counters covered, which are the same semantic features); every engine has each figure."""
    from epfuzz.infra.log import json_lines

    # for people each bug is one row of the bug table (stdout): logged as well only where a program reads
    # the log, or it is printed twice (issue 28)
    emit = log.warning if json_lines() else log.debug  # type: ignore[attr-defined]
    for bug in summary.bugs:
        emit("fuzz.bug", root_cause=bug.cause, count=bug.count, case=str(bug.case),
             replay=replay_command(bug.case, summary.backend, bug.repeats), summary=bug.note)
    # the summary's own lines follow on stdout: for people this event would say them twice
    # a program reads what the text summary says: where the run is, how many bugs, and why it stopped
    (log.info if json_lines() else log.debug)(  # type: ignore[attr-defined]
        "fuzz.summary", execs=summary.execs, exec_per_s=round(summary.exec_per_s), corpus=summary.corpus,
        features=summary.cov, harness_errors=summary.harness_errors, jobs=jobs,
        findings=len(summary.findings), bugs=len(summary.bugs), run_dir=str(summary.run_dir),
        stop=stop_reason(summary), signal=summary.interrupted or None)


def stop_reason(summary: Summary) -> str:
    """Why the campaign ended, one word: "time" (its --time budget), "execs" (--max-execs, or libFuzzer's
    -runs: 500 execs in 1 s of 60 said "time", trial 0205 item 4), "signal" (Ctrl-C, SIGTERM), "disk_full" or
    "harness_error" (the guided engine stops at a plug-in's first exception, exit 3); what the text summary's
    "stopped early by ..." and "first harness error" lines say."""
    if summary.disk_full:
        return "disk_full"
    if summary.interrupted:
        return "signal"
    return "harness_error" if summary.error else summary.bound


def exec_bound(max_execs: int | None, execs: list[int]) -> str:
    """`Summary.bound` of a campaign whose jobs ran `execs` each: "execs" where each reached `max_execs`."""
    return "execs" if max_execs is not None and execs and all(n >= max_execs for n in execs) else "time"
