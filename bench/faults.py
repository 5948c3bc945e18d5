"""Fault sweep: run every test in tests/faults/ and print what mtkit survives: "row | fault | expected | got".

    python bench/faults.py                 # all of tests/faults/
    python bench/faults.py -k train        # only the training faults
    python bench/faults.py -k serve        # only the server's (issue 37 rows 1-4: Origin, Host, key, bodies, hook)
    python bench/faults.py --row '#37'     # only the faults of issue 37's rows (ISSUE_ROWS)
    python bench/faults.py --row '#46.3'   # only the test file of issue 46's row 3
    python bench/faults.py --row '#57'     # the model-directory, server, train and export faults of issue 57

Each test drives the real `mtkit` command (`python -m mtkit` with this interpreter, the same
code the installed console script runs) with tiny models, signals sent by the test, damaged
files or a mocked full disk. A test whose docstring reads "fault: ...; expected: ..." gives
its row those words; any other is named by its file and function. "row" is the issue finding
the test's file answers (ISSUE_ROWS), "-" for the older ones. "got" is "as expected"
when the test passed, else the first line of its failure. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "faults"
sys.path.insert(0, str(ROOT))  # the tests import `tests.*`; a script's sys.path[0] is bench/, not the checkout
DOCSTRING = re.compile(r"fault:\s*(?P<fault>.+?);\s*expected:\s*(?P<expected>.+?)\.?\s*$", re.S)


# The finding of an issue that each fault test answers, printed as its row's first column: one
# entry per test file, so that the fixes of an issue's rows are added (and merged) side by side.
ISSUE_ROWS: dict[str, str] = {
    "test_serve_refuses_web_pages_and_foreign_host_names": "#37.1",
    "test_serve_asks_for_an_api_key_and_warns_when_open": "#37.2",
    "test_serve_answers_every_bad_body_with_one_json_line": "#37.3",
    "test_a_real_serve_process_refuses_bad_requests_without_a_traceback": "#37.3",
    "test_serve_runs_no_code_named_in_its_environment": "#37.4",
    "test_train_survives_sigterm_and_ctrl_c": "#37.5",
    "test_train_stops_validation_at_sigterm": "#37.6",
    "test_train_refuses_a_resume_that_ranks_see_differently": "#37.7",
    "test_average_never_writes_over_its_inputs_or_a_training_checkpoint": "#37.8",
    "test_export_keeps_the_files_a_user_added_to_its_directory": "#37.9",
    "test_restart_moves_only_mtkits_own_files": "#37.10",
    "test_prepare_and_bpe_lock_their_data_directory": "#37.11",
    "test_a_work_directory_is_judged_live_by_its_lock_not_its_pid": "#37.12",
    "test_the_train_lock_follows_no_link_and_never_hangs_the_other_ranks": "#37.13",
    "test_system_errors_and_damaged_files_are_one_sentence": "#37.14",
    "test_every_corpus_source_is_pinned_and_downloads_stay_on_https": "#37.15",
    "test_metrics_jsonl_is_strict_json": "#37.16",
    "test_outputs_that_are_not_regular_files_are_written_into_not_replaced": "#46.1",
    "test_serve_keeps_answering_while_idle_clients_hold_connections": "#46.2",
    "test_serve_decodes_no_request_whose_client_left_or_whose_time_ran_out": "#46.3",
    "test_train_saves_and_exits_129_at_a_hang_up": "#46.4",
    "test_serve_drains_at_a_hang_up_as_at_sigterm": "#46.5",
    "test_one_huge_line_is_cut_before_it_is_encoded": "#46.6",
    "test_a_killed_torchrun_rank_is_named_in_one_sentence": "#46.7",
    "test_a_damaged_hugging_face_config_is_one_sentence_naming_the_field": "#46.8",
    "test_a_resumed_cpu_run_equals_a_straight_one_bitwise_when_the_matmul_measurement_would_flip": "#46.9",
    "test_a_truncated_ctranslate2_vocabulary_is_one_sentence": "#46.10",
    "test_a_full_standard_output_is_one_sentence_and_exit_1": "#46.11",
    "test_a_cut_line_in_metrics_jsonl_costs_only_that_line": "#46.12",
    "test_serve_warns_when_its_api_key_file_is_readable_by_others": "#46.13",
    "test_serve_takes_the_first_line_of_the_api_key_file": "#46.14",
    "test_serve_matches_wildcard_host_names_as_starlette_does": "#46.15",
    "test_translate_leaves_no_temporary_file_at_sigterm_or_a_hang_up": "#46.16",
    "test_export_never_removes_or_writes_outside_its_directory": "#57.1",
    "test_bpe_from_an_opus_mt_multilingual_model_writes_its_own_language_tokens": "#57.2",
    "test_serve_refuses_past_its_connection_limit_with_503_and_never_resets": "#57.3",
    "test_serve_refuses_a_target_language_its_model_has_no_token_for_at_start": "#57.6",
    "test_a_model_directory_is_read_only_from_plain_files_of_bounded_size": "#57.7",
    "test_a_name_that_is_no_path_and_no_valid_hub_name_is_one_sentence": "#57.9",
    "test_a_huge_max_position_embeddings_is_one_sentence_naming_the_field": "#57.10",
    "test_a_multilingual_model_warns_once_about_lines_without_a_target_language": "#57.11",
    "test_train_on_a_data_directory_bpe_is_writing_names_the_writer": "#57.12",
    "test_train_stopped_before_its_first_save_exits_143_and_says_nothing_was_saved": "#57.13",
    "test_a_clean_resume_with_scoring_models_retrained_in_place_starts_over": "#74.3",
    "test_clean_writes_into_named_pipes_given_as_its_outputs": "#74.11",
}


def _sentence(name: str) -> str:
    return name.removeprefix("test_").replace("_", " ")


class _Collector:
    """A pytest plugin that keeps each test's docstring and outcome."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:  # after -k deselection
            doc = " ".join((getattr(item, "function", None).__doc__ or "").split())  # type: ignore[union-attr]
            m = DOCSTRING.search(doc)
            module = _sentence(Path(str(item.fspath)).stem)
            fault = m["fault"] if m else f"{module}: {_sentence(item.name.split('[')[0])}"
            if hasattr(item, "callspec"):
                fault += f" [{item.callspec.id}]"
            self.rows[item.nodeid] = {
                "row": ISSUE_ROWS.get(Path(str(item.fspath)).stem, "-"),
                "fault": fault,
                "expected": m["expected"] if m else "the test passes",
                "got": "not run",
                "passed": False,
            }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.rows.get(report.nodeid)
        if row is None or (report.when != "call" and report.passed):
            return
        if report.passed:
            row.update(got="as expected", passed=True)
        elif report.skipped:
            row.update(got="skipped", passed=False)
        else:
            first = str(report.longrepr).strip().splitlines()
            row.update(got=f"FAILED ({report.when}): {first[-1][:100] if first else ''}", passed=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="Only the faults whose test names match (pytest -k).")
    parser.add_argument("--row", default="", help="Only the test files whose issue row starts so ('#37', '#37.8').")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # the tests import `tests.support`; a script run puts only bench/ on the path
    collector = _Collector()
    start = time.monotonic()
    wanted = [
        str(FAULTS / f"{stem}.py")
        for stem, row in ISSUE_ROWS.items()
        if args.row and (row == args.row or row.startswith(args.row.rstrip(".") + "."))
    ]
    if args.row and not wanted:
        parser.error(f"no test file answers issue row {args.row!r}; ISSUE_ROWS lists them.")
    pytest_args = [*(wanted or [str(FAULTS)]), "-q", "-p", "no:cacheprovider", "--no-header", "-rN"]
    code = pytest.main([*pytest_args, *(["-k", args.k] if args.k else [])], plugins=[collector])
    rows = list(collector.rows.values())
    width = max((len(r["fault"]) for r in rows), default=5)
    rw = max((len(r["row"]) for r in rows), default=3)
    print(f"\n{'row':<{rw}} | {'fault':<{width}} | expected | got")
    for r in rows:
        print(f"{r['row']:<{rw}} | {r['fault']:<{width}} | {r['expected']} | {r['got']}")
    survived = sum(r["passed"] for r in rows)
    print(
        json.dumps(
            {
                "bench": "faults",
                "python": sys.executable,
                "faults": len(rows),
                "survived": survived,
                "failed": [r["fault"] for r in rows if not r["passed"]],
                "seconds": round(time.monotonic() - start, 1),
                "pytest_exit": int(code),
            }
        )
    )
    return 0 if survived == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
