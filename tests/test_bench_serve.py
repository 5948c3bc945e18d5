"""The serve benches run whole against a real `mtkit serve` of a tiny model (bench/harness.py's `serving`), a few
requests each: a bench that stopped working, or whose checks stopped checking, goes unnoticed until its figures are
needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.recipes import load_script

pytest.importorskip("httpx")
pytestmark = pytest.mark.slow


def bench(script: str, *args: str, cwd: Path) -> dict:
    """Run bench/SCRIPT with ARGS and --record; its record."""
    record = cwd / "record.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--record", str(record)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads(record.read_text(encoding="utf-8")))


def test_serve_protocols_times_every_api_the_model_alone_and_health_and_checks_they_agree(
    cli_model: Path, tmp_path: Path
) -> None:
    data = bench("serve_protocols.py", "--model", str(cli_model), "--rounds", "2", "--warmup", "1", "--gap-ms", "0",
                 "--threads", "1", "--in-process", "--health", "--batch-wait-ms", "0", cwd=tmp_path)  # fmt: skip
    rows = ["mtkit", "OpenNMT-py", "LibreTranslate", "DeepL", "OpenAI", "in-process Translator.translate"]
    assert list(data["results"]) == [*rows, "GET /health"]
    assert all(len(ms) == 2 for ms in data["passes"].values()) and data["settings"]["batch_wait_ms"] == 0
    assert data["results"]["mtkit"]["overhead_ms"] == 0 and data["results"]["mtkit"]["paired_ratio"] == 1


def test_a_row_that_answers_otherwise_stops_serve_protocols(monkeypatch, cli_model: Path) -> None:
    """Its check that every API gives mtkit's own translation is what makes its latencies comparable."""
    script = load_script("bench/serve_protocols.py")
    name, path, body, _ = script.PROTOCOLS[1]
    monkeypatch.setattr(script, "PROTOCOLS", [script.PROTOCOLS[0], (name, path, body, lambda answer: "another")])
    monkeypatch.setattr(sys, "argv", ["serve_protocols.py", "--model", str(cli_model), "--rounds", "1", "--warmup",
                                      "0", "--gap-ms", "0", "--threads", "1"])  # fmt: skip
    with pytest.raises(SystemExit, match="the rows differ on line 1"):
        script.main()


def test_serve_load_answers_every_good_client_and_each_bad_request_as_expected(cli_model: Path, tmp_path: Path) -> None:
    lines = tmp_path / "input.txt"
    lines.write_text("".join(f"a short line number {i}\n" for i in range(8)), encoding="utf-8")
    data = bench("serve_load.py", "--model", str(cli_model), "--input", str(lines), "--clients", "2,4", "--requests",
                 "2", "--max-len-b", "0", "--threads", "1", "--bad-clients", "2", "--bad-per-s", "100",
                 "--idle-sockets", "4", "--abandon-per-s", "20", "--rounds", "2", cwd=tmp_path)  # fmt: skip
    results = data["results"]
    assert list(results["batch"]) == ["all", "2_at_a_time", "4_at_a_time"]
    assert [(r["clients"], r["answered"], r["lost"], r["errors"]) for r in results["serve"]] == [
        (2, 4, 0, {}), (2, 4, 0, {}), (4, 8, 0, {}), (4, 8, 0, {})]  # fmt: skip
    for run in results["serve_with_bad"]:
        assert run["answered"] == run["requests"] and run["bad"]["sent"] > 0 and run["bad"]["unexpected"] == {}
        assert run["sockets"]["opened"] >= 4
    effects = results["good_with_bad_over_without"]
    assert [(e["clients"], e["round"]) for e in effects] == [(2, 1), (2, 2), (4, 1), (4, 2)]
    assert results["server_log_tracebacks"] == 0 and results["server_exit_code"] == 0
    assert len(data["passes"]) == 8 and all(len(p["latency_ms"]) == 2 * p["clients"] for p in data["passes"])


def test_serve_load_knows_the_status_each_bad_request_gets() -> None:
    """A kind whose expected status is wrong shows up as `unexpected`, not as a pass."""
    script = load_script("bench/serve_load.py")
    kinds = script.kinds("key", "127.0.0.1:1")
    assert {kind: status for kind, (status, _) in kinds.items()} == {
        "foreign_origin": 403, "foreign_host": 400, "no_api_key": 401, "text_plain": 415, "broken_json": 400,
        "deep_nesting": 422, "huge_number": 422, "huge_alpha": 422}  # fmt: skip
    assert b"Authorization: Bearer key" not in kinds["no_api_key"][1]
    assert b"Host: evil.example" in kinds["foreign_host"][1]
    summary = script.bad_summary({"no_api_key": {"401": 3}, "huge_alpha": {"422": 1, "500": 1}}, wall=1.0)
    assert summary["sent"] == 5 and summary["unexpected"] == {"huge_alpha": {"500": 1}}


