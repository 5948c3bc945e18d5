"""An OPUS-MT directory exported: CTranslate2 translates as mtkit does."""

from __future__ import annotations

import json

import pytest
import torch

from mtkit import checkpoint, sources

transformers = pytest.importorskip("transformers")
pytest.importorskip("ctranslate2")

# Lines whose translations by the test model end before the length limit, where CTranslate2 (like Transformers)
# forces EOS with probability 1 and mtkit scores it as the model does.
LINES = "Two dogs play in the snow.\nPEOPLE WALKING.\nA MAN IN A BLUE SHIRT IS STANDING ON A LADDER.\nA GIRL!\n"
OPTIONS = ("--beam", "4", "--max-len-a", "0", "--max-len-b", "28", "--device", "cpu")


def test_ctranslate2_export_translates_as_mtkit_does(cli, opus_dir, tmp_path):
    out = tmp_path / "ct2"
    done = cli("export", opus_dir, "--format", "ctranslate2", "-o", out)
    assert done.returncode == 0, done.stderr
    mine = cli("translate", "-m", opus_dir, *OPTIONS, input=LINES)
    theirs = cli("translate", "-m", out, *OPTIONS, input=LINES)
    assert mine.returncode == 0 and theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == mine.stdout


def test_the_ctranslate2_export_carries_the_two_sentencepiece_models(cli, opus_dir, tmp_path):
    """As CTranslate2's own OPUS-MT converter leaves them: the documented SentencePiece snippet reads them."""
    import sentencepiece as spm

    out = tmp_path / "ct2"
    assert cli("export", opus_dir, "--format", "ctranslate2", "-o", out).returncode == 0
    assert (out / "source.spm").read_bytes() == (opus_dir / "source.spm").read_bytes()
    assert (out / "target.spm").read_bytes() == (opus_dir / "target.spm").read_bytes()
    assert (out / "marian-tokenizer.json").is_file() and not (out / "spm.model").exists()
    pieces = spm.SentencePieceProcessor(model_file=str(out / "source.spm")).encode("A dog runs.", out_type=str)
    assert pieces and all(isinstance(p, str) for p in pieces)


def tuned_model(opus_dir, path):
    """The OPUS-MT model as fine-tuning leaves it: every weight moved, mtkit's PAD and BOS rows apart."""
    ckpt = sources.find(opus_dir).checkpoint()
    model = checkpoint.build_from(ckpt)
    torch.manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, ckpt["vocab"], step=7), path)
    return path


def test_the_huggingface_export_keeps_the_tokenizer_files_and_ids(cli, opus_dir, tmp_path):
    out = tmp_path / "hf"
    done = cli("export", opus_dir, "--format", "huggingface", "-o", out)
    assert done.returncode == 0, done.stderr
    for name in ("source.spm", "target.spm"):
        assert (out / name).read_bytes() == (opus_dir / name).read_bytes()
    assert json.loads((out / "vocab.json").read_text()) == json.loads((opus_dir / "vocab.json").read_text())
    mine, theirs = (json.loads((d / "config.json").read_text()) for d in (out, opus_dir))
    for field in ("vocab_size", "pad_token_id", "eos_token_id", "decoder_start_token_id", "activation_function"):
        assert mine[field] == theirs[field], field
    a = transformers.MarianMTModel.from_pretrained(out).state_dict()
    b = transformers.MarianMTModel.from_pretrained(opus_dir).state_dict()
    assert all((a[k] - b[k]).abs().max() < 1e-6 for k in b if "embed_positions" not in k)


def test_a_fine_tuned_model_exported_translates_in_transformers_as_in_mtkit(cli, opus_dir, tmp_path):
    tuned = tuned_model(opus_dir, tmp_path / "tuned.pt")
    out = tmp_path / "hf"
    assert cli("export", tuned, "--format", "huggingface", "-o", out).returncode == 0
    hf = transformers.MarianMTModel.from_pretrained(out).eval()
    tok = transformers.MarianTokenizer.from_pretrained(out)
    lines = ["Two dogs play in the snow.", "A girl!", "People walking down a busy city street at night."]
    batch = tok(lines, return_tensors="pt", padding=True)
    pad = hf.config.pad_token_id
    generated = hf.generate(**batch, num_beams=1, do_sample=False, max_length=20, bad_words_ids=[[pad]])
    expected = [tok.decode(row, skip_special_tokens=True) for row in generated]
    done = cli("translate", "-m", tuned, "--beam", "1", "--max-len-a", "0", "--max-len-b", "18", input="\n".join(lines))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
    assert cli("export", tuned, "--format", "ctranslate2", "-o", tmp_path / "ct2").returncode == 0
