"""`mtkit bpe DIR`: one joint SentencePiece BPE model, then every split encoded to DIR/bin.

Reads DIR/raw/{split}.{lang} (what `mtkit prepare` wrote) and writes:

    DIR/spm.model, DIR/spm.vocab         the model (fixed ids pad 0, unk 1, bos 2, eos 3)
    DIR/bin/{split}.{lang}.{bin,idx}     token ids without BOS/EOS (see binarize.py)
    DIR/bpe.json                         settings, input checksums, sizes and token counts

Re-running with the same settings on the same raw files reuses the model and the arrays;
a change of the settings or of the training text relearns the model, and a new model or
a changed split re-encodes what depends on it. `--threads` (encoding) changes speed, never
the result: the same raw files and settings give byte-identical spm.model and arrays.

DIR may hold the user's own files: bpe replaces only the files that bpe.json lists as its
own (owned.py), and a Ctrl-C or SIGTERM leaves no temporary file behind. It holds DIR/.mtkit.lock
for its whole run: a second `bpe` or a `prepare` on DIR meanwhile is refused in one sentence.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.atomic import write_atomic
from mtkit.data.binarize import id_dtype
from mtkit.data.corpora import SPLITS, default_registry
from mtkit.data.encode import all_lines, encode_file, give_back_freed_memory, sample_pairs
from mtkit.data.multilingual import balanced_sentences, gather, languages, pairs_of, token_of
from mtkit.data.owned import listed, previous_record, refuse_foreign
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.files import (
    MARIAN_TOKENIZER,
    SPM_MODEL,
    TOKENIZER_FILES,
    check_parallel,
    data_dir_locked,
    fingerprint,
    progress_bar,
)
from mtkit.interrupts import terminate_as_interrupt

logger = logging.getLogger(__name__)

FORMAT = 1
DEFAULT_SAMPLE = 2_000_000  # sentences (of both languages together) to learn from
DEFAULT_SEED = 1


@dataclass
class BpeOptions:
    vocab_size: int | None = None
    sample: int = DEFAULT_SAMPLE
    threads: int | None = None
    seed: int = DEFAULT_SEED
    force: bool = False
    progress: bool = False
    # `--from MODEL`: encode with that model's own tokenizer (and the name the user gave), learn nothing
    tokenizer: Tokenizer | None = None
    tokenizer_from: str | None = None


def encode_dirs(
    dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike | None = None,
    options: BpeOptions | None = None,
    open_tokenizer: Callable[[], Tokenizer] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """`mtkit bpe`: one DIR's vocabulary and binarized splits (`build`), or several DIRs gathered into OUT first
    (mtkit/data/multilingual.py). With `options.tokenizer_from`, `open_tokenizer` opens that model's tokenizer
    (this layer opens no model): it encodes, and a gathered pair's token is the model's spelling of it.
    Returns the gathered record (None for one DIR) and bpe.json's content."""
    opts = options or BpeOptions()
    if len(dirs) > 1 and out is None:
        raise MtkitError("several data directories make one multilingual directory: name it with --out DIR.")
    if len(dirs) == 1 and out is not None:
        raise MtkitError("--out is for several data directories (a multilingual model); give two or more.")
    if opts.tokenizer_from is not None and opts.vocab_size is not None:
        raise MtkitError("--vocab-size and --from exclude each other: --from uses the model's own vocabulary.")
    if opts.tokenizer is None and open_tokenizer is not None:
        opts = dataclasses.replace(opts, tokenizer=open_tokenizer())
    if out is None:
        return None, build(dirs[0], opts)
    gathered = gather(dirs, out, token_of(opts.tokenizer, opts.tokenizer_from))
    return gathered, build(out, opts)


