#!/usr/bin/env python3
"""atheris harness for the `shared_counter` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

    python harnesses/shared_counter_fuzzer.py corpus/shared_counter_fuzzer -max_total_time=60

No module is line-instrumented: libFuzzer's coverage is epfuzz's semantic features
(what the receiver read and watched, reorderings by those roles; docs/search.md).
"""

import sys

from epfuzz.harness import main

if __name__ == "__main__":
    main("shared_counter", sys.argv)
