"""Command-line options made from the configs, so that each setting and its default is written once.

A config field made with `mtkit.config.option(default, help, choices)` becomes `--field-name`
on every command decorated with `config_options(ThatConfig)`: typed by the field's
annotation, its choices real choices (shown in --help, completed by the shell), its help
beside the field. The option's own default is None, so the command receives exactly the
values the user gave (on the command line or in a --config file) and lays them over the
config's or the preset's defaults with `build`; a bad value is reported under the flag's name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Optional, TypeVar

import typer

from mtkit.config import ConfigError
from mtkit.errors import MtkitError

C = TypeVar("C")
F = TypeVar("F", bound=Callable[..., Any])


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def option_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a config that are command-line options (made with `mtkit.config.option`)."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def _annotation(cls: type, f: dataclasses.Field) -> Any:
    choices = f.metadata.get("choices")
    kind = Literal[choices] if choices else typing.get_type_hints(cls)[f.name]  # type: ignore[valid-type]
    if set(typing.get_args(kind)) == {int, str}:  # a number or a word (`--max-tokens auto`): the config parses it
        kind = str
    return Optional[kind]


def config_options(*classes: type, show_default: Callable[[type, str], str] | None = None) -> Callable[[F], F]:
    """Give a typer command one option per option field of `classes`; it receives them as `given`.

    The decorated function declares a parameter `given: dict`; it holds the fields the user set
    (field name -> typed value). `show_default(cls, field)` says what --help shows as the default
    (by default the config's own default).
    """

    def shown(cls: type, f: dataclasses.Field) -> str:
        if show_default is not None:
            return show_default(cls, f.name)
        return str(f.default)

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "given"]
        names = {p.name for p in own}
        added = []
        for cls in classes:
            for f in option_fields(cls):
                if f.name in names:
                    raise TypeError(f"{func.__name__} declares {f.name} itself and through {cls.__name__}")
                names.add(f.name)
                flag = flag_name(f.name)
                if typing.get_type_hints(cls)[f.name] is bool:  # --no-x too: it overrides a --config file's `x: true`
                    flag = f"{flag}/--no-{flag[2:]}"
                number_or_word = set(typing.get_args(typing.get_type_hints(cls)[f.name])) == {int, str}
                default = typer.Option(
                    None,
                    flag,
                    help=f.metadata["help"],
                    show_default=shown(cls, f),
                    metavar="<int|auto>" if number_or_word else None,
                )
                added.append(
                    inspect.Parameter(
                        f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=_annotation(cls, f)
                    )
                )
        fields = [p.name for p in added]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in fields}
            return func(**kwargs, given={name: v for name, v in values.items() if v is not None})

        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        command.__signature__ = signature.replace(parameters=keyword + added)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in keyword + added}
        del command.__wrapped__  # typer must read the signature above, not the function's own
        return typing.cast(F, command)

    return decorate


DEVICES = ("auto", "cpu", "cuda", "cuda:0", "mps")


def device_option(help: str) -> Any:
    """`--device`: not a closed choice (cuda:N), so completed from a list and shown as one."""
    return typer.Option(
        "auto",
        "--device",
        metavar="auto|cpu|cuda[:N]|mps",
        help=help,
        autocompletion=lambda incomplete: [d for d in DEVICES if d.startswith(incomplete)],
    )


def revision_option() -> Any:
    """`--revision`: the revision of a model given as a Hugging Face Hub name (mtkit/hub.py)."""
    return typer.Option(
        None,
        "--revision",
        show_default=False,
        help="With a Hugging Face Hub name as the model (owner/name, e.g. Helsinki-NLP/opus-mt-en-de): its "
        "branch, tag or commit (default main). Downloaded once into the Hub's cache; HF_HUB_OFFLINE=1 reads "
        "only the cache.",
    )


def compile_option() -> Any:
    """`--compile` of translate and serve: mtkit's encoder and greedy step compiled for one-sentence searches (an engine
    setting, not a search setting: no field of DecodeConfig, so no flag of calibrate or distill)."""
    return typer.Option(
        "off",
        "--compile",
        metavar="off|on|auto",
        help="mtkit's engine: a search of one sentence at a time (a lone line or request) with its encoder and "
        "its greedy step compiled ahead of time (AOTInductor), the same outputs up to fp32 rounding; batches and "
        "a beam's steps stay eager. auto: where that measured at least 1.05x faster on this machine (timed once at "
        "start-up and kept per machine; fp32 on the CPU only); on: always, eager again if compiling fails. "
        "Compiling takes seconds at the first start; the packages are kept in $MTKIT_CACHE/compiled; see "
        "docs/decoding.md.",
    )


def target_lang_option() -> Any:
    """`--target-lang` of translate and serve: a multilingual model's direction, checked by the translator (it is
    input preparation, not a search setting: no field of DecodeConfig)."""
    return typer.Option(
        "",
        "--target-lang",
        show_default=False,
        help="A multilingual model's output language: each source line gets the token >>LANG<< in front "
        "(a line that starts with such a token keeps its own). Empty: none.",
    )


def build(base: C, given: dict[str, Any]) -> C:
    """`base` with the user's values for its fields laid over it; a value the config refuses is named by its flag."""
    names = {f.name for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    with named_by_flag(given):
        return dataclasses.replace(base, **{k: v for k, v in given.items() if k in names})  # type: ignore[type-var]


@contextlib.contextmanager
def named_by_flag(given: dict[str, Any]) -> Iterator[None]:
    """A value of `given` that a config refuses (ConfigError) said under the flag the user typed."""
    try:
        yield
    except ConfigError as exc:
        if exc.name not in given:
            raise
        raise MtkitError(f"{flag_name(exc.name)} must be {exc.expected}, got {exc.value!r}.") from None


# A value that a user of another toolkit would give: the hint that says what mtkit calls it.
def _lenpen_hint(value: str) -> str | None:
    try:
        float(value)
    except ValueError:
        return None
    return f"did you mean --alpha {value} (with --lenpen fairseq for fairseq's formula)?"


HINTS: dict[str, Callable[[str], Optional[str]]] = {"--lenpen": _lenpen_hint}

# fairseq's names for options mtkit has under another name (the README's table maps the rest).
FAIRSEQ_NAMES = {
    "--max-update": "--max-steps",
    "--max-epoch": "--max-epochs",
    "--warmup-updates": "--warmup",
    "--lr": "--lr-scale (a factor on the paper's schedule)",
    "--fp16": "--precision fp16",
    "--bf16": "--precision bf16",
    "--cpu": "--device cpu",
    "--save-interval-updates": "--save-every-steps",
    "--validate-interval-updates": "--valid-every",
    "--keep-interval-updates": "--keep-last",
    "--log-interval": "--log-every",
}


def usage_hint(option: str, argv: list[str]) -> str | None:
    """The hint for `option` (unknown, or given a value it refuses) as the user typed it, if any applies."""
    if option in FAIRSEQ_NAMES:
        return f"mtkit calls it {FAIRSEQ_NAMES[option]}"
    hint = HINTS.get(option)
    if hint is None:
        return None
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return hint(argv[i + 1])
        if arg.startswith(option + "="):
            return hint(arg.partition("=")[2])
    return None


def read_config_file(path: Path, names: dict[str, str]) -> dict[str, Any]:
    """A YAML mapping of flag names (`max-tokens` or `max_tokens`) to values, keyed by parameter name.

    `names` maps each flag name (underscores for dashes) to the command's parameter name; the
    result is meant for click's `default_map`, so that the command line still wins over the file.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MtkitError(f"cannot read the config file {path}: {exc.strerror}.") from None
    except yaml.YAMLError as exc:
        raise MtkitError(f"{path} is not valid YAML: {' '.join(str(exc).split())}.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MtkitError(f"{path} must hold a mapping of flag names to values, e.g. `max-tokens: 2048`.")
    out = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in names:
            close = difflib.get_close_matches(name, list(names), n=1)
            suggestion = f"; did you mean {close[0].replace('_', '-')}?" if close else "."
            raise MtkitError(f"{path}: unknown key {key!r}{suggestion}")
        out[names[name]] = value
    return out


def config_file_option(ctx: Any, param: Any, value: Optional[Path]) -> Optional[Path]:
    """The callback of an eager `--config FILE` option: the file's values become the command's defaults."""
    if value is None or ctx.resilient_parsing:
        return value
    names = {}
    for p in ctx.command.params:
        if p.name in (param.name, "print_config", "help") or p.expose_value is False:
            continue
        long = [o for o in p.opts if o.startswith("--")]
        names[(long[0][2:] if long else p.name).replace("-", "_")] = p.name
    ctx.default_map = {**(ctx.default_map or {}), **read_config_file(value, names)}
    return value


def resolved_values(ctx: Any, resolved: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of the running command by its flag name, with `resolved` filling what the user left unset."""
    out: dict[str, Any] = {}
    for p in ctx.command.params:
        if p.name in ("config", "print_config", "help") or p.expose_value is False:
            continue
        long = [o for o in p.opts if o.startswith("--")]
        value = resolved[p.name] if p.name in resolved else ctx.params.get(p.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[long[0][2:] if long else p.name] = value
    return out
