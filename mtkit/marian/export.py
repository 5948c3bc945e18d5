"""`mtkit export --format huggingface`: a directory that Transformers loads as a `MarianMTModel` and its tokenizer.

    AutoModelForSeq2SeqLM.from_pretrained(DIR)    config.json, model.safetensors, generation_config.json
    AutoTokenizer.from_pretrained(DIR)            MarianTokenizer: source.spm = target.spm = mtkit's joint
                                                  spm.model, vocab.json = its pieces in id order

The weights are mapped by mtkit/marian/weights.py (names, the fused projections, and one permutation of the
model dimension that turns mtkit's interleaved position table into Marian's sines-then-cosines one).
The tokens follow mtkit's convention: MarianTokenizer appends </s> (id 3) to the source, as mtkit
does, and the decoder starts from <s> (id 2: `decoder_start_token_id`), where OPUS-MT models start
from <pad>. Marian's labels are shifted right from the same start token, so fine-tuning in
Transformers trains the model on what mtkit trained it on.

generation_config.json makes `model.generate`'s defaults mtkit's where Transformers can express them:
beam 4, alpha 0.6, stop once 4 hypotheses have ended (mtkit's default `--early-stop patience`), <pad>
and <s> never generated, </s> forced at the length limit. Two things it cannot express:
- The length penalty: Transformers divides a finished hypothesis's log-probability by |Y|^alpha
  (|Y| counting </s>), which is mtkit's `--lenpen fairseq`; mtkit's default is GNMT's ((5 + |Y|) / 6)^alpha.
  At alpha 0.6 both prefer longer outputs than plain log-probability, |Y|^alpha more so, so under
  beam search a sentence may end differently; greedy search (and beam with alpha 0) is the same.
- The length limit: mtkit's is the source length + 50; a limit that depends on the input is not a
  setting of `generate`, so `max_length` is the model's own bound, max_positions + 1 (the start token
  and at most max_positions generated tokens, the last of them </s>), the longest output mtkit itself
  ever allows. `generate(..., max_new_tokens=source_length + 51)` gives mtkit's limit for a batch.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, PAD, ExportConfig, ModelConfig
from mtkit.data.marian_vocab import MarianVocab
from mtkit.data.tokenizer import load_tokenizer
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.marian import card, export_opus
from mtkit.marian import weights as marian

logger = logging.getLogger(__name__)

MISSING_EXTRA = (
    "exporting to Hugging Face Transformers needs the transformers package; install it with: pip install 'mtkit[hf]'."
)
DTYPES = {"float32": torch.float32, "float16": torch.float16}
# Every name this format may write (checked against a user's files in the target before any work).
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "source.spm",
    "target.spm",
    "vocab.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    card.NAME,
)
BEAM, ALPHA = 4, 0.6  # DecodeConfig's defaults (section 6.1)


def check(config: ExportConfig) -> None:
    """Transformers stores float32 or float16 weights; int8 is a choice made when loading, not in the files."""
    if config.quantization not in DTYPES:
        raise MtkitError(
            f"--format huggingface writes float32 or float16 weights, not {config.quantization}; "
            "quantize when loading the model in Transformers (e.g. with torchao), or export --format ctranslate2."
        )


def import_extra() -> Any:
    """The optional `hf` extra, or one sentence that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise MtkitError(MISSING_EXTRA) from None
    return transformers


def generation_settings(cfg: ModelConfig) -> dict[str, Any]:
    """generation_config.json: mtkit's decoding defaults as `generate` reads them (see the module's docstring)."""
    return {
        "num_beams": BEAM,
        "length_penalty": ALPHA,
        "early_stopping": True,  # stop once num_beams hypotheses have ended: mtkit's --early-stop patience
        "max_length": cfg.max_positions + 1,
        "decoder_start_token_id": BOS,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "pad_token_id": PAD,
        "forced_eos_token_id": EOS,
        "bad_words_ids": [[PAD], [BOS]],  # mtkit's search never emits them
    }


def write(ckpt: dict[str, Any], source: Path, tmp: Path, config: ExportConfig) -> None:
    """Model, generation settings, tokenizer files and model card of `ckpt`, saved in `tmp`."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    tokenizer = load_tokenizer(ckpt["vocab"])
    if isinstance(tokenizer, MarianVocab):  # an OPUS-MT vocabulary: its own files and ids (export_opus.py)
        search = {"num_beams": BEAM, "length_penalty": ALPHA, "early_stopping": True}
        return export_opus.write(ckpt, tokenizer, tmp, config, DTYPES[config.quantization], search)
    cfg = checkpoint.config_of(ckpt)
    fields = marian.marian_config(cfg)  # refuses what Marian cannot represent (pre-norm)
    model = MarianMTModel(MarianConfig(**fields))
    missing, unexpected = model.load_state_dict(marian.to_marian(ckpt["model"], cfg), strict=False)
    if unexpected or set(missing) - set(marian.POSITION_KEYS):  # the positions are computed, never stored
        raise MtkitError(
            f"the Marian model does not take mtkit's weights (missing {sorted(missing)}, unexpected "
            f"{sorted(unexpected)}); this Transformers version is not supported by this mtkit."
        )
    model.generation_config = GenerationConfig(**generation_settings(cfg))
    export_opus.save_quietly(model.to(DTYPES[config.quantization]), tmp)
    del model
    vocab = Vocab.from_bytes(ckpt["vocab"])
    languages = card.languages(ckpt.get("provenance"))
    write_tokenizer(vocab, cfg, tmp, languages)
    (tmp / card.NAME).write_text(card.model_card(ckpt, source, cfg, generation_settings(cfg)), encoding="utf-8")
    logger.info("converted to a Transformers MarianMTModel (%s)", config.quantization)


def write_tokenizer(vocab: Vocab, cfg: ModelConfig, tmp: Path, languages: tuple[str, str] | None) -> None:
    """MarianTokenizer's files: one SentencePiece model on both sides and vocab.json in mtkit's id order.

    Embedding rows beyond the SentencePiece model (a table larger than the vocabulary) get unique
    placeholder names, so that every id the model may output has a token.
    """
    from transformers import MarianTokenizer

    sp = vocab.sp
    for name in ("source.spm", "target.spm"):
        (tmp / name).write_bytes(vocab.proto)
    size = max(cfg.vocab_size, cfg.target_vocab_size)
    pieces = [sp.id_to_piece(i) for i in range(len(vocab))] + [f"<mtkit_unused_{i}>" for i in range(len(vocab), size)]
    (tmp / "vocab.json").write_text(
        json.dumps({piece: i for i, piece in enumerate(pieces)}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    tokenizer = MarianTokenizer(
        str(tmp / "source.spm"),
        str(tmp / "target.spm"),
        str(tmp / "vocab.json"),
        source_lang=languages[0] if languages else None,
        target_lang=languages[1] if languages else None,
        unk_token=sp.id_to_piece(sp.unk_id()),
        eos_token=sp.id_to_piece(EOS),
        pad_token=sp.id_to_piece(PAD),
        bos_token=sp.id_to_piece(BOS),  # special, so that decoding skips the decoder's start token
        model_max_length=cfg.max_positions,  # the source with its </s> must fit the position table
    )
    tokenizer.save_pretrained(str(tmp))
