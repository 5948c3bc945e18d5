"""A data directory encoded with an OPUS-MT model's tokenizer (`mtkit bpe --from`) is asked for its tokenizer, never
for a file name: `mtkit distill` keeps it, and `mtkit shortlist` takes the OPUS-MT model itself (any source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit import checkpoint
from mtkit.data.dataset import open_data
from mtkit.decode.loading import load_translator
from mtkit.textio import one_line
from tests.support.cli import run_cli
from tests.support.corpora import SAMPLE


@pytest.fixture(scope="module")
def opus_data(tmp_path_factory, opus_dir) -> Path:
    """The sample as `mtkit prepare` leaves it, encoded by `mtkit bpe --from` the OPUS-MT directory."""
    data = tmp_path_factory.mktemp("opus-data") / "data"
    (data / "raw").mkdir(parents=True)
    (data / "prepare.json").write_text(json.dumps({"corpus": None, "src_lang": "en", "tgt_lang": "de"}))
    for split, name in (("train", "train"), ("valid", "val")):
        for lang in ("en", "de"):
            lines = (SAMPLE / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()[:40]
            (data / "raw" / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli("bpe", data, "--from", opus_dir)
    assert done.returncode == 0, done.stderr
    assert (data / "marian-tokenizer.json").is_file() and not (data / "spm.model").exists()
    return data


def test_distill_keeps_the_tokenizer_of_a_directory_encoded_with_a_models(opus_data, opus_dir, tmp_path):
    out = tmp_path / "new"
    done = run_cli("distill", opus_data, "-m", opus_dir, "--out", out, "--beam", "1", "--max-len-b", "8")
    assert done.returncode == 0, done.stderr
    assert (out / "marian-tokenizer.json").read_bytes() == (opus_data / "marian-tokenizer.json").read_bytes()
    assert not (out / "spm.model").exists()
    distilled = open_data(out)
    assert distilled.tokenizer().proto == open_data(opus_data).tokenizer().proto
    assert len(distilled.split("train")) > 0  # what `mtkit train` opens
    assert json.loads((out / "distill.json").read_text())["files"]["marian-tokenizer.json"] > 0


def test_shortlist_takes_an_opus_mt_directory_and_its_data(opus_data, opus_dir, tmp_path):
    out = tmp_path / "opus-shortlisted.pt"
    done = run_cli("shortlist", opus_dir, opus_data, "-o", out, "--k", "8", "--frequent", "10")
    assert done.returncode == 0, done.stderr
    assert checkpoint.load(out)["decode_defaults"] == {"shortlist": True}
    lines = (opus_data / "raw" / "valid.en").read_text(encoding="utf-8").splitlines()[:8]
    translator = load_translator(out, device="cpu")
    assert translator.defaults.shortlist
    ours = translator.translate(lines)
    assert ours != translator.translate(lines, shortlist=False)  # the shortlist restricts the output
    cli = run_cli("translate", "-m", out, "--device", "cpu", input="".join(f"{line}\n" for line in lines))
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines() == [one_line(text) for text in ours]  # as the command line writes them
