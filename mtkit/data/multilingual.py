"""Several prepared language pairs as one multilingual data directory (Johnson et al. 2017, "Google's
Multilingual Neural Machine Translation System": one model, a target-language token on each source).

`mtkit bpe A B C --out M` gathers the raw text of the directories `mtkit prepare` wrote into M, as one
corpus whose languages are called `src` and `tgt`:

    M/raw/{split}.src     every pair's source lines in turn, each after its target's token: `>>de<< A man ...`
    M/raw/{split}.tgt     the target lines in the same order
    M/prepare.json        `pairs`: each pair's languages, token and line range in every split, where it came from

and `mtkit bpe` then learns one SentencePiece model for all the languages, with the tokens as pieces
of their own, and binarizes M like any other directory: `mtkit train M` takes it as it is. One
directory, not several given to `train`, because a multilingual model has one vocabulary, and so one
place that says what it was learned from, one record a resumed run is checked against, and one
thing to pass to `train`, `average` and the recipes.

The token is OPUS-MT's (the Marian models of Helsinki-NLP): `>>xx<<` with the target language's code,
so a model trained here and one of theirs read the same input. The sentences the vocabulary is learned
from are drawn per language, an equal share each (`balanced_sentences`): a language with a small corpus
is not starved of pieces by a big one. English sides that are the same text (Multi30k's En-De, En-Fr and
En-Cs share theirs) count once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mtkit.atomic import write_atomic
from mtkit.data.corpora import SPLITS
from mtkit.data.language_codes import model_token
from mtkit.data.owned import previous_record
from mtkit.errors import MtkitError
from mtkit.files import CHUNK, data_dir_locked, fingerprint

if TYPE_CHECKING:
    from mtkit.data.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

SRC, TGT = "src", "tgt"  # the language names of a multilingual directory's files


def language_token(lang: str) -> str:
    """The target-language token: OPUS-MT's `>>xx<<`."""
    return f">>{lang}<<"


def token_of(tokenizer: Tokenizer | None, model: str | None) -> Callable[[str], str]:
    """A target language's token for `bpe A B --out M`: `>>xx<<`, or with --from MODEL the model's own spelling
    (`>>deu<<` for de in an OPUS-MT multilingual model: mtkit/data/language_codes.py)."""
    if tokenizer is None or model is None:
        return language_token
    tokens = list(tokenizer.language_tokens)
    return lambda lang: model_token(lang, tokens, model)


