"""A user's own protocol under libFuzzer (pip trial item 2): a harness file of theirs that names the plug-in in code,
and `epfuzz corpus merge/prune --protocol module:Attr` for its corpus, from the folder that holds the plug-in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from epfuzz.cases.corpus import sha1

#: a write-then-signal protocol whose tail fetch-and-add goes out on the next QP (the pip trial's plug-in):
#: under a strict MR only the cross-QP race reorders it; the fixed class signals on the data's QP
PLUGIN = '''
from epfuzz.ir import ops
from epfuzz.protocols.base import Consume, Protocol, Receiver


class TailReceiver(Receiver):
    watch = frozenset({ops.SIGNAL})

    def __init__(self, layout):
        self.layout = layout
        self.got = [False] * layout.num_channels

    def start_epoch(self, epoch):
        self.got = [False] * self.layout.num_channels

    def poll(self, mem, epoch):
        out = []
        for c, got in enumerate(self.got):
            n = self.layout.tokens_in_channel[c]
            if got:
                continue
            if n == 0:
                self.got[c] = True
                continue
            if mem.u64(ops.SIGNAL, c * 8) >= n:
                self.got[c] = True
                out.append(Consume(ops.DATA, self.layout.slot_offset(c, 0), n * self.layout.token_bytes, c,
                                   f"channel {c} tail"))
        return out

    def done(self):
        return all(self.got)

    def state(self):
        return tuple(self.got)

    def restore(self, state):
        self.got = list(state)


class OtherQP(Protocol):
    name, expect = "tail_other_qp", "finding"
    fixed = {"knobs.mr_relaxed": False}
    signature_knobs = ("topology.num_qps",)
    signal_on_data_qp = False

    def sender(self, scn, layout, epoch):
        progs = []
        q = scn.topology.num_qps
        for c in range(layout.num_channels):
            qp = scn.qp_of_channel(c)
            sig_qp = qp if self.signal_on_data_qp else (qp + 1) % q
            prog = []
            for t in range(layout.tokens_in_channel[c]):
                prog.append(ops.Write(qp, ops.DATA, layout.slot_offset(c, t), layout.token_bytes))
                prog.append(ops.AtomicAdd(sig_qp, ops.SIGNAL, c * 8, 1))
            progs.append(prog)
        return progs

    def receiver(self, scn, layout):
        return TailReceiver(layout)


class OtherQPFixed(OtherQP):
    name, expect = "tail_other_qp_fixed", "clean"
    signal_on_data_qp = True
'''

#: docs/continuous.md's harness file (its `import` is for PyInstaller; main() imports the plug-in by name)
HARNESS = '''import sys

import tailqp  # noqa: F401
from epfuzz.continuous.harness import main

if __name__ == "__main__":
    main("tailqp:{attr}", sys.argv)
'''


def project(tmp: Path) -> Path:
    """The user's folder: the plug-in module and a harness file per protocol, nothing of epfuzz's."""
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "tailqp.py").write_text(PLUGIN)
    for attr in ("OtherQP", "OtherQPFixed"):
        (proj / f"{attr.lower()}_fuzzer.py").write_text(HARNESS.format(attr=attr))
    return proj


def fuzz(proj: Path, harness: str, corpus: Path, art: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    corpus.mkdir(exist_ok=True)
    art.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, str(proj / harness), str(corpus), "-runs=300", "-seed=1",
                           f"-artifact_prefix={art}/", *extra], capture_output=True, text=True, timeout=600, cwd=proj)


def epfuzz(proj: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epfuzz", *args], capture_output=True, text=True, timeout=600,
                          cwd=proj)


def test_a_harness_file_of_ones_own_fuzzes_its_plugin_and_finds_the_bug(tmp_path):
    proj = project(tmp_path)
    p = fuzz(proj, "otherqp_fuzzer.py", tmp_path / "c", tmp_path / "art")
    assert p.returncode == 77, p.stderr[-2000:]
    assert "is a plug-in" not in p.stderr
    cases = list((tmp_path / "art").glob("finding-*.json"))
    assert cases and list((tmp_path / "art").glob("crash-*")), p.stderr[-2000:]
    case = json.loads(cases[0].read_text())
    assert case["expect"] == "finding" and case["scenario"]["protocol"] == "tailqp:OtherQP"
    # the same budget on the fixed protocol finds nothing: the crash above is the plug-in's bug
    fixed = fuzz(proj, "otherqpfixed_fuzzer.py", tmp_path / "cf", tmp_path / "artf")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert not list((tmp_path / "artf").iterdir())
    # a case file naming the plug-in still imports nothing by itself: the refusal stays
    refused = epfuzz(proj, "run", str(cases[0]))
    assert refused.returncode == 2 and "is a plug-in" in refused.stderr, refused.stderr


def test_corpus_prune_and_merge_take_a_plugin_protocol(tmp_path):
    proj = project(tmp_path)
    grown = tmp_path / "grown"
    p = fuzz(proj, "otherqp_fuzzer.py", grown, tmp_path / "art", "--keep-going", f"--findings-dir={tmp_path / 'art'}")
    assert p.returncode == 0, p.stderr[-2000:]
    before = len(list(grown.iterdir()))
    assert before > 1
    pruned = epfuzz(proj, "corpus", "prune", "--protocol", "tailqp:OtherQP", str(grown))
    assert pruned.returncode == 0, pruned.stderr
    assert f"pruned {grown}: {before} -> " in pruned.stdout
    dest = tmp_path / "dest"
    merged = epfuzz(proj, "corpus", "merge", "--protocol", "tailqp:OtherQP", str(dest), str(grown))
    assert merged.returncode == 0, merged.stderr
    assert list(dest.iterdir()) and "merged" in merged.stdout
    # the finding inputs are kept: the merged corpus still crashes the harness on load
    crash = fuzz(proj, "otherqp_fuzzer.py", dest, tmp_path / "art2", "-runs=0")
    assert crash.returncode == 77, crash.stderr[-2000:]
    # usage: --protocol stands for the harness, so a harness name beside it is one word too many
    both = epfuzz(proj, "corpus", "prune", "deepep_v2_dispatch", str(grown), "--protocol", "tailqp:OtherQP")
    assert both.returncode == 2 and "unrecognized arguments" in both.stderr, both.stderr


#: the plug-in above, whose sender (run per input, long after its import) refuses to run while its own folder is
#: still on sys.path: docs/hardening.md says a plug-in's folder is there only while its module is imported
PATH_CHECKED = PLUGIN + '''

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class PathChecked(OtherQPFixed):
    def sender(self, scn, layout, epoch):
        if any(p and os.path.abspath(p) == HERE for p in sys.path):
            raise RuntimeError(f"the plug-in's folder {HERE} is on sys.path after its import")
        return super().sender(scn, layout, epoch)
'''


def test_the_merge_child_has_the_plugins_folder_on_its_path_only_while_importing_it(tmp_path):
    """The merge's libFuzzer child runs in a scratch folder, so it is told where the plug-in's module is: it was
    PYTHONPATH, on the child's sys.path for its whole life, where epfuzz itself (and the doc) put the folder
    there only while importing the module. Each input the child runs checks its sys.path."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pathcheck.py").write_text(PATH_CHECKED)
    src = tmp_path / "src"
    src.mkdir()
    for n in range(4):
        data = bytes(range(n * 40, n * 40 + 64))
        (src / sha1(data)).write_bytes(data)
    dest = tmp_path / "dest"
    merged = epfuzz(proj, "corpus", "merge", "--protocol", "pathcheck:PathChecked", str(dest), str(src))
    assert merged.returncode == 0 and "merged" in merged.stdout, merged.stdout + merged.stderr
    assert "on sys.path after its import" not in merged.stdout + merged.stderr
    assert list(dest.iterdir()), merged.stdout + merged.stderr
