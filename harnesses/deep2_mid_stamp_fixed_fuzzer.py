#!/usr/bin/env python3
"""atheris harness for the `deep2_mid_stamp_fixed` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

    python harnesses/deep2_mid_stamp_fixed_fuzzer.py corpus/deep2_mid_stamp_fixed_fuzzer -max_total_time=60

epfuzz's own modules are instrumented, so coverage follows emulator paths (rule
cells, queue and signal branches), not only the decoder.
"""

import sys

import atheris

with atheris.instrument_imports(include=["epfuzz"]):
    from epfuzz.harness import main

if __name__ == "__main__":
    main("deep2_mid_stamp_fixed", sys.argv)
