"""The repair catalogue reads a receiver's options off its `__init__` (`receiver_options`): a receiver mypyc
compiled shows `(*args, **kwargs)` there, so the catalogue reads its source (issue 31 compiled the built-in
protocols, and every compiled receiver's options vanished from repairs). Both paths must give the same edits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.repair.catalogue import init_defaults, receiver_options

PROBE = """
import json
from epfuzz.protocols import BUILTIN, get_protocol
from epfuzz.repair.catalogue import receiver_options
print(json.dumps({n: [[e.name, e.doc, e.receiver_option] for e in receiver_options(get_protocol(n))] for n in BUILTIN}))
"""


def _here() -> dict[str, list[list[str]]]:
    return {n: [[e.name, e.doc, e.receiver_option] for e in receiver_options(get_protocol(n))] for n in BUILTIN}


def test_receiver_options_same_on_both_paths() -> None:
    env = {**os.environ, "EPFUZZ_PURE": "1"}
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    pure = json.loads(res.stdout.strip().splitlines()[-1])
    assert _here() == pure
    assert pure["shared_counter"] and pure["deep_gdr"] and pure["inband_tag"]  # options exist to compare


def test_init_defaults_of_a_plain_class_and_a_subclass() -> None:
    class A:
        def __init__(self, x: int, flag: bool = False, *, other: bool = True) -> None:
            pass

    class B(A):
        pass

    assert init_defaults(B) == [("flag", False), ("other", True)]
    assert init_defaults(object) == []
