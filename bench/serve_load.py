"""Load test of `mtkit serve` on loopback, against `mtkit translate` on the same sentences as one batch.

    python bench/serve_load.py --model runs/small/averaged.pt
    python bench/serve_load.py --model M.pt --clients 16,64 --requests 4 --max-len-b 0   # a quick run

A real server is started (`python -m mtkit serve --port 0`); for each client count, that many
clients each send --requests requests of --lines sentences one after another (a fixed amount
of work: the run stops by itself) and every answer is checked. Reported per client count:
sentences/s, latency p50/p95/p99, errors by status, lost requests (sent but never answered,
or answered with the wrong number of lines), answers that differ from the batch's
translation, and how many sentences the server decoded together on average. The baseline is
`mtkit translate` on the same sentences, timed in-process (model load excluded) with the same
--max-tokens: all at once, and (unless --no-chunks) CLIENTS x LINES sentences at a time, the
largest batch those clients can form. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "multi30k-en-de"


def read(path: str, limit: int) -> list[str]:
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, limit)]


def start_server(args: argparse.Namespace, log: Path) -> tuple[subprocess.Popen, str]:
    """`mtkit serve` on an ephemeral port; returns once /health says ready."""
    cmd = [
        sys.executable,
        "-m",
        "mtkit",
        "serve",
        "-m",
        args.model,
        "--port",
        "0",
        "--max-tokens",
        str(args.max_tokens),
        "--batch-wait-ms",
        str(args.batch_wait_ms),
        "--queue-size",
        str(args.queue_size),
        "--max-len-b",
        str(args.max_len_b),
        "--beam",
        str(args.beam),
        "--device",
        "cpu",
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"mtkit serve exited with {proc.returncode}:\n{log.read_text()}")
        if match := re.search(r"listening on (http://\S+)", log.read_text()):
            try:
                if httpx.get(match.group(1) + "/health", timeout=5).status_code == 200:
                    return proc, match.group(1)
            except httpx.TransportError:
                pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("mtkit serve did not become ready in 300 s")


async def client(
    http: httpx.AsyncClient,
    url: str,
    work: list[list[int]],
    lines: list[str],
    reference: list[str],
    out: dict[str, Any],
) -> None:
    """Send this client's requests one after another, recording latency, status and correctness."""
    for picked in work:
        start = time.perf_counter()
        try:
            answer = await http.post(url + "/translate", json={"text": [lines[i] for i in picked]})
        except httpx.HTTPError as exc:
            out["errors"][type(exc).__name__] += 1
            continue
        out["latency"].append(time.perf_counter() - start)
        if answer.status_code != 200:
            out["errors"][str(answer.status_code)] += 1
            continue
        got = answer.json()["translations"]
        if len(got) != len(picked):
            out["lost"] += 1
            continue
        out["answered"] += 1
        out["sentences"] += len(got)
        out["differ"] += sum(g != reference[i] for g, i in zip(got, picked))


def log_tail(path: Path, n: int = 20) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def load(
    url: str, clients: int, args: argparse.Namespace, lines: list[str], reference: list[str]
) -> dict[str, Any]:
    """`clients` concurrent clients, each --requests requests of --lines sentences (distinct per request)."""
    out: dict[str, Any] = {"latency": [], "errors": Counter(), "lost": 0, "answered": 0, "sentences": 0, "differ": 0}
    order = itertools.cycle(range(len(lines)))
    work = [[[next(order) for _ in range(args.lines)] for _ in range(args.requests)] for _ in range(clients)]
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as http:
        before = (await http.get(url + "/health")).json()["decoded"]
        start = time.perf_counter()
        await asyncio.gather(*(client(http, url, w, lines, reference, out) for w in work))
        wall = time.perf_counter() - start
        after = (await http.get(url + "/health")).json()["decoded"]
    batches = after["batches"] - before["batches"]
    sent = clients * args.requests
    lat = out["latency"]
    return {
        "clients": clients,
        "requests": sent,
        "answered": out["answered"],
        "sentences": out["sentences"],
        "wall_s": round(wall, 3),
        "sentences_per_s": round(out["sentences"] / wall, 2),
        "p50_ms": round(1000 * percentile(lat, 50), 1) if lat else None,
        "p95_ms": round(1000 * percentile(lat, 95), 1) if lat else None,
        "p99_ms": round(1000 * percentile(lat, 99), 1) if lat else None,
        "errors": dict(out["errors"]),
        "lost": sent - out["answered"] - sum(out["errors"].values()) + out["lost"],
        "differ_from_batch": out["differ"],
        "server_batches": batches,
        "sentences_per_batch": round((after["sentences"] - before["sentences"]) / max(batches, 1), 2),
    }


