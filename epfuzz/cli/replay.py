"""`epfuzz replay`: every input against its expected verdict, each one counted whatever another did.

One file's plug-in code may raise, exit, loop or hog memory (issue 29.4): that file is counted
(a protocol error, or a changed verdict of kind hang/oom) and the next one is replayed, so the
summary line and the exit code always reflect every verdict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from epfuzz.backends import Backend, Outcome, blind_spot, get_backend
from epfuzz.cases.replay import (
    LIBFUZZER_NAME,
    ManifestProblem,
    expected,
    load_classified,
    manifest_problems,
    replayable,
)
from epfuzz.cli.guard import EXIT_CLEAN, EXIT_FINDING, EXIT_HARNESS, EXIT_INPUT
from epfuzz.infra import log as elog
from epfuzz.infra.errors import BackendUnavailable, EpfuzzError, ProtocolError
from epfuzz.ir.scenario import Scenario
from epfuzz.protocols import REGISTRY, get_protocol, limits
from epfuzz.protocols.registry import describe


def cmd_replay(a: argparse.Namespace) -> int:
    log = elog.get_logger()
    paths, skipped = replayable([Path(p) for p in a.paths], a.protocol)
    if not paths:
        return _nothing_found(skipped)
    _refused_at_once(a)
    problems = manifest_problems([Path(p) for p in a.paths], a.strict)
    for problem in problems:
        elog.error_line(problem.line, problem.path or None)
    changed = errors = ok = unchecked = broken = plugin_bugs = 0
    first_unchecked = why_unchecked = ""
    no_backend: dict[str, tuple[int, str]] = {}  # cases whose own backend cannot run here: (count, why), skipped
    why_not: dict[str, str] = {}  # each backend's answer, asked once (_cannot_run)
    said = _Said()
    for path in paths:
        expect = None
        backend = ""
        try:
            case, raw = load_classified(path, a.protocol, a.preset, a.raw)
            scn = case.scenario
            expect = expected(case, path, raw)
            backend = case.backend if case.backend != "sim" else a.backend
            if _cannot_run(backend, why_not, no_backend):
                continue
            ran = get_backend(backend, require=False)  # _cannot_run asked it already
            out = ran.run(scn, get_protocol(scn.protocol))
        except (limits.OverLimit, MemoryError) as e:  # the plug-in looped, hogged memory or exited on this case,
            changed += 1  # or asked at once for more than the machine has (not seen growing: oom): a verdict
            kind, got = (e.kind, f"{e.kind} ({e})") if isinstance(e, limits.OverLimit) else (
                "oom", f"oom (MemoryError{REGISTRY.where(e)})")
            want = expect.verdict if expect and expect.verdict else ""
            _tell_changed(f"CHANGED {path}: expected {want or 'a verdict'}, got {got}", path, want, kind)
            continue
        except BackendUnavailable as e:  # available when asked, not when run: its later cases are skipped too
            if backend:
                _cannot_run(backend, why_not, no_backend, str(e).removeprefix(f"backend {backend} cannot run here: "))
            else:  # not from a backend's run: said like any other unreadable input
                print(f"epfuzz: {e}", file=sys.stderr)
                errors += 1
            continue
        except EpfuzzError as e:
            if isinstance(e, ProtocolError):
                plugin_bugs += 1
                said.say(path, f"protocol error (a bug in the protocol plug-in): {e}")
            else:
                said.say(path, str(e).removeprefix(f"{path}: "))
                errors += 1
            continue
        except (Exception, SystemExit) as e:  # one broken file must not hide the verdicts of the others
            where = REGISTRY.where(e)
            if where or isinstance(e, SystemExit):  # the plug-in's code raised (or exited): as `run` says it
                plugin_bugs += 1
                elog.error_line(f"{path}: protocol error (a bug in the protocol plug-in): {describe(e)}{where}", path)
            else:
                elog.error_line(f"{path}: harness error (a bug in epfuzz): {type(e).__name__}: {e}", path)
                broken += 1
            continue
        assert expect is not None
        if not expect.verdict:
            unchecked += 1
            line = f"UNCHECKED {path}: {out.verdict}, no expected verdict: {expect.source}"
            if a.verbose:
                print(line)
            first_unchecked, why_unchecked = first_unchecked or line, why_unchecked or expect.source
        elif out.verdict != expect.verdict:
            changed += 1
            line = _changed(path, expect.verdict, expect.source, out, ran, scn)
            _tell_changed(line, path, expect.verdict, out.verdict)
        else:
            ok += 1
            if a.verbose:
                print(f"ok {path}: {out.verdict}")
        log.debug("replay.case", path=str(path), verdict=out.verdict, expect=expect.verdict or None)
    said.the_rest()
    if unchecked == 1 and not a.verbose:
        print(first_unchecked)
    elif unchecked > 1 and not a.verbose:  # a fresh run's corpus is ~1,000 of them: a count, not a page
        print(f"UNCHECKED {unchecked} inputs have no expected verdict (the first: {why_unchecked}); -v lists each")
    return _summary(a, (ok, changed, unchecked, errors, plugin_bugs, broken), no_backend, problems, skipped)


def _refused_at_once(a: argparse.Namespace) -> None:
    """What is refused before any file, in one line as `run` and `fuzz` refuse it: a backend the user names that
    cannot run here (review), a --protocol plug-in that cannot be imported (it was one line per file: trial 0205
    item 1)."""
    get_backend(a.backend)
    if a.protocol:
        get_protocol(a.protocol)


class _Said:
    """Each file's error line, said once for all the files it is the same for: a run folder whose plug-in cannot
    be imported, or names one not allowed, said one identical line per file, 339 of them (trial 0205 item 1)."""

    def __init__(self) -> None:
        self.more: dict[str, int] = {}  # an error's text after its file's path: how many more files said it

    def say(self, path: Path, why: str) -> None:
        if why in self.more:
            self.more[why] += 1
        else:
            self.more[why] = 0
            elog.error_line(f"{path}: {why}", path)

    def the_rest(self) -> None:
        """One line for each error more files than its first had, after the verdicts."""
        for why, n in self.more.items():
            if n:
                print(f"epfuzz: {n} more file(s) failed the same way: {why}", file=sys.stderr)


def _tell_changed(line: str, path: Path, expected: str, got: str) -> None:
    """A CHANGED line on stdout; in a JSON log a `replay.changed` event too (path, expected and got: verdicts),
    for the CI job that reads the log (it had the text alone: trial 0205 item 4). For people the line is it. At
    level warning, as a finding of `fuzz` is: a changed verdict fails the replay (it was info: trial 1205)."""
    print(line)
    log = elog.get_logger()
    (log.warning if elog.json_lines() else log.debug)("replay.changed", path=str(path), expected=expected or None,
                                                   got=got, line=line)


def _changed(path: Path, verdict: str, source: str, out: Outcome, ran: Backend, scn: Scenario) -> str:
    """The CHANGED line; a finding replayed clean on a backend that cannot show the rule it needs on the sim
    says so (`backends.blind_spot`), as `run` does: clean there does not mean fixed (pipdocs' leftover)."""
    line = f"CHANGED {path}: expected {verdict} ({source}), got {out.verdict}"
    if out.violation is not None:
        return f"{line} ({out.violation.summary()})"
    note = blind_spot(ran, scn) if verdict == "finding" else ""
    return f"{line}\n  {note}" if note else line


def _cannot_run(backend: str, why_not: dict[str, str], no_backend: dict[str, tuple[int, str]], why: str = "") -> bool:
    """Whether `backend` cannot run here, its case then counted in `no_backend`. Each backend is asked once
    (`why_not` keeps the answers, "" where it can run); `why`: it said so only when a case ran on it."""
    if why:
        why_not[backend] = why
    elif backend not in why_not:
        try:
            get_backend(backend)
            why_not[backend] = ""
        except BackendUnavailable as e:
            why_not[backend] = str(e).removeprefix(f"backend {backend} cannot run here: ")
    if not why_not[backend]:
        return False
    n, _ = no_backend.get(backend, (0, ""))
    no_backend[backend] = (n + 1, why_not[backend])
    return True


def _nothing_found(skipped: list[Path]) -> int:
    nameless = [f for f in skipped if LIBFUZZER_NAME.fullmatch(f.name)]
    why = ([f"{len(nameless)} raw input(s) skipped: no folder above them names a protocol, pass --protocol "
            "NAME"] if nameless else []) + (
        [f"{len(skipped) - len(nameless)} skipped: not inputs"] if len(skipped) > len(nameless) else [])
    print("epfuzz: no files found" + (f" ({'; '.join(why)})" if why else ""), file=sys.stderr)
    # a program reading the log gets its replay.summary here too: zero counts, exit 2 (an empty folder had
    # only the error event, a missing path both: ops trial 1205 item 5)
    _summary_event((0, 0, 0, 0, 0, 0), 0, 0, len(skipped), EXIT_INPUT)
    return EXIT_INPUT


def _summary_event(counts: tuple[int, int, int, int, int, int], not_run: int, problems: int, not_inputs: int,
                   rc: int) -> None:
    """The summary line's numbers as a `replay.summary` event, for a program reading a JSON log."""
    ok, changed, unchecked, errors, plugin_bugs, broken = counts
    log = elog.get_logger()
    (log.info if elog.json_lines() else log.debug)(
        "replay.summary", replayed=ok + changed + unchecked, as_expected=ok, changed=changed, unchecked=unchecked,
        unreadable=errors, protocol_errors=plugin_bugs, harness_errors=broken, not_run=not_run,
        manifest_problems=problems, not_inputs=not_inputs, passed=rc == EXIT_CLEAN, exit=rc)


def _summary(a: argparse.Namespace, counts: tuple[int, int, int, int, int, int], no_backend: dict[str, tuple[int, str]],
             problems: list[ManifestProblem], skipped: list[Path]) -> int:
    """The lines after the verdicts and the exit code: one line per backend whose cases were not replayed here,
    and the summary, whose last word (PASS, or FAIL and the exit code) says the outcome."""
    ok, changed, unchecked, errors, plugin_bugs, broken = counts
    for backend, (n, reason) in sorted(no_backend.items()):
        print(f"skipped {n} case(s): backend {backend} not available here: {reason}"
              + (" (--strict: a case not replayed fails)" if a.strict else ""))
    not_run = sum(n for n, _ in no_backend.values())
    damaged = any(p.damage for p in problems) or (a.strict and bool(problems))
    if changed or (a.strict and (unchecked or not_run)):
        rc = EXIT_FINDING
    else:
        rc = EXIT_HARNESS if broken or plugin_bugs else EXIT_INPUT if errors or damaged else EXIT_CLEAN
    _summary_event(counts, not_run, len(problems), len(skipped), rc)
    print(f"replayed {ok + changed + unchecked} case(s): {ok} as expected, {changed} changed, "
          f"{unchecked} without an expected verdict, {errors} unreadable, {plugin_bugs} protocol error(s), "
          f"{broken} harness error(s)"
          + (f", {not_run} skipped (backend not available here)" if not_run else "")
          + (f", {len(problems)} seed manifest problem(s)" if problems else "")
          + (f"; skipped {len(skipped)} file(s) that are not inputs (the run's records, logs, reports, "
             "other harnesses' corpora, raw inputs of no known protocol)" if skipped else "")
          + ("; PASS" if rc == EXIT_CLEAN else f"; FAIL (exit {rc})"))
    return rc
