"""A plug-in's own bugs are named as the plug-in's, in one line, before and during a campaign
(a new user's tutorial receiver lacked three methods: `fuzz` restarted its job for the whole
budget and printed only "N harness error(s)"; `run` blamed epfuzz)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RECEIVER = '''
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Protocol, Receiver


class Rx(Receiver):
    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout):
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch):
        self.got = [False] * self.layout.num_channels

    def poll(self, mem, epoch):
        if len(self.got) > LIMIT:
            raise ZeroDivisionError("too many channels for this receiver")
        out = []
        for c, got in enumerate(self.got):
            if not got and mem.u64(ops.SIGNAL, c * 8) == epoch + 1:
                self.got[c] = True
                n = self.layout.tokens_in_channel[c] * self.layout.token_bytes
                out.append(Consume(ops.DATA, self.layout.slot_offset(c, 0), n, c, f"mailbox {c}"))
        return out

    def done(self):
        return all(self.got)

    def state(self):
        return tuple(self.got)

    def restore(self, state):
        self.got = list(state)


class Flag(Protocol):
    name, expect = "flag", "finding"
    fixed = FIXED

    def sender(self, scn, layout, epoch):
        n = lambda c: layout.tokens_in_channel[c] * layout.token_bytes
        return [[ops.Write(scn.qp_of_channel(c), ops.DATA, layout.slot_offset(c, 0), n(c)),
                 ops.WriteValue(scn.qp_of_channel(c), ops.SIGNAL, c * 8, epoch + 1)]
                for c in range(layout.num_channels)]

    def receiver(self, scn, layout):
        return Rx(layout)


class NoReceiver(Flag):
    def receiver(self, scn, layout):
        Rx(layout)  # the `return` forgotten


class Abstract(Flag):
    def receiver(self, scn, layout):
        class Half(Receiver):  # the tutorial's first attempt: poll and done only
            def poll(self, mem, epoch):
                return []

            def done(self):
                return True
        return Half()
'''


def plugin(folder: Path, name: str, limit: int = 99, fixed: str = '{"knobs.mr_relaxed": True}') -> None:
    (folder / f"{name}.py").write_text(RECEIVER.replace("LIMIT", str(limit)).replace("FIXED", fixed))


def epfuzz(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epfuzz", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "EPFUZZ_DEBUG": ""}, timeout=300)


def one_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in p.stderr.splitlines() if not x.startswith("{")]  # structlog JSON lines aside
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_an_exception_in_plugin_code_is_a_protocol_error_that_names_its_line(tmp_path):
    plugin(tmp_path, "mine", limit=0)
    (tmp_path / "input").write_bytes(bytes(64))
    p = epfuzz(tmp_path, "run", "--protocol", "mine:Flag", "input")
    assert p.returncode == 3
    line = one_line(p)
    assert "protocol error (a bug in the protocol plug-in): ZeroDivisionError" in line
    assert f"{tmp_path / 'mine.py'}:" in line and "in poll" in line


def test_fuzz_refuses_a_broken_plugin_at_once_and_writes_no_run_folder(tmp_path):
    plugin(tmp_path, "mine")
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Abstract", "--time", "30", "--run-dir", "r")
    assert p.returncode == 3
    line = one_line(p)
    assert "fails on the simplest scenario: TypeError: Can't instantiate abstract class Half" in line
    assert "in receiver" in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args", [("run", "input"), ("fuzz", "--time", "30", "--run-dir", "r")])
def test_a_receiver_method_that_returns_none_is_a_protocol_error_naming_it(tmp_path, args):
    """Pip trial item 11: it was AttributeError 'NoneType' object has no attribute 'watch', as a bug in epfuzz (run)
    or with no file and line (fuzz)."""
    plugin(tmp_path, "mine")
    (tmp_path / "input").write_bytes(bytes(64))
    p = epfuzz(tmp_path, *args, "--protocol", "mine:NoReceiver")
    assert p.returncode == 3
    line = one_line(p)
    assert "protocol error (a bug in the protocol plug-in)" in line and "'NoneType'" not in line, line
    assert "receiver() returned None, not an epfuzz Receiver" in line
    assert f"(at {tmp_path / 'mine.py'}:" in line and "in receiver)" in line
    assert not (tmp_path / "r").exists()


def test_a_plugin_named_from_another_folder_says_where_it_was_looked_for(tmp_path):
    """Pip trial item 11: `--protocol wts:X` from another folder said only "No module named 'wts'"."""
    proj, other = tmp_path / "proj", tmp_path / "other"
    proj.mkdir()
    other.mkdir()
    plugin(proj, "mine")
    (other / "input").write_bytes(bytes(64))
    p = epfuzz(other, "run", "--protocol", "mine:Flag", "input")
    assert p.returncode == 2
    line = one_line(p)
    assert "No module named 'mine'" in line and f"looked for in the current folder, {other}" in line, line
    assert "--allow-plugins FOLDER" in line
    # and the way out it names works: the allowed folder holds the module --protocol names
    p = epfuzz(other, "run", "--protocol", "mine:Flag", "--allow-plugins", str(proj), "input")
    assert p.returncode in (0, 1) and "protocol 'mine:Flag'" not in p.stderr, p.stderr
    # a command without that option does not suggest it (fuzz and corpus pointed at an option they lack: review)
    for args in (("fuzz", "--protocol", "mine:Flag", "--max-execs", "10"), ("corpus", "prune", "--protocol",
                                                                            "mine:Flag", str(other))):
        p = epfuzz(other, *args)
        assert p.returncode == 2 and "No module named 'mine'" in p.stderr, p.stderr
        assert "--allow-plugins" not in p.stderr, p.stderr


@pytest.mark.parametrize(("fixed", "says"), [
    ('{"knobs.no_such_knob": True}', "pins 'knobs.no_such_knob', which is no scenario field"),
    ('{"topology.num_qps": 99}', "out of range"),
])
def test_a_pin_of_no_field_or_out_of_range_is_refused(tmp_path, fixed, says):
    plugin(tmp_path, "mine", fixed=fixed)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--time", "30", "--run-dir", "r")
    assert p.returncode == 2
    assert says in one_line(p)
    assert not (tmp_path / "r").exists()


def test_a_campaign_names_its_first_harness_error_and_where_the_plugin_raised_it(tmp_path):
    plugin(tmp_path, "mine", limit=2)  # the simplest scenario passes; three channels or more raise
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--engine", "libfuzzer", "--time", "8", "--seed", "1",
               "--run-dir", "r")
    assert p.returncode == 3, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("first harness error:"))
    assert "ZeroDivisionError: too many channels for this receiver" in line
    assert f"{tmp_path / 'mine.py'}:" in line and "in poll" in line
    assert "Traceback" in (tmp_path / "r" / "job0.log").read_text()


def test_the_default_guided_campaign_stops_at_a_plugin_exception_with_its_input_and_summary(tmp_path):
    """The guided engine (the default on the sim) met the plug-in's exception and exited 3 with one line:
    no summary, no stats, the input lost. Now: a crash- artifact that replays as the same error."""
    plugin(tmp_path, "mine", limit=2)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--time", "600", "--max-execs", "2000", "--seed", "1",
               "--run-dir", "r")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr and "1 harness error(s)" in p.stdout, p.stdout
    line = next(x for x in p.stdout.splitlines() if x.startswith("first harness error:"))
    assert "ZeroDivisionError: too many channels for this receiver" in line and "in poll" in line
    (art,) = (tmp_path / "r" / "artifacts").glob("crash-*")
    assert (tmp_path / "r" / "stats.json").exists() and f"r/artifacts/{art.name}" in line
    q = epfuzz(tmp_path, "run", "--protocol", "mine:Flag", str(art))
    assert q.returncode == 3 and "ZeroDivisionError: too many channels" in q.stderr, q.stdout + q.stderr


def test_the_tutorial_protocol_works_as_written(tmp_path):
    """The tutorial's code block, saved under the name docs/tutorial.md gives it, finds its bug (the
    first wave's snippet called an undefined nbytes() and a receiver it never showed; the name was
    mailbox.py, which the standard library's `mailbox` shadowed: its cases replayed only from there)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "tutorial.md").read_text()
    assert "Save this as `myproto.py`" in page
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "myproto.py").write_text(code)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "myproto:SeqFlag", "--engine", "guided", "--time", "600",
               "--max-execs", "1000", "--seed", "1", "--run-dir", "r")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "myproto:SeqFlag|spec|stale-accept|A2b" in p.stdout
    case = next((tmp_path / "r").glob("finding-myproto.SeqFlag-*.json"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the printed replay line names the plug-in (a case alone never imports code); it pastes from elsewhere
    line = next(x for x in p.stdout.splitlines() if "replay (minimized):" in x)
    assert line.endswith("--protocol myproto:SeqFlag"), line
    r = subprocess.run([sys.executable, "-m", "epfuzz", "run", str(case), "--protocol", "myproto:SeqFlag"],
                       cwd=elsewhere, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1 and "finding" in r.stdout, r.stdout + r.stderr


def test_an_accept_outside_its_region_is_a_protocol_error_not_a_clean_run(tmp_path):
    """A slice past the region's end compared nothing: the run was clean and the accept unchecked."""
    plugin(tmp_path, "mine")
    text = (tmp_path / "mine.py").read_text().replace(
        "Consume(ops.DATA, self.layout.slot_offset(c, 0), n,", "Consume(ops.DATA, 1 << 30, n,")
    (tmp_path / "mine.py").write_text(text)
    (tmp_path / "input").write_bytes(bytes(64))
    p = epfuzz(tmp_path, "run", "--protocol", "mine:Flag", "input")
    assert p.returncode == 3
    assert "protocol error (a bug in the protocol plug-in)" in one_line(p)
    assert "outside the region" in p.stderr


def test_a_misspelt_signature_knob_is_refused_before_the_campaign(tmp_path):
    """An author's trial: ("payload.num_epochs",) in signature_knobs passed the pre-flight and the campaign
    crashed at its first finding as "unexpected error (a bug in epfuzz): AttributeError" (exit 3). It is
    named at load now, like a pin of no field, for every command that loads the plug-in."""
    plugin(tmp_path, "mine")
    text = (tmp_path / "mine.py").read_text().replace(
        '    fixed = {"knobs.mr_relaxed": True}', '    fixed = {"knobs.mr_relaxed": True}\n'
                                                 '    signature_knobs = ("payload.num_epochs",)')
    assert "signature_knobs" in text
    (tmp_path / "mine.py").write_text(text)
    (tmp_path / "input").write_bytes(bytes(64))
    for args in (["fuzz", "--protocol", "mine:Flag", "--time", "30", "--run-dir", "r"],
                 ["minimize", "--protocol", "mine:Flag", "input"]):
        p = epfuzz(tmp_path, *args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert ("lists in signature_knobs 'payload.num_epochs', which is no scenario field; did you mean "
                "payload.epochs?") in one_line(p)
    assert not (tmp_path / "r").exists()


def test_a_misspelt_preset_in_expect_is_refused_at_load_with_the_file_and_the_close_name(tmp_path):
    """An author's trial (typo.py): expect {"spec": ..., "mlx5-pci-atomics": ...} ran 4 execs under
    mlx5-pci-atomic and stopped with "harness error: expect gives None" (exit 3, no file, no close name);
    under no-ro, with no finding, nothing was said. It is named at load now, like a misspelt pin."""
    plugin(tmp_path, "mine")
    text = (tmp_path / "mine.py").read_text().replace(
        'name, expect = "flag", "finding"', 'name, expect = "flag", {"spec": "finding", "mlx5-pci-atomics": "finding"}')
    assert "mlx5-pci-atomics" in text
    (tmp_path / "mine.py").write_text(text)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--preset", "no-ro", "--time", "30", "--run-dir", "r")
    assert p.returncode == 2, p.stdout + p.stderr
    line = one_line(p)
    assert f"({tmp_path / 'mine.py'}, class Flag)" in line
    assert "expect names preset 'mlx5-pci-atomics', which is no preset; did you mean mlx5-pci-atomic?" in line
    assert not (tmp_path / "r").exists()


def test_a_receiver_that_hangs_with_nothing_reordered_is_a_plugin_error_before_the_campaign(tmp_path):
    """An author's trial: a receiver whose done() never returns True made every input a `hang|in-order|no
    knob` finding and a "FALSE ALARM ... a bug in the model". The pre-flight run says it is the plug-in's."""
    plugin(tmp_path, "mine")
    text = (tmp_path / "mine.py").read_text().replace("return all(self.got)", "return False")
    assert "return False" in text
    (tmp_path / "mine.py").write_text(text)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--time", "30", "--run-dir", "r")
    assert p.returncode == 3, p.stdout + p.stderr
    line = one_line(p)
    assert "protocol error (a bug in the protocol plug-in)" in line
    assert "hangs on the simplest scenario, where nothing is reordered" in line
    assert not (tmp_path / "r").exists() and "FALSE ALARM" not in p.stdout + p.stderr


@pytest.mark.parametrize(("attr", "says"), [
    ("Rx", "'mine:Rx' is the class Rx, not an epfuzz Protocol (a Protocol subclass or instance): it is a "
           "Receiver; name the Protocol whose receiver() returns it"),
    ("ops", "'mine:ops' is a module, not an epfuzz Protocol"),
])
def test_a_name_of_no_protocol_says_what_it_names(tmp_path, attr, says):
    """An author's trial: --protocol naming a Receiver class constructed it and said its constructor's
    TypeError ("missing 1 required positional argument: 'layout'")."""
    plugin(tmp_path, "mine")
    p = epfuzz(tmp_path, "fuzz", "--protocol", f"mine:{attr}", "--time", "30", "--run-dir", "r")
    assert p.returncode == 2, p.stdout + p.stderr
    assert says in one_line(p)
    assert not (tmp_path / "r").exists()


def test_the_tutorial_says_what_a_plugin_exception_in_a_campaign_does():
    """An author's trial: the tutorial said an exception only some scenarios raise "is counted as a harness
    error", implying fuzzing goes on; the guided campaign stops at it (the test above), and the page says so."""
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "tutorial.md").read_text().split())
    assert "is counted as a harness error" not in page
    assert "An exception that only some scenarios raise stops the campaign too, at the first input that raises it" \
        in page and "artifacts/crash-*" in page and "the exit code is 3" in page


def test_an_op_outside_the_layout_names_the_plugin_as_typed_and_its_sender(tmp_path):
    """New-user trial item 6: a flag written past its region said "protocol 'flag'" (the `name` attribute, not
    the `mine:Flag` the user typed) and no file and line, which the tutorial promises for an API slip."""
    plugin(tmp_path, "mine")
    text = (tmp_path / "mine.py").read_text().replace("ops.SIGNAL, c * 8, epoch + 1)", "ops.SIGNAL, 100000, 1)")
    assert "100000" in text
    (tmp_path / "mine.py").write_text(text)
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flag", "--time", "30", "--run-dir", "r")
    assert p.returncode == 3, p.stdout + p.stderr
    line = one_line(p)
    assert "protocol 'mine:Flag', epoch 0, channel 0, op 1" in line and "outside region 'signal'" in line, line
    sender = next(i for i, x in enumerate(text.splitlines(), 1) if "def sender" in x)
    assert line.endswith(f"(at {tmp_path / 'mine.py'}:{sender}, in sender)"), line


def test_a_misspelt_class_name_gets_the_close_names(tmp_path):
    """New-user trial item 6: `--protocol crossflag:CrossFlg` said only "module 'crossflag' has no attribute
    'CrossFlg'", where a misspelt harness name gets "did you mean"."""
    plugin(tmp_path, "mine")
    p = epfuzz(tmp_path, "fuzz", "--protocol", "mine:Flg", "--time", "30", "--run-dir", "r")
    assert p.returncode == 2, p.stdout + p.stderr
    assert one_line(p).endswith("cannot load protocol 'mine:Flg': module 'mine' has no attribute 'Flg'; "
                                "did you mean Flag?"), p.stderr
    assert not (tmp_path / "r").exists()


def test_replaying_a_folder_whose_plugin_cannot_be_imported_says_so_once(tmp_path):
    """Trial 0205 item 1: a run folder copied where its plug-in is not said "cannot load protocol ..." once per
    file (339 identical lines), and so did `--protocol nomod:Nope` ("the names differ"); `run` and `fuzz` say
    it once. Now --protocol is loaded first (one line, exit 2), and a refusal the files share is said once."""
    cases = tmp_path / "fromci"
    cases.mkdir()
    c2b = json.loads((Path(__file__).resolve().parents[2] / "corpus/regressions/deepep661-c2b.json").read_text())
    c2b["protocol"] = c2b["scenario"]["protocol"] = "mine:Flag"
    for i in range(3):
        (cases / f"finding-{i}.json").write_text(json.dumps(c2b))
    for spec, says in (("mine:Flag", "No module named 'mine'"), ("nomod:Nope", "No module named 'nomod'")):
        p = epfuzz(tmp_path, "replay", "fromci", "--protocol", spec)
        assert p.returncode == 2, p.stdout + p.stderr
        assert one_line(p).startswith(f"epfuzz: cannot load protocol '{spec}': {says}"), p.stderr
    p = epfuzz(tmp_path, "replay", "fromci")  # no --protocol: each file names a plug-in not allowed
    assert p.returncode == 2, p.stdout + p.stderr
    first, more = p.stderr.splitlines()
    why = "protocol 'mine:Flag' is a plug-in (the Python module mine), and plug-in code runs only when you name it"
    assert first.startswith("epfuzz: fromci/finding-") and why in first, p.stderr
    assert more.startswith(f"epfuzz: 2 more file(s) failed the same way: {why}"), p.stderr
    assert "3 unreadable" in p.stdout


@pytest.mark.parametrize("body,code", [("import numpyy_not_installed", 2), ("from epfuzz.ir import no_such_name", 2),
                                       ("raise RuntimeError('boom at import')", 3)])
def test_an_exception_inside_a_plugin_at_import_names_its_line(tmp_path, body, code):
    """Trial 0205 item 2: `import numpyy` in the plug-in said "cannot load protocol 'imperr:X': No module named
    'numpyy'", exit 2, no file nor line: as if the plug-in itself were missing. A failed import there is still
    an input error (a dependency missing where it runs: the verbs guest test relies on exit 2), now with the
    line of that import; any other exception there is the plug-in's bug, exit 3 with its line."""
    (tmp_path / "imperr.py").write_text(f"import os\n{body}\n")
    p = epfuzz(tmp_path, "fuzz", "--protocol", "imperr:X", "--max-execs", "10", "--run-dir", "r")
    assert p.returncode == code, p.stdout + p.stderr
    line = one_line(p)
    if code == 2:
        assert line.startswith("epfuzz: cannot load protocol 'imperr:X': "), line
        assert line.endswith(f"(imported at {tmp_path / 'imperr.py'}:2, in <module>)"), line
    else:
        assert line.startswith("epfuzz: protocol error (a bug in the protocol plug-in): cannot import protocol "
                               "'imperr:X': "), line
        assert line.endswith(f"(at {tmp_path / 'imperr.py'}:2, in <module>)"), line
    assert not (tmp_path / "r").exists()
    (tmp_path / "imperr.py").unlink()  # the plug-in's own module missing is still the one-line input error
    p = epfuzz(tmp_path, "fuzz", "--protocol", "imperr:X", "--max-execs", "10")
    assert p.returncode == 2 and one_line(p).startswith("epfuzz: cannot load protocol 'imperr:X': No module named "
                                                        "'imperr' (a plug-in is looked for in"), p.stderr
