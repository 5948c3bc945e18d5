"""`mtkit score`: sacreBLEU, chrF, TER and the paper's tokenized BLEU, by `mtkit.score.evaluate`; a thin command."""

from __future__ import annotations

from typing import Optional

import typer

from mtkit.cli.app import app, err


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
    import json

    from mtkit.score import evaluate

    result = evaluate(
        hyp, ref, test_set=test_set, langpair=langpair, lang=lang, tokenize=tokenize, paper=paper_bleu, compare=compare
    )
    if result.warning:
        err.print(f"mtkit: warning: {result.warning}", highlight=False)
    if json_out:
        typer.echo(json.dumps(result.record(), ensure_ascii=False, indent=1))
        return
    for r in result.scores:
        typer.echo(f"{r.text}\n    {r.signature}")
    if result.comparisons:
        typer.echo(f"paired bootstrap resampling, 1000 samples: {compare} (system) against {hyp} (baseline)")
        for c in result.comparisons:
            typer.echo(
                f"    {c.name:<6} baseline {c.baseline:6.2f} (mean {c.baseline_mean:.2f} +- {c.baseline_ci:.2f})"
                f"  system {c.system:6.2f} (mean {c.system_mean:.2f} +- {c.system_ci:.2f})"
                f"  p = {c.p_value:.4f}"
            )
