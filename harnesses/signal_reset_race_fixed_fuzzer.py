#!/usr/bin/env python3
"""atheris harness for the `signal_reset_race_fixed` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

    python harnesses/signal_reset_race_fixed_fuzzer.py corpus/signal_reset_race_fixed_fuzzer -max_total_time=60

No module is line-instrumented: libFuzzer's coverage is epfuzz's semantic features
(what the receiver read and watched, reorderings by those roles; docs/search.md).
"""

import sys

from epfuzz.harness import main

if __name__ == "__main__":
    main("signal_reset_race_fixed", sys.argv)
