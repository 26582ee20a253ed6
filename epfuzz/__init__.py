"""Fault-injection fuzzing for GPU expert-parallel write-then-signal protocols."""

from epfuzz import native

native.install()  # the compiled emulator or its pure-Python sources, decided once (see epfuzz.native)
