"""A JSON log's `error` event names the file it is about in its own `path` field (null where it is about none).

Operator trial 1205 item 5: error events had only the message, with the path somewhere in it: a CI job had to cut
it out of the text (a bad case file, a bad corpus entry, a crash artifact triage could not read)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_output_for_people import epfuzz


def _errors(stderr: str) -> list[dict[str, object]]:
    events = [json.loads(x) for x in stderr.splitlines()]
    return [e for e in events if e["event"] == "error"]


def test_the_error_event_of_a_bad_case_file_names_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"scenario": 5')
    p = epfuzz("--log-format", "json", "run", str(bad), cwd=tmp_path)
    assert p.returncode == 2
    [e] = _errors(p.stderr)
    assert e["path"] == str(bad) and str(e["message"]).startswith(f"{bad}: not valid JSON"), e
    p = epfuzz("run", str(bad), cwd=tmp_path)  # for people the line is as it was
    assert p.stderr.startswith(f"epfuzz: {bad}: not valid JSON"), p.stderr


def test_a_missing_file_and_an_error_about_no_file(tmp_path):
    p = epfuzz("--log-format", "json", "run", str(tmp_path / "nosuch.json"), cwd=tmp_path)
    [e] = _errors(p.stderr)
    assert p.returncode == 2 and e["path"] == str(tmp_path / "nosuch.json"), e
    p = epfuzz("--log-format", "json", "fuzz", "nosuch", cwd=tmp_path)
    [e] = _errors(p.stderr)
    assert p.returncode == 2 and "path" in e and e["path"] is None, e  # the same keys, null


def test_replay_names_each_bad_corpus_entry_and_manifest(tmp_path):
    folder = tmp_path / "corpus" / "dispatch_any_fuzzer"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_text("[]")
    (folder / "broken.json").write_text("{")
    (folder.parent / "dispatch_any_fuzzer.verdicts").write_text("preset spec\nnot a line\n")
    p = epfuzz("--log-format", "json", "replay", str(folder), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    paths = {Path(str(e["path"])).name for e in _errors(p.stderr)}
    assert paths == {"bad.json", "broken.json", "dispatch_any_fuzzer.verdicts"}, _errors(p.stderr)


def test_triage_names_the_crash_artifact_it_left_out(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    crash = run / "crash-00"
    crash.write_bytes(b"")  # the simplest scenario: clean, so left out of the table with a line
    p = epfuzz("--log-format", "json", "triage", "--protocol", "dispatch_any", str(run), cwd=tmp_path)
    said = [e for e in _errors(p.stderr) if "not grouped" in str(e["message"])]
    assert said and said[0]["path"] == str(crash), p.stderr
