"""Load test of `mtkit serve` on loopback, against `mtkit translate` on the same sentences as one batch,
and with bad requests mixed in.

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
largest batch those clients can form.

Then (unless --bad-clients 0) each client count runs again with bad clients beside the good
ones until those are done (bench/bad_clients.py): --bad-clients sending bad requests at
--bad-per-s in all (a foreign Origin, a foreign Host, no API key (the server runs with one),
text/plain, broken JSON, nesting past the recursion limit, a 5000-digit number, alpha 1e308);
--idle-sockets connections that send nothing or half a head, reopened when closed; and
--abandon-per-s heavy requests whose client hangs up before the answer. The server runs with
--server-nofile descriptors (256, as in issue 46). Clean and bad runs are paired and
interleaved (A B B A for --rounds 2) so that a shared machine's load hits both. Reported: the
good clients' figures beside those of the clean run of the same round, each bad kind's answers
(and any that were not the expected status), the sockets' and the server's counts (requests
dropped undecoded), and whether the server's log holds a traceback. The last line printed is
one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import multiprocessing
import os
import platform
import re
import resource
import secrets
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
from bad_clients import BAD, bad_summary, run_spoilers, set_key  # bench/bad_clients.py
from harness import process_cpu_s  # bench/harness.py: a script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "multi30k-en-de"


def read(path: str, limit: int) -> list[str]:
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, limit)]


API_KEY = secrets.token_urlsafe(24)  # the server needs it (bad clients "without a key" show that it does)
set_key(API_KEY)
AUTH = {"Authorization": f"Bearer {API_KEY}"}


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
    if args.max_connections:
        cmd += ["--max-connections", str(args.max_connections)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MTKIT_SERVE_API_KEY": API_KEY}

    def limit_files() -> None:  # the setting: 400 idle sockets against 256 descriptors
        if args.server_nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.server_nofile, args.server_nofile))

    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f, env=env, preexec_fn=limit_files)
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
            answer = await http.post(url + "/translate", json={"text": [lines[i] for i in picked]}, headers=AUTH)
        except httpx.HTTPError as exc:
            out["errors"][type(exc).__name__] += 1
            continue
        out["latency"].append(time.perf_counter() - start)
        if answer.status_code != 200:
            out["errors"][str(answer.status_code)] += 1
            continue
        out["ok_latency"].append(out["latency"][-1])
        got = answer.json()["translations"]
        if len(got) != len(picked):
            out["lost"] += 1
            continue
        out["answered"] += 1
        out["sentences"] += len(got)
        out["differ"] += sum(g != reference[i] for g, i in zip(got, picked))


async def health(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """/health's body; a connection the server closed as idle (under the bad load) is tried again."""
    for _ in range(9):
        try:
            return (await http.get(url + "/health")).json()
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    return (await http.get(url + "/health")).json()


def log_tail(path: Path, n: int = 20) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def load(
    url: str,
    pid: int,
    clients: int,
    args: argparse.Namespace,
    lines: list[str],
    reference: list[str],
    bad_clients: int = 0,
) -> dict[str, Any]:
    """`clients` concurrent clients, each --requests requests of --lines sentences (distinct per request),
    with `bad_clients` more sending bad requests (--bad-per-s in all) for as long as the good ones run."""
    out: dict[str, Any] = {
        "latency": [],
        "ok_latency": [],
        "errors": Counter(),
        "lost": 0,
        "answered": 0,
        "sentences": 0,
        "differ": 0,
    }
    bad: dict[str, Counter] = {kind: Counter() for kind in BAD}
    idle: Counter = Counter()  # idle and slow sockets, abandoned requests (bench/bad_clients.py)
    order = itertools.cycle(range(len(lines)))
    work = [[[next(order) for _ in range(args.lines)] for _ in range(args.requests)] for _ in range(clients)]
    limits = httpx.Limits(max_connections=clients + bad_clients, max_keepalive_connections=clients + bad_clients)
    spoilers = None
    if bad_clients:  # in a process of their own: this event loop times the good clients only
        ctx = multiprocessing.get_context("spawn")
        ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
        spec = {
            "url": url,
            "api_key": API_KEY,
            "bad_clients": bad_clients,
            "bad_per_s": args.bad_per_s,
            "idle_sockets": args.idle_sockets,
            "abandon_per_s": args.abandon_per_s,
            "heavy": lines[: args.abandon_lines],
        }
        spoilers = ctx.Process(target=run_spoilers, args=(spec, ready, stop, results), daemon=True)
        spoilers.start()
        await asyncio.to_thread(ready.wait, 60)
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as http:
        before = (await health(http, url))["decoded"]
        start, cpu = time.perf_counter(), process_cpu_s(pid)
        await asyncio.gather(*(client(http, url, w, lines, reference, out) for w in work))
        wall, cpu = time.perf_counter() - start, process_cpu_s(pid) - cpu
        if spoilers is not None:
            stop.set()
            spoiled = await asyncio.to_thread(results.get, True, 120)
            spoilers.join(60)
            bad, idle = {k: Counter(c) for k, c in spoiled["bad"].items()}, Counter(spoiled["sockets"])
        end = await health(http, url)
        after = end["decoded"]
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
        "p99_answered_ms": round(1000 * percentile(out["ok_latency"], 99), 1) if out["ok_latency"] else None,
        "errors": dict(out["errors"]),
        "lost": sent - out["answered"] - sum(out["errors"].values()) + out["lost"],
        "differ_from_batch": out["differ"],
        "server_batches": batches,
        "sentences_per_batch": round((after["sentences"] - before["sentences"]) / max(batches, 1), 2),
        "server_cpu_s": round(cpu, 2),
        **({"bad_clients": bad_clients, "bad": bad_summary(bad, wall), "sockets": dict(idle)} if bad_clients else {}),
        "server_dropped": end.get("dropped"),
    }


