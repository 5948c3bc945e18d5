"""OPUS-MT directories (Transformers' `MarianMTModel` with Marian's own vocabulary) as mtkit models, and back.

The public Helsinki-NLP models differ from the Marian directories mtkit writes (mtkit/marian/weights.py) in their
vocabulary: two SentencePiece models over one vocab.json in Marian's id order, `</s>` 0, `<unk>` 1 and
`<pad>` (the decoder's start) last. mtkit/data/marian_vocab.py keeps those files as they are and renumbers
ids for mtkit's model (`IdMap`, which adds one row: Marian's `<pad>` is mtkit's PAD and its BOS at once).
Here the weights follow the same renumbering: every embedding and output row, and `final_logits_bias`
(ModelConfig.output_bias). Marian's softmax counts `<pad>` once, so its two copies each get its bias less
log 2: the normalising sum, and so every log-probability, is Marian's. What cannot be represented (separate
source and target vocabularies, mismatched ids) is one sentence naming the field and its value.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import torch

from mtkit.config import BOS, EOS, PAD, ModelConfig
from mtkit.data.marian_vocab import MarianVocab
from mtkit.errors import MtkitError
from mtkit.files import read_model_file
from mtkit.marian import weights as marian

TABLES = ("src_embed.table.weight", "tgt_embed.table.weight", "output_proj.weight")  # rows are token ids
TOKENIZER_FIELDS = ("source_lang", "target_lang", "model_max_length")  # kept from tokenizer_config.json


def uses_marian_ids(hf: dict[str, Any]) -> bool:
    """A config.json with Marian's own ids (any OPUS-MT model), not the fixed ids of a directory mtkit wrote."""
    return (hf.get("pad_token_id"), hf.get("eos_token_id"), hf.get("decoder_start_token_id")) != (PAD, EOS, BOS)


def _refuse(path: Path, field: str, value: Any, why: str) -> MtkitError:
    return MtkitError(f"{path} is a Marian model that mtkit cannot represent: {field} is {value!r} ({why}).")


def read_tokenizer(path: Path, hf: dict[str, Any]) -> MarianVocab:
    """source.spm, target.spm and vocab.json as a MarianVocab, their ids checked against config.json."""
    tokenizer = marian._read_json(path / "tokenizer_config.json") or {}
    if tokenizer.get("separate_vocabs") or (path / "target_vocab.json").exists():
        raise _refuse(path, "separate_vocabs", True, "mtkit's model has one vocabulary for both sides")
    vocab = marian._read_json(path / "vocab.json")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise MtkitError(f"{path} has no readable vocab.json (a JSON object of pieces and their ids).")
    pieces = sorted(vocab, key=vocab.__getitem__)
    if [vocab[p] for p in pieces] != list(range(len(pieces))):
        raise _refuse(path, "vocab.json", "ids with gaps", "the ids must be 0 to the number of pieces less one")
    for field, piece in (("vocab_size", None), ("eos_token_id", "</s>"), ("pad_token_id", "<pad>")):
        want = len(pieces) if piece is None else vocab.get(piece)
        if hf.get(field) != want:
            raise _refuse(path, field, hf.get(field), f"vocab.json says {want}")
    if hf.get("decoder_start_token_id") != hf.get("pad_token_id"):
        raise _refuse(path, "decoder_start_token_id", hf.get("decoder_start_token_id"), "mtkit starts from <pad>")
    try:
        source, target = read_model_file(path / "source.spm"), read_model_file(path / "target.spm")
    except OSError as exc:
        raise MtkitError(f"{path} has no readable source.spm and target.spm ({exc.strerror or exc}).") from None
    kept = {k: tokenizer[k] for k in TOKENIZER_FIELDS if k in tokenizer}
    return MarianVocab(source, target, pieces, kept)


def forces_eos(hf: dict[str, Any], path: Path) -> bool:
    """Whether `generate` forces `</s>` at the length limit: `forced_eos_token_id` in generation_config.json (what
    `generate` reads when it is there) or else config.json. Any other forced token is one sentence."""
    generation = marian._read_json(path / "generation_config.json")
    source = generation if isinstance(generation, dict) and "forced_eos_token_id" in generation else hf
    forced = source.get("forced_eos_token_id")
    if forced is None:
        return False
    if forced not in (hf.get("eos_token_id"), [hf.get("eos_token_id")]):
        raise _refuse(
            path, "forced_eos_token_id", forced, f"mtkit can force only eos_token_id {hf.get('eos_token_id')}"
        )
    return True


