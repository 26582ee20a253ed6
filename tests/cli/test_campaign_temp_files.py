"""A job killed mid-write leaves no temp file in the run folder (issue 16's "every written file is whole").

libFuzzer's SIGINT handler ends a job with _Exit, so write_atomic's clean-up never runs in that job:
the campaign, which outlives its jobs, removes what they left half-written."""

from __future__ import annotations

import sys

from epfuzz.campaign.libfuzzer import _Jobs, _monitor, _summarize
from epfuzz.infra.log import get_logger

# a job that starts write_atomic (the temp file) and dies before the rename, as a _Exit would leave it
_DIES_MID_WRITE = ("import os, sys; d = sys.argv[1]; open(os.path.join(d, '.finding-x-0123.json.k2j4'), 'w')"
                   ".write('{\"name\": '); os._exit(0)")


def test_temp_file_of_a_job_stopped_mid_write_is_removed(tmp_path):
    run_dir, work = tmp_path / "run", tmp_path / "work"
    run_dir.mkdir()
    work.mkdir()
    (run_dir / "keep.txt").write_text("a user's file")
    jobs = _Jobs([sys.executable, "-c", _DIES_MID_WRITE, str(run_dir)], [], [], 1, 5, run_dir, None,
                 get_logger(harness="t"))
    jobs.launch(0)
    _monitor(jobs, 5, False)
    summary = _summarize("t", jobs, work, "sim", jobs.log)
    assert not list(run_dir.rglob(".finding-*"))
    assert (run_dir / "keep.txt").read_text() == "a user's file"
    assert summary.findings == []


def test_every_replay_line_a_verbs_campaign_logs_names_verbs(tmp_path, capsys):
    """A replay line pasted from a verbs campaign's log ran on sim. (Each raw finding's own line is the job's,
    relayed as the harness wrote it, with its backend: tests/search/test_console.py.)"""
    import json
    import logging
    import shutil

    from epfuzz.continuous.targets import corpus_root
    from epfuzz.infra.log import configure

    run_dir, work = tmp_path / "run", tmp_path / "work"
    run_dir.mkdir()
    work.mkdir()
    shutil.copy(corpus_root() / "regressions" / "cross-qp-mlx5-default.json", run_dir / "finding-x.json")
    configure(json_lines=True, level=logging.DEBUG)
    try:
        jobs = _Jobs([sys.executable, "-c", "pass"], [], [], 1, 5, run_dir, None, get_logger(harness="t"))
        jobs.launch(0)
        _monitor(jobs, 5, False)
        _summarize("t", jobs, work, "verbs", jobs.log)
    finally:
        configure()
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    replays = {x["event"]: x["replay"] for x in lines if "replay" in x}
    assert set(replays) == {"fuzz.bug"}, lines
    assert all(r.endswith("--backend verbs") for r in replays.values()), replays
