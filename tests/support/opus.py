"""OPUS-MT-shaped Hugging Face directories, made with Transformers' own classes (the hub is unreachable here).

What a public `Helsinki-NLP/opus-mt-*` directory has: two SentencePiece models (`source.spm` learned on the
source side, `target.spm` on the target side, each with SentencePiece's default ids), one shared `vocab.json`
in Marian's id order (`</s>` 0, `<unk>` 1, the pieces, `<pad>` last), and a `MarianMTModel` with swish
feed-forward layers, a `final_logits_bias`, 512 positions and `<pad>` as the decoder's start. Weights are
random and tiny; the embeddings are drawn wide so that the outputs are peaked and far from ties.

`hub_cache` puts such a directory where huggingface_hub's `snapshot_download` finds a Hub name offline
(`HF_HUB_CACHE` with `HF_HUB_OFFLINE=1`): the Hub itself cannot be reached from the tests.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import sentencepiece as spm

from mtkit.data.corpora import SHIPPED_MULTI30K
from tests.support.corpora import read_gz

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"
LANGUAGE_CODES = (">>fra<<", ">>deu<<", ">>ces<<")
# The commit a cached snapshot is filed under (any 40 hex digits: nothing checks it against the Hub).
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def training_lines(lang: str) -> list[str]:
    """Text an spm model of `lang` is learned on: the sample's 500 training lines (en, de), else the first 500 of
    the Multi30k copy that ships with mtkit (fr, cs: the same sentences, translated)."""
    if (SAMPLE / f"train.{lang}").is_file():
        return (SAMPLE / f"train.{lang}").read_text(encoding="utf-8").splitlines()
    return read_gz(SHIPPED_MULTI30K / f"train.{lang}.gz", 500)


def _spm(lines: list[str], vocab_size: int) -> bytes:
    """SentencePiece's defaults (unk 0, bos 1, eos 2, no pad), as Marian's own spm models are."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


def _pieces(proto: bytes) -> list[str]:
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i) and not sp.is_unknown(i)]


def make_opus_dir(
    path: Path,
    *,
    multilingual: bool = False,
    d_model: int = 16,
    d_ff: int = 32,
    heads: int = 2,
    layers: int = 2,
    spm_size: int = 200,
    seed: int = 0,
    eos_bias: float = 3.0,
    tgt_lang: str = "de",
) -> Path:
    """An OPUS-MT-shaped directory (En->`tgt_lang`; `multilingual`: `>>xxx<<` target tokens in the vocabulary) at
    `path`."""
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    path.mkdir(parents=True, exist_ok=True)
    src_spm, tgt_spm = _spm(training_lines("en"), spm_size), _spm(training_lines(tgt_lang), spm_size)
    pieces = list(dict.fromkeys(_pieces(src_spm) + _pieces(tgt_spm)))
    vocab = ["</s>", "<unk>", *(LANGUAGE_CODES if multilingual else ()), *pieces, "<pad>"]
    scratch = path / "_files"
    scratch.mkdir()
    (scratch / "source.spm").write_bytes(src_spm)
    (scratch / "target.spm").write_bytes(tgt_spm)
    (scratch / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}, ensure_ascii=False))
    tokenizer = MarianTokenizer(
        str(scratch / "source.spm"),
        str(scratch / "target.spm"),
        str(scratch / "vocab.json"),
        source_lang="en",
        target_lang=tgt_lang,
    )
    tokenizer.save_pretrained(path)
    for f in scratch.iterdir():
        f.unlink()
    scratch.rmdir()
    pad = len(vocab) - 1
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff,
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        share_encoder_decoder_embeddings=True,
        init_std=0.3,
        dropout=0.1,
        architectures=["MarianMTModel"],
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, 0] += eos_bias  # </s>: outputs end before the length limit
    model.save_pretrained(path)
    return path


def hub_cache(cache: Path, repo: str, opus_dir: Path, revision: str = "main") -> Path:
    """CACHE/models--OWNER--NAME/{refs/REVISION, snapshots/COMMIT/...} holding `opus_dir`, as `snapshot_download`
    leaves a download of `repo`; several repos may share one CACHE. Returns CACHE."""
    entry = cache / ("models--" + repo.replace("/", "--"))
    (entry / "refs").mkdir(parents=True, exist_ok=True)
    (entry / "refs" / revision).write_text(COMMIT)
    shutil.copytree(opus_dir, entry / "snapshots" / COMMIT, dirs_exist_ok=True)
    return cache