def model_config(hf: dict[str, Any], path: Path, size: int) -> ModelConfig:
    """mtkit's config: marian.py's reading of the architecture, `size` ids (one more than Marian's), a logits bias,
    and `</s>` forced at the length limit where the model asks for it (as `generate` does)."""
    decoder_vocab = hf.get("decoder_vocab_size") or hf.get("vocab_size")
    if decoder_vocab != hf.get("vocab_size"):
        raise _refuse(path, "decoder_vocab_size", decoder_vocab, "mtkit's model has one vocabulary for both sides")
    fixed = {**hf, "pad_token_id": PAD, "eos_token_id": EOS, "decoder_start_token_id": BOS}
    cfg = marian.model_config_of(fixed, path)
    forced = forces_eos(hf, path)
    return dataclasses.replace(cfg, vocab_size=size, tgt_vocab_size=None, output_bias=True, forced_eos=forced)


def renumber(state: dict[str, torch.Tensor], bias: torch.Tensor, vocab: MarianVocab) -> dict[str, torch.Tensor]:
    """Marian-ordered rows -> mtkit-ordered ones (tied tables stay one tensor); the bias with <pad>'s mass split."""
    index = torch.tensor(vocab.ids.marian_of)
    done: dict[int, torch.Tensor] = {}
    for name in TABLES:
        if name in state:
            table = state[name]
            state[name] = done.setdefault(id(table), table[index].contiguous())
    out_bias = bias.reshape(-1).float()[index].clone()
    out_bias[[PAD, BOS]] -= math.log(2.0)
    state["final_logits_bias"] = out_bias
    return state


def load_opus_dir(path: str | os.PathLike) -> dict[str, Any]:
    """An OPUS-MT directory as the dict `checkpoint.load` returns (kind "model"), or one sentence."""
    path = Path(path)
    hf = marian._read_json(path / "config.json")
    vocab = read_tokenizer(path, hf)
    cfg = model_config(hf, path, len(vocab))
    marian_cfg = dataclasses.replace(cfg, vocab_size=len(vocab) - 1, output_bias=False)
    tensors = marian._weights(path)
    bias = tensors.pop("final_logits_bias", torch.zeros(len(vocab) - 1))
    plain = marian.from_marian(tensors, marian_cfg, path)
    del tensors  # the file's tensors, before the renumbered tables are made beside the permuted ones
    state = renumber(plain, bias, vocab)
    return {
        "kind": "model",
        "model_config": dataclasses.asdict(cfg),
        "model": state,
        "vocab": vocab.proto,
        "step": 0,
        "provenance": None,
        "converted_from": {"format": "huggingface-marian", "dir": str(path)},
    }


def load_hf_dir(path: str | os.PathLike) -> dict[str, Any]:
    """Any Hugging Face Marian directory: an OPUS-MT one here, one that mtkit wrote by mtkit/marian/weights.py."""
    hf = marian._read_json(Path(path) / "config.json") if marian.is_hf_dir(Path(path)) else None
    if isinstance(hf, dict) and hf.get("model_type") == "marian" and uses_marian_ids(hf):
        return load_opus_dir(path)
    return marian.load_marian_dir(path)


# --------------------------------------------------------------------------- mtkit -> OPUS-MT
def unrenumber(state: dict[str, torch.Tensor], vocab: MarianVocab) -> dict[str, torch.Tensor]:
    """`renumber` undone: rows back in Marian's order, `<pad>` from mtkit's BOS row (the decoder's start, which
    fine-tuning trains), its bias the two copies' mass again (log 2 added back)."""
    index = torch.tensor(vocab.ids.mtkit_of)
    index[vocab.ids.pad] = BOS
    out = dict(state)
    done: dict[int, torch.Tensor] = {}
    for name in TABLES:
        if name in out:
            table = out[name]
            out[name] = done.setdefault(id(table), table[index].contiguous())
    bias = state["final_logits_bias"].float()[index].clone()
    bias[vocab.ids.pad] += math.log(2.0)
    out["final_logits_bias"] = bias
    return out


def opus_config(cfg: ModelConfig, vocab: MarianVocab) -> dict[str, Any]:
    """MarianConfig's fields for a model with an OPUS-MT vocabulary: Marian's size and ids, as the public models."""
    size = len(vocab) - 1
    fields = marian.marian_config(dataclasses.replace(cfg, vocab_size=size, tgt_vocab_size=None))
    fields.update(
        vocab_size=size,
        decoder_vocab_size=size,
        pad_token_id=vocab.ids.pad,
        bos_token_id=vocab.ids.eos,
        eos_token_id=vocab.ids.eos,
        decoder_start_token_id=vocab.ids.pad,
        forced_eos_token_id=vocab.ids.eos,
    )
    return fields


def to_opus(state: dict[str, torch.Tensor], cfg: ModelConfig, vocab: MarianVocab) -> dict[str, torch.Tensor]:
    """mtkit's state_dict of a model with an OPUS-MT vocabulary as MarianMTModel's, final_logits_bias included."""
    plain = unrenumber(state, vocab)
    bias = plain.pop("final_logits_bias")
    tensors = marian.to_marian(plain, dataclasses.replace(cfg, vocab_size=len(vocab) - 1, output_bias=False))
    tensors["final_logits_bias"] = bias.reshape(1, -1)
    return tensors
