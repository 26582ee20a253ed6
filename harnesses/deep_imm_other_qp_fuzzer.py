#!/usr/bin/env python3
"""atheris harness for the `deep_imm_other_qp` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

    python harnesses/deep_imm_other_qp_fuzzer.py corpus/deep_imm_other_qp_fuzzer -max_total_time=60

No module is line-instrumented: libFuzzer's coverage is epfuzz's semantic features
(what the receiver read and watched, reorderings by those roles; docs/search.md).
"""

import sys

from epfuzz.harness import main

if __name__ == "__main__":
    main("deep_imm_other_qp", sys.argv)
