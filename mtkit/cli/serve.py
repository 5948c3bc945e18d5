"""`mtkit serve`: the model behind an HTTP endpoint (FastAPI + uvicorn, the optional `serve` extra)."""

from __future__ import annotations

from typing import Any, Optional

import typer

from mtkit.cli.app import app, setup_logging
from mtkit.cli.options import build, compile_option, config_options, device_option, revision_option, target_lang_option
from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig, EngineConfig
from mtkit.errors import MtkitError


def _require_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MtkitError(
            f"mtkit serve needs the serve extra ({exc.name} is missing): pip install 'mtkit[serve]'."
        ) from None


@app.command()
@config_options(DecodeConfig, EngineConfig)
def serve(
    model: list[str] = typer.Option(
        ...,
        "--model",
        "-m",
        show_default=False,
        metavar="FILE",
        help="An mtkit model or checkpoint file (e.g. averaged.pt), a Hugging Face Marian directory, a "
        "Hugging Face Hub name (owner/name, e.g. Helsinki-NLP/opus-mt-en-de: downloaded once into its cache), or a "
        "directory of `mtkit export --format ctranslate2` (run on CTranslate2).",
    ),
    host: str = typer.Option(
        "127.0.0.1", help="Address to listen on; 0.0.0.0 opens the server to the network (set an API key)."
    ),
    port: int = typer.Option(5000, min=0, max=65535, help="TCP port; 0 picks a free one (said in the log)."),
    allow_origin: list[str] = typer.Option(
        [],
        metavar="ORIGIN",
        help="A web page origin (https://app.example.org) allowed to call the server, with CORS; repeatable. "
        "Requests from any other page get 403; requests without an Origin (curl, scripts) are not affected.",
    ),
    allow_host: list[str] = typer.Option(
        [],
        metavar="NAME",
        help="A name clients may use in the Host header besides localhost, 127.0.0.1, [::1] and --host "
        "(the proxy's or the machine's name; * for any); repeatable. Other names get 400.",
    ),
    api_key_file: str | None = typer.Option(
        None,
        metavar="FILE",
        help="A file whose first line is the API key every request but /health must send "
        "('Authorization: Bearer KEY' or 'X-API-Key: KEY'; 401 without). Default: $MTKIT_SERVE_API_KEY, else none.",
    ),
    api_keys: str | None = typer.Option(
        None,
        metavar="FILE",
        help="A file of API keys, one a line with optional limits: KEY [name=NAME] [requests_per_minute=N] "
        "[characters_per_day=N]; re-read when it changes. Past a limit: 429 with Retry-After.",
    ),
    drain_timeout: float = typer.Option(
        20.0,
        min=0.0,
        help="Seconds after SIGTERM to answer the requests in flight and queued; the rest then get 503 and "
        "the server exits (below the 30 s that Kubernetes and SLURM wait before SIGKILL).",
    ),
    request_timeout: float = typer.Option(
        60.0,
        min=0.0,
        help="Seconds from a request's arrival to its answer at most: past it, one still queued gets 503 (never "
        "decoded) and one being decoded 504 (its batch no longer waits for it); 0 for none. A request whose client "
        "disconnects is dropped before it is decoded.",
    ),
    max_connections: int = typer.Option(
        512,
        min=1,
        help="Open connections at most (nginx's worker_connections; lowered to fit ulimit -n). Past it, idle "
        "connections are closed, oldest first; when every one is busy, new ones get 503.",
    ),
    read_timeout: float = typer.Option(
        60.0,
        min=0.1,
        help="Seconds for a request's head and body to arrive, from its connection or its first byte (nginx's "
        "client_header_timeout); past it the connection is closed (408 for an unfinished head).",
    ),
    max_tokens: int = typer.Option(
        DEFAULT_BATCH_TOKENS,
        "--max-tokens",
        "--batch-tokens",
        min=1,
        help="Source tokens decoded together at most (requests batched dynamically).",
    ),
    batch_wait_ms: float = typer.Option(
        5.0,
        min=0.0,
        help="How long a batch waits for more requests to join it, while requests come within this of each other; "
        "a request that comes alone is decoded at once.",
    ),
    queue_size: int = typer.Option(64, min=1, help="Requests waiting at most; past it, 503 with Retry-After."),
    max_lines: int = typer.Option(64, min=1, help="Sentences in one request at most (413 past it)."),
    max_chars: int = typer.Option(16384, min=1, help="Characters in one request at most (413 past it)."),
    max_beam: int = typer.Option(16, min=1, help="The largest beam a request may ask for."),
    max_file_bytes: int = typer.Option(
        10 * 2**20, min=1, help="A file to translate at most (LibreTranslate's /translate_file, DeepL's /v2/document)."
    ),
    device: str = device_option("cpu, cuda, cuda:N, mps, or auto (CUDA when available)."),
    threads: int = typer.Option(0, min=0, help="CPU threads for PyTorch; 0 keeps PyTorch's default."),
    revision: Optional[str] = revision_option(),
    target_lang: str = target_lang_option(),
    compile: str = compile_option(),
    languages: Optional[str] = typer.Option(
        None,
        metavar="PAIRS",
        help="The model's language pairs for LibreTranslate's API, e.g. en-de or en-de,en-fr (default: the pair "
        "the model file records). Example: --languages en-de",
    ),
    reverse_model: Optional[str] = typer.Option(
        None,
        "--reverse-model",
        show_default="none",
        help="A model of the other direction whose score of the source is a feature of the confidence a request "
        "asks for (\"confidence\": true); loaded at start.",
    ),
    calibrator: Optional[str] = typer.Option(
        None,
        "--calibrator",
        show_default="the one `mtkit calibrate` wrote beside the model, else the documented default",
        help="The confidence's calibrator file.",
    ),
    decoder_process: bool = typer.Option(
        False,
        "--decoder-process",
        help="Search in a process of its own (one PyTorch thread, mtkit's engine on the CPU), so that no HTTP work "
        "(a flood of refusals, probes) takes the search's time; give it a core of its own (taskset, a CPU set).",
    ),
    *,
    given: dict[str, Any],
) -> None:
    """Serve translations over HTTP: POST /translate, POST /translator/translate (OpenNMT-py), GET /health, /info,
    LibreTranslate's API (/translate with q, /languages, /detect) and a page to try the model (GET /).

    Example: mtkit serve -m runs/small/averaged.pt --port 5000
    """
    import dataclasses
    import logging

    _require_extra()
    from mtkit.serve.guard import Access, load_api_key
    from mtkit.serve.keys import KeyFile
    from mtkit.serve.languages import parse_languages
    from mtkit.serve.payload import Limits
    from mtkit.serve.server import serve as run_server
    from mtkit.serve.service import ServeSettings

    setup_logging(logging.INFO)
    access = Access(
        bind=host,
        hosts=tuple(allow_host),
        origins=tuple(allow_origin),
        api_key=load_api_key(api_key_file),
        key_file=KeyFile(api_keys) if api_keys is not None else None,
    )
    precision = build(EngineConfig(), given).precision
    given = {k: v for k, v in given.items() if k != "precision"}  # the rest are decoding's settings
    settings = ServeSettings(
        models=tuple(str(m) for m in model),
        access=access,
        drain_timeout_s=drain_timeout,
        request_timeout_s=request_timeout,
        max_connections=max_connections,
        read_timeout_s=read_timeout,
        decode=build(DecodeConfig(), given),
        decode_given=frozenset(given),
        target_lang=target_lang,
        limits=Limits(max_lines=max_lines, max_chars=max_chars, max_beam=max_beam, max_file_bytes=max_file_bytes),
        max_tokens=max_tokens,
        batch_wait_ms=batch_wait_ms,
        queue_size=queue_size,
        device=device,
        precision=precision,
        threads=threads,
        compile=compile,
        languages=parse_languages(languages) if languages is not None else (),
        reverse_model=reverse_model,
        calibrator=calibrator,
        decoder_process=decoder_process,
    )
    # found once (a Hub name too) and checked before the server starts: "auto" is decided when the service opens it
    settings = dataclasses.replace(settings, model=settings.plan(revision))
    run_server(settings, host, port)
