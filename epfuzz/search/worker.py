"""One job of `epfuzz fuzz --jobs N` on the guided engine: `python -m epfuzz.search.worker JSON`.

Started by epfuzz.campaign_guided with the job's arguments as one JSON word; it fuzzes into the
shared run folder (epfuzz.campaign_guided.run_worker) and exits 0, or 2 when the disk was full.
"""

from __future__ import annotations

import json
import logging
import sys


def main(argv: list[str]) -> int:
    from epfuzz import log as elog
    from epfuzz.campaign_guided import run_worker
    from epfuzz.errors import EpfuzzError

    elog.configure(json_lines=False, level=logging.WARNING if elog.quiet() else logging.INFO)
    try:
        return run_worker(json.loads(argv[0]))
    except EpfuzzError as e:
        sys.stderr.write(f"epfuzz: {e}\n")
        return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
