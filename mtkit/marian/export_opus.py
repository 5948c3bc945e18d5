"""`mtkit export --format huggingface` of a model with an OPUS-MT vocabulary (read from an OPUS-MT directory,
or fine-tuned from one): the directory the public Helsinki-NLP models have.

Its tokenizer files are the original ones, unchanged (source.spm, target.spm, vocab.json with Marian's ids),
and config.json has Marian's ids (`<pad>` the decoder's start and never generated, `</s>` 0), so
`MarianMTModel` and `MarianTokenizer` load it as they load the model it came from; mtkit/marian/opus.py
turns mtkit's renumbered rows back. generation_config.json holds mtkit's beam settings as
mtkit/marian/export.py explains.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mtkit import checkpoint
from mtkit.config import ExportConfig
from mtkit.data.marian_vocab import MarianVocab
from mtkit.errors import MtkitError
from mtkit.marian import opus as marian_opus

logger = logging.getLogger(__name__)


def save_quietly(model: Any, directory: Path) -> None:
    """`model.save_pretrained(directory)` without Transformers' "Writing model shards" progress bar on stderr: the
    export logs its own lines, and a bar over one shard says nothing."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(directory)
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def write(
    ckpt: dict[str, Any], vocab: MarianVocab, tmp: Path, config: ExportConfig, dtype: Any, search: dict[str, Any]
) -> None:
    """Model, generation settings (`search`: mtkit's beam and length penalty) and the original tokenizer files of
    `ckpt`, saved in `tmp`."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

    cfg = checkpoint.config_of(ckpt)
    fields = marian_opus.opus_config(cfg, vocab)
    model = MarianMTModel(MarianConfig(**fields))
    missing, unexpected = model.load_state_dict(marian_opus.to_opus(ckpt["model"], cfg, vocab), strict=False)
    if unexpected or set(missing) - set(marian_opus.marian.POSITION_KEYS):
        raise MtkitError(
            f"the Marian model does not take mtkit's weights (missing {sorted(missing)}, unexpected "
            f"{sorted(unexpected)}); this Transformers version is not supported by this mtkit."
        )
    ids = vocab.ids
    model.generation_config = GenerationConfig(
        **search,
        max_length=cfg.max_positions,
        decoder_start_token_id=ids.pad,
        eos_token_id=ids.eos,
        pad_token_id=ids.pad,
        forced_eos_token_id=ids.eos,
        bad_words_ids=[[ids.pad]],
    )
    save_quietly(model.to(dtype), tmp)
    (tmp / "source.spm").write_bytes(vocab.source_proto)
    (tmp / "target.spm").write_bytes(vocab.target_proto)
    (tmp / "vocab.json").write_text(
        json.dumps({p: i for i, p in enumerate(vocab.pieces)}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    tokenizer = MarianTokenizer(
        str(tmp / "source.spm"),
        str(tmp / "target.spm"),
        str(tmp / "vocab.json"),
        source_lang=vocab.config.get("source_lang"),
        target_lang=vocab.config.get("target_lang"),
        model_max_length=int(vocab.config.get("model_max_length", cfg.max_positions)),
    )
    tokenizer.save_pretrained(str(tmp))
    logger.info("converted to a Transformers MarianMTModel with its OPUS-MT vocabulary (%s)", config.quantization)
