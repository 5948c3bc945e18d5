"""`mtkit export --format huggingface`: Transformers' MarianMTModel computes what mtkit computes, and reads back.

A tiny model trained here on a toy task (tests/support/models.py: train_toy) goes through both: greedy outputs
of `generate` equal `mtkit translate --beam 1`'s, logits agree within 1e-5 on a padded batch, the
tokenizer gives mtkit's ids, generation_config.json holds mtkit's decoding defaults. The directory
read back by mtkit (`translate -m DIR`, `info DIR`) is the same model, and a Marian model mtkit cannot
represent is refused in one sentence. Skipped, with the reason, where the `hf` extra is missing; CI
installs it (the `test` extra).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, PAD, DecodeConfig
from mtkit.decode.loading import load_translator
from mtkit.errors import MtkitError
from mtkit.export import ExportConfig, export
from mtkit.marian.weights import load_marian_dir
from tests.support.cli import run_cli
from tests.support.models import TOY_STEPS, random_model
from tests.support.spm import BYTE_PIECES, train_spm

transformers = pytest.importorskip("transformers", reason="the hf extra is not installed: pip install 'mtkit[hf]'")

HF = ExportConfig(format="huggingface")


@pytest.fixture(scope="module")
def exported(trained_model, tmp_path_factory) -> Path:
    return export(trained_model, tmp_path_factory.mktemp("hf") / "model", HF)


@pytest.fixture(scope="module")
def loaded(exported) -> tuple:
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(exported))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(exported)).eval()
    return tokenizer, model


def generate(loaded, lines: list[str], **options) -> list[str]:
    tokenizer, model = loaded
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, **options)
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def test_loads_as_marian_with_marian_tokenizer(loaded):
    tokenizer, model = loaded
    assert type(model).__name__ == "MarianMTModel" and type(tokenizer).__name__ == "MarianTokenizer"


def test_greedy_outputs_equal_mtkit_translate_beam_1(trained_model, loaded, toy_sentences, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(toy_sentences) + "\n", encoding="utf-8")
    done = run_cli("translate", "-m", trained_model, "--beam", "1", "-i", source)
    assert done.returncode == 0, done.stderr
    ours = done.stdout.splitlines()
    assert generate(loaded, toy_sentences, num_beams=1) == ours
    assert sum(bool(t) for t in ours) > len(ours) // 2  # the model really translates: not all empty


def test_beam_outputs_equal_mtkit_with_transformers_length_penalty(trained_model, loaded, toy_sentences):
    """generate's defaults (beam 4, |Y|^0.6, stop after 4 endings) are mtkit's --lenpen fairseq --early-stop patience:
    the one difference from mtkit's defaults is the formula of the length penalty."""
    mt = load_translator(trained_model, device="cpu")
    ours = [t.text for t in mt.translate_stream(toy_sentences, DecodeConfig(lenpen="fairseq", early_stop="patience"))]
    assert generate(loaded, toy_sentences) == ours


def test_logits_equal_on_a_padded_batch(trained_model, loaded, toy_sentences):
    tokenizer, model = loaded
    mt = load_translator(trained_model, device="cpu")
    lines = toy_sentences[:8]
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    assert bool(batch.input_ids.eq(PAD).any())  # the batch really holds padding
    targets = [mt.vocab.sp.encode(t.text) for t in mt.translate_stream(lines, DecodeConfig(beam=1))]
    T = max(map(len, targets)) + 1
    decoder_in = torch.tensor([[BOS, *t] + [PAD] * (T - 1 - len(t)) for t in targets])
    with torch.no_grad():
        ours = mt.engine.model(batch.input_ids, decoder_in)
        theirs = model(**batch, decoder_input_ids=decoder_in).logits
    real = torch.cat([torch.ones(len(lines), 1, dtype=torch.bool), decoder_in[:, 1:].ne(PAD)], dim=1)
    assert (ours - theirs)[real].abs().max().item() < 1e-5


def test_tokenizer_gives_mtkit_ids_and_round_trips(exported, loaded, toy_sentences):
    tokenizer, _ = loaded
    sp = spm.SentencePieceProcessor(model_file=str(exported / "source.spm"))
    for line in toy_sentences:
        ids = tokenizer(line).input_ids
        assert ids == sp.encode(line) + [EOS]  # mtkit's source: ids + [EOS]
        assert tokenizer.decode([BOS, *ids], skip_special_tokens=True) == sp.decode(ids[:-1])
    vocab = json.loads((exported / "vocab.json").read_text(encoding="utf-8"))
    assert [vocab[sp.id_to_piece(i)] for i in range(sp.get_piece_size())] == list(range(sp.get_piece_size()))


