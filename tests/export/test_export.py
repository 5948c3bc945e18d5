"""`mtkit export --format ctranslate2`: CTranslate2 computes what mtkit computes, and the directory is safe to write.

The equivalence tests run a tiny model trained here on a toy task through both engines:
greedy outputs equal, per-token log-probabilities equal, and beam outputs and scores equal
once CTranslate2's patience-based stop is lifted (it stops after `beam` finished hypotheses,
mtkit's default search only when no live one can win). They are skipped, with the reason,
where the `ct2` extra is not installed; CI installs it (the `test` extra).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, DecodeConfig
from mtkit.decode.loading import load_translator
from mtkit.decode.translator import Translator
from mtkit.export import RECORD, ExportConfig, export
from mtkit.marian.card import _training
from tests.support.cli import run_cli
from tests.support.models import random_model
from tests.support.spm import BYTE_PIECES, train_spm

ctranslate2 = pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'mtkit[ct2]'")

MAX_LEN = 30  # one output limit for both engines (mtkit: max_len_a 0, max_len_b 30)


@pytest.fixture(scope="module")
def exported(trained_model, tmp_path_factory) -> Path:
    return export(trained_model, tmp_path_factory.mktemp("ct2") / "model")


@pytest.fixture(scope="module")
def engines(trained_model, exported) -> tuple[Translator, object, spm.SentencePieceProcessor]:
    sp = spm.SentencePieceProcessor(model_file=str(exported / "spm.model"))
    ct2 = ctranslate2.Translator(str(exported), device="cpu", intra_threads=1)
    return load_translator(trained_model, device="cpu"), ct2, sp


def ct2_translate(ct2: object, sp: spm.SentencePieceProcessor, lines: list[str], **options) -> list:
    """CTranslate2 with mtkit's output limits: at most MAX_LEN tokens before EOS, and EOS allowed first.

    CTranslate2's default `min_decoding_length=1` forbids an empty output, renormalising the
    first step's probabilities without EOS (its scores then differ from mtkit's by about 1e-3).
    mtkit never generates <pad> or <s> (their log-probabilities are set to -inf); CTranslate2's
    `suppress_sequences` would do the same but renormalise the rest, which shifts the scores.
    A trained model gives both next to no probability, so they are left alone here.
    """
    return ct2.translate_batch(
        sp.encode(lines, out_type=str),
        max_decoding_length=MAX_LEN + 1,  # + 1: EOS
        min_decoding_length=0,
        return_scores=True,
        **options,
    )


def mtkit_translate(mt: Translator, lines: list[str], beam: int, alpha: float = 0.0) -> list:
    config = DecodeConfig(
        beam=beam, alpha=alpha, lenpen="fairseq", max_len_a=0.0, max_len_b=MAX_LEN, early_stop="exact"
    )  # the rule CTranslate2 follows with its patience lifted
    return list(mt.translate_stream(lines, config))


def test_greedy_outputs_equal_mtkit_beam_1(engines, toy_sentences):
    mt, ct2, sp = engines
    ours = [t.text for t in mtkit_translate(mt, toy_sentences, beam=1)]
    theirs = [sp.decode(r.hypotheses[0]) for r in ct2_translate(ct2, sp, toy_sentences, beam_size=1)]
    assert ours == theirs
    assert sum(bool(t) for t in ours) > len(ours) // 2  # the model really translates: not all empty


def test_log_probabilities_equal(engines, toy_sentences):
    """Teacher-forced log P(y_t | y_<t, x) of mtkit's greedy outputs, EOS included, token by token."""
    mt, ct2, sp = engines
    outputs = [t.text for t in mtkit_translate(mt, toy_sentences[:12], beam=1)]
    scored = ct2.score_batch(sp.encode(toy_sentences[:12], out_type=str), sp.encode(outputs, out_type=str))
    for line, output, result in zip(toy_sentences, outputs, scored):
        src, tgt = sp.encode(line) + [EOS], sp.encode(output)
        with torch.no_grad():
            lprobs = mt.engine.model(torch.tensor([src]), torch.tensor([[BOS] + tgt])).log_softmax(-1)[0]  # (T, V)
        ours = lprobs.gather(1, torch.tensor([tgt + [EOS]]).T).squeeze(1).tolist()
        assert result.log_probs == pytest.approx(ours, abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_outputs_and_scores_equal_without_patience_stop(engines, toy_sentences, alpha):
    """Patience lifted, CTranslate2 keeps searching to the limit; mtkit's exact stop gives the same best."""
    mt, ct2, sp = engines
    ours = mtkit_translate(mt, toy_sentences, beam=4, alpha=alpha)
    theirs = ct2_translate(ct2, sp, toy_sentences, beam_size=4, length_penalty=alpha, patience=1000.0)
    assert [t.text for t in ours] == [sp.decode(r.hypotheses[0]) for r in theirs]
    for t, r in zip(ours, theirs):  # score = log P / |Y|^alpha, |Y| counting EOS, in both
        assert r.scores[0] == pytest.approx(t.score, abs=1e-4)


def test_positions_are_mtkit_interleaved_table(exported, trained_model):
    """The position table is written into the model: CTranslate2's built-in one is not mtkit's."""
    spec_table = checkpoint.build_from(checkpoint.load(trained_model)).src_embed.positions.pe
    assert spec_table[1, 0] == pytest.approx(math.sin(1.0)) and spec_table[1, 1] == pytest.approx(math.cos(1.0))
    names = (exported / "model.bin").read_bytes()
    assert b"encoder/position_encodings/encodings" in names and b"decoder/position_encodings/encodings" in names


def test_vocabulary_is_spm_pieces_in_id_order(exported, engines):
    _, _, sp = engines
    vocab = json.loads((exported / "shared_vocabulary.json").read_text(encoding="utf-8"))
    assert vocab == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    config = json.loads((exported / "config.json").read_text(encoding="utf-8"))
    assert (config["decoder_start_token"], config["add_source_eos"], config["add_source_bos"]) == ("<s>", True, False)


def test_int8_export_is_int8_and_translates(trained_model, exported, engines, toy_sentences, tmp_path):
    """int8 weights take about a quarter of the bytes; a 64-wide toy model loses more to them than a real
    one, so its outputs need only mostly agree (CTranslate2's int8 kernels differ between CPUs, too)."""
    _, ct2, sp = engines
    int8_dir = export(trained_model, tmp_path / "int8", ExportConfig(quantization="int8"))
    assert (int8_dir / "model.bin").stat().st_size < 0.5 * (exported / "model.bin").stat().st_size
    int8 = ctranslate2.Translator(str(int8_dir), device="cpu", intra_threads=1)
    fp32_out = [r.hypotheses[0] for r in ct2_translate(ct2, sp, toy_sentences, beam_size=1)]
    int8_out = [r.hypotheses[0] for r in ct2_translate(int8, sp, toy_sentences, beam_size=1)]
    assert sum(a == b for a, b in zip(fp32_out, int8_out)) >= 0.5 * len(toy_sentences)


# --------------------------------------------------------------------------- the CLI and the directory
def test_cli_writes_directory_and_record(trained_model, tmp_path):
    out = tmp_path / "ct2"
    done = run_cli("export", trained_model, "--format", "ctranslate2", "--quantization", "int8", "-o", out)
    assert done.returncode == 0, done.stderr
    record = json.loads((out / RECORD).read_text(encoding="utf-8"))
    assert record["quantization"] == "int8" and "model.bin" in record["files"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left beside it


def test_cli_replaces_its_own_export_but_refuses_a_foreign_directory(trained_model, tmp_path):
    out = tmp_path / "ct2"
    assert run_cli("export", trained_model, "-o", out).returncode == 0
    again = run_cli("export", trained_model, "-o", out, "--quantization", "int8")
    assert again.returncode == 0, again.stderr
    assert json.loads((out / RECORD).read_text(encoding="utf-8"))["quantization"] == "int8"
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    refused = run_cli("export", trained_model, "-o", foreign)
    assert refused.returncode == 1 and "did not write" in refused.stderr and "Traceback" not in refused.stderr
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_cli_bad_model_is_one_sentence(tmp_path):
    done = run_cli("export", tmp_path / "missing.pt", "-o", tmp_path / "out")
    assert done.returncode == 1 and "does not exist" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "overrides",
    [
        {"pre_norm": True},
        {"share_embeddings": "none"},
        {"share_embeddings": "decoder", "vocab_size": 140 + BYTE_PIECES},
    ],
)
def test_other_architectures_score_alike(overrides, tmp_path, toy_sentences):
    """Pre-norm (final LayerNorms), an untied output projection, a source table larger than the
    SentencePiece model (placeholder pieces): log-probabilities still equal, on a random model."""
    vocab = train_spm(toy_sentences * 3, vocab_size=80 + BYTE_PIECES)
    sp = spm.SentencePieceProcessor(model_proto=vocab)
    fields = {"vocab_size": sp.get_piece_size(), "tgt_vocab_size": sp.get_piece_size(), **overrides}
    model = random_model(fields.pop("vocab_size"), seed=2, **fields)
    path = tmp_path / "model.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab), path)
    ct2 = ctranslate2.Translator(str(export(path, tmp_path / "ct2")), device="cpu", intra_threads=1)
    src, tgt = sp.encode(toy_sentences[0]), sp.encode(toy_sentences[1])
    result = ct2.score_batch([sp.id_to_piece(src)], [sp.id_to_piece(tgt)])[0]
    with torch.no_grad():
        lprobs = model(torch.tensor([src + [EOS]]), torch.tensor([[BOS] + tgt])).log_softmax(-1)[0]
    assert result.log_probs == pytest.approx(
        lprobs.gather(1, torch.tensor([tgt + [EOS]]).T).squeeze(1).tolist(), abs=1e-4
    )


def test_the_model_card_says_where_the_weights_came_from() -> None:
    """One checkpoint's weights (`mtkit average CKPT -o FILE`) or the average of several, by step."""
    taken = {"step": 300, "taken_from": {"file": "run/checkpoint_last.pt", "step": 300, "sha256": "ab"}}
    assert "- Weights: the checkpoint of step 300" in _training(taken)
    averaged = {"step": 300, "averaged_from": [{"file": "a", "step": 200, "sha256": "a"}, {"file": "b", "step": 300}]}
    assert "- Weights: the average of 2 checkpoints (steps 200, 300)" in _training(averaged)
