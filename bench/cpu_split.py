"""Where a decode's CPU time goes, mtkit against CTranslate2: `perf record` over the timed passes only, the samples
sorted into products, other kernels, Python and dispatch, memory, and threads waiting.

    python bench/cpu_split.py --model M.pt                      # mtkit fp32 and CTranslate2 fp32, 1 thread
    python bench/cpu_split.py --model M.pt --threads 2 --limit 1000 --passes 3

Each system runs alone in a child process under `perf record` (Linux perf 5.10 or later; as root, or as a user with
`perf_event_paranoid` at 2, which samples user code only, so the kernel's page faults then go unseen), started
with its recording off: the child loads the model, translates the lines once untimed, then switches the recording
on (perf's control FIFO) for --passes timed passes and off again. The search is bench/translate_speed.py's
(bench/searches.py, its defaults): beam 4, fairseq's length normalisation 0.6, batches of --batch-tokens source
tokens, longest output = source + 50 (CTranslate2: the longest source + 50).

A sample is put in one class by the function it fell in:
- products: matrix products, wherever they run (oneDNN's and CTranslate2's generated code, which perf sees as
  JIT code, and MKL's or oneDNN's named GEMM/GEMV functions);
- kernels: every other function of PyTorch or CTranslate2 (softmax, layer norm, top-k, copies inside them,
  PyTorch's operator dispatch);
- python: the interpreter and PyTorch's Python bindings;
- memory: the C library (memory copies, malloc) and the kernel (page faults);
- waiting: the OpenMP runtime (a thread spinning or parked until the next parallel region).

The seconds are CPU seconds a pass (samples / frequency / passes, all threads together): with one thread they
add up to the pass's wall time; with two, a second thread waiting while the first runs Python shows as waiting.
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from procstat import cpu_name  # bench/ is a script's sys.path[0]
from searches import ct2_translate, decode_config, search_settings
from translate_speed import DATA, ROOT, export_model, parse_args, read_lines

SYSTEMS = ("mtkit-fp32", "ct2-fp32")
CLASSES = ("products", "kernels", "python", "memory", "waiting", "other")
PRODUCT = re.compile(r"mkl_blas|sgemm|gemv|gemm_driver|gemm_batch|bmm")  # MKL, oneDNN and PyTorch product functions
FREQUENCY = 999  # samples a second per thread


def classify(dso: str, symbol: str) -> str:
    """The class of a sample taken in `symbol` of `dso` (see the module's docstring)."""
    if "[JIT]" in dso or dso.startswith("perf-") or PRODUCT.search(symbol):
        return "products"
    if "libgomp" in dso or "libiomp" in dso:
        return "waiting"
    if "libpython" in dso or "torch_python" in dso or dso.startswith("python"):
        return "python"
    if dso.startswith("libc.so") or dso.startswith("libc-") or "[kernel" in dso:
        return "memory"
    if "libtorch" in dso or "libc10" in dso or "ctranslate2" in dso or "libstdc++" in dso:
        return "kernels"
    return "other"


def split(report: str) -> dict[str, int]:
    """Samples by class, from `perf report --stdio -n --no-children --sort dso,sym`'s lines, such as
    `    12.34%        1234  libtorch_cpu.so   [.] at::native::...` (`[k]`: the kernel's)."""
    samples = dict.fromkeys(CLASSES, 0)
    for line in report.splitlines():
        found = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s+\[([.k])\]\s+(.*)", line)
        if found:
            dso = "[kernel]" if found[3] == "k" else found[2]
            samples[classify(dso, found[4])] += int(found[1])
    return samples


def child(system: str, job: dict[str, Any]) -> None:
    """Load, translate once untimed, then time --passes passes with perf's recording on."""
    lines = job["lines"]
    if system == "mtkit-fp32":
        sys.path.insert(0, str(ROOT))
        import torch

        from mtkit.decode.loading import load_translator

        torch.set_num_threads(job["threads"])
        translator = load_translator(
            job["model"], device=job["device"], precision="fp32", workers=job["workers"], threads=job["threads"]
        )
        config = decode_config(job)

        def translate() -> None:
            list(translator.translate_stream(lines, config, job["batch_tokens"]))

    else:
        ct2, _ = ct2_translate(job, "float32")

        def translate() -> None:
            ct2(lines)

    translate()
    with open(job["ctl"], "w", encoding="ascii") as ctl, open(job["ack"], encoding="ascii") as ack:
        ctl.write("enable\n")
        ctl.flush()
        ack.readline()
        start = time.perf_counter()
        for _ in range(job["passes"]):
            translate()
        seconds = (time.perf_counter() - start) / job["passes"]
        ctl.write("disable\n")
        ctl.flush()
        ack.readline()
    Path(job["out"]).write_text(json.dumps({"seconds": seconds}), encoding="utf-8")


def measure(system: str, job: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Run one system's child under perf; its wall seconds a pass and CPU seconds a pass by class."""
    ctl, ack, data = tmp / f"{system}.ctl", tmp / f"{system}.ack", tmp / f"{system}.perf"
    for fifo in (ctl, ack):
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    job = {**job, "ctl": str(ctl), "ack": str(ack), "out": str(tmp / f"{system}.json")}
    job_path = tmp / f"{system}.job.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    record = ["perf", "record", "-q", "-F", str(FREQUENCY), "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run(
        [*record, str(data), sys.executable, __file__, "--child", system, str(job_path)], check=True, env=env
    )
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "-n", "--no-children", "--sort", "dso,sym"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    samples = split(report)
    passes = job["passes"]
    cpu = {k: round(v / FREQUENCY / passes, 3) for k, v in samples.items()}
    seconds = json.loads(Path(job["out"]).read_text(encoding="utf-8"))["seconds"]
    return {"seconds": round(seconds, 3), "cpu_s": cpu, "cpu_total_s": round(sum(cpu.values()), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a trained mtkit model or checkpoint (required)")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"), help="source text (.gz is fine)")
    parser.add_argument("--limit", type=int, default=300, help="translate the first N lines")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of: {', '.join(SYSTEMS)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--passes", type=int, default=5, help="timed passes under perf")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(args.child, json.loads(Path(rest[0]).read_text(encoding="utf-8")))
        return
    if not args.model:
        parser.error("--model is required")
    if shutil.which("perf") is None:
        sys.exit("cpu_split.py needs Linux perf (`perf record`), which is not installed here.")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        sys.exit(f"unknown systems {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        # translate_speed's defaults for everything else (beam 4, alpha 0.6, +50, patience, one worker, the CPU)
        same = parse_args(
            ["--model", args.model, "--threads", str(args.threads), "--batch-tokens", str(args.batch_tokens)]
        )
        job = {
            "model": args.model,
            "lines": read_lines(args.input, args.limit),
            **search_settings(same),
            "passes": args.passes,
            "ct2_dir": export_model(args.model, tmp) if "ct2-fp32" in systems else None,
        }
        rows = {system: measure(system, job, tmp) for system in systems}
    print(f"{len(job['lines'])} sentences, beam 4, {args.threads} thread(s), {cpu_name()}; CPU seconds a pass:")
    print(f"{'system':<12} {'wall s':>7} " + " ".join(f"{c:>9}" for c in CLASSES) + f" {'CPU s':>7}")
    for system, row in rows.items():
        cells = " ".join(f"{row['cpu_s'][c]:>9.3f}" for c in CLASSES)
        print(f"{system:<12} {row['seconds']:>7.3f} {cells} {row['cpu_total_s']:>7.3f}")
    print(json.dumps({"bench": "cpu_split", "sentences": len(job["lines"]), "threads": args.threads,
                      "cpu": cpu_name(), "systems": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
