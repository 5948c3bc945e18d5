"""The model card (README.md) of a Hugging Face export: what the model is, its data, its scores, how it was trained.

Transformers' convention: YAML front matter (language, license, library_name, pipeline_tag, tags,
metrics) that the Hub reads, then Markdown for people. Everything comes from what mtkit stored:
the checkpoint (architecture, step, best validation figure, the checkpoints averaged), the run's
record (RUN/run.json inside the checkpoint: command, versions, device, the data's sha256 chain), and
the run's metrics.jsonl when the model file sits in its run directory. mtkit stores no test-set
score, and the card says so rather than invent one. The license is the data's and the user's to
state: the card says `other` and asks for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtkit.config import ModelConfig
from mtkit.provenance import data_languages

NAME = "README.md"


def languages(provenance: dict[str, Any] | None) -> tuple[str, str] | None:
    """(source, target) from the run's record (mtkit.provenance.data_languages)."""
    return data_languages(provenance)


def _front_matter(langs: tuple[str, str] | None) -> list[str]:
    lines = ["---"]
    if langs:
        lines += ["language:", *(f"- {lang}" for lang in langs)]
    return [
        *lines,
        "license: other  # the training data's terms: set it before publishing",
        "library_name: transformers",
        "pipeline_tag: translation",
        "tags:",
        "- translation",
        "- marian",
        "- mtkit",
        "metrics:",
        "- bleu",
        "---",
    ]


def _about(ckpt: dict[str, Any], source: Path, cfg: ModelConfig, langs: tuple[str, str] | None) -> list[str]:
    from mtkit.facts import architecture, parameters

    pair = f"{langs[0]} → {langs[1]}" if langs else "translation"
    vocab = ckpt.get("vocab") or b""
    return [
        f"# {source.parent.name or source.name} ({source.name})",
        "",
        f"A Transformer (Vaswani et al. 2017, \"Attention Is All You Need\") for {pair}, trained with "
        "mtkit and exported with `mtkit export --format huggingface` as a Transformers "
        "`MarianMTModel`: post-norm layers, ReLU, sinusoidal positions, embeddings scaled by sqrt(d_model), "
        "source, target and output embeddings tied as the model was trained.",
        "",
        f"- Architecture: {architecture(cfg)}",
        f"- Parameters: {parameters(ckpt['model']):,}",
        f"- Vocabulary: one joint SentencePiece BPE model ({len(vocab):,} bytes), `source.spm` = `target.spm`; "
        "ids `<pad>` 0, `<unk>` 1, `<s>` 2, `</s>` 3; the decoder starts from `<s>`.",
    ]


def _data(provenance: dict[str, Any] | None) -> list[str]:
    data = (provenance or {}).get("data") or {}
    if not data:
        return ["## Data", "", "Not recorded (the model was not made by `mtkit train`, or predates run.json)."]
    archives = data.get("archives") or {}
    lines = ["## Data", "", f"- Corpus: {archives.get('corpus') or 'not named'} (prepared in `{data.get('dir')}`)"]
    for src in archives.get("sources") or []:
        lines.append(f"- Archive: {src.get('file')} ({src.get('url') or 'local'}), sha256 `{src.get('sha256')}`")
    bpe = data.get("bpe") or {}
    if bpe.get("vocab_size"):
        lines.append(f"- SentencePiece: {bpe['vocab_size']} pieces learned on the training text by `mtkit bpe`")
    for rel, info in (data.get("files") or {}).items():
        lines.append(f"- `{rel}`: sha256 `{(info or {}).get('sha256')}`")
    return lines


