"""Engines: a few lines each, composing the parts of epfuzz.search.

- `guided` (`epfuzz fuzz`'s default on the sim backend): executor + feedbacks + corpus +
  scheduler + moves + monitor;
- `libfuzzer`: the atheris harnesses' custom mutator (the same moves) and counters (the same
  features);
- `random` and `sampler`: the baselines of the search benchmark.
"""
