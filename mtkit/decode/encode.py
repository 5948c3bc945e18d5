"""Text into token ids that fit the model's positions, each problem said by its input line (numbered from `first`).

A source longer than the model allows is cut, with a warning: the rest of the input still gets translated. A
target prefix, or a target to score, that cannot fit is an error: its output would not be the one asked for.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence

from mtkit.config import DecodeConfig
from mtkit.data.language_codes import model_token
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode.lengths import max_output_length
from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)


# A subword token covers at most SentencePiece's longest piece (16 characters by default, and the word-start mark):
# a source line is cut to this many characters a token of the model before it is encoded, so that a 100 MB line
# costs what the model can take of it, not gigabytes of pieces that would be cut away after.
MAX_CHARS_PER_TOKEN = 32


def target_language(vocab: Tokenizer, target_lang: str) -> str:
    """`target_lang` as a language code (">>fr<<" is "fr"; "" none), refused in one sentence when it is not one or
    when the model has no token for it: a multilingual model's direction, which is input preparation, not search."""
    text = target_lang if isinstance(target_lang, str) else ""
    code = text[2:-2] if text.startswith(">>") and text.endswith("<<") else text
    if not isinstance(target_lang, str) or (code and not re.fullmatch(r"[\w-]+", code)):
        raise MtkitError(f"target_lang must be a language code such as de, fra or zho_Hant, got {target_lang!r}.")
    if code:
        with_target_lang(vocab, [], code)
    return code


# The multilingual models already warned about lines without a language token (their token sets): once a process.
_WARNED_UNTAGGED: set[tuple[str, ...]] = set()


def with_target_lang(vocab: Tokenizer, lines: list[str], target_lang: str) -> list[str]:
    """The lines with `>>target_lang<<` in front (docs/multilingual.md), where none of the model's tokens is.

    Without `target_lang`, a multilingual model's line with no token of its own gets the language the
    model makes of it, which nobody chose: said once, with the languages it knows (not refused: a
    model trained with a default direction, or a user who tags some lines only, is served as asked).
    """
    if not target_lang:
        if vocab.language_tokens and not all(vocab.language_token(line) for line in lines):
            _warn_untagged(sorted(vocab.language_tokens))
        return lines
    token = f">>{target_lang}<<"
    if token not in vocab.language_tokens and vocab.language_tokens:
        with contextlib.suppress(MtkitError):  # the model's own spelling: `fr` is `>>fra<<` in OPUS-MT's newer models
            token = model_token(target_lang, vocab.language_tokens, "the model")
    if token not in vocab.language_tokens:
        known = ", ".join(tok[2:-2] for tok in vocab.language_tokens)
        raise MtkitError(
            f"the model has no target-language token {token}: it knows {known}."
            if known
            else f"the model has no target-language tokens (it knows one pair); drop --target-lang {target_lang}."
        )
    return [line if vocab.language_token(line) else f"{token} {line}" for line in lines]


def _warn_untagged(tokens: list[str]) -> None:
    if tuple(tokens) in _WARNED_UNTAGGED:
        return
    _WARNED_UNTAGGED.add(tuple(tokens))
    known = ", ".join(tok[2:-2] for tok in tokens)
    logger.warning(
        "a line has no target-language token and no --target-lang was given: this multilingual model (it knows %s) "
        "picks a language itself; give --target-lang (a request's \"target_lang\") or start the line with >>xx<<.",
        known,
    )


def number(first: int | Sequence[int], i: int) -> int:
    """The input line number of item i: `first` + i, or `first[i]` where items are a line's sentences."""
    return first + i if isinstance(first, int) else first[i]


def source_ids(
    vocab: Tokenizer, lines: list[str], first: int | Sequence[int], limit: int, target_lang: str = ""
) -> list[list[int]]:
    """Each line's ids, cut to `limit` tokens (the model's positions less the EOS appended) with a warning;
    after the target-language token of `target_lang`, where the line has none."""
    most = limit * MAX_CHARS_PER_TOKEN
    lines = list(lines)  # the caller's list stays as it was
    for i, line in enumerate(lines):
        if len(line) > most:
            logger.warning(
                "line %d has %d characters, more than the model's %d subword tokens can hold; only its first %d "
                "characters are read.",
                number(first, i),
                len(line),
                limit,
                most,
            )
            lines[i] = line[:most]
    ids = vocab.encode_batch(with_target_lang(vocab, lines, target_lang))
    for i, sentence in enumerate(ids):
        if len(sentence) > limit:
            logger.warning(
                "line %d has %d subword tokens, more than the model's %d; only the first %d are translated.",
                number(first, i),
                len(sentence),
                limit,
                limit,
            )
            ids[i] = sentence[:limit]
    return ids


def prefix_ids(
    vocab: Tokenizer,
    prefixes: list[str],
    sources: list[list[int]],
    first: int | Sequence[int],
    config: DecodeConfig,
    limit: int,
) -> list[list[int]]:
    """The target prefixes' ids; one longer than its sentence's output may be (by `config`, within the model's
    `limit` + 1 positions) is an error."""
    if not any(prefixes):
        return [[] for _ in prefixes]
    out = vocab.encode_target_batch(prefixes)
    limits = [max_output_length(len(s), config, limit + 1) for s in sources]
    for i, (prefix, most) in enumerate(zip(out, limits)):
        if len(prefix) > most:
            raise MtkitError(
                f"line {number(first, i)}: the target prefix has {len(prefix)} subword tokens, more than "
                f"the {most} this sentence's output may have (max_len_a x source tokens + "
                "max_len_b, within the model's positions)."
            )
    return out


def target_ids(vocab: Tokenizer, targets: list[str], first: int, limit: int, cut: bool = False) -> list[list[int]]:
    """The ids of targets to score; one longer than `limit` is an error (BOS + target must fit the positions), or
    with `cut` its first `limit` tokens, with a warning (corpus filtering: one long line must not stop it)."""
    out = vocab.encode_target_batch(targets)
    for i, target in enumerate(out):
        if len(target) > limit and cut:
            logger.warning(
                "line %d: the target has %d subword tokens, more than the model's %d; only the first %d are scored.",
                first + i,
                len(target),
                limit,
                limit,
            )
            out[i] = target[:limit]
        elif len(target) > limit:
            raise MtkitError(
                f"line {first + i}: the target has {len(target)} subword tokens, more than the "
                f"model's {limit} positions allow."
            )
    return out
