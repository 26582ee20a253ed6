"""One job of `epfuzz fuzz --jobs N` on the guided engine: `python -m epfuzz.campaign.worker JSON`.

Started by epfuzz.campaign.guided with the job's arguments as one JSON word; it fuzzes into the
shared run folder (epfuzz.campaign.guided.run_worker) and exits 0, or 2 when the disk was full.
"""

from __future__ import annotations

import json
import logging
import sys


def main(argv: list[str]) -> int:
    from epfuzz.campaign.guided import run_worker
    from epfuzz.infra import log as elog
    from epfuzz.infra.errors import EpfuzzError

    elog.configure(json_lines=False, level=logging.WARNING if elog.quiet() else logging.INFO)
    try:
        args = json.loads(argv[0])
        if not isinstance(args, dict) or not {"run_dir", "job", "name", "protocol", "preset", "seed", "seconds",
                                               "max_execs", "feedback", "moves"} <= set(args):
            raise ValueError("not the JSON object of a job's arguments")
    except (IndexError, ValueError) as e:  # started by hand: not by epfuzz.campaign.guided_jobs
        sys.stderr.write(f"epfuzz: worker: bad job argument ({e}); usage: python -m epfuzz.campaign.worker JSON\n")
        return 2
    from epfuzz.infra.proc import tune_gc

    tune_gc()
    try:
        return run_worker(args)
    except EpfuzzError as e:
        sys.stderr.write(f"epfuzz: {e}\n")
        return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
