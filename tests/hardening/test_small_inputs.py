"""The smaller points of issue 29: each bad input one line, exit 2 where it is the input's fault."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.hardening import bad_plugins
from tests.hardening.util import EPFUZZ, ROOT, epfuzz, one_line_error

CASE = ROOT / "corpus/regressions/deepep661-c2b.json"


def _run_folder(tmp: Path) -> Path:
    run = tmp / "run"
    run.mkdir()
    (run / "progress.csv").write_text("seconds,execs,exec_per_s,cov,corpus,findings,rss_mb\n1.0,10,10,5,2,0,90\n"
                                      "2.0,20,10,6,3,1,9")
    (run / "bugs.csv").write_text('root_cause,count,case,minimized,raw\n"a|b",3,bugs/x.json,True,f1\n"c|d",')
    return run


def test_report_reads_a_run_folder_cut_short(tmp_path):
    _run_folder(tmp_path)
    p = epfuzz(tmp_path, "report", "run", "--no-png")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "skipped 1 row(s)" in p.stderr and "| `a\\|b` | 3 | x.json |" in p.stdout, p.stdout + p.stderr


def test_report_of_a_file_that_is_no_progress_csv_is_one_line(tmp_path):
    run = _run_folder(tmp_path)
    (run / "progress.csv").write_bytes(b"\xff\xfe garbage\x00\n1,2\n")
    p = epfuzz(tmp_path, "report", "run", "--no-png")
    assert p.returncode == 2 and one_line_error(p) and "not a progress.csv" in p.stderr, p.stderr


@pytest.mark.parametrize("field,value", [("input", 5), ("expect", ["finding"]), ("name", {}), ("backend", 1),
                                         ("note", 2.5), ("signature", None)])
def test_a_case_field_of_the_wrong_type_is_one_line(tmp_path, field, value):
    d = json.loads(CASE.read_text())
    d[field] = value
    (tmp_path / "c.json").write_text(json.dumps(d))
    for cmd in (["run", "c.json"], ["replay", "c.json"]):
        p = epfuzz(tmp_path, *cmd)
        assert p.returncode == 2 and one_line_error(p) and repr(field) in p.stderr, (cmd, p.stderr)


def test_explain_plot_refuses_a_non_picture_and_names_what_it_writes(tmp_path):
    p = epfuzz(tmp_path, "explain", str(CASE), "--plot", "x.txt")
    assert p.returncode == 2 and one_line_error(p) and "x.txt" in p.stderr, p.stderr
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed")
    (tmp_path / "pics").mkdir()
    p = epfuzz(tmp_path, "explain", str(CASE), "--plot", "pics")
    said = [x.split(": ", 1)[1] for x in p.stdout.splitlines() if x.startswith("picture: ")]
    assert p.returncode == 1 and said == ["pics/deepep661-c2b-timeline.png"], p.stdout
    assert (tmp_path / said[0]).is_file()
    p = epfuzz(tmp_path, "explain", str(CASE), "--plot", "noext")
    assert "picture: noext.png" in p.stdout and (tmp_path / "noext.png").is_file()


def test_a_fifo_no_one_writes_to_is_refused_not_waited_on_forever(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    p = epfuzz(tmp_path, "run", "f", "--protocol", "deepep_v2_dispatch", timeout=120)
    assert p.returncode == 2 and one_line_error(p) and "FIFO" in p.stderr, p.stderr


def test_a_fifo_with_a_writer_is_read(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    p = subprocess.Popen([EPFUZZ, "run", str(fifo)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.5)
    with fifo.open("wb") as f:
        f.write(CASE.read_bytes())
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "deepep661-c2b: finding" in out, err


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to "
                    "run as an unprivileged user (root reads every folder)")
def test_an_unreadable_folder_is_said_not_no_files_found():
    base = Path(tempfile.mkdtemp(prefix="epfuzz-unreadable-"))  # pytest's tmp_path is 0700: nobody cannot enter
    try:
        base.chmod(0o755)
        sub = base / "cases" / "sub"
        sub.mkdir(parents=True)
        (base / "cases").chmod(0o755)
        shutil.copy(CASE, sub)
        sub.chmod(0o000)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", EPFUZZ, "replay",
                            str(base / "cases")], capture_output=True, text=True, timeout=120, cwd="/")
    finally:
        (base / "cases" / "sub").chmod(0o755)
        shutil.rmtree(base)
    assert p.returncode == 2 and "cannot read the folder" in p.stderr and "no files found" not in p.stderr, p.stderr


def test_minimize_default_name_has_no_colon(tmp_path):
    bad_plugins.write(tmp_path)
    case = bad_plugins.regression_case(tmp_path, ROOT)
    p = epfuzz(tmp_path, "minimize", str(case), "--protocol", "mb:Bad", env={"BAD": "none"}, timeout=300)
    written = list((tmp_path / "runs" / "minimized").glob("*.json"))
    assert p.returncode == 1 and len(written) == 1 and ":" not in written[0].name, (p.stdout, p.stderr)


def test_run_honours_the_case_backend_as_replay_does(tmp_path):
    d = json.loads(CASE.read_text())
    d["backend"] = "cuda"
    (tmp_path / "c.json").write_text(json.dumps(d))
    run, replay = epfuzz(tmp_path, "run", "c.json"), epfuzz(tmp_path, "replay", "c.json")
    ok, _ = __import__("epfuzz.backends", fromlist=["get_backend"]).get_backend("cuda", require=False).availability()
    if ok:
        pytest.skip("cuda can run here: nothing to refuse")
    assert run.returncode == 2 and "backend cuda cannot run here" in run.stderr, run.stderr
    # replay goes on past a case it cannot run here: one line saying why, and a pass unless --strict (cf trial 5)
    assert replay.returncode == 0 and "skipped 1 case(s): backend cuda not available here: " in replay.stdout
    assert epfuzz(tmp_path, "replay", "--strict", "c.json").returncode == 1


def test_run_and_replay_agree_a_receiver_exception_is_the_plugins(tmp_path):
    bad_plugins.write(tmp_path)
    d = {"scenario": {"protocol": "mb:Bad"}, "expect": "clean"}
    (tmp_path / "c.json").write_text(json.dumps(d))
    env = {"BAD": "raise"}
    run = epfuzz(tmp_path, "run", "c.json", "--protocol", "mb:Bad", env=env)
    replay = epfuzz(tmp_path, "replay", "c.json", "--protocol", "mb:Bad", env=env)
    for p in (run, replay):
        assert p.returncode == 3 and "protocol error (a bug in the protocol plug-in)" in p.stderr, p.stderr
        assert "mb.py" in p.stderr and "a bug in epfuzz" not in p.stderr