def default_vocab_size(corpus: str | None, train_pairs: int) -> tuple[int, str]:
    """The registry's size for a named corpus (37000 wmt14 En-De, 32000 En-Fr, 8000 Multi30k);
    for custom data a size that grows with the corpus: 8000 under 100k pairs, 16000 under 1M,
    32000 above."""
    registry = default_registry()
    if corpus and corpus in registry:
        return registry.get(corpus).vocab_size, f"the default for {corpus}"
    size = 8000 if train_pairs < 100_000 else 16000 if train_pairs < 1_000_000 else 32000
    return size, f"the default for {train_pairs} training pairs of custom data"


def _languages(data_dir: Path) -> tuple[str | None, str, str]:
    raw = data_dir / "raw"
    prep = data_dir / "prepare.json"
    if prep.is_file():
        try:
            info = json.loads(prep.read_text())
            return info.get("corpus"), info["src_lang"], info["tgt_lang"]
        except (ValueError, KeyError):
            raise MtkitError(f"{prep} is not a valid prepare.json; run `mtkit prepare` again.") from None
    if not raw.is_dir():
        raise MtkitError(f"{raw} does not exist; run `mtkit prepare NAME --out {data_dir}` first.")
    langs = sorted(p.suffix.lstrip(".") for p in raw.glob("train.*"))
    if len(langs) != 2:
        raise MtkitError(f"{raw} should hold train.SRC and train.TGT, found {len(langs)} train files.")
    return None, langs[0], langs[1]


def build(data_dir: str | os.PathLike, options: BpeOptions | None = None) -> dict[str, Any]:
    """Learn (or reuse) DIR/spm.model and encode (or reuse) every split; returns bpe.json's content."""
    opts = options or BpeOptions()
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MtkitError(f"{data_dir} does not exist; run `mtkit prepare NAME --out {data_dir}` first.")
    if opts.sample < 2:
        raise MtkitError(f"--sample must be at least 2 sentences, got {opts.sample}.")
    with data_dir_locked(data_dir, "mtkit bpe"):  # no `prepare` or other `bpe` on DIR meanwhile
        return _build(data_dir, opts)


