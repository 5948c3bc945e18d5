"""A target language's token in a model's own spelling: `de` is `>>deu<<` in an OPUS-MT multilingual model.

mtkit's own multilingual data writes ISO 639-1 codes (`>>de<<`, as `mtkit prepare` names languages);
OPUS-MT's multilingual models spell theirs in ISO 639-3 (`>>deu<<`, `>>fra<<`, some with a script:
`>>zho_Hans<<`). A token the model does not have is encoded as `<unk>`, so data for such a model must use
its own. The codes are mapped with langcodes (the IETF/ISO 639 tables, kept up to date there) rather
than a table of our own; without langcodes only exact spellings match, and the sentence says what the
model has.
"""

from __future__ import annotations

from collections.abc import Iterable

from mtkit.errors import MtkitError

SHOWN = 12  # tokens listed in a sentence; a model of many languages has hundreds


def spellings(lang: str) -> list[str]:
    """`lang` and its other ISO 639 codes: "de" -> ["de", "deu", "ger"]; "fra" -> ["fra", "fr", "fre"]."""
    found = [lang]
    try:
        import langcodes
    except ImportError:
        return found
    try:
        tag = langcodes.Language.get(lang)
        found += [tag.language or lang, tag.to_alpha3(), tag.to_alpha3(variant="B")]
    except (LookupError, ValueError):  # not a language code langcodes knows: its own spelling only
        pass
    return list(dict.fromkeys(found))


def model_token(lang: str, tokens: Iterable[str], model: str) -> str:
    """The token of `tokens` (a model's `>>xx<<` pieces) for the target language `lang`, or one sentence."""
    have = sorted(set(tokens))
    codes = spellings(lang)
    for code in codes:
        if f">>{code}<<" in have:
            return f">>{code}<<"
    scripted = [t for t in have if t[2:-2].split("_")[0] in codes]  # >>zho_Hans<<: one script of the language
    if len(scripted) == 1:
        return scripted[0]
    if not have:
        raise MtkitError(
            f"{model} has no target-language tokens (it translates into one language), so data of several pairs "
            f"cannot tell it which to write; use a multilingual model, or learn a vocabulary without --from."
        )
    listed = ", ".join(have[:SHOWN]) + (f" and {len(have) - SHOWN} more" if len(have) > SHOWN else "")
    which = f"several ({', '.join(scripted)})" if scripted else "none"
    raise MtkitError(f"{model} has {which} for the target language {lang}; its tokens are {listed}.")
