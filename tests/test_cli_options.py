"""Options said once: config fields are flags, presets show their values, config files, choices and completion."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import typing

import pytest
import yaml
from typer.testing import CliRunner

from mtkit.cli import app
from mtkit.cli.options import option_fields
from mtkit.config import PRESETS, DecodeConfig, ModelConfig, SamplingConfig, TrainConfig
from mtkit.train.finetune import cpu_update_seconds

WIDE = {"COLUMNS": "400"}  # one help row a line, so that a test can read it


def flat(text: str) -> str:
    """Help text as one line of words, without the boxes rich draws around it."""
    return " ".join(text.replace("│", " ").split())


def a_valid_value(cls: type, field: dataclasses.Field) -> str:
    """A value unlike the defaults that every option field of that type accepts."""
    if field.metadata["choices"]:
        return field.metadata["choices"][-1]
    kind = typing.get_type_hints(cls)[field.name]
    if set(typing.get_args(kind)) == {int, str}:  # a number or a word: --max-tokens 7 or auto
        return "7"
    return {int: "7", float: "0.25"}[kind]


def test_every_option_field_reaches_the_config_under_its_flag(cli, tmp_path):
    args, expected = [], {}
    for cls in (TrainConfig, ModelConfig):
        for f in option_fields(cls):
            if typing.get_type_hints(cls)[f.name] is bool:  # a flag: the default is off, the flag alone turns it on
                args.append(f"--{f.name.replace('_', '-')}")
                expected[f.name.replace("_", "-")] = True
                continue
            value = a_valid_value(cls, f)
            args += [f"--{f.name.replace('_', '-')}", value]
            expected[f.name.replace("_", "-")] = yaml.safe_load(value)
    assert "--max-tokens" in args and "--dropout" in args and "--precision" in args
    done = cli("train", tmp_path, "--out", tmp_path / "run", *args, "--print-config")
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert {k: printed[k] for k in expected} == expected


def test_decoding_options_are_the_fields_of_decode_config(cli):
    done = cli("translate", "--help", env=WIDE)
    for f in option_fields(DecodeConfig) + option_fields(SamplingConfig):  # the options' rows, not the examples
        # the option's row and the lines its help wraps onto (which start with spaces in the table)
        block = re.search(rf"^\W+--{f.name.replace('_', '-')}\s.*(?:\n│ {{20,}}\S.*)*", done.stdout, re.M).group(0)
        row = " ".join(block.replace("│", " ").split())
        assert f.metadata["help"][:30] in row and f"[default: ({f.default})]" in row
    assert {f.name for f in option_fields(DecodeConfig)} == {f.name for f in dataclasses.fields(DecodeConfig)}


def test_train_help_shows_each_presets_values_and_choices(cli):
    text = flat(cli("train", "--help", env=WIDE).stdout)
    assert "[default: (tiny 1024, small/student-tiny/student-fast 2048, base/big 4096)]" in text
    assert "[default: (tiny/small/base/student-tiny/student-fast 0.1, big 0.3)]" in text  # --dropout, a model field
    assert "<tiny|small|base|big|student-tiny|student-fast>" in text and "<auto|fp32|bf16|fp16>" in text
    for preset in PRESETS.values():
        assert f"{preset.name}: {preset.about}" in text


def test_flags_show_no_value_and_every_help_ends_with_the_exit_codes(cli):
    commands = [c.name for c in app.registered_commands] + [None]
    for command in commands:
        done = cli(*([command] if command else []), "--help", env=WIDE)
        assert done.returncode == 0
        assert "<bool>" not in done.stdout, command
        assert "Exit codes: 0 done" in done.stdout and "130 interrupted" in flat(done.stdout), command


def test_a_config_file_is_read_and_the_command_line_wins(cli, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("preset: tiny\nmax-tokens: 777\nwarmup: 50\nset: [pre_norm=true]\nout: runs/x\n")
    done = cli("train", tmp_path, "--config", config, "--warmup", "5", "--print-config")
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert (printed["max-tokens"], printed["warmup"], printed["out"]) == (777, 5, "runs/x")
    assert printed["set"] == ["pre_norm=true"] and printed["log-every"] == PRESETS["tiny"].train.log_every
    again = tmp_path / "printed.yaml"
    again.write_text(done.stdout)
    assert cli("train", "--config", again, "--print-config").stdout == done.stdout  # a fixed point


def test_a_printed_base_config_keeps_the_token_target(cli, tmp_path):
    printed = yaml.safe_load(cli("train", tmp_path, "-o", "r", "--print-config").stdout)
    assert printed["preset"] == "base" and printed["update-freq"] is None  # still ~25k tokens per update


@pytest.mark.parametrize(
    "content, message",
    [
        ("max_token: 5\n", "unknown key 'max_token'; did you mean max-tokens?"),
        ("colour: red\n", "unknown key 'colour'."),
        ("- a list\n", "must hold a mapping of flag names to values"),
        ("warmup: [1\n", "is not valid YAML"),
    ],
)
def test_bad_config_files_are_one_sentence(cli, tmp_path, content, message):
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    done = cli("train", tmp_path, "-o", "r", "--config", config)
    assert done.returncode == 1 and message in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "shell, marker",
    [
        ("bash", "complete -o default -F _mtkit_completion mtkit"),
        ("zsh", "compdef _mtkit_completion mtkit"),
        ("fish", "complete --command mtkit"),
    ],
)
def test_completion_scripts_for_bash_zsh_and_fish(cli, shell, marker):
    done = cli(env={"_MTKIT_COMPLETE": f"source_{shell}"})
    assert done.returncode == 0 and marker in done.stdout


def test_choices_and_devices_are_completed(cli):
    def complete(words: str) -> list[str]:
        current = len(words.split()) - (0 if words.endswith(" ") else 1)  # the index of the word being typed
        env = {"_MTKIT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(current)}
        return cli(env=env).stdout.split()

    assert complete("mtkit train data --preset ") == list(PRESETS)
    assert complete("mtkit translate --lenpen ") == ["gnmt", "fairseq", "none"]
    assert "mps" in complete("mtkit translate --device ")
    assert complete("mtkit tr") == ["train", "translate"]


def test_show_completion_is_offered(cli):
    text = cli("--help").stdout
    assert "--install-completion" in text and "--show-completion" in text


def test_without_a_preset_a_cpu_run_says_what_base_costs_and_suggests_small(tmp_path, monkeypatch, caplog):
    (tmp_path / "bpe.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de", "vocab_size": 8000}))
    calls = []
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("mtkit.train.trainer.train", lambda *a, **k: calls.append((a, k)) or _Result())
    try:
        with caplog.at_level(logging.WARNING):
            done = CliRunner().invoke(app, ["train", str(tmp_path), "-o", str(tmp_path / "run"), "--threads", "2"])
    finally:  # the CLI's log handler writes to the runner's stderr, which is gone after this test
        for handler in [h for h in logging.getLogger().handlers if getattr(h, "_mtkit", False)]:
            logging.getLogger().removeHandler(handler)
    assert done.exit_code == 0, done.output
    assert calls and calls[0][0][2].d_model == 512  # base
    assert re.search(
        r"no --preset given: training the paper's `base` model, which on this CPU takes roughly \d+ s "
        r"an update; for a CPU, --preset small",
        caplog.text,
    )


def test_the_cpu_estimate_matches_the_measured_small_run_and_scales_with_the_model():
    small = dataclasses.replace(PRESETS["small"].model, vocab_size=8000)
    assert cpu_update_seconds(small, PRESETS["small"].train, threads=2) == pytest.approx(0.88, abs=0.1)
    base = dataclasses.replace(PRESETS["base"].model, vocab_size=37000)
    assert cpu_update_seconds(base, PRESETS["base"].train, threads=2) > 50


@dataclasses.dataclass
class _Result:
    step: int = 0
    best: float = 0.0
    stopped: str = "max_steps"


@pytest.mark.parametrize(
    "args, hint",
    [
        (("--max-update", "5"), "mtkit calls it --max-steps"),
        (("--fp16",), "mtkit calls it --precision fp16"),
        (("--lr=0.001",), "mtkit calls it --lr-scale"),
    ],
)
def test_fairseq_names_are_a_one_line_usage_error_with_mtkits_name(cli, tmp_path, args, hint):
    done = cli("train", tmp_path, "-o", tmp_path / "run", *args)
    assert done.returncode == 2 and hint in done.stderr and len(done.stderr.splitlines()) == 1


def test_serve_offers_the_precisions_translate_does(cli):
    """`mtkit serve --precision` takes translate's choices, int8 included (one rule: mtkit.runtime)."""
    for command in ("translate", "serve"):
        assert "<auto|fp32|bf16|fp16|int8>" in flat(cli(command, "--help", env=WIDE).stdout), command
