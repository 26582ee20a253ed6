"""What a campaign prints names where its findings replay, and a guest's console echo stops at its summary."""

from __future__ import annotations

from pathlib import Path

from epfuzz.campaign.common import Summary
from epfuzz.campaign.guest import GUEST_RUN, _guest_summary_starts
from epfuzz.guest import vm
from epfuzz.triage.findings import Bug


def _summary(backend: str, run: Path) -> Summary:
    bug = Bug("dispatch_any|spec|stale-accept|in-order|kind=faa", run / "finding-dispatch_any-0123.json",
              "dispatch_any: accepted ...", False)
    bug.raw.append(bug.case)
    return Summary("dispatch_any_fuzzer", run, 10.0, 100, 5, 3, 0, [("sig", bug.case, "")], [bug], backend=backend)


def test_a_verbs_campaign_replay_line_names_the_backend(tmp_path):
    text = _summary("verbs", tmp_path).render()
    assert [x.strip() for x in text.splitlines() if "replay:" in x][0].endswith(
        f"run {tmp_path.resolve()}/finding-dispatch_any-0123.json --backend verbs")
    assert "--backend" not in _summary("sim", tmp_path).render()  # sim is the default: no flag to paste


def test_the_guest_echo_goes_to_stderr_names_host_paths_and_stops_at_the_guests_findings(capsys, tmp_path):
    echo = vm.echo_until(_guest_summary_starts, (GUEST_RUN, str(tmp_path)))
    for line in [f'{{"event": "fuzz.start", "run_dir": "{GUEST_RUN}"}}', '{"event": "fuzz.progress"}',
                 f'{{"event": "fuzz.bug", "replay": "/usr/bin/python3 -m epfuzz run {GUEST_RUN}/finding-x.json"}}',
                 '{"event": "fuzz.summary"}', "epfuzz fuzz x: 15 s, 98 execs", f"run folder: {GUEST_RUN}"]:
        echo(line)
    shown = capsys.readouterr()
    assert shown.out == ""
    assert shown.err.splitlines() == [f'{{"event": "fuzz.start", "run_dir": "{tmp_path}"}}',
                                      '{"event": "fuzz.progress"}']
