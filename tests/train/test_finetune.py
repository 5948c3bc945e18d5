"""`mtkit bpe --from MODEL` and `mtkit train --init MODEL` (mtkit/train/finetune.py) on an OPUS-MT directory."""

from __future__ import annotations

import json
import shutil

import pytest

from mtkit import checkpoint, sources
from mtkit.data.dataset import open_data
from mtkit.errors import MtkitError
from mtkit.train.finetune import FINETUNE_PEAK_LR, FINETUNE_WARMUP, sha256_of
from tests.support.cli import error_line, run_cli
from tests.support.opus import SAMPLE

pytest.importorskip("transformers")

TRAIN = ("--max-steps", "3", "--max-tokens", "400", "--valid-every", "3", "--device", "cpu", "--threads", "1")


@pytest.fixture(scope="module")
def raw_data(tmp_path_factory):
    """The sample as `mtkit prepare` leaves it: raw/{train,valid}.{en,de}."""
    data = tmp_path_factory.mktemp("ft") / "data"
    (data / "raw").mkdir(parents=True)
    (data / "prepare.json").write_text(json.dumps({"corpus": None, "src_lang": "en", "tgt_lang": "de"}))
    for split, name in (("train", "train"), ("valid", "val")):
        for lang in ("en", "de"):
            lines = (SAMPLE / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()[:120]
            (data / "raw" / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


@pytest.fixture(scope="module")
def opus_data(raw_data, opus_dir):
    done = run_cli("bpe", raw_data, "--from", opus_dir)
    assert done.returncode == 0, done.stderr
    return raw_data


def test_bpe_from_a_model_encodes_with_its_tokenizer(opus_data, opus_dir):
    from transformers import MarianTokenizer

    tok = MarianTokenizer.from_pretrained(opus_dir)
    ckpt = sources.find(opus_dir).checkpoint()
    assert (opus_data / "marian-tokenizer.json").read_bytes() == ckpt["vocab"]  # a name that says what it is
    assert not (opus_data / "spm.model").exists()
    data = open_data(opus_data)
    train = data.split("train")
    src = (opus_data / "raw" / "train.en").read_text(encoding="utf-8").splitlines()[:3]
    tgt = (opus_data / "raw" / "train.de").read_text(encoding="utf-8").splitlines()[:3]
    from mtkit.data.tokenizer import load_tokenizer

    vocab = load_tokenizer(ckpt["vocab"])
    for i in range(3):
        s, t = train.src[i].tolist(), train.tgt[i].tolist()
        assert [vocab.ids.marian_of[x] for x in s] == tok(src[i]).input_ids[:-1]
        assert [vocab.ids.marian_of[x] for x in t] == tok(text_target=tgt[i]).input_ids[:-1]


def test_train_init_starts_from_the_model_names_it_and_fine_tunes(cli, opus_data, opus_dir, tmp_path):
    run = tmp_path / "run"
    warmup = ("--warmup", str(FINETUNE_WARMUP))  # given: on a CPU the warmup would fit --max-steps 3
    done = cli("train", opus_data, "--init", opus_dir, "--out", run, *TRAIN, *warmup)
    assert done.returncode == 0, done.stderr
    record = json.loads((run / "run.json").read_text())
    assert record["init"]["model"] == str(opus_dir) and record["init"]["sha256"] == sha256_of(opus_dir)
    config = json.loads((run / "config.json").read_text())
    start = sources.find(opus_dir).checkpoint()
    assert config["model"] == start["model_config"]
    assert config["train"]["warmup"] == FINETUNE_WARMUP
    peak = config["train"]["lr_scale"] * start["model_config"]["d_model"] ** -0.5 * FINETUNE_WARMUP**-0.5
    assert peak == pytest.approx(FINETUNE_PEAK_LR)
    # Three updates at the start of the warmup (rates below 1e-6): every weight moved a little from the model's.
    tuned = checkpoint.load(run / "checkpoint_last.pt")
    assert tuned["vocab"] == start["vocab"] and tuned["step"] == 3
    diffs = {k: float((v - tuned["model"][k]).abs().max()) for k, v in start["model"].items()}
    assert max(diffs.values()) < 1e-4
    assert diffs["encoder.0.ffn.w_1.weight"] > 0 and diffs["final_logits_bias"] == 0  # a buffer, never trained
    out = cli("translate", "-m", run / "checkpoint_last.pt", "--beam", "2", input="A dog runs.\n")
    assert out.returncode == 0, out.stderr
    assert cli("average", run, "--last", "1").returncode == 0  # an ordinary run: its checkpoints average
    averaged = checkpoint.load(run / "averaged.pt")
    assert averaged["vocab"] == start["vocab"] and averaged["model"]["final_logits_bias"].equal(
        start["model"]["final_logits_bias"]
    )


def test_what_disagrees_with_the_model_is_one_sentence_before_training(cli, opus_data, opus_dir, tmp_path, raw_data):
    run = tmp_path / "run"
    line = error_line(cli("train", opus_data, "--init", opus_dir, "--out", run, "--preset", "base", *TRAIN))
    assert "--init" in line and "--preset" in line
    line = error_line(cli("train", opus_data, "--init", opus_dir, "--out", run, "--activation", "relu", *TRAIN))
    assert "activation is 'swish', not 'relu'" in line
    other = tmp_path / "other"
    shutil.copytree(raw_data, other)
    assert cli("bpe", other, "--vocab-size", "400", "--force").returncode == 0
    line = error_line(cli("train", other, "--init", opus_dir, "--out", run, *TRAIN))
    assert f"mtkit bpe {other} --from {opus_dir}" in line
    assert not run.exists()


@pytest.mark.parametrize(
    "given, expected",
    [
        ({}, {"update_freq": 1, "update_tokens": 0, "max_tokens": 2048, "warmup": FINETUNE_WARMUP}),
        ({"max_steps": 300}, {"update_freq": 1, "max_tokens": 2048, "warmup": 30}),
        ({"max_steps": 5}, {"warmup": 1}),
        ({"update_freq": 3, "max_tokens": 1000, "warmup": 50}, {"update_freq": 3, "max_tokens": 1000, "warmup": 50}),
    ],
)
def test_fine_tuning_on_a_cpu_takes_one_batch_an_update_and_a_warmup_that_fits_the_budget(given, expected, opus_dir):
    """The library's rule (mtkit/train/start.py), so `mtkit train --init` and Python callers share it: what the user
    gives wins; the peak stays FINETUNE_PEAK_LR whatever the warmup."""
    from mtkit.train import finetune
    from mtkit.train.start import train_config

    start = finetune.load_start(str(opus_dir))
    _, cfg = train_config(None, given, start, "cpu")
    assert {k: getattr(cfg, k) for k in expected} == expected
    peak = cfg.lr_scale * start.model_cfg.d_model**-0.5 * cfg.warmup**-0.5
    assert peak == pytest.approx(FINETUNE_PEAK_LR)
    budget = train_config(None, {"max_minutes": 30.0}, start, "cpu", threads=2)[1]
    estimate = int(30 * 60 / finetune.cpu_update_seconds(start.model_cfg, budget, 2))
    assert budget.warmup == max(1, min(FINETUNE_WARMUP, estimate // 10))  # what 30 minutes buy, a tenth of it
    _, scratch = train_config(None, given, None, "cpu")  # not fine-tuning: the preset's own settings
    assert scratch.warmup == given.get("warmup", 4000)


def test_python_callers_get_the_commands_fine_tuning_rules(opus_data, opus_dir):
    """`mtkit.train.start.configure` is what `mtkit train` calls: the model's architecture, data checked against
    its vocabulary, the fine-tuning schedule (here on a CPU, fitted to --max-steps)."""
    from mtkit.train import finetune
    from mtkit.train.start import configure

    start = finetune.load_start(str(opus_dir))
    model_cfg, train_cfg = configure(open_data(opus_data), None, {"max_steps": 50}, None, start, str(opus_dir), "cpu")
    assert model_cfg == start.model_cfg and (train_cfg.warmup, train_cfg.update_freq, train_cfg.max_steps) == (5, 1, 50)
    with pytest.raises(MtkitError, match="drop that option"):
        configure(open_data(opus_data), None, {"activation": "relu"}, None, start, str(opus_dir), "cpu")