def batch_baseline(args: argparse.Namespace, lines: list[str], chunks: list[int]) -> tuple[list[str], dict[str, Any]]:
    """`mtkit translate`'s code path on the same sentences: all as one input, then `chunk` sentences at a time.

    A server with N clients of one sentence each decodes at most N sentences together, so
    "N at a time" is the best it can do; "all" is what one offline run of `mtkit translate` does.
    """
    import torch

    from mtkit.config import DecodeConfig
    from mtkit.decode.translator import Translator

    if args.threads:
        torch.set_num_threads(args.threads)
    translator = Translator.load(args.model, device="cpu")
    config = DecodeConfig(beam=args.beam, max_len_b=args.max_len_b)
    figures: dict[str, Any] = {}
    out: list[str] = []
    for chunk in [len(lines), *chunks]:
        start = time.perf_counter()
        out = [
            t.text
            for i in range(0, len(lines), chunk)
            for t in translator.translate_stream(lines[i : i + chunk], config, args.max_tokens)
        ]
        wall = time.perf_counter() - start
        name = "all" if chunk == len(lines) else f"{chunk}_at_a_time"
        figures[name] = {
            "sentences": len(lines),
            "wall_s": round(wall, 3),
            "sentences_per_s": round(len(lines) / wall, 2),
        }
        print(f"batch (mtkit translate, in-process), {name}: {figures[name]}", flush=True)
    return out, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="an mtkit model or checkpoint file")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"), help="source text (.gz is fine)")
    parser.add_argument("--clients", default="16,64", help="concurrent client counts, comma-separated")
    parser.add_argument("--requests", type=int, default=4, help="requests each client sends, one after another")
    parser.add_argument("--lines", type=int, default=1, help="sentences per request")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-len-b", type=int, default=50, help="0 keeps an untrained model's output short")
    parser.add_argument("--max-tokens", type=int, default=4096, help="the server's and the baseline's batch size")
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--queue-size", type=int, default=256, help="above the largest client count: no 503s")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    parser.add_argument("--no-chunks", action="store_true", help="time the batch baseline on all sentences only")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one request may take")
    args = parser.parse_args()

    counts = [int(c) for c in args.clients.split(",")]
    lines = read(args.input, max(counts) * args.requests * args.lines)
    reference, baseline = batch_baseline(args, lines, [] if args.no_chunks else [c * args.lines for c in counts])
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(args, Path(tmp) / "serve.log")
        try:
            runs = []
            for clients in counts:
                runs.append(asyncio.run(load(url, clients, args, lines, reference)))
                print(f"serve, {clients} clients: {runs[-1]}", flush=True)
                if runs[-1]["errors"]:
                    print("server log (last lines):\n" + "\n".join(log_tail(Path(tmp) / "serve.log")), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            exit_code = proc.wait(timeout=300)
    print(
        json.dumps(
            {
                "bench": "serve_load",
                "model": args.model,
                "cpu": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "beam": args.beam,
                "max_len_b": args.max_len_b,
                "lines_per_request": args.lines,
                "requests_per_client": args.requests,
                "batch_wait_ms": args.batch_wait_ms,
                "max_tokens": args.max_tokens,
                "batch": baseline,
                "serve": runs,
                "server_exit_code": exit_code,
            }
        )
    )


if __name__ == "__main__":
    main()
