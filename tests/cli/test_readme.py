"""README is a front page whose every shown command runs and prints what the page shows."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
#: durations vary run to run: "0.01 s" is compared as "<t> s"
SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")


def _sessions() -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) of every `$ ` line of the README's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", README, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def test_readme_is_a_front_page():
    assert len(README.splitlines()) <= 250
    assert "make fuzz" in README and "make test" in README


def test_readme_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_every_readme_command_prints_the_lines_shown(tmp_path):
    shutil.copytree(ROOT / "corpus" / "regressions", tmp_path / "corpus" / "regressions")
    sessions = _sessions()
    assert len(sessions) >= 4
    for command, shown in sessions:
        argv = shlex.split(command)
        assert argv[0] == "epfuzz", command
        p = subprocess.run([sys.executable, "-m", "epfuzz", *argv[1:]], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "EPFUZZ_DEBUG": ""})
        assert p.returncode in (0, 1), command + "\n" + p.stderr
        got = {SECONDS.sub("<t> s", x.rstrip()) for x in p.stdout.splitlines()}
        missing = [x for x in shown if SECONDS.sub("<t> s", x.rstrip()) not in got]
        assert not missing, f"{command}: lines the README shows but the command did not print: {missing}"


def _shape(line: str) -> re.Pattern[str]:
    """A sample line of the README as a pattern: counts, times and hashes vary, the words do not."""
    pat = re.sub(r"\d+", r"\\d+", re.escape(line.rstrip()))
    pat = pat.replace(re.escape("<time>"), r"[0-9-]+").replace(re.escape("<hash>"), "[0-9a-f]+")
    pat = pat.replace(re.escape(".venv/bin/epfuzz"), ".+").replace(re.escape(" ..."), " .*")
    return re.compile(re.sub(r"(\\ )+", r"\\s+", pat))   # column alignment follows the counts' widths


def test_the_make_fuzz_sample_has_the_shape_of_a_real_run(tmp_path):
    """User audit D8: the sample named runs/<harness>-<time>/ (the folder is <harness>-guided-<time>/) and
    left out the knob legend; `make fuzz` is the same command with a 60 s budget."""
    (sample,) = re.findall(r"`make fuzz` ends with a bug table.*?```text\n(.*?)```", README, re.S)
    p = subprocess.run([sys.executable, "-m", "epfuzz", "fuzz", "deepep_v2_dispatch", "--time", "600",
                        "--max-execs", "300", "--seed", "1"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    got = p.stdout.splitlines()
    for line in sample.splitlines():
        assert any(_shape(line).fullmatch(x.rstrip()) for x in got), (line, got)
