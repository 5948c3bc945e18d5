"""Translator: decoding settings, input order, streaming, odd input lines; and the raw-text reader."""

from __future__ import annotations

import dataclasses
import inspect
import io
import logging
import os

import pytest
import torch

import mtkit
from mtkit.config import DecodeConfig
from mtkit.data.vocab import Vocab
from mtkit.decode.loading import load_translator
from mtkit.decode.torch_engine import TorchEngine
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError
from mtkit.model.linear import Linear
from mtkit.runtime import matmul, resolve_dtype
from mtkit.textio import open_output, read_lines_lenient
from mtkit.train.validation import greedy_bleu

FAST = DecodeConfig(beam=2, max_len_b=5)


@pytest.fixture(scope="module")
def translator(model_file) -> Translator:
    return load_translator(model_file, device="cpu")


def test_translator_is_exported_lazily_and_loads_a_training_checkpoint(translator, model_file):
    assert mtkit.Translator is Translator
    loaded = mtkit.load_translator(str(model_file), device="cpu")
    assert loaded.translate(["A dog runs."], beam=2) == translator.translate(["A dog runs."], beam=2)


def test_translations_keep_the_input_order_and_empty_lines(translator, multi30k_lines):
    lines = multi30k_lines["test_2016_flickr.en"][:12]
    lines[3:3] = ["", "   "]
    stream = list(translator.translate_stream(lines, FAST, batch_tokens=40, chunk_lines=5))
    assert [t.line for t in stream] == list(range(1, len(lines) + 1))
    assert stream[3].text == "" and stream[4].text == ""
    alone = [translator.translate([line], beam=2, max_len_b=5)[0] for line in lines]
    assert [t.text for t in stream] == alone
    assert len(set(alone)) > 5, "a random model that ignores its input would make this test empty"


def test_the_first_translations_come_before_the_input_ends(translator):
    read = []

    def endless():
        while True:
            read.append(1)
            yield "A man rides a bike."

    first = next(iter(translator.translate_stream(endless(), FAST, chunk_lines=3)))
    assert first.line == 1 and len(read) <= 4


def test_decoding_defaults_come_from_decode_config_alone(translator):
    """`translate` takes a DecodeConfig and changes to its fields; no method re-types a setting's default."""
    for method in (Translator.translate, Translator.translate_stream, Translator.score, Translator.score_stream):
        assert not set(inspect.signature(method).parameters) & {f.name for f in dataclasses.fields(DecodeConfig)}
    lines = ["A dog runs.", "Two men talk in the snow."]
    assert translator.translate(lines) == [t.text for t in translator.translate_stream(lines, DecodeConfig())]
    assert translator.translate(lines, beam=2, max_len_b=5) == translator.translate(lines, FAST)
    assert translator.translate(lines, FAST, beam=1) == translator.translate(lines, DecodeConfig(beam=1, max_len_b=5))
    with pytest.raises(MtkitError, match="beam"):
        translator.translate(lines, beam=0)
    with pytest.raises(MtkitError, match="beams is no decoding setting; DecodeConfig's are beam, alpha"):
        translator.translate(lines, beams=2)


def test_an_overlong_line_is_truncated_with_a_warning_naming_it(translator, caplog):
    long_line = " ".join(["bicycle"] * 60)
    with caplog.at_level(logging.WARNING):
        out = translator.translate(["A dog.", long_line], beam=2, max_len_b=3)
    assert len(out) == 2
    assert "line 2 has" in caplog.text and "first 31" in caplog.text


def test_nbest_hypotheses_are_ranked(translator):
    [t] = translator.translate_stream(["Two men talk."], DecodeConfig(beam=4, nbest=3, max_len_b=4))
    scores = [s for _, s in t.hypotheses]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)


def test_a_file_without_a_vocabulary_or_not_from_mtkit_is_one_clear_error(tmp_path, make_model):
    from mtkit import checkpoint

    model = make_model(10, seed=0)
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, None), tmp_path / "novocab.pt")
    with pytest.raises(MtkitError, match="no SentencePiece vocabulary"):
        load_translator(tmp_path / "novocab.pt", device="cpu")
    torch.save({"weights": torch.ones(2)}, tmp_path / "other.pt")
    with pytest.raises(MtkitError, match="not an mtkit model"):
        load_translator(tmp_path / "other.pt")
    with pytest.raises(MtkitError, match="does not exist"):
        load_translator(tmp_path / "missing.pt")


def test_a_vocabulary_larger_than_the_model_is_refused(spm_bytes, make_model):
    with pytest.raises(MtkitError, match="more than the model's 50 embeddings"):
        Translator(TorchEngine(make_model(50, seed=0)), Vocab.from_bytes(spm_bytes))


def test_fp16_needs_cuda():
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        resolve_dtype("fp16", torch.device("cpu"))
    assert resolve_dtype("bf16", torch.device("cpu")) is torch.bfloat16


def test_read_lines_replaces_and_reports_bad_utf8_by_line(caplog):
    data = "\ufeffeins\r\n".encode() + b"zw\xffei\n" + b"drei"
    with caplog.at_level(logging.WARNING):
        lines = list(read_lines_lenient(io.BytesIO(data), name="in.txt"))
    assert lines == ["eins", "zw\ufffdei", "drei"]
    assert "in.txt line 2 is not valid UTF-8" in caplog.text
    assert "line 1 " not in caplog.text and "line 3" not in caplog.text


def test_open_output_leaves_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with open_output(target) as f:
            f.write(b"half")
            raise RuntimeError("stop")
    assert target.read_text() == "old\n" and list(tmp_path.iterdir()) == [target]
    with open_output(target) as f:
        f.write(b"new\n")
    assert target.read_text() == "new\n"


def test_loading_a_translator_caps_onednns_kernel_caches(cli_model, monkeypatch):
    for name in ("LRU_CACHE_CAPACITY", "ONEDNN_PRIMITIVE_CACHE_CAPACITY"):
        monkeypatch.delenv(name, raising=False)
    load_translator(cli_model, device="cpu")
    assert os.environ["LRU_CACHE_CAPACITY"] == os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "16"


def test_a_translator_uses_its_models_as_they_are_and_load_applies_the_runtime(
    make_model, spm_bytes, multi30k_lines, model_file
):
    vocab = Vocab.from_bytes(spm_bytes)
    model = make_model(len(vocab), seed=3)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    translated = Translator(TorchEngine(model, "cpu"), vocab).translate(["a dog runs"], beam=1, max_len_b=3)
    assert all(m.packed is None and not m.onednn for m in model.modules() if isinstance(m, Linear))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items()) and not model.training
    sources = multi30k_lines["test_2016_flickr.en"][:2]
    model.train()
    greedy_bleu(model, vocab, sources, multi30k_lines["test_2016_flickr.de"][:2], torch.device("cpu"))
    assert model.training  # validation gives the trained model back as it was
    assert all(m.packed is None for m in model.modules() if isinstance(m, Linear))
    again = Translator(TorchEngine(model.eval(), "cpu"), vocab)
    assert again.translate(["a dog runs"], beam=1, max_len_b=3) == translated
    with pytest.raises(MtkitError, match="eval mode"):
        Translator(TorchEngine(model.train(), "cpu"), vocab)
    loaded = load_translator(model_file, device="cpu")  # its own models: the tests pin oneDNN, so all packed
    if matmul.onednn_works():
        assert all(m.onednn and m.packed is not None for m in loaded.engine.model.modules() if isinstance(m, Linear))