def pairs_of(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The `pairs` a prepare.json or bpe.json of a multilingual directory lists; [] for one pair."""
    return list(info.get("pairs") or [])


def _pair_dir(path: Path) -> dict[str, Any]:
    prep = path / "prepare.json"
    try:
        info = json.loads(prep.read_text(encoding="utf-8"))
        src, tgt = str(info["src_lang"]), str(info["tgt_lang"])
    except (OSError, ValueError, KeyError):
        raise MtkitError(f"{path} holds no valid prepare.json; run `mtkit prepare NAME --out {path}` first.") from None
    if pairs_of(info):
        raise MtkitError(f"{path} is itself multilingual; give the directories of its pairs instead.")
    return {"src": src, "tgt": tgt, "corpus": info.get("corpus"), "from": str(path)}


def gather(
    dirs: Sequence[str | os.PathLike], out: str | os.PathLike, token_of: Callable[[str], str] = language_token
) -> dict[str, Any]:
    """Write OUT/raw and OUT/prepare.json from the pairs in `dirs`; returns the record.

    `token_of`: a target language's token, `>>xx<<` unless the data is for a model with its own
    (`bpe --from`: mtkit/data/language_codes.py)."""
    out = Path(out)
    paths = [Path(d) for d in dirs]
    pairs = [_pair_dir(p) for p in paths]
    seen = [(p["src"], p["tgt"]) for p in pairs]
    twice = sorted({f"{s}-{t}" for s, t in seen if seen.count((s, t)) > 1})
    if twice:
        raise MtkitError(f"the pair {twice[0]} is given twice; give each language pair once.")
    if any(out.resolve() == p.resolve() for p in paths):
        raise MtkitError(f"--out {out} is one of the pairs' directories; give a new directory.")
    previous = previous_record(out / "prepare.json")
    if (out / "prepare.json").is_file() and not pairs_of(previous):
        raise MtkitError(f"{out} holds a corpus of one language pair; give --out a directory of its own.")
    splits = [s for s in SPLITS if all((p / "raw" / f"{s}.{pair['src']}").is_file() for p, pair in zip(paths, pairs))]
    if "train" not in splits or "valid" not in splits:
        raise MtkitError("every directory must hold raw/train and raw/valid; run `mtkit prepare` for each first.")
    tokens = {pair["tgt"]: token_of(pair["tgt"]) for pair in pairs}  # refused here, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    with data_dir_locked(out, "mtkit bpe"):
        (out / "raw").mkdir(exist_ok=True)
        for pair in pairs:
            pair["token"], pair["lines"] = tokens[pair["tgt"]], {}
        for split in splits:
            _concatenate(out / "raw", split, paths, pairs)
        for pair, path in zip(pairs, paths):  # the text of each side, so that equal text is sampled once
            pair["train_sha256"] = {
                side: fingerprint(path / "raw" / f"train.{pair[side]}")["sha256"] for side in ("src", "tgt")
            }
        record = {
            "format": 1,
            "corpus": None,
            "src_lang": SRC,
            "tgt_lang": TGT,
            "pairs": pairs,
            "files": sorted(f"raw/{split}.{lang}" for split in splits for lang in (SRC, TGT)),
        }
        write_atomic(out / "prepare.json", json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def _concatenate(raw: Path, split: str, paths: list[Path], pairs: list[dict[str, Any]]) -> None:
    """OUT/raw/{split}.src and .tgt: every pair's lines in turn, the source after its token; each pair's range."""
    start = 0
    tmp = {lang: raw / f".{split}.{lang}.tmp" for lang in (SRC, TGT)}
    try:
        with open(tmp[SRC], "wb") as fs, open(tmp[TGT], "wb") as ft:
            for path, pair in zip(paths, pairs):
                token = (pair["token"] + " ").encode("utf-8")
                n = 0
                with open(path / "raw" / f"{split}.{pair['src']}", "rb", buffering=CHUNK) as f:
                    for line in f:
                        fs.write(token + line if line.endswith(b"\n") else token + line + b"\n")
                        n += 1
                with open(path / "raw" / f"{split}.{pair['tgt']}", "rb", buffering=CHUNK) as f:
                    shutil.copyfileobj(f, ft, CHUNK)
                pair["lines"][split] = [start, start + n]
                start += n
        for lang, path in tmp.items():
            os.replace(path, raw / f"{split}.{lang}")
    finally:
        for path in tmp.values():
            path.unlink(missing_ok=True)


def languages(pairs: list[dict[str, Any]]) -> list[str]:
    """Every language of the pairs, in the order they first appear."""
    return list(dict.fromkeys(lang for p in pairs for lang in (p["src"], p["tgt"])))


def balanced_sentences(
    raw: Path, pairs: list[dict[str, Any]], sample: int, seed: int, taken: list[int]
) -> Iterator[str]:
    """Training sentences for the vocabulary: at most sample / languages of each language, drawn at random
    (seeded) from its distinct texts, tokens left out. Adds the count yielded to `taken[0]`."""
    rng = np.random.default_rng(seed)
    share = max(1, sample // max(1, len(languages(pairs))))
    chosen: dict[str, list[np.ndarray]] = {SRC: [], TGT: []}  # line numbers of raw/train.{src,tgt} to take
    for lang in languages(pairs):
        texts: dict[str, tuple[str, list[int]]] = {}  # sha256 -> (file, [start, end]): each distinct text once
        for p in pairs:
            for side, file in (("src", SRC), ("tgt", TGT)):
                if p[side] == lang:
                    texts.setdefault(p["train_sha256"][side], (file, p["lines"]["train"]))
        ranges = list(texts.values())
        total = sum(b - a for _, (a, b) in ranges)
        picks = np.sort(rng.choice(total, size=min(share, total), replace=False))
        offset = 0
        for file, (a, b) in ranges:
            inside = picks[(picks >= offset) & (picks < offset + b - a)]
            chosen[file].append(inside - offset + a)
            offset += b - a
    for file in (SRC, TGT):
        lines = np.sort(np.concatenate(chosen[file])) if chosen[file] else np.zeros(0, dtype=np.int64)
        taken[0] += len(lines)
        yield from _lines_at(raw / f"train.{file}", lines, strip_token=file == SRC)


def _lines_at(path: Path, numbers: np.ndarray, strip_token: bool) -> Iterator[str]:
    """The lines of `path` at the sorted 0-based `numbers`, in one pass."""
    if not len(numbers):
        return
    want = iter(numbers.tolist())
    next_line = next(want)
    with open(path, encoding="utf-8", newline="\n") as f:
        for i, line in enumerate(f):
            if i != next_line:
                continue
            text = line.rstrip("\n")
            yield text.split(" ", 1)[1] if strip_token and " " in text else text
            next_line = next(want, -1)
            if next_line < 0:
                return
