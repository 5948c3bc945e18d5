"""Config-field machinery: option() flags, ConfigError, value checks, and parsing configs from dicts and `--set`."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import field
from typing import Any, TypeVar

from mtkit.errors import MtkitError

C = TypeVar("C")


class ConfigError(MtkitError):
    """A field with a bad value; kept apart so that the CLI can name the flag the user typed instead."""

    def __init__(self, cls: type, name: str, expected: str, value: Any) -> None:
        super().__init__(f"{cls.__name__}.{name} must be {expected}, got {value!r}.")
        self.name, self.expected, self.value = name, expected, value


def check_field(ok: bool, cls: type, name: str, expected: str, value: Any) -> None:
    if not ok:
        raise ConfigError(cls, name, expected, value)


def option(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A field that is also a command-line flag: `--field-name`, with its help and choices kept beside it.

    mtkit/cli/options.py turns every such field into a typer option, typed by the field's
    annotation, so a new setting is one line here. Fields made with a plain default are
    settings without a flag (reachable from Python, or through `--set` for ModelConfig).
    """
    return field(default=default, metadata={"help": help, "choices": choices})


def choice(default: str, choices: tuple[str, ...]) -> Any:
    """A setting without a flag that takes one of `choices` (checked by `check_choices`, as an option's are)."""
    return field(default=default, metadata={"choices": choices})


def check_choices(cfg: Any) -> None:
    """Every field of `cfg` that declares its choices (`option(..., choices)` or `choice`) holds one of them: the
    one check of a word-valued setting, made from what the field declares (fairseq's ChoiceEnum), called by each
    config's `__post_init__`."""
    for f in dataclasses.fields(cfg):
        choices = f.metadata.get("choices")
        if choices:
            value = getattr(cfg, f.name)
            check_field(value in choices, type(cfg), f.name, f"one of {', '.join(choices)}", value)


def check_positive(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        check_field(isinstance(value, int) and value > 0, type(cfg), name, "a positive integer", value)


def check_probability(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        check_field(
            isinstance(value, (int, float)) and 0.0 <= value < 1.0, type(cfg), name, "a number in [0, 1)", value
        )


def config_from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
    """Rebuild a config from JSON-like data, naming every unknown field at once."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise MtkitError(
            f"unknown {cls.__name__} field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(known))}."
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**values)


def config_diff(a: Any, b: Any) -> list[str]:
    """Human-readable list of fields whose values differ between two configs of one type."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return [f"{k}: {da.get(k)!r} != {db.get(k)!r}" for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)]


def parse_value(text: str, annotation: Any) -> Any:
    """A string typed by a field's annotation (int, float, bool, str, `X | None`); ValueError when it does not fit."""
    args = typing.get_args(annotation)
    if type(None) in args:
        if text.lower() in ("none", "null", ""):
            return None
        annotation = next(a for a in args if a is not type(None))
    if annotation is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(text)
        return text.lower() in ("true", "1", "yes")
    if annotation in (int, float):
        return annotation(text)
    if annotation is str:
        return text
    raise ValueError(f"no parser for {annotation}")


def type_name(annotation: Any) -> str:
    """How an error names what a field of this annotation accepts."""
    args = typing.get_args(annotation)
    if type(None) in args:
        return f"{type_name(next(a for a in args if a is not type(None)))} or none"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        annotation, str(annotation)
    )


def parse_overrides(items: list[str] | tuple[str, ...], cls: type) -> dict[str, Any]:
    """`field=value` strings (e.g. from `--set`) typed by the field's annotation; the config validates the values."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip().replace("-", "_"), text.strip()
        if not sep or name not in fields:
            raise MtkitError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(sorted(fields))}.")
        try:
            out[name] = parse_value(text, hints[name])
        except ValueError:
            raise MtkitError(f"--set {item!r}: {name} must be {type_name(hints[name])}.") from None
    return out
