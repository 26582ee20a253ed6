"""docs/tutorial.md section 5 as a user runs it: its code block saved as `combine.py`, its `epfuzz` commands
run in that folder, and every line of output the page shows found in what they print (timings and run
folders aside), in order. The page's output is pasted from a real run; this keeps it true."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def _section() -> str:
    page = PAGE.read_text()
    return page[page.index("## 5. A combine-style receiver"):]


def _blocks(text: str, lang: str) -> list[str]:
    return [b.split("```", 1)[0] for b in text.split(f"```{lang}\n")[1:]]


def _norm(line: str) -> str:
    """What may differ between two runs of the same command: wall time, speed, paths of the run folder."""
    line = re.sub(r"\d+ s, (\d+ execs) \(\d+ exec/s\)", r"\1", line)
    line = re.sub(r"\S*epfuzz run \S*/bugs/", "epfuzz run RUN/bugs/", line)
    return line.rstrip()


def _shown_in(shown: str, printed: str) -> None:
    """Every line the page shows (less '...', which marks lines left out) is printed, in that order."""
    out = [_norm(x) for x in printed.splitlines()]
    at = 0
    for line in (_norm(x) for x in shown.splitlines()):
        if not line or line.strip() == "...":
            continue
        assert line in out[at:], f"the page shows {line!r}; the command printed:\n{printed}"
        at = out.index(line, at) + 1


def test_the_tutorials_combine_protocol_finds_its_bug_and_its_fix_is_clean(tmp_path):
    sec = _section()
    assert "as `combine.py`:" in sec
    (code,) = _blocks(sec, "python")
    (tmp_path / "combine.py").write_text(code)
    commands, shown = _blocks(sec, "sh"), _blocks(sec, "text")
    assert len(commands) == len(shown) == 3
    env = {**os.environ, "EPFUZZ_DEBUG": "", "PYTHONPATH": str(tmp_path)}
    run_dir = ""
    for cmd, text in zip(commands, shown):
        argv = shlex.split(cmd.strip())
        assert argv[0] == "epfuzz", cmd
        if argv[1] == "fuzz":
            run_dir = f"r{len(list(tmp_path.glob('r*')))}"
            argv += ["--run-dir", run_dir]
        else:  # explain: the page's runs/... is the last fuzz run's folder
            argv = [a.replace("runs/...", run_dir) for a in argv]
        p = subprocess.run([sys.executable, "-m", "epfuzz", *argv[1:]], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=600)
        expect_rc = 0 if "0 bug(s)" in text else 1  # 1: a finding (fuzz, explain)
        assert p.returncode == expect_rc, p.stdout + p.stderr
        _shown_in(text, p.stdout)


def test_the_tutorials_receiver_reduces_a_token_only_when_all_k_have_arrived():
    ns: dict[str, object] = {}
    exec(_blocks(_section(), "python")[0], ns)  # noqa: S102 - the repository's own documentation
    from epfuzz.encoding import codec
    from epfuzz.ir import ops

    proto = ns["TopkCombine"]()  # type: ignore[operator]
    scn = codec.load_dict({"protocol": "dispatch_any", "payload": {"num_tokens": 5}, "topology": {"num_channels": 2}})
    lay = proto.layout(scn)
    k = lay.tokens_in_channel
    assert k == (3, 2)

    class Mem:
        def __init__(self, counters: list[int]) -> None:
            self.counters = counters

        def u64(self, region: str, offset: int) -> int:
            assert region == ops.SIGNAL
            return self.counters[offset // 8]

    rx = proto.receiver(scn, lay)
    rx.start_epoch(0)
    assert rx.poll(Mem([2, 1]), 0) == [] and not rx.done()
    (c,) = rx.poll(Mem([3, 1]), 0)
    assert (c.channel, c.offset, c.length) == (0, lay.slot_offset(0, 0), 3 * lay.token_bytes) and not rx.done()
    (c,) = rx.poll(Mem([3, 2]), 0)
    assert c.channel == 1 and rx.done()
