"""Child processes that end with their parent, and signals that end a command with its cleanup.

A `fuzz` killed by SIGKILL left its libFuzzer jobs writing into the run folder for seconds; a
`corpus prune` stopped by SIGTERM left its libFuzzer merge child running and a full copy of the
corpus beside it (issue 29.3, 29.5). Two rules fix both: every child is started with
`die_with_parent` (Linux PR_SET_PDEATHSIG: the kernel sends it SIGKILL when its parent dies,
however the parent died), and a command that holds temporary state runs under `stop_on_signals`,
which turns SIGINT, SIGTERM and SIGHUP into an exception (`Stopped`, raised at the block's next
safe point) so `finally` blocks clean up and end the children.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import subprocess
import threading
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1
#: the collector's thresholds in epfuzz's own processes (`tune_gc`): CPython's (700, 10, 10) ran a young
#: collection every few hundred microseconds of search, and each older one walked every cached built form
#: and corpus entry (issue 31: 4-9% of a guided or replay profile in gc_collect_main)
GC_THRESHOLD = (10000, 50, 50)
_libc: ctypes.CDLL | None = None


class Stopped(BaseException):  # noqa: N818 - like KeyboardInterrupt: not an error, a request to stop
    """A signal asked the command to stop; `finally` blocks run, the CLI exits 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


def tune_gc() -> None:
    """Set the cyclic collector for a long search in a process epfuzz owns (the CLI, a harness, a job).

    A process-wide setting, so a library call never makes it: only the entry points call this. What the
    imports made is frozen out of every later collection (`gc.freeze`: modules, tables, the compiled
    decoder), and young collections run after 10,000 allocations instead of 700. Nothing is left
    uncollected: cycles are still found, in fewer and larger sweeps; a run's memory grows by at most the
    garbage of 10,000 allocations between them."""
    if gc.get_threshold() == GC_THRESHOLD:  # once per process: a second freeze would keep what died since
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def die_with_parent() -> None:
    """`preexec_fn` of a child: the kernel kills it (SIGKILL) when the parent dies. Only async-
    signal-safe work happens here (ctypes calls into an already-loaded libc)."""
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _load_libc() -> None:
    global _libc
    with contextlib.suppress(OSError, AttributeError):
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl  # noqa: B018 - resolve the symbol now, in the parent, not in the forked child


_load_libc()


def set_death_signal(parent: int) -> None:
    """The same for this process, when it is the child of `parent` (a harness started by a
    campaign): if that parent is gone already, end now rather than run on orphaned."""
    die_with_parent()
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)


def end(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float = 3.0) -> None:
    """Stop a child started with `start_new_session=True` and its own children: SIGTERM to its
    process group, then SIGKILL after `grace` seconds; reaped either way."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Within the block, `signals` are recorded in the main thread (elsewhere: no change), and the
    block's wait loops (`wait`) and stage boundaries (`check_stopped`) raise `Stopped` for them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stopped(signum: int, _frame: object) -> None:
        # recorded, raised by `check_stopped` at the block's next safe point: raised here it could land in a
        # spot that ignores exceptions (Popen's at-fork hooks), printed as "Exception ignored" and lost
        _pending.append(signum)

    old = {s: signal.signal(s, raise_stopped) for s in signals}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _pending.clear()


_pending: list[int] = []


def check_stopped() -> None:
    """Raise `Stopped` now if a signal asked the `stop_on_signals` block to stop."""
    if _pending:
        raise Stopped(_pending[0])


def wait(p: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float, step: float = 0.2) -> int | None:
    """`p.wait(timeout)` in steps, checking for a lost stop request between them; None on timeout."""
    waited = 0.0
    while waited < timeout:
        check_stopped()
        try:
            return p.wait(timeout=step)
        except subprocess.TimeoutExpired:
            waited += step
    return None
