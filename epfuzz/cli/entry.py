"""The `epfuzz` command's first lines: start-up failures in one line, not a traceback (issue 29).

Everything else imports numpy, structlog and the emulator; under a tight memory limit
(`ulimit -v`, a container's cgroup) that import fails with a MemoryError or an ImportError
("failed to map segment"), and a SIGINT during it was a full traceback. Both happen before
`epfuzz.cli.commands.main` can catch anything, so this module imports only the standard library and
imports the rest inside a `try`. It is the console script's target and `python -m epfuzz`'s.
"""

from __future__ import annotations

import os
import signal
import sys

#: exit codes, as epfuzz.cli.commands documents them (not imported from there: importing it is what may fail)
EXIT_INPUT = 2
#: address space (ulimit -v) below which numpy's OpenBLAS cannot map its buffer at import and calls
#: exit(1) itself, which no Python code can catch: refused first, in one line (measured: 100 MB fails,
#: 130 MB starts; a run needs more)
MIN_ADDRESS_SPACE = 192 << 20


def _address_space_too_small() -> int | None:
    """The soft RLIMIT_AS in bytes when it is below MIN_ADDRESS_SPACE, else None."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    return soft if soft != resource.RLIM_INFINITY and soft < MIN_ADDRESS_SPACE else None


def _first_line(e: BaseException) -> str:
    """The line of an import error that says what failed (numpy's starts with a blank line and a
    page of advice; its last line, "Original error was: ...", is the cause)."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return next((x for x in lines if x.startswith("Original error was")), lines[0] if lines else "")


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS sizes a buffer per core at import (tens of MB each) for matrix code epfuzz
    # never runs; one thread is what a memory-capped CI job can afford
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    small = _address_space_too_small()
    if small is not None:
        print(f"epfuzz: cannot start: the address-space limit (ulimit -v) is {small >> 20} MiB; epfuzz needs at "
              f"least {MIN_ADDRESS_SPACE >> 20} MiB", file=sys.stderr)
        return EXIT_INPUT
    # a SIGINT during the imports is held until they end: raised inside numpy's C import it came out as an
    # ImportError ("could not import module datetime"), a start-up failure it was not
    held: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        from epfuzz.cli.commands import main as cli_main
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except (MemoryError, ImportError, OSError) as e:
        print(f"epfuzz: cannot start: {type(e).__name__}: {_first_line(e)} (out of memory? check ulimit -v and the "
              "container's memory limit)", file=sys.stderr)
        return EXIT_INPUT
    finally:
        signal.signal(signal.SIGINT, old)
    if held:
        return 128 + signal.SIGINT
    from epfuzz.infra.proc import tune_gc

    tune_gc()  # after the imports: what they made is frozen out of the collector's walks
    try:
        return cli_main(argv)
    except KeyboardInterrupt:  # between the parser and the command's own handler
        return 128 + signal.SIGINT
    except MemoryError:
        print("epfuzz: out of memory (check ulimit -v and the container's memory limit)", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
