"""`epfuzz fuzz --backend verbs` on a host without RDMA: the whole campaign runs in the soft-RoCE guest.

The run folder lives in the guest's tmpfs while the campaign runs and is copied to the host's at
the end (libFuzzer writes every new corpus input and the monitor polls the folder, and each of
those is a 9p round trip of 10-60 ms under TCG); the host then reads it back and prints its own
summary, with host paths and replay lines that name the backend.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

from epfuzz.campaign.common import RUNS, Summary, fresh_run_dir, plugin_name, read_findings
from epfuzz.continuous.targets import harness_name
from epfuzz.guest import vm, vm_tree
from epfuzz.infra.log import get_logger

GUEST_RUN = "/tmp/run"   # a guest campaign's run folder (tmpfs), copied to the host's at the end


def _guest_summary_starts(line: str) -> bool:
    """The guest's report of its findings (log events, then the summary): the host reports its own."""
    return line.startswith("epfuzz fuzz ") or any(f'"event": "fuzz.{e}"' in line for e in ("finding", "bug", "summary"))


def fuzz_in_guest(harness: str | None, protocol: str | None, seconds: int, backend: str, preset: str,
                  extra: list[str] | None, run_dir: Path | None, seed: int | None) -> Summary:
    name = harness_name(harness) if harness else plugin_name(protocol or "")
    # a plug-in's source goes along (the guest has the project alone), and the campaign runs in its folder as
    # the host's did, so its libFuzzer jobs find it too; one that cannot go is refused before the boot
    files, enter = vm_tree.plugin_shipment(protocol or "")
    run_dir = fresh_run_dir(run_dir, RUNS / f"{name}-{backend}-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ["python3", "-P", "-m", "epfuzz", "--log-json", "fuzz", *([harness] if harness else []), "--backend",
            backend, "--time", str(seconds), "--preset", preset, "--run-dir", GUEST_RUN]
    if protocol:
        args += ["--protocol", protocol]
    if seed is not None:
        args += ["--seed", str(seed)]
    if extra:
        args += ["--", *extra]
    start = time.monotonic()
    # piped, so the guest's output is no terminal (its progress is log lines), with the exit code kept
    command = (f"{enter}{{ {shlex.join(args)}; echo $? >/tmp/fuzz.rc; }} 2>&1 | cat; rc=$(cat /tmp/fuzz.rc); "
               f"cp -r {GUEST_RUN}/. /mnt/out/; exit $rc")
    echo = vm.echo_until(_guest_summary_starts, (GUEST_RUN, str(run_dir)))
    _, lines = vm.run(command, timeout=seconds + 600, out_dir=run_dir, stream=echo, files=files)
    errors = [int(m.group(1)) for x in lines if (m := re.search(r"(\d+) harness error\(s\)", x))]
    rows = (run_dir / "progress.csv").read_text().splitlines()[1:] if (run_dir / "progress.csv").exists() else []
    last = rows[-1].split(",") if rows else ["0"] * 7
    findings, grouping = read_findings(run_dir, backend, get_logger(harness=name, backend=backend, preset=preset),
                                   grouped_at=GUEST_RUN)
    return Summary(name, run_dir, time.monotonic() - start, int(last[1]), int(last[3]), int(last[4]),
                   errors[-1] if errors else 1, findings, grouping.bugs, left=grouping.left, why=grouping.why,
                   backend=backend)
