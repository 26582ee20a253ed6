"""The search, built from small parts (LibAFL's components, one file each).

- `executor`: input bytes -> scenario -> one emulator run (an `Execution` with its trace);
- `feedbacks`: named feature functions over a run (what the receiver read and watched, reorder
  pairs by those roles, slack, progress, shape; line coverage as one more), pluggable;
- `corpus` and `scheduler`: kept inputs and which one to mutate next (energy, bounded cost);
- `moves`: the one registry of named mutations (fresh, schedule, IR and byte moves), pluggable;
- `sink`: the one place a finding is signed, written and announced;
- `monitor`: progress rows, the terminal line, per-move and per-feedback stats;
- `engines/`: guided (the default of `epfuzz fuzz` on sim), the libFuzzer harness parts, and the
  random and sampler baselines, each composing the above.

docs/search.md says how to add a feedback or a move.
"""