def _build(data_dir: Path, opts: BpeOptions) -> dict[str, Any]:
    corpus, src, tgt = _languages(data_dir)
    timings: dict[str, float] = {}
    # 1. The raw text: checksums and line counts, checked pairwise.
    t0 = time.perf_counter()
    inputs = _fingerprint_inputs(data_dir / "raw", src, tgt)
    timings["fingerprint_s"] = time.perf_counter() - t0
    splits = [s for s in SPLITS if f"{s}.{src}" in inputs and f"{s}.{tgt}" in inputs]
    train_pairs = inputs[f"train.{src}"]["lines"]
    vocab_size, why = (
        (opts.vocab_size, "--vocab-size") if opts.vocab_size is not None else default_vocab_size(corpus, train_pairs)
    )
    settings = _learn_settings(vocab_size, opts) if opts.tokenizer is None else _model_settings(opts)
    pairs = pairs_of(previous_record(data_dir / "prepare.json"))  # several pairs (mtkit/data/multilingual.py)
    if pairs and opts.tokenizer is None:  # their target-language tokens as pieces of their own; sampled per language
        settings.update(user_defined_symbols=list(dict.fromkeys(p["token"] for p in pairs)), sample_by="language")
    # 2. What DIR holds: replace only what an earlier run wrote; its record counts only without --force.
    record_path = data_dir / "bpe.json"
    previous = previous_record(record_path)
    outputs = _outputs(splits, src, tgt)
    owned = _owned(previous)
    refuse_foreign(data_dir, outputs, owned, "mtkit bpe", "bpe.json")
    prev = {} if opts.force else previous
    with terminate_as_interrupt():
        _sweep_temporaries(data_dir, outputs)
        # A record of every file that may change and no settings: nothing reuses a half-updated directory.
        _write_record(record_path, {"format": FORMAT, "state": "building", "files": sorted(owned | outputs)})
        # 3. The model: learned, or reused when the settings and the training text are the same.
        if opts.tokenizer is None:
            learned = _learn_or_reuse(data_dir, inputs, src, tgt, settings, why, opts, prev, timings, pairs)
        else:
            learned = _model_tokenizer(data_dir, opts.tokenizer, prev)
            why = f"the tokenizer of {opts.tokenizer_from}"
        # 4. Every split encoded, or reused when its text and the model are the same.
        encoded = _encode_splits(data_dir, inputs, splits, src, tgt, learned, opts, prev, timings)
        record = {
            "format": FORMAT,
            "corpus": corpus,
            "src_lang": src,
            "tgt_lang": tgt,
            "vocab_size": len(learned.vocab),
            "mtkit_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "settings": settings,
            "vocab_size_from": why,
            "learned_from": _train_inputs(inputs, src, tgt),
            "sample_used": learned.sample,
            "model": {"file": learned.vocab.filename, "sha256": learned.sha256, "pieces": len(learned.vocab)},
            "splits": encoded,
            "files": sorted(outputs),
            "reused_model": learned.reused,
            **({"pairs": pairs} if pairs else {}),
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
        _write_record(record_path, record)
    return record


def _fingerprint_inputs(raw: Path, src: str, tgt: str) -> dict[str, dict[str, Any]]:
    """{"split.lang": fingerprint} of every raw file there is; train must be there, pairs must align."""
    inputs: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        for lang in (src, tgt):
            path = raw / f"{split}.{lang}"
            if path.is_file():
                inputs[f"{split}.{lang}"] = fingerprint(path)
            elif split == "train":
                raise MtkitError(f"{path} is missing; run `mtkit prepare` first.")
    for split in SPLITS:
        if f"{split}.{src}" in inputs and f"{split}.{tgt}" in inputs:
            check_parallel(
                inputs[f"{split}.{src}"]["lines"],
                inputs[f"{split}.{tgt}"]["lines"],
                str(raw / f"{split}.{src}"),
                str(raw / f"{split}.{tgt}"),
                hint="; run `mtkit prepare` again",
            )
    return inputs


def _train_inputs(inputs: dict[str, dict[str, Any]], src: str, tgt: str) -> dict[str, dict[str, Any]]:
    return {k: inputs[k] for k in (f"train.{src}", f"train.{tgt}")}


def _learn_settings(vocab_size: int, opts: BpeOptions) -> dict[str, Any]:
    """What the model depends on (besides the training text): a change of any of them relearns it."""
    import sentencepiece

    from mtkit.data.vocab import TRAIN_SETTINGS

    return {
        **TRAIN_SETTINGS,
        "vocab_size": vocab_size,
        "sample": opts.sample,
        "seed": opts.seed,
        "sentencepiece": sentencepiece.__version__,
        "mtkit_bpe_version": 1,
    }


def _model_settings(opts: BpeOptions) -> dict[str, Any]:
    """`--from MODEL`: what the arrays depend on is the tokenizer itself."""
    assert opts.tokenizer is not None
    sha256 = hashlib.sha256(opts.tokenizer.proto).hexdigest()
    return {"from": opts.tokenizer_from, "sha256": sha256, "mtkit_bpe_version": 1}


def _model_tokenizer(data_dir: Path, tokenizer: Tokenizer, prev: Mapping[str, Any]) -> _Learned:
    """`--from MODEL`: the model's tokenizer written under the name that says what it holds (`filename`: spm.model
    for a SentencePiece model, marian-tokenizer.json for an OPUS-MT model's bundle), nothing learned; the other
    name, which an earlier run may have written, removed."""
    proto = tokenizer.proto
    sha256 = hashlib.sha256(proto).hexdigest()
    model_path = data_dir / tokenizer.filename
    reused = model_path.is_file() and model_path.read_bytes() == proto
    if not reused:
        write_atomic(model_path, proto)
    for other in TOKENIZER_FILES:
        if other != tokenizer.filename:
            (data_dir / other).unlink(missing_ok=True)
    write_atomic(data_dir / "spm.vocab", tokenizer.pieces_file())
    return _Learned(tokenizer, sha256, reused and prev.get("model", {}).get("sha256") == sha256, {})


# --------------------------------------------------------------------------- the files bpe owns
MODEL_FILES = (*TOKENIZER_FILES, "spm.vocab")


def _outputs(splits: list[str], src: str, tgt: str) -> set[str]:
    return {
        *MODEL_FILES,
        *(f"bin/{split}.{lang}.{ext}" for split in splits for lang in (src, tgt) for ext in ("bin", "idx")),
    }


def _owned(previous: Mapping[str, Any]) -> set[str]:
    """The files an earlier bpe.json lists (format-1 records before `files` existed: its model and arrays)."""
    owned = listed(previous.get("files"))
    if isinstance(previous.get("model"), dict):
        owned.update(MODEL_FILES)
    for entry in (previous.get("splits") or {}).values():
        for info in ((entry or {}).get("files") or {}).values() if isinstance(entry, dict) else ():
            owned |= listed([info.get("bin"), info.get("idx")]) if isinstance(info, dict) else set()
    return owned


def _sweep_temporaries(data_dir: Path, outputs: set[str]) -> None:
    """Remove what a killed run left of the files about to be written (BinaryWriter's, atomic writes').

    Safe because DIR is locked: no other run can be writing them now.
    """
    for rel in outputs:
        path = data_dir / rel
        for tmp in (path.with_name(path.name + ".tmp"), *path.parent.glob(f".{path.name}.*.tmp")):
            if tmp.is_file():
                logger.info("removing %s, left by an interrupted run", tmp)
                tmp.unlink()


def _write_record(path: Path, record: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------- learn, encode
@dataclass
class _Learned:
    vocab: Any  # mtkit.data.vocab.Vocab
    sha256: str
    reused: bool
    sample: dict[str, Any]


def _learn_or_reuse(
    data_dir: Path,
    inputs: dict[str, dict[str, Any]],
    src: str,
    tgt: str,
    settings: dict[str, Any],
    why: str,
    opts: BpeOptions,
    prev: Mapping[str, Any],
    timings: dict[str, float],
    pairs: list[dict[str, Any]],
) -> _Learned:
    from mtkit.data.vocab import Vocab, train_bpe

    model_path = data_dir / SPM_MODEL
    model_bytes = model_path.read_bytes() if model_path.is_file() else b""
    if (
        prev.get("settings") == settings
        and prev.get("learned_from") == _train_inputs(inputs, src, tgt)
        and model_bytes
        and hashlib.sha256(model_bytes).hexdigest() == prev.get("model", {}).get("sha256")
    ):
        logger.info("reusing %s (same settings and training text)", model_path)
        return _Learned(Vocab.from_bytes(model_bytes), prev["model"]["sha256"], True, prev.get("sample_used", {}))
    t0 = time.perf_counter()
    raw = data_dir / "raw"
    train_pairs, total, taken = inputs[f"train.{src}"]["lines"], 2 * inputs[f"train.{src}"]["lines"], [0]
    if pairs:
        sentences: Iterator[str] = balanced_sentences(raw, pairs, opts.sample, opts.seed, taken)
        logger.info(
            "learning a joint BPE model of %d pieces (%s) for %s, at most %d sentences of each (seed %d)",
            settings["vocab_size"],
            why,
            ", ".join(languages(pairs)),
            opts.sample // len(languages(pairs)),
            opts.seed,
        )
    elif opts.sample >= total:
        sentences = all_lines(raw / f"train.{src}", raw / f"train.{tgt}")
        taken[0] = total
        logger.info(
            "learning a joint BPE model of %d pieces (%s) from all %d sentences", settings["vocab_size"], why, total
        )
    else:
        sentences = sample_pairs(
            raw / f"train.{src}", raw / f"train.{tgt}", train_pairs, opts.sample // 2, opts.seed, taken
        )
        logger.info(
            "learning a joint BPE model of %d pieces (%s) from %d of %d training sentences (seed %d)",
            settings["vocab_size"],
            why,
            opts.sample // 2 * 2,
            total,
            opts.seed,
        )
    model_bytes = train_bpe(sentences, settings["vocab_size"], settings.get("user_defined_symbols", ()))
    give_back_freed_memory()
    write_atomic(model_path, model_bytes)
    (data_dir / MARIAN_TOKENIZER).unlink(missing_ok=True)  # an earlier `--from` model's, now stale
    vocab = Vocab.from_bytes(model_bytes)
    write_atomic(data_dir / "spm.vocab", vocab.pieces_file())
    timings["learn_s"] = time.perf_counter() - t0
    return _Learned(vocab, hashlib.sha256(model_bytes).hexdigest(), False, {"sentences": taken[0], "of": total})


def _encode_splits(
    data_dir: Path,
    inputs: dict[str, dict[str, Any]],
    splits: list[str],
    src: str,
    tgt: str,
    learned: _Learned,
    opts: BpeOptions,
    prev: Mapping[str, Any],
    timings: dict[str, float],
) -> dict[str, dict[str, Any]]:
    """Each split's arrays in DIR/bin; one is reused when its raw text and the model are those it was made from."""
    bin_dir = data_dir / "bin"
    bin_dir.mkdir(exist_ok=True)
    threads = max(1, opts.threads or os.cpu_count() or 1)
    prev_splits = prev.get("splits", {}) if prev.get("model", {}).get("sha256") == learned.sha256 else {}
    lines = sum(inputs[f"{s}.{lang}"]["lines"] for s in splits for lang in (src, tgt))
    out: dict[str, dict[str, Any]] = {}
    with progress_bar(opts.progress, lines, "encoding", "sentences") as bar:
        for split in splits:
            entry: dict[str, Any] = {
                "sentences": inputs[f"{split}.{src}"]["lines"],
                "tokens": {},
                "files": {},
                "inputs": {},
            }
            for lang in (src, tgt):
                key = f"{split}.{lang}"
                old = prev_splits.get(split, {})
                if old.get("inputs", {}).get(lang) == inputs[key]["sha256"] and _bin_intact(
                    bin_dir / key, old.get("files", {}).get(lang)
                ):
                    logger.info("reusing %s.bin", bin_dir / key)
                    entry["tokens"][lang], entry["files"][lang] = old["tokens"][lang], old["files"][lang]
                else:
                    logger.info("encoding %s", data_dir / "raw" / key)
                    vocab = learned.vocab  # an OPUS-MT tokenizer cuts the target side with its target model
                    encode = vocab.encode_batch if lang == src else vocab.encode_target_batch
                    entry["tokens"][lang] = encode_file(
                        encode, len(vocab), data_dir / "raw" / key, bin_dir / key, threads, timings, bar.update
                    )
                    entry["files"][lang] = {
                        "bin": f"bin/{key}.bin",
                        "idx": f"bin/{key}.idx",
                        "bin_bytes": (bin_dir / f"{key}.bin").stat().st_size,
                        "idx_bytes": (bin_dir / f"{key}.idx").stat().st_size,
                    }
                entry["inputs"][lang] = inputs[key]["sha256"]
            entry["src_tokens"], entry["tgt_tokens"] = entry["tokens"][src], entry["tokens"][tgt]
            entry["dtype"] = id_dtype(len(learned.vocab)).name
            out[split] = entry
    return out


def _bin_intact(prefix: Path, info: dict | None) -> bool:
    if not info:
        return False
    for ext in ("bin", "idx"):
        path = prefix.with_name(f"{prefix.name}.{ext}")
        if not path.is_file() or path.stat().st_size != info.get(f"{ext}_bytes"):
            return False
    return True
