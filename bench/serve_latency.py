"""Latency of one short sentence on an idle `mtkit serve`: the request LibreTranslate's clients (Mastodon, a page
translating as you type) send, one at a time.

    python bench/serve_latency.py --model runs/small/model.pt
    python bench/serve_latency.py --model M.pt --requests 300 --batch-wait-ms 5,0 --threads 2
    python bench/serve_latency.py --model student.pt --beam 0 --precision int8   # a student as it ships

A real server is started per --batch-wait-ms value (`python -m mtkit serve --port 0`); one client sends
--requests requests of one sentence, one after another on one keep-alive connection, alternating mtkit's own
`POST /translate` ({"text": [...]}) and LibreTranslate's ({"q": ..., "source", "target"}), after --warmup
requests of each, and a `GET /health` after each pair (what the HTTP layer costs with nothing to decode); the
time is the client's, from sending to the parsed answer. Beside them, the same
sentence translated in this process (`Translator.translate`, the model alone, same threads), so that what
the HTTP layer and the batching window add can be read off. Reported: p50, p90, p99 and mean in ms, the CPU,
the threads, and the load average before and after (a busy machine inflates every figure: compare rows of
one run, not runs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import cpu_name, latency  # noqa: E402  # bench/ is a script's sys.path[0]


def percentiles(ms: list[float]) -> str:
    q = latency(ms)
    return f"p50 {q['p50']:6.1f}  p90 {q['p90']:6.1f}  p99 {q['p99']:6.1f}  mean {q['mean']:6.1f} ms"


def start_server(
    code: Path, serve: list[str], log: Path, launch: Sequence[str] = ("-m", "mtkit"), name: str = ""
) -> tuple[subprocess.Popen, str]:
    """`mtkit serve SERVE...` of the checkout `code` on an ephemeral port; returns once /health says ready. It runs
    in `code`, so `python -m mtkit` imports that checkout's mtkit, not the caller's: give it absolute paths.
    `launch`: what follows `python` to reach mtkit's command line (`-c CODE ARG`, say); `name` in its errors."""
    import httpx

    name = name or str(code)
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("MTKIT_SERVE_API_KEY", None)
    cmd = [sys.executable, *launch, "serve", "--port", "0", "--device", "cpu", *serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env, cwd=code)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if m := re.search(r"listening on (http://\S+?:\d+)", log.read_text(errors="replace")):
            try:
                if httpx.get(m.group(1) + "/health", timeout=5).status_code == 200:
                    return proc, m.group(1)
            except httpx.TransportError:
                pass
        if proc.poll() is not None:
            raise SystemExit(f"mtkit serve ({name}) exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"mtkit serve ({name}) did not become ready in 300 s")


def start(args: argparse.Namespace, wait_ms: str, log: Path) -> tuple[subprocess.Popen, str]:
    serve = ["-m", str(Path(args.model).resolve()), "--batch-wait-ms", wait_ms, "--languages", args.languages]
    serve += ["--precision", args.precision]
    if args.beam:  # 0: the model's own defaults (a student greedy, its shortlist), as serve applies them
        serve += ["--beam", str(args.beam)]
    if args.threads:
        serve += ["--threads", str(args.threads)]
    return start_server(ROOT, serve, log)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sentence", default="A man is riding a bike.")
    ap.add_argument("--languages", default="en-de", help="the pair LibreTranslate's request names")
    ap.add_argument("--requests", type=int, default=200, help="timed requests of each API")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--beam", type=int, default=4, help="0: the model's own (a student: greedy, its shortlist)")
    ap.add_argument("--precision", default="fp32", help="the server's and the baseline's (int8 for a student)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads, server and baseline (0: PyTorch's)")
    ap.add_argument("--batch-wait-ms", default="5,0", help="the server's batching windows to try, comma-separated")
    args = ap.parse_args()
    import httpx
    import torch

    from mtkit import load_translator

    source, target = args.languages.split("-", 1)
    load_before = os.getloadavg()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {load_before[0]:.2f}")
    beam = "the model's own" if not args.beam else args.beam
    print(f"sentence: {args.sentence!r}; beam {beam}; precision {args.precision}; {args.requests} timed requests each")

    if args.threads:
        torch.set_num_threads(args.threads)
    given = {"beam": args.beam} if args.beam else {}  # beam 0: the model's own, as serve does
    translator = load_translator(args.model, device="cpu", precision=args.precision, threads=args.threads, **given)
    config = translator.defaults
    for _ in range(args.warmup):
        translator.translate([args.sentence], config)
    alone = []
    for _ in range(args.requests):
        t0 = time.perf_counter()
        out = translator.translate([args.sentence], config)[0]
        alone.append(1000 * (time.perf_counter() - t0))
    translator.close()
    print(f"translation: {out!r}; torch threads {torch.get_num_threads()}")
    print(f"{'in-process Translator.translate':44s} {percentiles(alone)}")

    native = {"text": [args.sentence]}
    libre = {"q": args.sentence, "source": source, "target": target}
    for wait_ms in args.batch_wait_ms.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            proc, url = start(args, wait_ms, Path(tmp) / "serve.log")
            try:
                times: dict[str, list[float]] = {"mtkit": [], "libre": [], "health": []}
                with httpx.Client(base_url=url, timeout=120) as http:
                    for k in range(args.warmup + args.requests):
                        for name, body in (("mtkit", native), ("libre", libre), ("health", None)):
                            t0 = time.perf_counter()
                            answer = http.post("/translate", json=body) if body else http.get("/health")
                            answer.json()
                            if answer.status_code != 200:
                                raise SystemExit(f"{name}: {answer.status_code} {answer.text}")
                            if k >= args.warmup:
                                times[name].append(1000 * (time.perf_counter() - t0))
            finally:
                proc.terminate()
                proc.wait(60)
        row = f"serve --batch-wait-ms {wait_ms}, POST /translate"
        print(f"{row + ' {text}':44s} {percentiles(times['mtkit'])}")
        print(f"{row + ' {q} (Libre)':44s} {percentiles(times['libre'])}")
        print(f"{'serve, GET /health (nothing decoded)':44s} {percentiles(times['health'])}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
