"""`mtkit bpe DIR`: one joint SentencePiece BPE model, then every split encoded to DIR/bin.

Reads DIR/raw/{split}.{lang} (what `mtkit prepare` wrote) and writes:

    DIR/spm.model, DIR/spm.vocab         the model (fixed ids pad 0, unk 1, bos 2, eos 3)
    DIR/bin/{split}.{lang}.{bin,idx}     token ids without BOS/EOS (see binarize.py)
    DIR/bpe.json                         settings, input checksums, sizes and token counts

Re-running with the same settings on the same raw files reuses the model and the arrays;
a change of the settings or of the training text relearns the model, and a new model or
a changed split re-encodes what depends on it. `--threads` (encoding) changes speed, never
the result: the same raw files and settings give byte-identical spm.model and arrays.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from mtkit.atomic import write_atomic
from mtkit import __version__
from mtkit.data.binarize import BinaryWriter, id_dtype
from mtkit.data.corpora import SPLITS, default_registry
from mtkit.data.extract import CHUNK
from mtkit.errors import MtkitError

FORMAT = 1
DEFAULT_SAMPLE = 2_000_000  # sentences (of both languages together) to learn from
DEFAULT_SEED = 1
ENCODE_BATCH = 20_000
Log = Callable[[str], None]


@dataclass
class BpeOptions:
    vocab_size: int | None = None
    sample: int = DEFAULT_SAMPLE
    threads: int | None = None
    seed: int = DEFAULT_SEED
    force: bool = False
    progress: bool = False


def default_vocab_size(corpus: str | None, train_pairs: int) -> tuple[int, str]:
    """The registry's size for a named corpus (37000 wmt14 En-De, 32000 En-Fr, 8000 Multi30k);
    for custom data a size that grows with the corpus: 8000 under 100k pairs, 16000 under 1M,
    32000 above."""
    registry = default_registry()
    if corpus and corpus in registry:
        return registry.get(corpus).vocab_size, f"the default for {corpus}"
    size = 8000 if train_pairs < 100_000 else 16000 if train_pairs < 1_000_000 else 32000
    return size, f"the default for {train_pairs} training pairs of custom data"


def fingerprint(path: Path) -> dict:
    """Size, line count and sha256 of a file, in one pass."""
    sha, lines, size, last = hashlib.sha256(), 0, 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            sha.update(block)
            lines += block.count(b"\n")
            size += len(block)
            last = block[-1:]
    return {"bytes": size, "lines": lines + (last != b"\n"), "sha256": sha.hexdigest()}


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


def _lines(path: Path, batch: int) -> Iterator[list[str]]:
    """Batches of lines as text; a line that is not UTF-8 is an error naming file and line."""
    first = 1
    with open(path, "rb", buffering=CHUNK) as f:
        while True:
            raw = f.readlines(batch * 200)
            if not raw:
                return
            blob = b"".join(raw)
            try:
                text = blob.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = first + blob.count(b"\n", 0, exc.start)
                raise MtkitError(f"{path}: line {line} is not valid UTF-8; run `mtkit prepare` again.") from None
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            first += len(lines)
            yield lines


def all_lines(*paths: Path) -> Iterator[str]:
    for path in paths:
        for batch in _lines(path, ENCODE_BATCH):
            yield from batch


def sample_pairs(src: Path, tgt: Path, pairs: int, want: int, seed: int, taken: list[int] | None = None) -> Iterator[str]:
    """Both sides of `want` pairs chosen uniformly at random (seeded) among `pairs`, in one pass.

    Exact selection in a stream: each block of lines gets a hypergeometric share of what is
    still wanted, then that many of its lines at random. Memory holds one block. The number
    of sentences yielded is added to `taken[0]`.
    """
    rng = np.random.default_rng(seed)
    remaining, need = pairs, min(want, pairs)
    block = 100_000
    with open(src, "rb", buffering=CHUNK) as fs, open(tgt, "rb", buffering=CHUNK) as ft:
        while remaining and need:
            a = [fs.readline() for _ in range(min(block, remaining))]
            b = [ft.readline() for _ in range(len(a))]
            n = len(a)
            take = int(rng.hypergeometric(n, remaining - n, need)) if remaining > n else need
            for i in np.sort(rng.choice(n, size=take, replace=False)):
                for line in (a[i], b[i]):
                    yield line.decode("utf-8", errors="replace").rstrip("\n")
            if taken is not None:
                taken[0] += 2 * take
            need -= take
            remaining -= n


def build(data_dir: str | os.PathLike, options: BpeOptions | None = None, log: Log | None = None) -> dict:
    """Learn (or reuse) DIR/spm.model and encode (or reuse) every split; returns bpe.json's content."""
    from mtkit.data.vocab import TRAIN_SETTINGS, Vocab, train_bpe
    import sentencepiece

    opts = options or BpeOptions()
    log = log or (lambda _msg: None)
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MtkitError(f"{data_dir} does not exist; run `mtkit prepare NAME --out {data_dir}` first.")
    corpus, src, tgt = _languages(data_dir)
    raw = data_dir / "raw"
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    files: dict[str, dict] = {}
    for split in SPLITS:
        for lang in (src, tgt):
            path = raw / f"{split}.{lang}"
            if path.is_file():
                files[f"{split}.{lang}"] = fingerprint(path)
            elif split == "train":
                raise MtkitError(f"{path} is missing; run `mtkit prepare` first.")
    splits = [s for s in SPLITS if f"{s}.{src}" in files and f"{s}.{tgt}" in files]
    timings["fingerprint_s"] = time.perf_counter() - t0
    for split in splits:
        a, b = files[f"{split}.{src}"]["lines"], files[f"{split}.{tgt}"]["lines"]
        if a != b:
            raise MtkitError(f"{raw / f'{split}.{src}'} has {a} lines but {raw / f'{split}.{tgt}'} has {b}; "
                             f"run `mtkit prepare` again.")
    train_pairs = files[f"train.{src}"]["lines"]
    if train_pairs == 0:
        raise MtkitError(f"{raw / f'train.{src}'} is empty.")

    if opts.vocab_size is not None:
        vocab_size, why = opts.vocab_size, "--vocab-size"
    else:
        vocab_size, why = default_vocab_size(corpus, train_pairs)
    if opts.sample < 2:
        raise MtkitError(f"--sample must be at least 2 sentences, got {opts.sample}.")
    threads = max(1, opts.threads or os.cpu_count() or 1)
    settings = {**TRAIN_SETTINGS, "vocab_size": vocab_size, "sample": opts.sample, "seed": opts.seed,
                "sentencepiece": sentencepiece.__version__, "mtkit_bpe_version": 1}
    train_inputs = {k: files[k] for k in (f"train.{src}", f"train.{tgt}")}

    bpe_json = data_dir / "bpe.json"
    prev: dict = {}
    if bpe_json.is_file() and not opts.force:
        try:
            prev = json.loads(bpe_json.read_text())
        except ValueError:
            prev = {}
    model_path = data_dir / "spm.model"

    # ------------------------------------------------------------------ learn (or reuse)
    model_bytes = model_path.read_bytes() if model_path.is_file() else b""
    reuse_model = (bool(prev) and prev.get("settings") == settings and prev.get("learned_from") == train_inputs
                   and bool(model_bytes) and hashlib.sha256(model_bytes).hexdigest() == prev.get("model", {}).get("sha256"))
    sample_info = prev.get("sample_used", {})
    # A stale record must not describe files that are about to change.
    bpe_json.unlink(missing_ok=True)
    if reuse_model:
        log(f"reusing {model_path} (same settings and training text)")
    else:
        t0 = time.perf_counter()
        total_sentences = 2 * train_pairs
        taken = [0]
        if opts.sample >= total_sentences:
            sentences: Iterator[str] = all_lines(raw / f"train.{src}", raw / f"train.{tgt}")
            taken[0] = total_sentences
            log(f"learning a joint BPE model of {vocab_size} pieces ({why}) from all {total_sentences} sentences")
        else:
            sentences = sample_pairs(raw / f"train.{src}", raw / f"train.{tgt}", train_pairs, opts.sample // 2,
                                     opts.seed, taken)
            log(f"learning a joint BPE model of {vocab_size} pieces ({why}) from {opts.sample // 2 * 2} of "
                f"{total_sentences} training sentences (seed {opts.seed})")
        model_bytes = train_bpe(sentences, vocab_size)
        _give_back_freed_memory()
        used = taken[0]
        sample_info = {"sentences": used, "of": total_sentences}
        write_atomic(model_path, model_bytes)
        vocab = Vocab.from_bytes(model_bytes)
        write_atomic(data_dir / "spm.vocab", "".join(f"{vocab.sp.id_to_piece(i)}\t{vocab.sp.get_score(i):g}\n"
                                                     for i in range(len(vocab))).encode("utf-8"))
        timings["learn_s"] = time.perf_counter() - t0
    vocab = Vocab.from_bytes(model_bytes)
    model_sha = hashlib.sha256(model_bytes).hexdigest()

    # ------------------------------------------------------------------ encode (or reuse)
    bin_dir = data_dir / "bin"
    bin_dir.mkdir(exist_ok=True)
    bar = None
    if opts.progress:
        from tqdm import tqdm

        tqdm.monitor_interval = 0
        bar = tqdm(total=sum(files[f"{s}.{lang}"]["lines"] for s in splits for lang in (src, tgt)), unit=" sentences",
                   unit_scale=True, desc="encoding", file=sys.stderr, leave=False, dynamic_ncols=True)
    out_splits: dict[str, dict] = {}
    prev_splits = prev.get("splits", {}) if prev.get("model", {}).get("sha256") == model_sha else {}
    for split in splits:
        entry: dict = {"sentences": files[f"{split}.{src}"]["lines"], "tokens": {}, "files": {}}
        for lang in (src, tgt):
            key = f"{split}.{lang}"
            prefix = bin_dir / key
            old = prev_splits.get(split, {})
            if (old.get("inputs", {}).get(lang) == files[key]["sha256"] and _bin_intact(prefix, old.get("files", {}).get(lang))):
                log(f"reusing {prefix}.bin")
                entry["tokens"][lang] = old["tokens"][lang]
                entry["files"][lang] = old["files"][lang]
            else:
                log(f"encoding {raw / key}")
                entry["tokens"][lang] = encode_file(vocab, raw / key, prefix, threads, timings,
                                                    bar.update if bar is not None else None)
                entry["files"][lang] = {"bin": f"bin/{key}.bin", "idx": f"bin/{key}.idx",
                                        "bin_bytes": (bin_dir / f"{key}.bin").stat().st_size,
                                        "idx_bytes": (bin_dir / f"{key}.idx").stat().st_size}
            entry.setdefault("inputs", {})[lang] = files[key]["sha256"]
        entry["src_tokens"], entry["tgt_tokens"] = entry["tokens"][src], entry["tokens"][tgt]
        entry["dtype"] = id_dtype(len(vocab)).name
        out_splits[split] = entry
    if bar is not None:
        bar.close()
    timings = {k: round(v, 3) for k, v in timings.items()}

    record = {
        "format": FORMAT,
        "corpus": corpus,
        "src_lang": src,
        "tgt_lang": tgt,
        "vocab_size": len(vocab),
        "mtkit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "vocab_size_from": why,
        "learned_from": train_inputs,
        "sample_used": sample_info,
        "model": {"file": "spm.model", "sha256": model_sha, "pieces": len(vocab)},
        "splits": out_splits,
        "reused_model": reuse_model,
        "timings": timings,
    }
    write_atomic(bpe_json, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return record


def _give_back_freed_memory() -> None:
    """SentencePiece's trainer frees its sentences when done, but glibc keeps the pages: return
    them to the system, so that encoding does not carry learning's peak with it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to do
            pass


def _bin_intact(prefix: Path, info: dict | None) -> bool:
    if not info:
        return False
    for ext in ("bin", "idx"):
        path = prefix.with_name(f"{prefix.name}.{ext}")
        if not path.is_file() or path.stat().st_size != info.get(f"{ext}_bytes"):
            return False
    return True


def encode_file(vocab, path: Path, prefix: Path, threads: int, timings: dict[str, float] | None = None,
                progress: Callable[[int], object] | None = None) -> int:
    """Encode a raw text file line by line into PREFIX.bin/.idx; returns the token count.

    `timings` accumulates seconds spent reading+decoding, in SentencePiece, and writing arrays.
    """
    t = timings if timings is not None else {}
    clock = time.perf_counter
    with BinaryWriter(prefix, len(vocab)) as writer:
        lines_iter = _lines(path, ENCODE_BATCH)
        while True:
            t0 = clock()
            lines = next(lines_iter, None)
            t1 = clock()
            if lines is None:
                break
            ids = vocab.encode_batch(lines, threads=threads)
            t2 = clock()
            writer.add_many(ids)
            t3 = clock()
            t["read_s"] = t.get("read_s", 0.0) + t1 - t0
            t["encode_s"] = t.get("encode_s", 0.0) + t2 - t1
            t["binarize_s"] = t.get("binarize_s", 0.0) + t3 - t2
            if progress is not None:
                progress(len(lines))
        t0 = clock()
    t["binarize_s"] = t.get("binarize_s", 0.0) + clock() - t0  # the final flush and renames
    return writer.num_tokens
