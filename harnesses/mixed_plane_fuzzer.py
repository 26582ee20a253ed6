#!/usr/bin/env python3
"""atheris harness for the `mixed_plane` protocol (OSS-Fuzz layout: <name>_fuzzer.py).

From the root of an epfuzz checkout, whose seeds for it are corpus/mixed_plane_fuzzer:

    mkdir -p runs/libfuzzer/corpus
    python harnesses/mixed_plane_fuzzer.py runs/libfuzzer/corpus \
        corpus/mixed_plane_fuzzer -max_total_time=60 -artifact_prefix=runs/libfuzzer/

libFuzzer writes new inputs into its first corpus folder: a fresh one, never the checked-in seeds
(corpus/mixed_plane_fuzzer is read only; an input added there fails `make replay`).
An installed epfuzz (`epfuzz list` says where) carries the same seeds as
epfuzz/_corpus/mixed_plane_fuzzer, and an OSS-Fuzz build zips them beside the fuzzer as
mixed_plane_fuzzer_seed_corpus.zip.

Nothing is line-instrumented: libFuzzer's coverage is the search's semantic features of each run
(epfuzz.search.feedbacks, as counters) and its mutator the search's moves, the same search as
`epfuzz fuzz` runs.
"""

import sys

from epfuzz.continuous.harness import main

if __name__ == "__main__":
    main("mixed_plane", sys.argv)
