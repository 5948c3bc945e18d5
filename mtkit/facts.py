"""What a model and a run are, in a few figures: the architecture in the paper's symbols, the parameter count, the
best validation score a checkpoint keeps, and the summary of a run's metrics.jsonl.

Shared by `mtkit info` (mtkit/sources/) and the model card of the Hugging Face export (mtkit/marian/card.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# The names the trainer gives its checkpoints (mtkit/checkpoint.py saves them): checkpoint_<step>.pt, and every one
# of them (<step>, last, best). Here, with no torch, so that telling what a path is imports none.
CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)\.pt")
CHECKPOINT_FILE = re.compile(r"checkpoint_.*\.pt")


def parameters(state: dict[str, Any]) -> int:
    """Parameters of a state_dict, each shared tensor counted once (tied embeddings, paper 3.4)."""
    seen: set[tuple] = set()
    total = 0
    for tensor in state.values():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            total += tensor.numel()
    return total


def best_score(ckpt: dict[str, Any]) -> dict[str, float] | None:
    best = (ckpt.get("progress") or {}).get("best")
    if not isinstance(best, (int, float)) or best in (float("inf"), float("-inf")):
        return None
    if (ckpt.get("train_config") or {}).get("valid_bleu"):
        return {"bleu": -float(best)}  # the trainer keeps -BLEU so that lower is better for both
    return {"nll": float(best)}


def architecture(config: Any) -> str:
    """One line in the paper's symbols: layers, d_model / d_ff / h, norm placement, sharing, dropout."""
    norm = "pre-norm" if config.pre_norm else "post-norm"
    extras = "".join(
        [f", {config.activation}" if config.activation != "relu" else "", ", logits bias" if config.output_bias else ""]
    )
    vocab = str(config.vocab_size) if config.tgt_vocab_size is None else f"{config.vocab_size}/{config.tgt_vocab_size}"
    return (
        f"{config.encoder_layers}+{config.decoder_layers} layers, d_model {config.d_model}, d_ff {config.d_ff}, "
        f"h {config.heads} (d_k {config.d_k}), {norm}{extras}, embeddings shared: {config.share_embeddings}, "
        f"dropout {config.dropout}, vocabulary {vocab}"
    )


def run_metrics(run: Path) -> dict[str, Any] | None:
    """The best validation figures, the last step and the training time that metrics.jsonl records."""
    from mtkit.plot import minutes_axis

    path = run / "metrics.jsonl"
    if not path.is_file():
        return None
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill; info describes what is there
        if isinstance(record, dict) and "event" in record and "time" in record:
            records.append(record)
    if not records:
        return None
    valid = [r for r in records if r["event"] == "valid"]
    out: dict[str, Any] = {
        "records": len(records),
        "last_step": max((r.get("step", 0) for r in records), default=0),
        "training_minutes": round(minutes_axis(records)[-1], 2),
        "sessions": sum(r["event"] == "start" for r in records),
    }
    for key, pick in (("loss", min), ("ppl", min), ("bleu", max)):
        scored = [r for r in valid if isinstance(r.get(key), (int, float))]
        if scored:
            best = pick(scored, key=lambda r: r[key])
            out[f"best_valid_{key}"] = {"value": best[key], "step": best.get("step")}
    done = [r for r in records if r["event"] == "done"]
    if done:
        out["stopped"] = done[-1].get("stopped")
    return out
