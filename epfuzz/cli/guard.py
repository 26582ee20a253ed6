"""What the CLI trusts and what it says when a command fails in a way nobody raised on purpose.

`trust`: the plug-ins a command may import (issue 29.1). `unexpected`: one line and the exit
code for an exception no command caught: the plug-in's code (exit 3, its line named), a full
disk or a file the system refused (exit 2), or a bug in epfuzz (exit 3).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from epfuzz.infra import log as elog
from epfuzz.infra.diskspace import NoSpace, is_no_room
from epfuzz.protocols import REGISTRY

EXIT_CLEAN, EXIT_FINDING, EXIT_INPUT, EXIT_HARNESS = 0, 1, 2, 3
#: the commands that never write a file: a path the system refused them was one they could not read
READ_ONLY = frozenset({"run", "replay", "explore", "list", "safety-table"})


def trust(a: argparse.Namespace) -> None:
    """The plug-ins this command may import: the one `--protocol` names, and modules in the
    `--allow-plugins` paths; a case's `protocol` field alone never imports code (issue 29.1)."""
    from epfuzz.protocols.trust import check_spec

    spec = getattr(a, "protocol", None)
    if spec and ":" in spec:
        check_spec(spec)
        REGISTRY.policy.named.add(spec)
    REGISTRY.policy.offers_allow = hasattr(a, "allow_plugins")
    for path in getattr(a, "allow_plugins", None) or []:
        REGISTRY.policy.allow_path(Path(path))


def unexpected(e: Exception, debug: bool, command: str = "") -> int:
    """An exception nobody raised on purpose: the user's plug-in code (exit 3, its line named),
    a file the system refused (exit 2: not a bug anywhere), or a bug in epfuzz (exit 3)."""
    if debug:
        traceback.print_exc()
    line = str(e).splitlines()[0] if str(e) else ""
    where = REGISTRY.where(e)
    if isinstance(e, MemoryError):  # a plug-in's allocation is a finding (oom); epfuzz's, the machine's limit
        if where:
            print(f"epfuzz: oom: the plug-in ran out of memory{where} (a finding of kind oom)", file=sys.stderr)
            return EXIT_FINDING
        print("epfuzz: out of memory (check ulimit -v and the container's memory limit)", file=sys.stderr)
        return EXIT_INPUT
    if where:
        print(f"epfuzz: protocol error (a bug in the protocol plug-in): {type(e).__name__}: {line}{where}",
              file=sys.stderr)
        return EXIT_HARNESS
    if is_no_room(e):
        print(f"epfuzz: {NoSpace(e.filename or '?', e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_INPUT
    if isinstance(e, OSError) and e.filename:
        how = "read" if command in READ_ONLY else "write or read"  # replay was said to write (pip trial item 11)
        elog.error_line(f"cannot {how} {e.filename}: {e.strerror or line}", e.filename)
        return EXIT_INPUT
    print(f"epfuzz: unexpected error (a bug in epfuzz): {type(e).__name__}: {line}"
          + ("" if debug else " (--debug or EPFUZZ_DEBUG=1 shows the traceback)"), file=sys.stderr)
    return EXIT_HARNESS
