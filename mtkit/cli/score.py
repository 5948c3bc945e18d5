"""`mtkit score`: sacreBLEU, chrF, TER and the paper's tokenized BLEU."""

from __future__ import annotations

from typing import Optional

import typer

from mtkit.cli.app import app, err
from mtkit.errors import MtkitError


@app.command()
def score(
    hyp: str = typer.Argument(
        ..., help="Detokenized translations, one a line (.gz is fine); - reads stdin.", show_default=False
    ),
    ref: list[str] = typer.Option(
        [], "--ref", "-r", show_default="none", help="Reference translations; repeat for several references."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    paper_bleu: bool = typer.Option(
        False,
        "--paper-bleu",
        help="Also the paper's tokenized BLEU: Moses tokens, a-b split as "
        "a ##AT##-##AT## b (as held against 27.3 / 28.4).",
    ),
    lang: Optional[str] = typer.Option(
        None,
        "--lang",
        show_default="the target of --langpair, else unknown (de for --paper-bleu)",
        help="Target language: picks sacreBLEU's tokenizer (zh, ja-mecab, ko-mecab, else 13a) and the Moses "
        "tokenizer of --paper-bleu. Example: --lang zh",
    ),
    tokenize: Optional[str] = typer.Option(
        None,
        "--tokenize",
        show_default="by --lang: zh, ja-mecab, ko-mecab, else 13a",
        help="sacreBLEU's BLEU tokenizer: 13a, intl, zh, ja-mecab, ko-mecab, char, flores200 or none "
        "(ja-mecab needs mtkit\\[ja], ko-mecab mtkit\\[ko]; flores200 downloads its model). Example: --tokenize char",
    ),
    compare: Optional[str] = typer.Option(
        None,
        "--compare",
        show_default="none",
        help="A second system's translations: paired bootstrap resampling (1000 samples) of it against HYP.",
    ),
    test_set: Optional[str] = typer.Option(
        None, "--test-set", "-t", show_default="none", help="A sacrebleu test set (e.g. wmt14) whose references to use."
    ),
    langpair: Optional[str] = typer.Option(
        None, "--langpair", "-l", show_default="none", help="Language pair of --test-set, e.g. en-de."
    ),
) -> None:
    """Score translations against references: sacreBLEU, chrF, TER, tokenized BLEU.

    Example: mtkit score test.hyp.de --ref test.de --paper-bleu

    Chinese (sacreBLEU's zh tokenizer, chosen by --lang): mtkit score test.hyp.zh --ref test.zh --lang zh

    From a pipe: mtkit translate -m averaged.pt < test.en | mtkit score - --ref test.de
    """
    import dataclasses
    import json

    from mtkit import score as scoring
    from mtkit.textio import read_lines_strict

    if [hyp, *ref, compare].count("-") > 1:
        raise MtkitError("only one file can be read from stdin (-).")
    if test_set is not None and ref:
        raise MtkitError("give references either with --ref or with --test-set, not both.")
    if test_set is not None:
        if langpair is None:
            raise MtkitError("--test-set needs --langpair, e.g. --langpair en-de.")
        refs = scoring.sacrebleu_references(test_set, langpair)
        ref_names = [f"{test_set} {langpair} reference {i + 1}" for i in range(len(refs))]
    elif ref:
        refs = [read_lines_strict(r) for r in ref]
        ref_names = [str(r) for r in ref]
    else:
        raise MtkitError("no references: give --ref FILE, or --test-set NAME --langpair SRC-TGT.")
    target = lang or (langpair.split("-")[-1] if langpair else None)
    chosen = tokenize or scoring.default_tokenize(target)
    scoring.check_tokenize(chosen)
    hyps = read_lines_strict(hyp)
    scoring.check_lengths(hyps, refs, str(hyp), ref_names)
    if tokenize is None and target is None and (script := scoring.script_hint(refs[0])):
        err.print(
            f"mtkit: warning: the references look like {script} text, which the 13a tokenizer reads as whole lines; "
            f"give --lang {script} (or --tokenize) for a BLEU that counts its words.",
            highlight=False,
        )
    results = scoring.corpus_scores(hyps, refs, chosen)
    if paper_bleu:
        results.append(scoring.paper_bleu(hyps, refs, target or "de"))
    comparisons = []
    if compare is not None:
        hyps2 = read_lines_strict(compare)
        scoring.check_lengths(hyps2, refs, str(compare), ref_names)
        comparisons = scoring.paired_bootstrap(hyps, hyps2, refs, tokenize=chosen)
    if json_out:
        report: dict = {"hyp": str(hyp), "lines": len(hyps), "scores": [dataclasses.asdict(r) for r in results]}
        if compare is not None:
            report["compare"] = {
                "hyp2": str(compare),
                "samples": 1000,
                "metrics": [dataclasses.asdict(c) for c in comparisons],
            }
        typer.echo(json.dumps(report, ensure_ascii=False, indent=1))
        return
    for r in results:
        typer.echo(f"{r.text}\n    {r.signature}")
    if comparisons:
        typer.echo(f"paired bootstrap resampling, 1000 samples: {compare} (system) against {hyp} (baseline)")
        for c in comparisons:
            typer.echo(
                f"    {c.name:<6} baseline {c.baseline:6.2f} (mean {c.baseline_mean:.2f} +- {c.baseline_ci:.2f})"
                f"  system {c.system:6.2f} (mean {c.system_mean:.2f} +- {c.system_ci:.2f})"
                f"  p = {c.p_value:.4f}"
            )
