"""`epfuzz fuzz --engine guided`: the in-process greybox loop (epfuzz.greybox) as a campaign.

Same run folder and summary as the libFuzzer campaign (epfuzz.campaign): kept
inputs under `corpus/` (named by SHA-1, seeded from corpus/<harness>/, which is
never written), one case file per bug signature, `progress.csv` a row a second,
bugs grouped by root cause with a minimized case each, `bugs.csv`. There is no
process per job and no line coverage: "coverage" here is the number of semantic
features seen (epfuzz.feedback). The emulator is the only backend it drives,
since its features are read from the emulator's trace.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from epfuzz import limits
from epfuzz.backends.sim import SimBackend
from epfuzz.campaign_common import (
    PROGRESS_HEADER,
    RUNS,
    GroupingProgress,
    Summary,
    false_alarms,
    fresh_run_dir,
    log_end,
    plugin_name,
    preflight,
    resource_findings,
    until_grace,
)
from epfuzz.corpus import case_paths, sha1, write_atomic
from epfuzz.diskspace import NoSpace, is_no_room, remove_empty
from epfuzz.errors import EpfuzzError
from epfuzz.findings import group_findings, one_line_json, replay_command, signature, write_bug_index, write_finding
from epfuzz.greybox import Greybox, Step
from epfuzz.log import get_logger
from epfuzz.protocols import get_protocol
from epfuzz.targets import harness_name, seed_folder


def _seeds(folder: Path | None, protocol: str, preset: str) -> list[bytes]:
    """Raw inputs and cases of a seed folder, as bytes the decoder reads (unreadable files skipped)."""
    from epfuzz import codec
    from epfuzz.replay import load_any

    out = []
    for p in case_paths([folder]) if folder is not None else []:
        try:
            case = load_any(p, protocol, preset)
        except EpfuzzError:
            continue
        out.append(case.input or codec.encode(case.scenario))
    return out


def _peak_rss_mb() -> int:
    """This process's peak RSS (the guided loop runs in it; the report showed 0 MB for it)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux


class _Campaign:
    """One guided run: the loop, its findings by signature, and its progress rows."""

    def __init__(self, name: str, protocol: str, preset: str, run_dir: Path, seed: int) -> None:
        self.name, self.protocol, self.preset, self.run_dir = name, protocol, preset, run_dir
        self.proto = get_protocol(protocol)
        self.loop = Greybox(protocol, self.proto, seed, preset)
        self.seen: set[str] = set()
        self.findings: list[tuple[str, Path, str]] = []
        self.stop_signal = 0
        self.log = get_logger(harness=name, backend="sim", preset=preset, engine="guided")
        self.resource: list[tuple[str, str]] = []   # (hang|oom, artifact) of inputs past a limit
        self.disk_full = ""                          # the write that found no room, if one did

    def attempt(self, data: bytes, move: str) -> None:
        """One input; one that makes the plug-in's code loop, hog memory or exit is saved as a
        `timeout-`/`oom-` artifact (libFuzzer's names) and the loop goes on (issue 29.5)."""
        try:
            self.handle(self.loop.try_input(data, move))
        except (limits.OverLimit, MemoryError) as e:
            kind = e.kind if isinstance(e, limits.OverLimit) else "oom"
            path = self.run_dir / "artifacts" / f"{'timeout' if kind == 'hang' else kind}-{sha1(data)}"
            write_atomic(path, data)
            self.resource.append((kind, str(path)))
            sys.stderr.write(f"\n=== epfuzz {kind}: {e}\n  input: {path}\n")

    def handle(self, step: Step) -> None:
        if step.kept:
            write_atomic(self.run_dir / "corpus" / sha1(step.data), step.data)
        if step.run.violation is None:
            return
        outcome = SimBackend().run(step.scenario, self.proto)
        sig = signature(step.scenario, outcome, self.proto)
        if sig in self.seen:
            return
        self.seen.add(sig)
        path = write_finding(self.run_dir, step.scenario, step.data, outcome, self.proto)
        self.findings.append((sig, path, outcome.violation.summary() if outcome.violation else ""))
        alarm = "" if self.proto.expected(step.scenario) != "clean" else (  # "": no promise here
            f"  FALSE ALARM: {self.protocol} is expected clean; this is a bug in the model\n")
        sys.stderr.write(f"\n=== epfuzz finding: {self.findings[-1][2]}\n{alarm}  signature: {sig}\n"
                         f"  replay: {replay_command(path)}\n  scenario: {one_line_json(step.scenario)}\n")

    def row(self, elapsed: float) -> str:
        g = self.loop
        return (f"{elapsed:.1f},{g.execs},{g.execs / elapsed if elapsed else 0:.0f},{len(g.seen)},"
                f"{len(g.corpus)},{len(self.findings)},{_peak_rss_mb()}\n")

    def run(self, seconds: float, max_execs: int | None, progress: bool) -> float:
        """The loop; a full disk ends it (`disk_full` says why) and the summary still comes."""
        start = time.monotonic()
        try:
            self._loop(start, seconds, max_execs, progress)
        except (NoSpace, OSError) as e:
            if not is_no_room(e):
                raise
            self.disk_full = str(e) if isinstance(e, NoSpace) else str(NoSpace(self.run_dir / "progress.csv", e))
        return time.monotonic() - start

    def _loop(self, start: float, seconds: float, max_execs: int | None, progress: bool) -> None:
        last = 0.0
        with (self.run_dir / "progress.csv").open("a") as csv:
            csv.write(PROGRESS_HEADER)
            for data in _seeds(seed_folder(self.name), self.protocol, self.preset):
                self.attempt(data, "seed")
            while not self.stop_signal and time.monotonic() - start < seconds and (
                    max_execs is None or self.loop.execs < max_execs):
                self.attempt(*self.loop.next_input())
                now = time.monotonic()
                if now - last >= 1:
                    csv.write(self.row(now - start))
                    csv.flush()
                    last = now
                    if progress and sys.stderr.isatty():
                        sys.stderr.write(f"\r[{now - start:5.0f}s / {seconds:.0f}s] execs {self.loop.execs} "
                                         f"features {len(self.loop.seen)} corpus {len(self.loop.corpus)} "
                                         f"findings {len(self.findings)}   ")
        if progress and sys.stderr.isatty():
            sys.stderr.write("\n")


