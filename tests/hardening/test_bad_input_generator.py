"""A bad-input generator of our own, run in `make test` (issue 29, "Done when").

Bounded in cases, not seconds: a seeded generator makes MUTATED mutated case files (byte and
JSON mutations of the regression cases, protocol names that would import code), DEVICES device-
like paths, and every misbehaving plug-in of `bad_plugins` under five commands. Each command runs
as a user runs it (the `epfuzz` script, in the artifact's folder) and is held to what the CLI
documents, nothing more:

- the exit code is a documented one: 0 clean, 1 finding (hang/oom included), 2 input error, 3
  only for a plug-in's own bug, never for a bad file;
- no traceback, and every complaint is one `epfuzz:`/`error:` line;
- no command runs past its bound (subprocess timeout; none is near it);
- nothing is lost: `replay` counts every file it was given, no file it read changed, and no code
  lying beside a case ran.

The counts are printed (`pytest -s`) and asserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests.hardening import bad_plugins
from tests.hardening.util import ROOT, epfuzz

SEED = 29
MUTATED = 60           # mutated case files, replayed together and a sample of them run one by one
RUN_ONE_BY_ONE = 12
RAW = 12               # raw inputs in a harness-named folder (random bytes: any verdict, never an error)
BOUND_S = 120          # per command: a hang past it fails the test
DOCUMENTED = {0, 1, 2, 3}

SOURCES = sorted((ROOT / "corpus" / "regressions").glob("*.json"))[:8]
EVIL = 'from pathlib import Path\nPath(__file__).with_name("CODE-RAN").write_text("ran")\n'
NAMES = ["evil:P", "os:system", "this:x", "..:P", "mb:Bad", "a" * 300 + ":B", "", "deepep_v2_dispatch:x",
         "nosuch", "ÿ:ÿ", "os.path:join", "subprocess:Popen"]
VALUES: list[object] = [None, True, -1, 0, 2 ** 70, 1.5, float("nan"), "", "x" * 5000, [], {}, [1, [2, [3]]],
                        {"a": {"b": {}}}]


def _mutate_json(obj: object, rng: random.Random) -> object:
    """One structural change somewhere in `obj`: a key deleted, a value replaced by one of another
    type, a protocol renamed to something that would import code."""
    if not isinstance(obj, dict) or not obj:
        return rng.choice(VALUES)
    obj = dict(obj)
    key = rng.choice(sorted(obj))
    roll = rng.random()
    if key == "protocol" or roll < 0.15:
        obj["protocol"] = rng.choice(NAMES)
        if isinstance(obj.get("scenario"), dict) and rng.random() < 0.7:
            obj["scenario"] = {**obj["scenario"], "protocol": obj["protocol"]}
    elif roll < 0.35:
        del obj[key]
    elif roll < 0.7 and isinstance(obj[key], dict):
        obj[key] = _mutate_json(obj[key], rng)
    else:
        obj[key] = rng.choice(VALUES)
    return obj


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    roll = rng.random()
    at = rng.randrange(len(data))
    if roll < 0.3:
        return data[:at]                                       # truncated
    if roll < 0.55:
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]   # one byte flipped
    if roll < 0.75:
        return data[:at] + rng.randbytes(rng.randrange(1, 64)) + data[at:]
    if roll < 0.85:
        return b"[" * 100_000 + b"]" * 100_000                 # nested too deeply
    return b"\xff\xfe" + data[:at]                             # not UTF-8


def _cases(folder: Path, rng: random.Random) -> list[Path]:
    out = []
    for i in range(MUTATED):
        src = rng.choice(SOURCES).read_bytes()
        if rng.random() < 0.6:
            obj = json.loads(src)
            for _ in range(rng.randrange(1, 4)):
                obj = _mutate_json(obj, rng)
            data = json.dumps(obj).encode()
        else:
            data = _mutate_bytes(src, rng)
        path = folder / f"m{i:03d}.json"
        path.write_bytes(data)
        out.append(path)
    return out


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_fifo()}


class Tally:
    def __init__(self) -> None:
        self.commands = 0
        self.by_code: dict[int, int] = {}

    def check(self, p: subprocess.CompletedProcess[str], allowed: set[int], what: object) -> None:
        self.commands += 1
        self.by_code[p.returncode] = self.by_code.get(p.returncode, 0) + 1
        assert p.returncode in allowed and p.returncode in DOCUMENTED, (what, p.returncode, p.stderr[-2000:])
        assert "Traceback" not in p.stdout + p.stderr, (what, p.stderr[-3000:])
        for line in p.stderr.splitlines():
            if line.strip() and not line.startswith("{"):  # log lines are JSON off a terminal
                assert line.startswith(("epfuzz:", "error:")), (what, line)


def test_generated_bad_inputs_get_documented_answers(tmp_path):
    rng = random.Random(SEED)
    tally = Tally()
    art = tmp_path / "artifact"
    art.mkdir()
    (art / "evil.py").write_text(EVIL)
    bad_plugins.write(art)
    cases = _cases(art, rng)
    raw = art / "deepep_v2_dispatch_fuzzer"
    raw.mkdir()
    for _ in range(RAW):
        data = rng.randbytes(rng.randrange(0, 300))
        (raw / hashlib.sha1(data).hexdigest()).write_bytes(data)
    before = _digest(art)

    # every mutated case in one replay: each one counted, whatever the others did
    p = epfuzz(art, "replay", "--strict", ".", timeout=BOUND_S * 3)
    tally.check(p, {1, 2}, "replay of the mutated folder")
    summary = next(x for x in p.stdout.splitlines() if x.startswith("replayed "))
    m = re.match(r"replayed (\d+) case\(s\): .* (\d+) unreadable, (\d+) protocol error\(s\), (\d+) harness", summary)
    assert m, summary
    replayed, unreadable, plugin, broken = (int(g) for g in m.groups())
    assert replayed + unreadable + plugin == MUTATED + RAW and broken == 0, summary  # nothing lost from the count
    assert "harness error" not in p.stderr, p.stderr

    for path in rng.sample(cases, RUN_ONE_BY_ONE):
        tally.check(epfuzz(art, "run", path.name, timeout=BOUND_S), {0, 1, 2}, path.read_bytes()[:200])
    for path in sorted(raw.iterdir())[:4]:
        tally.check(epfuzz(art, "run", str(path), timeout=BOUND_S), {0, 1}, path.name)

    # device-like paths
    fifo = art / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(SOURCES[0].read_bytes()))
    writer.start()
    tally.check(epfuzz(art, "run", "fifo", timeout=BOUND_S), {1}, "fifo with a writer")
    writer.join(timeout=30)
    (art / "loop").symlink_to("loop")
    devices = ["/dev/null", "/dev/zero", "/dev/urandom", ".", "loop", "missing.json", "/proc/self/mem", "-"]
    for dev in devices:
        for raw_flag in ([], ["--raw", "--protocol", "deepep_v2_dispatch"]):
            p = epfuzz(art, "run", dev, *raw_flag, timeout=BOUND_S, stdin="")
            tally.check(p, {0, 1, 2}, dev)
    fifo.unlink()
    (art / "loop").unlink()

    # plug-ins that loop, allocate, exit or raise, under every command that runs one: on the regression cases'
    # inputs as raw bytes, which --protocol names the protocol of (a case runs as the protocol it names)
    (art / "mb-inputs").mkdir()
    inputs = [art / "mb-inputs" / src.stem for src in SOURCES[:2]]
    for src, dest in zip(SOURCES, inputs):
        dest.write_bytes(bytes.fromhex(json.loads(src.read_text())["input"]))
    for kind in bad_plugins.KINDS:
        env = bad_plugins.env(kind)
        want = {3} if bad_plugins.OUTCOME[kind] == "protocol error" else {1}
        for cmd in (["run"], ["explain"], ["explore", "--max-states", "2000"], ["minimize", "-o", "min.json"]):
            p = epfuzz(art, *cmd, str(inputs[0]), "--protocol", "mb:Bad", env=env, timeout=BOUND_S)
            tally.check(p, want, (kind, cmd))
        (art / "min.json").unlink(missing_ok=True)
        p = epfuzz(art, "replay", "--strict", str(inputs[0]), str(inputs[1]), "--protocol", "mb:Bad", env=env,
                   timeout=BOUND_S)
        tally.check(p, want, (kind, "replay"))
        assert "replayed 2 case(s)" in p.stdout or "replayed 0 case(s)" in p.stdout and "2 protocol error" in p.stdout

    assert not (art / "CODE-RAN").exists()  # no case imported the module lying beside it
    after = _digest(art)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing it read was changed
    print(f"\nbad-input generator (seed {SEED}): {MUTATED} mutated cases + {RAW} raw inputs in one replay, "
          f"{RUN_ONE_BY_ONE} + 4 run one by one, {len(devices) * 2 + 1} device-like paths, "
          f"{len(bad_plugins.KINDS)} plug-in misbehaviours x 5 commands; {tally.commands} commands, exit codes "
          f"{dict(sorted(tally.by_code.items()))}; 0 tracebacks, 0 past the {BOUND_S} s bound, 0 files changed")
    assert tally.commands == 1 + RUN_ONE_BY_ONE + 4 + 1 + len(devices) * 2 + len(bad_plugins.KINDS) * 5


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_case_json_never_reaches_a_traceback_in_process(seed, capsys):
    """The same mutations through the parser alone (no process start): many more cases, cheaply."""
    from epfuzz.cases.corpus import parse_case
    from epfuzz.infra.errors import EpfuzzError

    rng = random.Random(seed)
    kinds: dict[str, int] = {}
    for _ in range(400):
        src = rng.choice(SOURCES).read_bytes()
        obj = json.loads(src)
        for _ in range(rng.randrange(1, 5)):
            obj = _mutate_json(obj, rng)
        data = json.dumps(obj).encode() if rng.random() < 0.7 else _mutate_bytes(json.dumps(obj).encode(), rng)
        try:
            parse_case(data, "gen", "gen")
            kinds["parsed"] = kinds.get("parsed", 0) + 1
        except EpfuzzError as e:
            assert "\n" not in str(e)
            kinds["refused"] = kinds.get("refused", 0) + 1
    assert sum(kinds.values()) == 400 and kinds.get("refused", 0) > 0
    print(f"\nparser generator (seed {seed}): {kinds}")