def compare(clean: dict[str, Any], mixed: dict[str, Any]) -> dict[str, Any]:
    """The good clients' figures with bad traffic over those without (1.0 is unaffected), and what the bad
    requests cost the server: its extra CPU time, per bad request (the good work is the same in both runs)."""
    ratio: dict[str, Any] = {}
    for key in ("sentences_per_s", "p50_ms", "p95_ms", "p99_ms"):
        if clean.get(key) and mixed.get(key) is not None:
            ratio[key] = round(mixed[key] / clean[key], 3)
    sent = mixed["bad"]["sent"]
    ratio["server_cpu_ms_per_bad_request"] = (
        round(1000 * (mixed["server_cpu_s"] - clean["server_cpu_s"]) / sent, 2) if sent else None
    )
    return ratio


def batch_baseline(args: argparse.Namespace, lines: list[str], chunks: list[int]) -> tuple[list[str], dict[str, Any]]:
    """`mtkit translate`'s code path on the same sentences: all as one input, then `chunk` sentences at a time.

    A server with N clients of one sentence each decodes at most N sentences together, so
    "N at a time" is the best it can do; "all" is what one offline run of `mtkit translate` does.
    """
    import torch

    from mtkit import DecodeConfig, load_translator

    if args.threads:
        torch.set_num_threads(args.threads)
    translator = load_translator(args.model, device="cpu")
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
    parser.add_argument("--bad-clients", type=int, default=8, help="clients sending bad requests (0: no mixed run)")
    parser.add_argument("--bad-per-s", type=float, default=200, help="bad requests a second, all together (0: flood)")
    parser.add_argument("--idle-sockets", type=int, default=400, help="idle or slow connections in the bad load")
    parser.add_argument("--abandon-per-s", type=float, default=4, help="heavy requests a second whose client leaves")
    parser.add_argument("--abandon-lines", type=int, default=8, help="sentences in each abandoned request")
    parser.add_argument("--server-nofile", type=int, default=256, help="the server's open-file limit (0: as is)")
    parser.add_argument("--max-connections", type=int, default=0, help="the server's limit (0: its default)")
    parser.add_argument("--rounds", type=int, default=2, help="clean/bad pairs per client count, as A B B A ...")
    args = parser.parse_args()

    counts = [int(c) for c in args.clients.split(",")]
    lines = read(args.input, max(counts) * args.requests * args.lines)
    reference, baseline = batch_baseline(args, lines, [] if args.no_chunks else [c * args.lines for c in counts])
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(args, Path(tmp) / "serve.log")
        try:
            runs, mixed, effect = [], [], []
            for clients in counts:  # clean and bad runs paired and interleaved, A B B A, so shared load hits both
                for r in range(args.rounds if args.bad_clients else 1):
                    for bad in ((0, args.bad_clients) if r % 2 == 0 else (args.bad_clients, 0))[
                        : 2 if args.bad_clients else 1
                    ]:
                        run = asyncio.run(load(url, proc.pid, clients, args, lines, reference, bad))
                        (mixed if bad else runs).append(run)
                        print(
                            f"serve, {clients} clients{f' + {bad} bad' if bad else ''}, round {r + 1}: {run}",
                            flush=True,
                        )
                        if run["errors"]:
                            print(
                                "server log (last lines):\n" + "\n".join(log_tail(Path(tmp) / "serve.log")), flush=True
                            )
                    if args.bad_clients:
                        effect.append({"clients": clients, "round": r + 1, **compare(runs[-1], mixed[-1])})
                        print(f"  good clients with bad traffic / without (1.0 = unaffected): {effect[-1]}", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            exit_code = proc.wait(timeout=300)
            log = (Path(tmp) / "serve.log").read_text(encoding="utf-8", errors="replace")
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
                "serve_with_bad": mixed,
                "good_with_bad_over_without": effect,
                "server_log_tracebacks": log.count("Traceback"),
                "server_log_errors": sum(
                    " ERROR " in line or "error" in line.split(":", 1)[0] for line in log.splitlines()
                ),
                "server_exit_code": exit_code,
            }
        )
    )


if __name__ == "__main__":
    main()
