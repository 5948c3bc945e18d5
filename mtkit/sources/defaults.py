"""A model's own decoding defaults, as data, and the one rule that lays the layers of defaults over each other.

Transformers keeps a model's generation settings in its generation_config.json and lays a caller's changes over
them in one function; mtkit keeps the DecodeConfig fields a model decodes with unless told otherwise under
`decode_defaults` (KEY) in its model file and in its export record: a model trained on `mtkit distill` data
decodes greedily (beam 1: a student has learnt its teacher's beam, Kim & Rush 2016), and `mtkit shortlist`
turns the shortlist on. The trainer writes them (`for_data`), `mtkit average` and `mtkit export` carry them on,
mtkit/sources/ reads them (`of`); a file written before they were recorded is read by its provenance and its
shortlist, as before.

`layered` is where the layers meet, for every caller (`Translator.defaults`, mtkit/decode/translator.py):
DecodeConfig's own defaults (the paper's), then the engine's (CTranslate2's length penalty), then the model's,
then the caller's changes (a command line's flags, a Python call's keywords).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mtkit.config_decode import DecodeConfig
from mtkit.errors import MtkitError
from mtkit.provenance import distilled_from

KEY = "decode_defaults"
FIELDS = {f.name: f.default for f in dataclasses.fields(DecodeConfig)}


def for_data(provenance: Any) -> dict[str, Any]:
    """The defaults a model trained on this run's data decodes with: beam 1 for `mtkit distill` data."""
    return {"beam": 1} if distilled_from(provenance) is not None else {}


def of(record: Mapping[str, Any], shortlist: bool | None = None, where: object = "the model") -> dict[str, Any]:
    """The decoding defaults a model file (or an export record) carries, checked; one written before they were
    recorded: from its provenance (`for_data`) and whether it carries a shortlist (`shortlist`: None, the
    record's own `shortlist`). `where` names the file in the sentence that refuses a damaged entry."""
    stored = record.get(KEY)
    if stored is not None:
        return checked(stored, where)
    has_shortlist = record.get("shortlist") is not None if shortlist is None else shortlist
    return {**for_data(record.get("provenance")), **({"shortlist": True} if has_shortlist else {})}


def checked(defaults: Any, where: object) -> dict[str, Any]:
    """`defaults` if it is a dict of DecodeConfig fields, each of its field's type, that make a valid DecodeConfig."""

    def refuse(why: str) -> MtkitError:
        return MtkitError(f"{where} holds damaged decoding defaults ({KEY}: {why}); write the model file again.")

    if not isinstance(defaults, dict):
        raise refuse(f"a {type(defaults).__name__}, not a dict")
    for name, value in defaults.items():
        if name not in FIELDS:
            raise refuse(f"{name!r} is no decoding setting")
        kind = type(FIELDS[name])
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, (int, float) if kind is float else kind):
            raise refuse(f"{name} {value!r} is not of type {kind.__name__}")
    try:
        DecodeConfig(**defaults)
    except MtkitError as exc:
        raise refuse(str(exc)) from None
    return dict(defaults)


def layered(engine: Mapping[str, Any], model: Mapping[str, Any], changes: Mapping[str, Any]) -> DecodeConfig:
    """DecodeConfig's defaults, then the engine's, then the model's, then the caller's `changes` (each a dict of
    DecodeConfig fields): what decodes. A beam the engine or the model chose stays wide enough for the `nbest`
    the caller asked for (a student's beam 1 with nbest 3 searches a beam of 3)."""
    unknown = sorted(set(changes) - FIELDS.keys())
    if unknown:  # a misspelt keyword of a Python call (the CLI's flags are fields): one sentence listing them
        raise MtkitError(f"{unknown[0]} is no decoding setting; DecodeConfig's are {', '.join(FIELDS)}.")
    below = {k: v for k, v in {**engine, **model}.items() if k not in changes}
    if "beam" in below:
        below["beam"] = max(below["beam"], changes.get("nbest", 1))
    return DecodeConfig(**{**below, **changes})
