#!/usr/bin/env python3
"""The harness script of every libFuzzer campaign: a built-in protocol by name, or a user protocol
given as `--protocol=module:Attr` (no atheris code to write).

    python -m epfuzz.continuous.plugin_fuzzer --protocol=deepep_v2_dispatch CORPUS -max_total_time=60
    python -m epfuzz.continuous.plugin_fuzzer --protocol=examples.seqflag:SeqFlag CORPUS -max_total_time=60

Nothing is line-instrumented (epfuzz.continuous.harness): libFuzzer's coverage is the semantic features of
each run, the same whether this starts as `python -m epfuzz.continuous.plugin_fuzzer` or as a script.
"""

import os
import sys


def _protocol(argv: list[str]) -> str:
    for a in argv:
        if a.startswith("--protocol="):
            return a.split("=", 1)[1]
    spec = os.environ.get("EPFUZZ_PROTOCOL", "")
    if not spec:
        sys.stderr.write("epfuzz: plugin_fuzzer needs --protocol=NAME or --protocol=module:Attr\n")
        raise SystemExit(2)
    return spec


if __name__ == "__main__":
    spec = _protocol(sys.argv)
    os.environ["EPFUZZ_PROTOCOL"] = spec  # for libFuzzer's child processes
    named = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--backend=")]
    if (named[-1] if named else os.environ.get("EPFUZZ_BACKEND", "sim")) != "sim":
        import atheris

        # off the sim there are no semantic features (they are read off the emulator's trace), so libFuzzer's
        # coverage there is the lines of what such a run executes: the epoch start and the op check (not the
        # emulator, which a verbs or cuda input never reaches); without it the corpus stays empty
        with atheris.instrument_imports(include=["epfuzz.model.epoch", "epfuzz.protocols.opcheck"]):
            import epfuzz.model.epoch  # noqa: F401
            import epfuzz.protocols.opcheck  # noqa: F401
    from epfuzz.continuous.harness import main

    main(spec, [a for a in sys.argv if not a.startswith("--protocol=")])