def _training(ckpt: dict[str, Any]) -> list[str]:
    record = ckpt.get("provenance") or {}
    lines = ["## Training", "", f"- Updates: {int(ckpt.get('step', 0)):,}"]
    if record:
        versions = ", ".join(f"{k} {v}" for k, v in (record.get("versions") or {}).items() if v)
        lines += [
            f"- Command: `{record.get('command')}`",
            f"- Device: {record.get('device')}, {record.get('threads')} thread(s), precision "
            f"{record.get('precision')}, world size {record.get('world_size')}",
            f"- Versions: {versions}",
        ]
        if record.get("git"):
            lines.append(f"- mtkit commit: `{record['git'].get('commit')}`")
    train = ckpt.get("train_config") or {}
    if train:
        lines.append(
            f"- Optimisation: Adam, lr scale {train.get('lr_scale')}, warmup {train.get('warmup')}, "
            f"{train.get('max_tokens')} tokens a batch x {train.get('update_freq')}, "
            f"label smoothing {train.get('label_smoothing')}"
        )
    taken = ckpt.get("taken_from")
    if isinstance(taken, dict):
        lines.append(f"- Weights: the checkpoint of step {taken.get('step')}")
    averaged = ckpt.get("averaged_from") or []
    if averaged:
        steps = [str(a.get("step")) for a in averaged if isinstance(a, dict)]
        lines.append(f"- Weights: the average of {len(averaged)} checkpoints (steps {', '.join(steps)})")
    return lines


def _scores(ckpt: dict[str, Any], source: Path) -> list[str]:
    from mtkit.facts import best_score, run_metrics

    lines = ["## Evaluation", ""]
    best = best_score(ckpt)
    if best and "bleu" in best:
        lines.append(f"- Best validation BLEU (sacreBLEU, greedy, on the dev sample): {best['bleu']:.2f}")
    elif best:
        lines.append(f"- Best validation loss (NLL per token): {best['nll']:.3f}")
    metrics = run_metrics(source.parent) if (source.parent / "metrics.jsonl").is_file() else None
    for key, label in (("bleu", "BLEU (greedy, dev sample)"), ("loss", "loss"), ("ppl", "perplexity")):
        found = (metrics or {}).get(f"best_valid_{key}")
        if found:
            lines.append(f"- Run's best validation {label}: {found['value']:.3f} at update {found['step']}")
    lines += [
        "- Test-set BLEU: not stored with the model. Measure it with `mtkit translate` and `mtkit score` "
        "(sacreBLEU with its signature), or with this directory and `generate` as below."
    ]
    return lines


def _usage(settings: dict[str, Any]) -> list[str]:
    return [
        "## How to use",
        "",
        "```python",
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
        "",
        'tokenizer = AutoTokenizer.from_pretrained("THIS_DIRECTORY")',
        'model = AutoModelForSeq2SeqLM.from_pretrained("THIS_DIRECTORY")',
        'batch = tokenizer(["A sentence to translate."], return_tensors="pt", padding=True)',
        "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
        "```",
        "",
        f"`generation_config.json` holds mtkit's decoding defaults: beam {settings['num_beams']}, length penalty "
        f"alpha {settings['length_penalty']}, stop once {settings['num_beams']} hypotheses have ended, `<pad>` "
        "and `<s>` never generated, `</s>` forced at the length limit. Two differ from `mtkit translate`:",
        "",
        "- Length penalty: Transformers divides by |Y|^alpha (mtkit's `--lenpen fairseq`), mtkit by GNMT's "
        "((5 + |Y|) / 6)^alpha, so beam search may pick another ending for some sentences (`generate` and "
        "`mtkit translate --lenpen fairseq` search alike). Greedy search (`num_beams=1`) gives exactly "
        "`mtkit translate --beam 1`'s output.",
        f"- Length limit: mtkit allows the source length + 50 tokens; `max_length` here is "
        f"{settings['max_length']} (the position table's bound). Pass "
        "`max_new_tokens=batch.input_ids.shape[1] + 50` for mtkit's limit.",
    ]


def model_card(ckpt: dict[str, Any], source: Path, cfg: ModelConfig, settings: dict[str, Any]) -> str:
    """README.md for the export directory of `ckpt` (read from `source`)."""
    provenance = ckpt.get("provenance")
    langs = languages(provenance)
    sections = [
        _front_matter(langs),
        _about(ckpt, source, cfg, langs),
        _data(provenance),
        _training(ckpt),
        _scores(ckpt, source),
        _usage(settings),
        [
            "## License",
            "",
            "mtkit does not know the terms of the training data; state them in `license` above before publishing.",
        ],
    ]
    return "\n\n".join("\n".join(s) for s in sections) + "\n"