def fuzz_guided(harness: str | None, seconds: float, preset: str = "spec", run_dir: Path | None = None,
                seed: int | None = None, progress: bool = True, protocol: str | None = None,
                max_execs: int | None = None) -> Summary:
    """Fuzz a built-in harness's protocol, or a plug-in protocol (module:Attr), with the greybox loop."""
    if protocol:
        preflight(protocol, preset)  # loads it: fails now, with the reason, if it cannot be loaded or run
        name = plugin_name(protocol)
    else:
        name = harness_name(harness or "")
        protocol = name.removesuffix("_fuzzer")
    run_dir = fresh_run_dir(run_dir, RUNS / f"{name}-guided-{time.strftime('%Y%m%d-%H%M%S')}")
    (run_dir / "corpus").mkdir(parents=True, exist_ok=True)
    camp = _Campaign(name, protocol, preset, run_dir, 0 if seed is None else seed)

    def stop(signum: int, *_: object) -> None:
        camp.stop_signal = signum

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    camp.log.info("fuzz.start", seconds=seconds, run_dir=str(run_dir))
    try:
        elapsed = camp.run(seconds, max_execs, progress)
        # the handler stays: a signal (the one that ended the fuzzing too) leaves the grouping SIGNAL_GRACE
        # seconds; with the disk full there is no room for minimized cases: only what the cache knows
        paths = [p for _, p, _ in camp.findings]
        grouping = group_findings(paths, run_dir / "bugs", "sim",
                                  stop=(lambda: True) if camp.disk_full else until_grace(lambda: camp.stop_signal != 0),
                                  progress=GroupingProgress(camp.log) if progress else None)
        if grouping.why.startswith("no room"):
            camp.disk_full = camp.disk_full or grouping.why
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    g = camp.loop
    summary = Summary(name, run_dir, elapsed, g.execs, len(g.seen), len(g.corpus), 0, camp.findings, grouping.bugs,
                      camp.stop_signal, resource=resource_findings(camp.resource, protocol, preset),
                      false_alarms=false_alarms(paths), left=grouping.left, why=grouping.why)
    try:
        write_bug_index(grouping, run_dir / "bugs.csv")
        with (run_dir / "progress.csv").open("a") as f:  # the last row is the summary's numbers: report agrees
            f.write(camp.row(elapsed))
    except (OSError, NoSpace) as e:
        if not is_no_room(e):
            raise
        camp.disk_full = camp.disk_full or str(e if isinstance(e, NoSpace) else NoSpace(run_dir / "progress.csv", e))
    if camp.disk_full:
        remove_empty(run_dir)
        summary.disk_full = camp.disk_full
    log_end(camp.log, summary, features=len(g.seen))
    return summary
