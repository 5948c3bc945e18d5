"""Decoding speed side by side: mtkit fp32/int8, the same weights exported to CTranslate2 fp32/int8 (its own Python
API: ct2-*), and mtkit's text pipeline over that export (`mtkit translate -m CT2DIR`: mtkit-ct2-*).

    python bench/translate_speed.py --model M.pt                          # Multi30k test_2016_flickr
    python bench/translate_speed.py --model M.pt --rounds 5 --limit 200  # a shared machine: A B, B A, ...; best, paired
    python bench/translate_speed.py --model M.pt --rounds 3 --record docs/results/NAME.json   # keep the record

Everything goes through the public API: `mtkit.load_translator` for the mtkit rows, `mtkit export` (the CLI) for
the CTranslate2 directory, and CTranslate2's own Python API for the ct2-* rows.

Every system translates the same sentences in a child process of its own (one after the
other, never at once), so that each peak RSS is its own: the child reads VmHWM from
/proc/self/status (`ru_maxrss` of a child would include what the parent had when it forked).
The mtkit children import torch, the CTranslate2 children and (on the CPU) mtkit-ct2-* do not. Each child translates the
first 8 sentences once before the clock starts. With --rounds N the systems run in turn N times
(A B, then B A, ...) and each keeps its fastest round (a busy machine only slows a round down) and its
highest peak RSS; a ratio is then given twice, best round over best round and the median over rounds of
the ratio within a round ("paired", the steadier on a machine whose speed drifts: see `add_ratios`).

Settings, the same for every system: beam 4, fairseq's length normalisation score / |Y|^0.6
(mtkit `--lenpen fairseq --alpha 0.6`; CTranslate2 `length_penalty=0.6`, where |Y| counts the
end token too: the tests hold the scores equal), longest output = source tokens + 50
(CTranslate2 takes one limit for all: the longest source + 50), an empty output allowed
(CTranslate2 `min_decoding_length=0`; its default 1 renormalises the first step), batches of about
--batch-tokens source tokens (CTranslate2: batch_type="tokens"), --workers batches searched at once
(mtkit `--workers`: processes; CTranslate2 `inter_threads`), each with --threads intra-op threads (mtkit's
workers run one thread each). A system's peak RSS adds up its worker processes' VmHWM, an upper bound that
counts the pages a forked worker shares with its parent (weights, libraries) in each; so with several
workers an mtkit row also gives its peak PSS, the memory its processes hold together (sampled every 0.05 s
in a second, untimed pass: sampling slows a translation down):

    python bench/translate_speed.py --model M.pt --workers 2 --threads 1  # 2 cores as 2 workers, both systems

Stopping: mtkit by `--early-stop` (default patience: once `beam` hypotheses have finished, as
CTranslate2's patience 1; `exact` runs until no live hypothesis can beat the best finished one).
mtkit never generates <pad> or <s>; CTranslate2 is left as deployed (a trained model gives them next
to no probability; its `suppress_sequences` would renormalise the scores).

mtkit int8 runs only where `mtkit translate --precision int8` exists (skipped with a note elsewhere).
On a GPU (`--device cuda`) the mtkit rows can also be bf16 and fp16, each with its ratio to mtkit fp32, and
each mtkit row adds its peak GPU memory (`torch.cuda.max_memory_allocated`); there the mtkit children translate
all the sentences once before the clock starts, not 8 (each new shape costs a kernel choice the first time):

    python bench/translate_speed.py --model M.pt --device cuda --systems mtkit-fp32,mtkit-bf16,mtkit-fp16

The CTranslate2 rows need `pip install 'mtkit[ct2]'`. Ratios are sentences/s over CTranslate2 fp32's (mtkit
int8 and mtkit-ct2-int8 over CTranslate2 int8's): mtkit-ct2-* over ct2-* is mtkit's overhead around CTranslate2:

    python bench/translate_speed.py --model M.pt --systems ct2-fp32,mtkit-ct2-fp32,ct2-int8,mtkit-ct2-int8 --rounds 5

The distillation comparison: a student, greedy, with its shortlist (mtkit decodes over the shortlist the model
carries; CTranslate2 over the export's vocabulary map, vmap.txt, with `use_vmap=True`), each system at each of
several thread and worker settings in one run (`--settings THREADSxWORKERS,...`; the rounds take every system and
setting in turn, reversing each round), CTranslate2 at its best of them being the comparison:

    python bench/translate_speed.py --model student.pt --beam 1 --shortlist --systems mtkit-int8,ct2-int8 \
        --settings 1x1,2x1,1x2 --rounds 3 --record docs/results/NAME.json

On an AVX-512 CPU, `--isa avx2` caps each library's x86 instructions at AVX2 through its own variable (PyTorch's
kernels, MKL, oneDNN, CTranslate2's dispatch; each mtkit row says which kernels PyTorch ran): the code an AVX2-only
CPU runs, on this CPU's caches and clock, a proxy for one. fbgemm (mtkit int8) has no such cap, so compare fp32:

    python bench/translate_speed.py --model M.pt --isa avx2 --systems mtkit-fp32,ct2-fp32 --settings 2x1 --rounds 3

Speed is sentences/s and output words/s (whitespace-separated words: the same count for every system). The last
line printed is one JSON object with every figure; `--record PATH` also writes it as a record (bench/harness.py),
with `--settings` one a docs page renders (bench/best_setting.py's `table`): every system at every setting, and
each mtkit system at its best setting against its CTranslate2 counterpart at its own best.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: a script's sys.path[0], and a page renderer's

from best_setting import ISA_CAPS, add_ratios, best_settings, child_env, setting_name, settings_list  # noqa: E402
from harness import PeakPss, Record, cpu_name, keep_best, peak_rss_mib, workers_peak_rss_mib  # noqa: E402
from searches import ct2_translate, decode_config, on_gpu, search_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "mtkit" / "data" / "multi30k"  # the Multi30k that ships with mtkit
SYSTEMS = ("mtkit-fp32", "mtkit-int8", "ct2-fp32", "ct2-int8", "mtkit-ct2-fp32", "mtkit-ct2-int8")
GPU_ONLY = ("mtkit-bf16", "mtkit-fp16")  # on request
WARMUP = 8


def read_lines(path: str, limit: int | None) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


# --------------------------------------------------------------------------- children
def warmup_lines(job: dict[str, Any]) -> list[str]:
    """What a child translates before the clock starts: the first WARMUP lines; on a GPU all of them, as every
    new shape costs a kernel choice there the first time (an H200: 1.1-1.4 s for a first pass over the 1,000
    test sentences, 0.6-0.8 s for the next ones) and a deployed translator has met them."""
    return job["lines"] if on_gpu(job) else job["lines"][:WARMUP]


def run_mtkit(job: dict[str, Any], precision: str) -> tuple[list[str], float, float, float | None, float | None]:
    """(outputs, seconds, the workers' peak RSS in MiB, peak GPU MiB, peak PSS MiB) of `mtkit.load_translator`'s
    Translator (over the CTranslate2 export for mtkit-ct2-*); the PSS only with forked workers, from a second,
    untimed pass (`PeakPss`)."""
    sys.path.insert(0, str(ROOT))
    import mtkit

    ct2 = precision.startswith("ct2-")
    precision = precision.removeprefix("ct2-")
    model = job["ct2_dir"] if ct2 else job["model"]
    torch = None
    if not ct2 or on_gpu(job):  # mtkit over CTranslate2 runs without torch, as `mtkit translate -m CT2DIR` does
        import torch

        torch.set_num_threads(job["threads"])
    translator = mtkit.load_translator(
        model, device=job["device"], precision=precision, workers=job["workers"], threads=job["threads"]
    )
    config = decode_config(job)
    lines = job["lines"]
    list(translator.translate_stream(warmup_lines(job), config, job["batch_tokens"]))
    start = time.perf_counter()
    outputs = [t.text for t in translator.translate_stream(lines, config, job["batch_tokens"])]
    seconds = time.perf_counter() - start
    gpu = torch.cuda.max_memory_allocated() / 2**20 if torch is not None and on_gpu(job) else None
    pss = None
    if job["workers"] > 1 and not ct2:  # CTranslate2's inter_threads are threads of one process
        with PeakPss() as peak:
            list(translator.translate_stream(lines, config, job["batch_tokens"]))
        pss = peak.peak
    return outputs, seconds, workers_peak_rss_mib(), gpu, pss


def run_ct2(job: dict[str, Any], compute_type: str) -> tuple[list[str], float]:
    """(outputs, seconds) of ctranslate2.Translator on the exported directory."""
    translate, _ = ct2_translate(job, compute_type)
    translate(warmup_lines(job))
    start = time.perf_counter()
    outputs = translate(job["lines"])
    return outputs, time.perf_counter() - start


def child(system: str, job_path: str, out_path: str) -> None:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    workers, gpu, pss = 0.0, None, None
    if system.startswith("mtkit"):
        outputs, seconds, workers, gpu, pss = run_mtkit(job, system.split("-", 1)[1])
    else:
        outputs, seconds = run_ct2(job, {"ct2-fp32": "float32", "ct2-int8": "int8"}[system])
    peak = peak_rss_mib() + workers
    result = {"outputs": outputs, "seconds": seconds, "peak_rss_mib": peak, "peak_gpu_mib": gpu, "peak_pss_mib": pss}
    if system.startswith("mtkit") and "torch" in sys.modules:  # the instructions PyTorch's kernels run (--isa)
        result["cpu_capability"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
    if gpu is not None:
        import torch

        result["gpu"] = torch.cuda.get_device_name()
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")


# --------------------------------------------------------------------------- parent
def available(system: str, device: str) -> str | None:
    """None when `system` can run here, else the note that says why not."""
    if system not in (*SYSTEMS, *GPU_ONLY):
        return "skipped: no such system"
    if system == "mtkit-fp16" and not device.startswith("cuda"):
        return "skipped: fp16 decoding runs on CUDA only"
    if "ct2" in system:
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            return "skipped: ctranslate2 is not installed (pip install 'mtkit[ct2]')"
    return None


def export_model(model: str, directory: Path, isa: str | None = None) -> str:
    """The model exported once in fp32 by `mtkit export`; CTranslate2 quantizes to int8 on load (compute_type)."""
    out = directory / "ct2"
    env = child_env(isa)
    cmd = [sys.executable, "-m", "mtkit", "export", model, "--format", "ctranslate2", "-o", str(out)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return str(out)


def run_child(system: str, job_path: Path, tmp: Path, isa: str | None = None) -> dict[str, Any]:
    out_path = tmp / f"{system}.json"
    env = child_env(isa)
    subprocess.run(
        [sys.executable, __file__, "--child", system, "--job", str(job_path), "--out", str(out_path)],
        check=True,
        env=env,
    )
    return json.loads(out_path.read_text(encoding="utf-8"))


def bleu(outputs: list[str], refs: list[str] | None) -> float | None:
    if refs is None:
        return None
    import sacrebleu

    return round(sacrebleu.corpus_bleu(outputs, [refs]).score, 2)


def summarise(system: str, r: dict[str, Any], n: int, refs: list[str] | None) -> dict[str, Any]:
    words = sum(len(line.split()) for line in r["outputs"])
    return {
        "system": system,
        "seconds": round(r["seconds"], 3),
        "sentences_per_s": round(n / r["seconds"], 2),
        "words_per_s": round(words / r["seconds"], 1),
        "peak_rss_mib": round(r["peak_rss_mib"], 1),
        **({"peak_gpu_mib": round(r["peak_gpu_mib"], 1), "gpu": r["gpu"]} if r.get("peak_gpu_mib") is not None else {}),
        **({"peak_pss_mib": round(r["peak_pss_mib"], 1)} if r.get("peak_pss_mib") is not None else {}),
        **({"cpu_capability": r["cpu_capability"]} if "cpu_capability" in r else {}),
        "bleu": bleu(r["outputs"], refs),
        "outputs_sha256": hashlib.sha256("\n".join(r["outputs"]).encode()).hexdigest()[:16],
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a trained mtkit model or checkpoint (required)")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"), help="source text (.gz is fine)")
    parser.add_argument(
        "--ref", default=str(DATA / "test_2016_flickr.de.gz"), help="reference translations for BLEU ('' for none)"
    )
    parser.add_argument("--limit", type=int, default=None, help="translate only the first N lines")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of: {', '.join(SYSTEMS)}")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6, help="fairseq length normalisation exponent")
    parser.add_argument("--max-len-b", type=int, default=50, help="longest output = source tokens + this")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--device", default="cpu", help="cpu or cuda[:N] (the mtkit rows; CTranslate2's too where installed)"
    )
    parser.add_argument(
        "--early-stop",
        default="patience",
        choices=("patience", "exact", "none"),
        help="mtkit's stop rule (CTranslate2 stops by patience; see mtkit translate --help)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="batches searched at once (mtkit --workers, CTranslate2 inter_threads)"
    )
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads per worker (default: 2 / workers)")
    parser.add_argument(
        "--settings",
        type=settings_list,
        help="instead of --threads and --workers, each of these THREADSxWORKERS settings (e.g. 1x1,2x1,1x2: one "
        "thread, two threads, two workers of one thread), every system at each, in turns",
    )
    parser.add_argument(
        "--shortlist",
        action="store_true",
        help="decode over the model's shortlist (mtkit) and the export's vocabulary map (CTranslate2 use_vmap)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the systems in turn this many times (A B, B A, ...) and keep each one's best speed and highest "
        "RSS, and give each ratio paired too (the median of the rounds' ratios): on a shared machine a slow spell "
        "then cannot fall on one system alone",
    )
    parser.add_argument(
        "--isa",
        choices=sorted(ISA_CAPS),
        help="cap every library's x86 instructions (avx2: what an AVX2-only CPU runs, on this CPU; not int8's)",
    )
    parser.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.child and not args.model:
        parser.error("--model is required: the figures mean something only for a trained model")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.threads is None:
        args.threads = max(1, 2 // args.workers)
    return args


def main() -> None:
    args = parse_args()
    if args.child:
        child(args.child, args.job, args.out)
        return
    record = Record()
    lines = read_lines(args.input, args.limit)
    refs = read_lines(args.ref, args.limit) if args.ref else None
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    notes = {s: note for s in systems if (note := available(s, args.device))}
    each = args.settings or [(args.threads, args.workers)]
    # a row for each system at each setting, named as the system alone without --settings
    runs = [(s, t, w) for t, w in each for s in systems if s not in notes]
    key = {(s, t, w): f"{s}, {setting_name(t, w)}" if args.settings else s for s, t, w in runs}
    rows: dict[str, dict[str, Any]] = {}
    passes: dict[str, list[float]] = {key[run]: [] for run in runs}
    with tempfile.TemporaryDirectory(prefix="translate-speed-") as name:
        tmp = Path(name)
        job = {
            "model": args.model,
            "lines": lines,
            **search_settings(args),
            "ct2_dir": export_model(args.model, tmp, args.isa) if any("ct2" in s for s, _, _ in runs) else None,
        }
        if args.shortlist and job["ct2_dir"] and not (Path(job["ct2_dir"]) / "vmap.txt").is_file():
            sys.exit(
                "translate_speed.py: --shortlist: the model carries no shortlist (mtkit shortlist MODEL DATA -o OUT)"
            )
        for t, w in each:
            (tmp / f"job-{t}x{w}.json").write_text(json.dumps({**job, "threads": t, "workers": w}), encoding="utf-8")
        for turn in range(args.rounds):  # A B, then B A: neither system nor setting always runs first
            for system, t, w in runs if turn % 2 == 0 else runs[::-1]:
                row = summarise(system, run_child(system, tmp / f"job-{t}x{w}.json", tmp, args.isa), len(lines), refs)
                row.update(name=key[system, t, w], threads=t, workers=w, setting=setting_name(t, w))
                print(f"{row['name']}: {row['sentences_per_s']} sent/s", file=sys.stderr, flush=True)
                rows[key[system, t, w]] = keep_best(rows.get(key[system, t, w]), row)
                passes[key[system, t, w]].append(row["seconds"])
    for t, w in each:  # the ratios within a setting, then each system at its best against its anchor at its own
        add_ratios({r["system"]: r for r in rows.values() if (r["threads"], r["workers"]) == (t, w)})
    best = best_settings(list(rows.values())) if args.settings else {}
    print_table(rows, notes)
    settings = {
        "model": Path(args.model).name,
        "input": Path(args.input).name,
        "sentences": len(lines),
        "beam": args.beam,
        "lenpen": f"fairseq alpha {args.alpha}",
        "max_len_b": args.max_len_b,
        "batch_tokens": args.batch_tokens,
        **(
            {"settings": [setting_name(t, w) for t, w in each]}
            if args.settings
            else {"threads": args.threads, "workers": args.workers}
        ),
        "shortlist": args.shortlist,
        "rounds": args.rounds,
        "device": args.device,
        **({"isa": f"capped at {args.isa}: {ISA_CAPS[args.isa]}"} if args.isa else {}),
    }
    results = {"rows": list(rows.values()), "notes": notes, **({"best": best} if best else {})}
    if args.record and args.settings:  # a table for a page: its rows, rendered by `table`
        data = record.data(settings, {s: p for s, p in passes.items() if p}, results)
        data.update(renderer="bench/best_setting.py::table", rows=list(rows.values()), sentences=len(lines),
                    words=sum(len(line.split()) for line in lines))  # fmt: skip
        record.write_data(args.record, data)
    else:
        record.write(args.record, settings, {s: p for s, p in passes.items() if p}, results)
    print(json.dumps({"bench": "translate_speed", **settings, **results, "cpu": cpu_name(), "cpus": os.cpu_count()}))


def print_table(rows: dict[str, dict[str, Any]], notes: dict[str, str]) -> None:
    """Each row's figures and ratios."""
    print(f"{'system':<14} {'sent/s':>8} {'words/s':>9} {'peak RSS MiB':>13} {'BLEU':>6}  ratio")
    for system, row in rows.items():
        ratios = [
            f"{v:.2f}x {k[3:]}" + (f" (paired {row['paired_' + k]:.2f}x)" if "paired_" + k in row else "")
            for k, v in row.items()
            if k.startswith("vs_")
        ]
        if "peak_gpu_mib" in row:
            ratios.append(f"peak GPU {row['peak_gpu_mib']:,.0f} MiB")
        if "peak_pss_mib" in row:
            ratios.append(f"peak PSS {row['peak_pss_mib']:,.0f} MiB (the workers together)")
        print(
            f"{system:<14} {row['sentences_per_s']:>8.2f} {row['words_per_s']:>9.1f} "
            f"{row['peak_rss_mib']:>13.0f} {row['bleu'] if row['bleu'] is not None else '-':>6}  {', '.join(ratios)}"
        )
    for system, note in notes.items():
        print(f"{system:<14} {note}")


if __name__ == "__main__":
    main()
