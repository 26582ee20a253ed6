"""Triage: from raw findings to bugs, the same whatever the clock or the load.

- `passes` and `readdress`: the minimizer's steps (the search itself is `epfuzz.triage.minimize`);
- `cause`: what a minimized finding needs (rule cells, knobs), its root cause;
- `group`: raw findings grouped by root cause, bounded in steps, with a cache across runs;
- `identity`: the crash a harness raises for a finding, named so ClusterFuzz tells bugs apart.
"""
