"""Limits on plug-in code run in this process, and hard deadlines (issue 29.4, 29.5, 29.8).

A plug-in's receiver that loops forever hung preflight, replay and the summary's grouping; one
that allocates without end took the machine; one that calls `sys.exit(0)` or `os._exit(0)`
ended a failing `replay --strict` with exit 0. The emulator bounds its own work in steps (packets,
TLPs, polls), but a loop *inside* one call of the user's code is no step of it, so the limits
here are on that call:

- **time**: one call into plug-in code (the outermost plug-in frame on the stack) that runs
  for more than `call_cpu_s` seconds of CPU or `call_wall_s` of wall time raises `OverLimit`
  ("hang") inside it. A legitimate call takes micro- to milliseconds: the bound is about four
  orders of magnitude above the slowest, so a loaded machine does not change the verdict, and
  an endless loop is past any bound.
- **memory**: while plug-in code runs, a resident set above `memory_mb` raises `OverLimit`
  ("oom") inside it.
- **exits**: `os._exit` called from plug-in code raises `SystemExit` instead, as `sys.exit`
  does, which callers catch as a protocol error (a bug in the plug-in's code, exit 3).

A ticker (SIGALRM, every `TICK_S` of wall time, main thread only) checks them; `watch()`
installs it for the CLI. The same ticker ends `deadline()` blocks: a campaign's grouping, cut off
at its documented budget however long one minimization would take.

Not in this process (libFuzzer jobs): the jobs get libFuzzer's own `-timeout` and
`-rss_limit_mb` (`job_flags`), which write a `timeout-*` or `oom-*` artifact and end the job.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

TICK_S = 0.25


def _env_float(name: str, default: float) -> float:
    try:
        v = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return v if v > 0 else default


@dataclass(frozen=True)
class Limits:
    call_cpu_s: float       # CPU seconds one call into plug-in code may take
    call_wall_s: float      # wall seconds (a plug-in that blocks: a sleep, a FIFO with no writer)
    memory_mb: float        # resident set while plug-in code runs; also each libFuzzer job's RSS limit

    @staticmethod
    def from_env() -> Limits:
        """EPFUZZ_CALL_LIMIT_S (default 10; wall time gets 3x) and EPFUZZ_MEMORY_LIMIT_MB (default 2048,
        libFuzzer's own default -rss_limit_mb)."""
        cpu = _env_float("EPFUZZ_CALL_LIMIT_S", 10.0)
        return Limits(cpu, 3 * cpu, _env_float("EPFUZZ_MEMORY_LIMIT_MB", 2048.0))


class OverLimit(BaseException):  # noqa: N818 - a BaseException: a plug-in's `except Exception` must not eat it
    """Plug-in code ran past a limit: kind "hang" (time) or "oom" (memory)."""

    def __init__(self, kind: str, detail: str, where: str = "") -> None:
        super().__init__(f"{kind}: {detail}{where}")
        self.kind, self.detail, self.where = kind, detail, where


class DeadlinePassed(BaseException):  # noqa: N818
    """A `deadline()` block ran out of time (or a signal asked it to end now)."""


class _Ticker:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.watched: tuple[FrameType, float, float] | None = None   # (outermost plug-in frame, wall, cpu)
        self.raised = 0             # OverLimits raised into the watched call that it swallowed
        self.deadlines: list[float] = []
        self.cache: dict[str, bool] = {}
        self.cache_key: tuple[int, int] = (-1, -1)

    def is_plugin(self, filename: str) -> bool:
        from epfuzz.protocols import REGISTRY

        key = (len(REGISTRY.plugin_files), len(REGISTRY.plugin_roots))
        if key != self.cache_key:
            self.cache, self.cache_key = {}, key
        hit = self.cache.get(filename)
        if hit is None:
            hit = self.cache[filename] = REGISTRY.is_plugin_file(filename)
        return hit

    def outer_plugin_frame(self, frame: FrameType | None) -> FrameType | None:
        from epfuzz.protocols import REGISTRY

        if not REGISTRY.plugin_files and not REGISTRY.plugin_roots:
            return None
        outer = None
        while frame is not None:
            if self.is_plugin(frame.f_code.co_filename):
                outer = frame
            frame = frame.f_back
        return outer

    def tick(self, _signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.deadlines and now >= min(self.deadlines):
            self.deadlines = [d for d in self.deadlines if d > now]
            raise DeadlinePassed()
        outer = self.outer_plugin_frame(frame)
        if outer is None:
            self.watched, self.raised = None, 0
            return
        cpu = time.process_time()
        if self.watched is None or self.watched[0] is not outer:
            self.watched, self.raised = (outer, now, cpu), 0
        _, wall0, cpu0 = self.watched
        lim = self.limits
        where = f" (at {frame.f_code.co_filename}:{frame.f_lineno}, in {frame.f_code.co_name})" if frame else ""
        if cpu - cpu0 > lim.call_cpu_s or now - wall0 > lim.call_wall_s:
            self._raise("hang", f"one call into the plug-in ran past the per-call limit ({lim.call_cpu_s:g} s of CPU "
                                f"or {lim.call_wall_s:g} s of wall time: EPFUZZ_CALL_LIMIT_S)", where)
        rss = rss_mb()
        if rss > lim.memory_mb:
            self._raise("oom", f"the plug-in's code ran with {rss:.0f} MB resident, over the {lim.memory_mb:g} MB "
                               "limit (EPFUZZ_MEMORY_LIMIT_MB)", where)

    def _raise(self, kind: str, detail: str, where: str) -> None:
        self.raised += 1
        if self.raised > 40:  # ten seconds of OverLimits swallowed (a bare `except:` in a loop): no way to stop it
            os.write(2, f"epfuzz: {kind}: {detail}{where}; the plug-in catches every exception and cannot be "
                        "stopped: ending epfuzz\n".encode())
            _real_exit(1)
        raise OverLimit(kind, detail, where)


_ticker: _Ticker | None = None
_real_exit = os._exit


def rss_mb() -> float:
    """This process's resident set in MB (/proc/self/statm; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return 0.0


def _guarded_exit(code: int) -> Any:
    """`os._exit` while the ticker runs: from plug-in code, an `OverLimit("exit")` instead."""
    import sys

    frame = sys._getframe(1)
    if _ticker is not None and frame is not None and _ticker.is_plugin(frame.f_code.co_filename):
        e = SystemExit(code)
        e.via = "os._exit"  # type: ignore[attr-defined]
        raise e
    _real_exit(code)


@contextlib.contextmanager
def watch(limits: Limits | None = None) -> Iterator[None]:
    """Install the ticker for the block (main thread only; elsewhere a no-op)."""
    global _ticker
    if _ticker is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    _ticker = _Ticker(limits or Limits.from_env())
    old = signal.signal(signal.SIGALRM, _ticker.tick)
    signal.siginterrupt(signal.SIGALRM, False)  # SA_RESTART: a tick never fails a C extension's read()
    old_timer = signal.setitimer(signal.ITIMER_REAL, TICK_S, TICK_S)
    os._exit = _guarded_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_timer[0]:
            signal.setitimer(signal.ITIMER_REAL, *old_timer)
        os._exit = _real_exit
        _ticker = None


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise `DeadlinePassed` in the block once `seconds` have passed (needs `watch()`; without it
    the block runs unbounded, as before)."""
    if _ticker is None:
        yield
        return
    at = time.monotonic() + seconds
    _ticker.deadlines.append(at)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _ticker.deadlines.remove(at)


def input_timeout(extra: list[str], backend: str, seconds: float, limits: Limits | None = None) -> int:
    """libFuzzer's `-timeout` for a campaign's jobs (one input's wall time), unless the user gave one
    after `--`: a fifth of the campaign, 2 s at least and the per-call wall limit at most, on sim
    (which runs an input in milliseconds: 2 s is three orders of magnitude above the slowest);
    300 s on a device backend. A stuck input is then reported (timeout-*) before the campaign's
    own bound ends its job (campaign.STOP_GRACE_S after it)."""
    for a in extra:
        if a.startswith("-timeout="):
            try:
                return max(0, int(a.split("=", 1)[1]))
            except ValueError:
                return 0
    lim = limits or Limits.from_env()
    if backend != "sim":
        return 300
    return int(min(max(2, seconds // 5), max(2, lim.call_wall_s)))


def job_flags(extra: list[str], backend: str, seconds: float, limits: Limits | None = None) -> list[str]:
    """The per-input limits libFuzzer enforces in a job: `-timeout` (input_timeout) and `-rss_limit_mb`,
    each unless the user gave their own after `--`."""
    lim = limits or Limits.from_env()
    out = []
    if not any(a.startswith("-timeout=") for a in extra):
        out.append(f"-timeout={input_timeout(extra, backend, seconds, lim)}")
    if not any(a.startswith("-rss_limit_mb=") for a in extra):
        out.append(f"-rss_limit_mb={int(lim.memory_mb)}")
    return out


def within(seconds: float, work: Callable[[], T], fallback: Callable[[], T]) -> T:
    """`work()`, cut off after `seconds` (a `deadline`) for `fallback()` instead: a campaign's
    grouping minimizes findings until its budget, then the rest are grouped by raw signature; one
    minimization in progress no longer runs on past the budget (29.5, 29.8)."""
    try:
        with deadline(seconds):
            return work()
    except DeadlinePassed:
        return fallback()
