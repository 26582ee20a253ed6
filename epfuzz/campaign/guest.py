"""`epfuzz fuzz --backend verbs` on a host without RDMA: the whole campaign runs in the soft-RoCE guest.

The run folder lives in the guest's tmpfs while the campaign runs and is copied to the host's at
the end (libFuzzer writes every new corpus input and the monitor polls the folder, and each of
those is a 9p round trip of 10-60 ms under TCG); the host then reads it back and prints its own
summary, with host paths and replay lines that name the backend.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import time
from pathlib import Path

from epfuzz.campaign.common import RUNS, Summary, plugin_name, read_findings
from epfuzz.campaign.rundir import fresh_run_dir
from epfuzz.continuous.targets import harness_name
from epfuzz.guest import vm, vm_tree
from epfuzz.infra.errors import EpfuzzError, HarnessError, ProtocolError
from epfuzz.infra.log import get_logger

GUEST_RUN = "/tmp/run"   # a guest campaign's run folder (tmpfs), copied to the host's at the end


def _guest_summary_starts(line: str) -> bool:
    """The guest's report of its findings (log events, then the summary): the host reports its own."""
    return line.startswith("epfuzz fuzz ") or any(f'"event": "fuzz.{e}"' in line for e in ("finding", "bug", "summary"))


#: how the guest's CLI begins the error line of these kinds (its exit 3); any other error is exit 2
_KINDS = (("protocol error (a bug in the protocol plug-in): ", ProtocolError),
          ("harness error (a bug in epfuzz): ", HarnessError))


def _stopped_before_writing(rc: int, lines: list[str]) -> EpfuzzError:
    """The error of a guest campaign that wrote nothing, in the guest's words (its --log-json error event) and
    of its kind: a plug-in the guest could not import (one from the user's folder, which the guest has not)
    ended the run there after the host's pre-flight passed, and the host printed a summary of 0 execs, "1
    harness error", for a run folder holding only its claim, which the retry was then refused."""
    said = ""
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "error":
                said = str(event.get("message", ""))
    what = f"the campaign in the guest stopped before writing anything (exit {rc})"
    for prefix, kind in _KINDS:
        if said.startswith(prefix):
            return kind(f"{what}: {said.removeprefix(prefix)}")
    return EpfuzzError(f"{what}: {said}" if said else f"{what}; the guest's lines above say why")


def fuzz_in_guest(harness: str | None, protocol: str | None, seconds: int, backend: str, preset: str,
                  extra: list[str] | None, run_dir: Path | None, seed: int | None) -> Summary:
    name = harness_name(harness) if harness else plugin_name(protocol or "")
    # a plug-in's source goes along (the guest has the project alone), and the campaign runs in its folder as
    # the host's did, so its libFuzzer jobs find it too; one that cannot go is refused before the boot
    files, enter = vm_tree.plugin_shipment(protocol or "")
    claim = fresh_run_dir(run_dir, RUNS / f"{name}-{backend}-{time.strftime('%Y%m%d-%H%M%S')}")
    with claim.released_on_failure() as run_dir:  # nothing written: the folder is given back
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
        rc, lines = vm.run(command, timeout=seconds + 600, out_dir=run_dir, stream=echo, files=files)
        if rc != 0 and claim.untouched():  # raised: the claim is given back, and a retry may name the folder
            raise _stopped_before_writing(rc, lines)
        errors = [int(m.group(1)) for x in lines if (m := re.search(r"(\d+) harness error\(s\)", x))]
        rows = (run_dir / "progress.csv").read_text().splitlines()[1:] if (run_dir / "progress.csv").exists() else []
        last = rows[-1].split(",") if rows else ["0"] * 7
        findings, grouping = read_findings(run_dir, backend, get_logger(harness=name, backend=backend, preset=preset),
                                           grouped_at=GUEST_RUN)
        return Summary(name, run_dir, time.monotonic() - start, int(last[1]), int(last[3]), int(last[4]),
                       errors[-1] if errors else 1, findings, grouping.bugs, left=grouping.left, why=grouping.why,
                       backend=backend)
