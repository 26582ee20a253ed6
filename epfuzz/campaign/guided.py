"""`epfuzz fuzz` on the sim backend: the guided engine (epfuzz.search) as a campaign, one job or many.

Same run folder and summary as the libFuzzer campaign (epfuzz.campaign.libfuzzer): kept inputs under
`corpus/` (named by SHA-1, seeded from the harness's seeds, `seed_folder`: corpus/<harness>/ in a checkout,
epfuzz/_corpus/<harness>/ in an install; never written), one case file
per bug signature, `progress.csv` a row a second, bugs grouped by root cause with a minimized case
each, `bugs.csv`, and `stats.json` (per move and per feedback: what was used). "Coverage" is the
number of semantic features seen (epfuzz.search.feedbacks).

`--jobs N` runs N worker processes (`python -m epfuzz.campaign.worker`), job j with seed+j, sharing
the corpus through the run folder as libFuzzer `-jobs` and AFL++ `-M/-S` do: each writes its new
inputs atomically into `corpus/` and, every `SYNC_EVERY` executions, runs the inputs others wrote
since it last looked. The parent writes the progress rows, waits, and groups every job's findings
into one summary and one bug table.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epfuzz.campaign.common import (
    PROGRESS_HEADER,
    RUNS,
    GroupingProgress,
    Summary,
    exec_bound,
    false_alarms,
    log_end,
    log_start,
    plugin_name,
    resource_findings,
    until_grace,
)
from epfuzz.campaign.preflight import preflight
from epfuzz.campaign.rundir import fresh_run_dir
from epfuzz.cases.corpus import case_paths, sha1, write_atomic
from epfuzz.continuous.targets import harness_name, harness_protocol, home_preset, seed_folder
from epfuzz.infra.diskspace import NoSpace, is_no_room, remove_empty
from epfuzz.infra.errors import EpfuzzError, ProtocolError
from epfuzz.infra.log import get_logger
from epfuzz.protocols import REGISTRY, get_protocol, limits
from epfuzz.search import feedbacks as fb
from epfuzz.search import moves as mv
from epfuzz.search.engines.guided import Guided, Step
from epfuzz.search.monitor import Console, Monitor
from epfuzz.search.sink import FindingSink
from epfuzz.triage.findings import group_findings, write_bug_index

#: executions between two looks at the shared corpus (a few seconds at the slowest protocols' rate)
SYNC_EVERY = 256


def _seeds(folder: Path | None, protocol: str, preset: str) -> list[bytes]:
    """Raw inputs and cases of a seed folder, as bytes the decoder reads (unreadable files skipped)."""
    from epfuzz.cases.replay import load_any
    from epfuzz.encoding import codec

    out = []
    for p in case_paths([folder]) if folder is not None else []:
        try:
            case = load_any(p, protocol, preset, switch=True)  # a seed of another protocol lends its scenario
        except EpfuzzError:
            continue
        out.append(case.input or codec.encode(case.scenario))
    return out


class _Campaign:
    """One guided job: the engine, the sink of its findings, its progress rows and the shared corpus."""

    def __init__(self, name: str, protocol: str, preset: str, run_dir: Path, seed: int,
                 feedbacks: Sequence[Any] = fb.DEFAULT, moves: Sequence[mv.Move] = mv.DEFAULT,
                 sync: bool = False) -> None:
        self.name, self.protocol, self.preset, self.run_dir = name, protocol, preset, run_dir
        self.proto = get_protocol(protocol)
        self.monitor = Monitor()
        self.loop = Guided(protocol, self.proto, seed, preset, feedbacks=feedbacks, moves=moves,
                           monitor=self.monitor)
        self.log = get_logger(harness=name, backend="sim", preset=preset, engine="guided")
        self.console = Console(log=self.log)
        self.sink = FindingSink(run_dir, protocol, self.proto, console=self.console)
        self.stop_signal = 0
        self.resource: list[tuple[str, str]] = []   # (hang|oom, artifact) of inputs past a limit
        self.disk_full = ""                          # the write that found no room, if one did
        self.sync = sync
        self.known: set[str] = set()                 # corpus/ names this job has run or written
        self.error = ""                              # the plug-in's exception that ended the run, and where

    @property
    def findings(self) -> list[tuple[str, Path, str]]:
        return self.sink.findings

    def attempt(self, data: bytes, move: str) -> None:
        """One input; one that makes the plug-in's code loop, hog memory or exit is saved as a
        `timeout-`/`oom-` artifact (libFuzzer's names) and the loop goes on (issue 29.5)."""
        try:
            self.handle(self.loop.try_input(data, move))
        except (limits.OverLimit, MemoryError) as e:
            self.over_limit(data, e)
        except (ProtocolError, Exception) as e:  # noqa: BLE001 - the plug-in's own code, named by crashed()
            self.crashed(data, e)

    def mutate(self) -> tuple[bytes, str] | None:
        """The next input, or None where making it ran the plug-in past a limit or into an exception: a
        schedule move runs a configuration's arrival order, and that configuration is what is saved (it
        replays so; moves.Context.culprit)."""
        try:
            return self.loop.next_input()
        except (limits.OverLimit, MemoryError) as e:
            self.over_limit(self.loop.ctx.culprit(self.loop.parent), e)
        except (ProtocolError, Exception) as e:  # noqa: BLE001 - the plug-in's own code, named by crashed()
            self.crashed(self.loop.ctx.culprit(self.loop.parent), e)
        self.loop.ctx.running = None
        return None

    def crashed(self, data: bytes, e: Exception) -> None:
        """The plug-in raised: the input is kept as a `crash-` artifact (libFuzzer's name) and the run
        ends, as a libFuzzer job ends at its crash; the summary names the error and the input (exit 3).
        An exception with no plug-in frame is epfuzz's own bug (or a full disk): raised on."""
        where = REGISTRY.where(e)
        if not isinstance(e, ProtocolError) and not where:
            raise e
        if not isinstance(e, ProtocolError):
            line = str(e).splitlines()[0] if str(e) else ""
            e = ProtocolError(f"{type(e).__name__}: {line}{where}")
        path = self.run_dir / "artifacts" / f"crash-{sha1(data)}"
        write_atomic(path, data)
        (_, _, replay), = resource_findings([("crash", str(path))], self.protocol, self.preset)
        self.error = f"{e} (input: {path}; replay: {replay})"
        sys.stderr.write(f"=== epfuzz harness error: {self.error}\n")

    def over_limit(self, data: bytes, e: limits.OverLimit | MemoryError) -> None:
        kind = e.kind if isinstance(e, limits.OverLimit) else "oom"
        path = self.run_dir / "artifacts" / f"{'timeout' if kind == 'hang' else kind}-{sha1(data)}"
        write_atomic(path, data)
        if (kind, str(path)) not in self.resource:
            self.resource.append((kind, str(path)))
            sys.stderr.write(f"\n=== epfuzz {kind}: {e}\n  input: {path}\n")

    def handle(self, step: Step) -> None:
        if step.kept:
            name = sha1(step.data)
            self.known.add(name)
            write_atomic(self.run_dir / "corpus" / name, step.data)
        if step.run.violation is not None:
            self.sink.offer(step.scenario, step.data, step.execution.outcome)  # the run's own outcome
            self.monitor.findings = len(self.sink.findings)

    def pick_up(self) -> None:
        """The inputs other jobs wrote into corpus/ since the last look (AFL++'s sync)."""
        try:
            names = sorted(set(os.listdir(self.run_dir / "corpus")) - self.known)
        except OSError:
            return
        for n in names:
            self.known.add(n)
            if n.startswith("."):      # write_atomic's temporary file
                continue
            try:
                data = (self.run_dir / "corpus" / n).read_bytes()
            except OSError:
                continue
            self.attempt(data, "sync")

    def row(self, elapsed: float) -> str:
        return self.monitor.row(elapsed, self.loop.execs)

    def run(self, seconds: float, max_execs: int | None, progress: bool, csv_path: Path) -> float:
        """The loop; a full disk ends it (`disk_full` says why) and the summary still comes."""
        start = time.monotonic()
        try:
            self._loop(start, seconds, max_execs, progress, csv_path)
        except (NoSpace, OSError) as e:
            if not is_no_room(e):
                raise
            self.disk_full = str(e) if isinstance(e, NoSpace) else str(NoSpace(csv_path, e))
        return time.monotonic() - start

    def _loop(self, start: float, seconds: float, max_execs: int | None, progress: bool, csv_path: Path) -> None:
        with csv_path.open("a") as csv:
            csv.write(PROGRESS_HEADER)
            for data in _seeds(seed_folder(self.name), self.protocol, self.preset):
                if self.error:
                    break
                self.attempt(data, "seed")
            while not self.stop_signal and not self.error and time.monotonic() - start < seconds and (
                    max_execs is None or self.loop.execs < max_execs):
                made = self.mutate()
                if made is not None:
                    self.attempt(*made)
                if self.sync and self.loop.execs % SYNC_EVERY == 0:
                    self.pick_up()
                if self.monitor.due():
                    csv.write(self.row(time.monotonic() - start))
                    csv.flush()
                    if progress:
                        self.monitor.line(seconds, self.console)
        self.console.end()

    def stats(self, elapsed: float) -> dict[str, Any]:
        return {**self.monitor.stats(), "execs": self.loop.execs, "elapsed": elapsed,
                "resource": self.resource, "disk_full": self.disk_full, "error": self.error,
                "findings": [str(p) for _, p, _ in self.findings]}


def _names(harness: str | None, protocol: str | None, preset: str) -> tuple[str, str]:
    if protocol:
        preflight(protocol, preset)  # loads it: fails now, with the reason, if it cannot be loaded, run or complete
        return plugin_name(protocol), protocol
    name = harness_name(harness or "")
    return name, name.removesuffix("_fuzzer")


def fuzz_guided(harness: str | None, seconds: float, preset: str | None = None, run_dir: Path | None = None,
                seed: int | None = None, progress: bool = True, protocol: str | None = None,
                max_execs: int | None = None, jobs: int = 1, feedback: Sequence[str] = (),
                moves: Sequence[str] = ()) -> Summary:
    """Fuzz a built-in protocol (by harness or protocol name) or a plug-in protocol (module:Attr) with
    the guided engine; `feedback`/`moves`: plug-ins (module:attr) added to the default parts. `preset`: None is
    the protocol's home preset, as `epfuzz fuzz` and the harness take it (it was "spec" here: ops trial 1205)."""
    preset = preset or home_preset(protocol or harness_protocol(harness or ""))
    name, protocol = _names(harness, protocol, preset)
    feeds = [*fb.DEFAULT, *fb.load(feedback)]
    mvs = [*mv.DEFAULT, *mv.load(moves)]
    claim = fresh_run_dir(run_dir, RUNS / f"{name}-guided-{time.strftime('%Y%m%d-%H%M%S')}")
    with claim.released_on_failure() as run_dir:  # nothing written: the folder is given back
        (run_dir / "corpus").mkdir(parents=True, exist_ok=True)
        if jobs > 1:
            from epfuzz.campaign.guided_jobs import fuzz_jobs

            return fuzz_jobs(name, protocol, preset, run_dir, seconds, 0 if seed is None else seed, progress,
                              max_execs, jobs, feedback, moves)
        camp = _Campaign(name, protocol, preset, run_dir, 0 if seed is None else seed, feeds, mvs)

        def stop(signum: int, *_: object) -> None:
            camp.stop_signal = signum

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        log_start(camp.log, "sim", seconds=seconds, run_dir=str(run_dir))
        try:
            elapsed = camp.run(seconds, max_execs, progress, run_dir / "progress.csv")
            # the handler stays: a signal (the one that ended the fuzzing too) leaves the grouping SIGNAL_GRACE
            # seconds; with the disk full there is no room for minimized cases: only what the cache knows
            paths = [p for _, p, _ in camp.findings]
            shown = GroupingProgress(camp.log, final=False) if progress else None
            ends = (lambda: True) if camp.disk_full else until_grace(lambda: camp.stop_signal != 0)
            grouping = group_findings(paths, run_dir / "bugs", "sim", stop=ends, progress=shown)
            if shown is not None and paths:
                shown.end(grouping)
            if grouping.why.startswith("no room"):
                camp.disk_full = camp.disk_full or grouping.why
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        g = camp.loop
        summary = Summary(name, run_dir, elapsed, g.execs, len(g.corpus.seen), len(g.corpus), int(bool(camp.error)),
                          camp.findings, grouping.bugs, camp.stop_signal,
                          resource=resource_findings(camp.resource, protocol, preset), error=camp.error,
                          false_alarms=false_alarms(paths), left=grouping.left, why=grouping.why,
                          bound=exec_bound(max_execs, [g.execs]))
        try:
            write_bug_index(grouping, run_dir / "bugs.csv")
            write_atomic(run_dir / "stats.json", json.dumps(camp.stats(elapsed), indent=1).encode())
            with (run_dir / "progress.csv").open("a") as f:  # the last row is the summary's numbers: report agrees
                f.write(camp.row(elapsed))
        except (OSError, NoSpace) as e:
            if not is_no_room(e):
                raise
            full = e if isinstance(e, NoSpace) else NoSpace(run_dir / "progress.csv", e)
            camp.disk_full = camp.disk_full or str(full)
        if camp.disk_full:
            remove_empty(run_dir)
            summary.disk_full = camp.disk_full
        log_end(camp.log, summary)
        return summary


def run_worker(args: dict[str, Any]) -> int:
    """One job of `--jobs N` (epfuzz.campaign.worker): fuzz into the shared run folder, write jobs/job-J.json."""
    run_dir, j = Path(args["run_dir"]), int(args["job"])
    if ":" in args["protocol"]:
        REGISTRY.load_plugin(args["protocol"])  # named on the parent's command line
    camp = _Campaign(args["name"], args["protocol"], args["preset"], run_dir, int(args["seed"]) + j,
                     [*fb.DEFAULT, *fb.load(args["feedback"])], [*mv.DEFAULT, *mv.load(args["moves"])], sync=True)

    def stop(signum: int, *_: object) -> None:
        camp.stop_signal = signum

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)
    with limits.watch():
        elapsed = camp.run(float(args["seconds"]), args["max_execs"], False, run_dir / "jobs" / f"job-{j}.csv")
    try:
        write_atomic(run_dir / "jobs" / f"job-{j}.json", json.dumps(camp.stats(elapsed)).encode())
    except (OSError, NoSpace) as e:
        if not is_no_room(e):
            raise
        return 2
    return 2 if camp.disk_full else 0
