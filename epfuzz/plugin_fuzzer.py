#!/usr/bin/env python3
"""Harness for a user protocol given as `--protocol=module:Attr`: no atheris code to write.

    python -m epfuzz.plugin_fuzzer --protocol=examples.seqflag:SeqFlag CORPUS -max_total_time=60

Both epfuzz and the protocol's module are instrumented for coverage.
"""

import os
import sys

import atheris


def _protocol(argv: list[str]) -> str:
    for a in argv:
        if a.startswith("--protocol="):
            return a.split("=", 1)[1]
    spec = os.environ.get("EPFUZZ_PROTOCOL", "")
    if not spec:
        sys.stderr.write("epfuzz: plugin_fuzzer needs --protocol=module:Attr\n")
        raise SystemExit(2)
    return spec


if __name__ == "__main__":
    spec = _protocol(sys.argv)
    os.environ["EPFUZZ_PROTOCOL"] = spec  # for libFuzzer's child processes
    with atheris.instrument_imports(include=["epfuzz", spec.split(":")[0].split(".")[0]]):
        from epfuzz.harness import main
        from epfuzz.protocols import load_plugin

        load_plugin(spec)  # import (and instrument) the user's module now: named on the command line
    main(spec, [a for a in sys.argv if not a.startswith("--protocol=")])