def test_generation_config_holds_mtkit_settings(exported, loaded):
    settings = json.loads((exported / "generation_config.json").read_text(encoding="utf-8"))
    expected = {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True, "decoder_start_token_id": BOS}
    assert {k: settings[k] for k in expected} == expected
    assert (settings["eos_token_id"], settings["pad_token_id"], settings["forced_eos_token_id"]) == (EOS, PAD, EOS)
    assert settings["bad_words_ids"] == [[PAD], [BOS]]
    max_positions = json.loads((exported / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"]
    assert settings["max_length"] == max_positions + 1
    assert loaded[1].generation_config.num_beams == 4  # what generate() takes by default


def test_model_card_has_front_matter_and_training_facts(exported):
    card = (exported / "README.md").read_text(encoding="utf-8")
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    for line in ("- translation", "- marian", "- mtkit", "library_name: transformers", "pipeline_tag: translation"):
        assert line in front.splitlines()
    assert f"Updates: {TOY_STEPS}" in body and "AutoModelForSeq2SeqLM" in body and "--lenpen fairseq" in body


# --------------------------------------------------------------------------- mtkit reads the directory back
def test_translate_and_info_read_the_directory_back(trained_model, exported, toy_sentences, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(toy_sentences[:10]) + "\n", encoding="utf-8")
    from_file = run_cli("translate", "-m", trained_model, "-i", source)
    from_dir = run_cli("translate", "-m", exported, "-i", source)
    assert from_dir.returncode == 0, from_dir.stderr
    assert from_dir.stdout == from_file.stdout
    info = run_cli("info", exported, "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["step"] == TOY_STEPS


def test_weights_read_back_are_the_model(trained_model, exported):
    original = checkpoint.load(trained_model)["model"]
    back = load_marian_dir(exported)["model"]
    assert set(back) == set(original)
    assert max((original[k] - back[k]).abs().max().item() for k in original) == 0.0  # a permutation, exact


@pytest.mark.parametrize(
    "edit, difference",
    [
        ({"activation_function": "gelu"}, "activation_function 'gelu'"),
        ({"scale_embedding": False}, "scale_embedding false"),
        ({"normalize_before": True}, "pre-norm"),
        ({"pad_token_id": 58100}, "pad_token_id is 58100 (vocab.json says 0)"),
        ({"model_type": "bart"}, "Marian models only"),
    ],
)
def test_a_marian_model_mtkit_cannot_represent_is_one_sentence(exported, tmp_path, edit, difference):
    changed = tmp_path / "changed"
    shutil.copytree(exported, changed)
    config = json.loads((changed / "config.json").read_text(encoding="utf-8"))
    (changed / "config.json").write_text(json.dumps({**config, **edit}), encoding="utf-8")
    done = run_cli("translate", "-m", changed, input="house small\n")
    assert done.returncode == 1 and difference in done.stderr and "Traceback" not in done.stderr


def test_separate_vocabularies_are_refused(exported, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(exported, changed)
    (changed / "target.spm").write_bytes(b"another model")
    with pytest.raises(MtkitError, match="different source.spm and target.spm"):
        load_marian_dir(changed)


def test_pickle_weights_are_never_opened(exported, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(exported, changed)
    (changed / "model.safetensors").rename(changed / "pytorch_model.bin")
    with pytest.raises(MtkitError, match="pickle is never opened"):
        load_marian_dir(changed)


# --------------------------------------------------------------------------- other architectures and options
@pytest.mark.parametrize(
    "overrides", [{"share_embeddings": "decoder", "vocab_size": 140 + BYTE_PIECES}, {"share_embeddings": "none"}]
)
def test_other_sharing_computes_alike_and_reads_back(overrides, tmp_path, toy_sentences):
    """An untied source table (larger than the SentencePiece model: placeholder pieces) or an untied output
    projection: logits still equal, on a random model, and the directory reads back to the same weights."""
    vocab = train_spm(toy_sentences * 3, vocab_size=80 + BYTE_PIECES)
    size = spm.SentencePieceProcessor(model_proto=vocab).get_piece_size()
    fields = {"vocab_size": size, "tgt_vocab_size": size, **overrides}
    model = random_model(fields.pop("vocab_size"), seed=2, **fields)
    path = tmp_path / "model.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab), path)
    out = export(path, tmp_path / "hf", HF)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(out)).eval()
    src, tgt = torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 8, 9]])
    with torch.no_grad():
        assert (model(src, tgt) - hf(input_ids=src, decoder_input_ids=tgt).logits).abs().max().item() < 1e-5
    back, original = load_marian_dir(out), checkpoint.load(path)
    explicit = [checkpoint.config_of(c) for c in (back, original)]  # None and the size itself say the same
    assert [dataclasses.replace(c, tgt_vocab_size=c.target_vocab_size) for c in explicit] == [
        dataclasses.replace(explicit[1], tgt_vocab_size=explicit[1].target_vocab_size)
    ] * 2
    assert all(torch.equal(back["model"][k], t) for k, t in original["model"].items())


def test_pre_norm_is_refused_before_anything_is_written(tmp_path, toy_sentences):
    vocab = train_spm(toy_sentences * 3, vocab_size=80 + BYTE_PIECES)
    model = random_model(spm.SentencePieceProcessor(model_proto=vocab).get_piece_size(), seed=2, pre_norm=True)
    path = tmp_path / "model.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab), path)
    done = run_cli("export", path, "--format", "huggingface", "-o", tmp_path / "hf")
    assert done.returncode == 1 and "pre-norm" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "hf").exists()


def test_int8_is_refused_and_float16_is_written(trained_model, tmp_path):
    done = run_cli("export", trained_model, "--format", "huggingface", "--quantization", "int8", "-o", tmp_path / "a")
    assert done.returncode == 1 and "float32 or float16" in done.stderr and not (tmp_path / "a").exists()
    out = export(trained_model, tmp_path / "b", ExportConfig(format="huggingface", quantization="float16"))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(out), dtype=torch.float16)
    assert next(model.parameters()).dtype == torch.float16


def test_the_export_prints_no_progress_bar_of_transformers(trained_model, tmp_path):
    done = run_cli("export", trained_model, "--format", "huggingface", "-o", tmp_path / "hf")
    assert done.returncode == 0, done.stderr
    assert "Writing model shards" not in done.stderr and "it/s" not in done.stderr, done.stderr
