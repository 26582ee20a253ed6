"""`--feedback` and `--moves` plug-ins from a module outside the package: imported only when named,
and used (their counts are in the run's stats.json)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

TOY = textwrap.dedent('''
    from pathlib import Path

    from epfuzz.search.feedbacks import Feedback
    from epfuzz.search.moves import Move

    Path("imported.txt").write_text("yes")


    def polls(run):
        """How many accepting polls the run had: a toy feature."""
        return {("toy-polls", len(run.polls))}


    def double(ctx, data, rng):
        """The parent twice over: a toy move."""
        return (data + data)[:ctx.max_len]


    FEEDBACK = Feedback("toy", polls)
    MOVES = [Move("toy-double", "ir", 5, double)]
''')


def _fuzz(cwd, *extra):
    return subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deep_ro_signal", "--time", "600", "--max-execs",
                           "300", "--seed", "1", "--run-dir", "run", *extra], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_a_toy_feedback_and_a_toy_move_are_used(tmp_path):
    (tmp_path / "toyparts.py").write_text(TOY)
    p = _fuzz(tmp_path, "--feedback", "toyparts:FEEDBACK", "--moves", "toyparts:MOVES")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["feedbacks"].get("toy", 0) > 0, stats["feedbacks"]
    assert stats["moves"]["toy-double"]["used"] > 0, stats["moves"]


def test_a_plugin_is_imported_only_when_named(tmp_path):
    (tmp_path / "toyparts.py").write_text(TOY)
    p = _fuzz(tmp_path)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    assert not (tmp_path / "imported.txt").exists()
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert "toy" not in stats["feedbacks"] and "toy-double" not in stats["moves"]


def test_a_bad_plugin_name_is_one_line_and_exit_2(tmp_path):
    for flag, spec in (("--feedback", "nosuchmodule:X"), ("--moves", "not a spec")):
        p = _fuzz(tmp_path, flag, spec)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert flag in p.stderr.strip().splitlines()[-1]
