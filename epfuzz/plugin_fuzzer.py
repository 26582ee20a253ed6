#!/usr/bin/env python3
"""The harness script of every libFuzzer campaign: a built-in protocol by name, or a user protocol
given as `--protocol=module:Attr` (no atheris code to write).

    python -m epfuzz.plugin_fuzzer --protocol=deepep_v2_dispatch CORPUS -max_total_time=60
    python -m epfuzz.plugin_fuzzer --protocol=examples.seqflag:SeqFlag CORPUS -max_total_time=60

epfuzz (and a plug-in's own module) is instrumented for coverage; the protocol is resolved inside the
instrumented import, since the registry imports a built-in protocol's family on first use.
"""

import contextlib
import os
import sys

import atheris


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
    plugin = ":" in spec
    with atheris.instrument_imports(include=["epfuzz", *([spec.split(":")[0].split(".")[0]] if plugin else [])]):
        from epfuzz.errors import InputError
        from epfuzz.harness import main
        from epfuzz.protocols import get_protocol, load_plugin

        # import (and instrument) the protocol's module now: a plug-in is named on the command line
        if plugin:
            load_plugin(spec)
        else:
            with contextlib.suppress(InputError):  # an unknown name: main() says so in one line (exit 2)
                get_protocol(spec)
    main(spec, [a for a in sys.argv if not a.startswith("--protocol=")])