def test_serve_key_limits_keeps_the_limits_and_counts_what_a_flood_met(cli_model: Path, tmp_path: Path) -> None:
    data = bench("serve_key_limits.py", "--model", str(cli_model), "--clients", "1", "--requests", "2", "--flooders",
                 "2", "--flood-rate", "40", "--rpm", "2", "--rounds", "2", "--threads", "1", cwd=tmp_path)  # fmt: skip
    limited = data["results"]["limited key"]
    assert limited["answers"]["200"] == 2 and limited["answers"]["429"] >= 2 and limited["answered_past_a_limit"] == 0
    assert [p["flooded"] for p in data["passes"]] == [False, True, True, False]
    assert all(len(p["free_ms"]) == 2 for p in data["passes"])


def test_serve_key_limits_finds_an_answer_past_a_limit_and_a_refusal_without_retry_after() -> None:
    check = load_script("bench/serve_key_limits.py").check_limits
    kept = [(float(t), 200, 10, False) for t in range(2)] + [(2.0, 429, 10, True)]
    assert check(kept, rpm=2, cpd=100) == {
        "answers": {200: 2, 429: 1}, "most_200_in_a_minute": 2, "characters_answered": 20, "past_a_limit": False,
        "refusals_without_retry_after": 0, "other_statuses": 0}  # fmt: skip
    assert check([*kept, (59.0, 200, 10, False)], rpm=2, cpd=100)["past_a_limit"]  # three in one minute
    assert check([*kept, (61.5, 200, 90, False)], rpm=2, cpd=100)["past_a_limit"]  # 110 characters a day
    assert not check([*kept, (61.5, 200, 10, False)], rpm=2, cpd=100)["past_a_limit"]  # a new minute
    found = check([*kept, (3.0, 429, 10, False), (4.0, 500, 10, False)], rpm=2, cpd=100)
    assert (found["refusals_without_retry_after"], found["other_statuses"], found["past_a_limit"]) == (1, 1, False)


def test_serve_refusal_cpu_times_each_apis_refusal_against_a_baseline(cli_model: Path, tmp_path: Path) -> None:
    data = bench("serve_refusal_cpu.py", "--model", str(cli_model), "--baseline", str(ROOT), "--refusals", "30",
                 "--rounds", "2", cwd=tmp_path)  # fmt: skip
    paths = ["/translate", "/v2/translate", "/v1/chat/completions"]
    assert [(p["round"], p["checkout"]) for p in data["passes"]] == [(0, "this"), (0, "baseline"),
                                                                     (1, "baseline"), (1, "this")]  # fmt: skip
    assert all(
        p[path]["us_cpu_a_refusal"] >= 0 and p[path]["us_round_trip"] > 0 for p in data["passes"] for path in paths
    )
    assert sorted(data["results"]["this / baseline (paired)"]) == sorted(paths)
    assert data["settings"]["baseline"]["commit"] == data["commit"]["commit"]


def test_the_flood_key_is_used_up_for_as_long_as_a_half_may_take() -> None:
    wait = load_script("bench/serve_key_limits.py").refill_wait
    assert wait([], now=100.0, hold_s=20.0) == 0.0  # nothing answered this minute: use it up now
    assert wait([90.0, 95.0], now=100.0, hold_s=20.0) == 0.0  # the first leaves at 150, after the half
    assert wait([50.0, 55.0], now=100.0, hold_s=20.0) == 15.0  # 50 would leave mid-half: wait until 55 has left
    assert wait([10.0, 30.0], now=100.0, hold_s=20.0) == 0.0  # the window is empty again


def test_a_flood_that_keeps_slowing_the_other_key_is_called_so_within_the_noise() -> None:
    script = load_script("bench/serve_key_limits.py")
    nine_of_ten = [1.17, 1.01, 0.997, 1.12, 1.22, 1.21, 1.14, 1.21, 1.21, 1.06]
    assert round(script.sign_test(nine_of_ten), 4) == 0.0107 and script.slowed(nine_of_ten, spread=1.3)
    assert script.slowed([1.05, 1.02, 1.03, 1.01], spread=1.2)  # every round slower
    assert not script.slowed([1.04, 1.16, 1.28, 0.9, 0.96, 1.21], spread=1.3)  # 4 of 6: chance, p 0.34
    assert script.slowed([1.4, 1.3, 0.9], spread=1.2)  # past the clean spread
