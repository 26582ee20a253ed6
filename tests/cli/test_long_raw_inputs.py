"""A raw input longer than libFuzzer's default -max_len replays as its harness runs it.

`epfuzz run` refused raw inputs over 4096 bytes ("over the 4096-byte input limit", exit 2) that the harness
decodes and runs whole: a long crash ClusterFuzz found could not be replayed, nor grouped by triage
(operator trial 1205 item 7). The decoder reads a bounded prefix, so the rest of the input is as the harness
sees it: bytes it never reads."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epfuzz.backends import get_backend
from epfuzz.cases.corpus import MAX_CASE_BYTES
from epfuzz.cases.replay import load_any
from epfuzz.encoding import codec
from epfuzz.infra.errors import InputError
from epfuzz.protocols import get_protocol
from tests.cli.test_output_for_people import epfuzz

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = "dispatch_any"


def _crash_seed() -> bytes:
    folder = ROOT / "corpus" / f"{PROTOCOL}_fuzzer"
    lines = (ROOT / "corpus" / f"{PROTOCOL}_fuzzer.verdicts").read_text().splitlines()
    sha = next(x.split()[0] for x in lines if x.endswith(" finding"))
    return (folder / sha).read_bytes()


def _harness_verdict(data: bytes) -> str:
    """What the harness decides of `data`: it decodes the whole input (Harness.test_one_input)."""
    scn = codec.decode(data, PROTOCOL, "spec")
    return get_backend("sim").run(scn, get_protocol(PROTOCOL)).verdict


@pytest.mark.parametrize("size", [5000, 3 << 20])
def test_a_long_crash_input_replays_as_its_harness_runs_it(tmp_path, size):
    data = _crash_seed()
    data += random.Random(size).randbytes(size - len(data))
    assert _harness_verdict(data) == "finding"
    crash = tmp_path / "clusterfuzz-testcase-minimized-dispatch_any_fuzzer-5712345678"
    crash.write_bytes(data)
    assert load_any(crash, None, None).scenario == codec.decode(data, PROTOCOL, "spec")
    p = epfuzz("run", str(crash), cwd=tmp_path)
    assert p.returncode == 1 and "FINDING" in p.stdout.upper(), p.stdout + p.stderr
    # triage groups it as a crash-* artifact of a run folder
    run = tmp_path / "run"
    run.mkdir()
    (run / "crash-0123abcd").write_bytes(data)
    t = epfuzz("triage", "--protocol", PROTOCOL, str(run), cwd=tmp_path)
    assert t.returncode == 1 and "1 bug(s)" in t.stdout, t.stdout + t.stderr


def test_past_the_read_limit_the_decoder_must_not_read_further(tmp_path):
    """Past MAX_CASE_BYTES the bytes are not read: accepted only where the decoder never reaches them."""
    from epfuzz.cases.replay import decode_raw

    head = random.Random(1).randbytes(MAX_CASE_BYTES + 1)
    scn, used = decode_raw(head, tmp_path / "x", PROTOCOL, "spec")
    assert scn == codec.decode(head, PROTOCOL, "spec") and len(used) == MAX_CASE_BYTES


def test_a_decoder_that_reads_past_the_limit_is_refused(tmp_path, monkeypatch):
    from epfuzz.cases import replay
    from epfuzz.cases.replay import decode_raw

    def greedy(protocol, preset):
        def read(r):
            r.pos = MAX_CASE_BYTES + 1
        return read

    monkeypatch.setattr(replay.codec, "decoder_for", greedy)
    with pytest.raises(InputError, match="reads past them"):
        decode_raw(bytes(MAX_CASE_BYTES + 1), tmp_path / "x", PROTOCOL, "spec")
