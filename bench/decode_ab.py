"""Decoding speed, A against B: the same model and sentences through variants, each in its own process.

    python bench/decode_ab.py --model M.pt --variant base=/tmp/mtkit-main --variant new=. \\
        --variant new-patience=.:early_stop=patience --variant new-int8=.:precision=int8 --limit 500 --rounds 2

A variant is NAME=CODE_DIR[:key=value,...]: CODE_DIR is a checkout of mtkit (e.g. `git worktree add
/tmp/mtkit-main main`), keys are DecodeConfig fields plus precision and batch_tokens, and upper-case keys
are environment variables for that variant's process (`.:ONEDNN_PRIMITIVE_CACHE_CAPACITY=16`); `threads`
overrides --threads and `workers` sets `load_translator(workers=N)` (`.:workers=2,threads=1`: the worker processes'
CPU seconds and peak RSS are added to the variant's, their shared weights counted in each). Rounds
take turns (A B, then B A, ...) so that a shared machine's load falls on all of them. Each variant's
process loads its model once and translates the input once per round, when its turn comes (the
others wait, idle): a round costs the translations only, not each process's start (importing torch,
loading the model, warming up).

Two figures per variant against the first: the ratio of their best rounds, and the median over
rounds of the ratio within a round ("paired"). On a machine whose speed drifts by 15-20% from one
minute to the next (a shared 2-core VM), variants that run back to back see nearly the same machine,
so the paired median is the steadier figure: two identical variants, 12 rounds of 300 sentences on a
2-core Zen 3 EPYC, came out 0.95x by their best rounds and 1.02x paired (rounds 0.84-1.13x). CPU
seconds are reported beside wall seconds, with the part spent in the kernel and the minor page faults
(first touches of fresh memory: a fresh buffer costs one per 4 KiB written); each child reports its own
peak RSS (VmHWM), and whether its output equals the first variant's is printed. Without --model a random
`small` model decodes (its output is noise, lengths capped at the source length). The last line
printed is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rounds import paired_ratio  # bench/rounds.py: a script's directory is on sys.path

DATA = Path(__file__).resolve().parents[1] / "mtkit" / "data" / "multi30k"  # the Multi30k that ships with mtkit

CHILD = r'''
import json, sys, time, torch
args = json.loads(sys.argv[1])
sys.path.insert(0, args["bench"])
from procstat import counters, totals
torch.set_num_threads(args["threads"])
from mtkit.config import DecodeConfig
from mtkit.decode.translator import Translator
lines = open(args["input"], encoding="utf-8").read().split("\n")[:-1]
if args["model"]:
    workers = {"workers": args["workers"]} if args["workers"] > 1 else {}  # older checkouts have no workers
    from mtkit.decode.loading import load_translator
    tr = load_translator(args["model"], device="cpu", precision=args.get("precision", "fp32"), **workers)
else:
    from mtkit.data.vocab import Vocab
    from mtkit.model import build_model
    vocab = Vocab.from_bytes(open(args["spm"], "rb").read())
    torch.manual_seed(1)
    model = build_model("small", len(vocab))
    workers = {"workers": args["workers"]} if args["workers"] > 1 else {}
    try:  # what the loader does to the models it loads: mtkit.runtime's decisions, applied
        from mtkit import runtime
    except ImportError:  # an older checkout: its Translator prepared the model itself (quantize_int8 before)
        if args.get("precision") == "int8":
            from mtkit.decode.quantize import quantize_int8
            model = quantize_int8(model)
        tr = Translator(model, vocab, "cpu", **workers)
    else:
        plan = runtime.decide_decoding(args.get("precision", "fp32"), torch.device("cpu"), model.cfg.d_model)
        model = runtime.apply(model.to(plan.dtype).eval(), plan)
        try:  # the text pipeline around an engine (mtkit/decode/engine.py)
            from mtkit.decode.torch_engine import TorchEngine
        except ImportError:  # an older checkout: the Translator held the models itself
            tr = Translator(model, vocab, "cpu", **workers)
        else:
            tr = Translator(TorchEngine(model, "cpu"), vocab, **workers)
fields = {k: v for k, v in args["options"].items() if k in DecodeConfig.__dataclass_fields__}
config = DecodeConfig(**fields)
batch_tokens = int(args["options"].get("batch_tokens", 4096))
list(tr.translate_stream(lines[:8], config, batch_tokens))  # warm-up
print("ready", flush=True)
for command in sys.stdin:  # one translation of the whole input per "run", until the parent closes stdin
    before = counters()
    start = time.perf_counter()
    out = [t.text for t in tr.translate_stream(lines, config, batch_tokens)]
    seconds = time.perf_counter() - start
    used = totals(before, counters())
    tokens = sum(len(i) for i in tr.vocab.encode_batch(out))
    print(json.dumps({"seconds": seconds, **used, "tokens": tokens,
                      "outputs": out}), flush=True)
'''


def parse_variant(text: str) -> tuple[str, str, dict, dict]:
    """NAME=CODE_DIR[:key=value,...] -> (name, code dir, decoding options, environment variables)."""
    name, _, rest = text.partition("=")
    code, _, opts = rest.partition(":")
    options: dict = {}
    env: dict = {}
    for item in filter(None, opts.split(",")):
        key, _, value = item.partition("=")
        if key.isupper():
            env[key] = value
            continue
        options[key] = (
            int(value) if value.isdigit() else (float(value) if value.replace(".", "", 1).isdigit() else value)
        )
    return name, str(Path(code).resolve()), options, env


def spm_for_random_model(tmp: Path, data: Path) -> str:
    """A BPE model of 8,000 ids learned as `mtkit bpe --vocab-size 8000` learns it, on 10,000 lines a side."""
    from mtkit.data.vocab import train_bpe

    with gzip.open(data / "train.en.gz", "rt") as en, gzip.open(data / "train.de.gz", "rt") as de:
        pairs = itertools.chain(itertools.islice(en, 10_000), itertools.islice(de, 10_000))
        lines = [line.rstrip("\n") for line in pairs]
    (tmp / "spm.model").write_bytes(train_bpe(lines, vocab_size=8000))
    return str(tmp / "spm.model")


def start_child(
    args: argparse.Namespace, tmp: Path, spm_path: str, code: str, options: dict, variables: dict
) -> subprocess.Popen:
    """A variant's process: it loads its model, warms up, prints "ready", then translates once per line it reads."""
    options = {"max_len_b": 50 if args.model else 0, **options}
    child = {
        "input": str(tmp / "input.txt"),
        "model": args.model,
        "spm": spm_path,
        "threads": int(options.pop("threads", args.threads)),
        "workers": int(options.pop("workers", 1)),
        "options": options,
        "precision": options.get("precision", "fp32"),
        "bench": str(Path(__file__).resolve().parent),  # where the child imports procstat from
    }
    env = {**os.environ, **variables, "PYTHONPATH": code}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(child)],
        env=env,
        cwd=code,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_ready(name: str, child: subprocess.Popen) -> None:
    line = child.stdout.readline()  # type: ignore[union-attr]
    if line.strip() != "ready":
        raise SystemExit(f"variant {name} failed to start (exit status {child.wait()}); its errors are above.")


def run_once(name: str, child: subprocess.Popen) -> dict:
    """One translation of the input by a variant's process, which waits idle between its turns."""
    child.stdin.write("run\n")  # type: ignore[union-attr]
    child.stdin.flush()  # type: ignore[union-attr]
    line = child.stdout.readline()  # type: ignore[union-attr]
    if not line:
        raise SystemExit(f"variant {name} stopped (exit status {child.wait()}); its errors are above.")
    result: dict = json.loads(line)
    return result


def paired_speedups(seconds: dict[str, list[float]], first: str) -> dict[str, tuple[float, float, float]]:
    """Per variant, (median, lowest, highest) over rounds of first's seconds / its seconds in the same round."""
    return {name: paired_ratio(seconds[first], times) for name, times in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="", help="a trained mtkit model (default: a random small model)")
    parser.add_argument("--variant", action="append", required=True, help="NAME=CODE_DIR[:key=value,...]")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"))
    parser.add_argument(
        "--ref",
        default=str(DATA / "test_2016_flickr.de.gz"),
        help="references for sacreBLEU (with --model; '' for none)",
    )
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="decode_ab"))
    opener = gzip.open if args.input.endswith(".gz") else open
    with opener(args.input, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in itertools.islice(f, args.limit)]
    (tmp / "input.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spm_path = "" if args.model else spm_for_random_model(tmp, Path(args.input).parent)
    variants = [parse_variant(v) for v in args.variant]
    children = {
        name: start_child(args, tmp, spm_path, code, options, variables) for name, code, options, variables in variants
    }
    best: dict[str, dict] = {}
    seconds: dict[str, list[float]] = {name: [] for name in children}
    try:
        for name, child in children.items():  # every model loaded and warmed up before the first round
            wait_ready(name, child)
        for turn in range(args.rounds):
            for name, _, _, _ in variants if turn % 2 == 0 else variants[::-1]:
                result = run_once(name, children[name])
                seconds[name].append(result["seconds"])
                print(
                    f"  {name}: {len(lines) / result['seconds']:.1f} sent/s, "
                    f"{len(lines) / result['cpu_seconds']:.1f} sent/CPU-s ({result['system_cpu_seconds']:.2f} s in "
                    f"the kernel, {result['minor_faults']} minor page faults), {result['peak_rss_mib']:.0f} MiB",
                    flush=True,
                )
                if name not in best or result["cpu_seconds"] < best[name]["cpu_seconds"]:
                    best[name] = result
    finally:
        for child in children.values():
            child.stdin.close()  # type: ignore[union-attr]  # the child's loop ends; it exits
        for child in children.values():
            child.wait()
    paired = paired_speedups(seconds, variants[0][0])
    reference = best[variants[0][0]]
    refs = None
    if args.model and args.ref:
        with (gzip.open if args.ref.endswith(".gz") else open)(args.ref, "rt", encoding="utf-8") as f:
            refs = [line.rstrip("\n") for line in itertools.islice(f, len(lines))]
    summary = {}
    for name, _, options, variables in variants:
        r = best[name]
        same = sum(a == b for a, b in zip(r["outputs"], reference["outputs"]))
        summary[name] = {
            "options": options,
            "env": variables,
            "sentences_per_s": round(len(lines) / r["seconds"], 2),
            "tgt_tokens_per_s": round(r["tokens"] / r["seconds"], 1),
            "sentences_per_cpu_s": round(len(lines) / r["cpu_seconds"], 2),
            "cpu_speedup_vs_first": round(reference["cpu_seconds"] / r["cpu_seconds"], 3),
            "system_cpu_s": round(r["system_cpu_seconds"], 2),
            "minor_faults": r["minor_faults"],
            "peak_rss_mib": round(r["peak_rss_mib"], 1),
            "same_output_as_first": same,
            "speedup_vs_first": round(reference["seconds"] / r["seconds"], 3),
            "paired_speedup_vs_first": round(paired[name][0], 3),
            "paired_speedup_range": [round(x, 3) for x in paired[name][1:]],
            "rounds_seconds": [round(x, 3) for x in seconds[name]],
        }
        if refs is not None:
            import sacrebleu

            summary[name]["bleu"] = round(sacrebleu.corpus_bleu(r["outputs"], [refs]).score, 2)
        print(
            f"{name:>16}: {summary[name]['sentences_per_s']:8.1f} sent/s {summary[name]['tgt_tokens_per_s']:9.1f} "
            f"tok/s  {summary[name]['sentences_per_cpu_s']:8.1f} sent/CPU-s  {r['minor_faults'] / 1000:6.1f}k faults  "
            f"peak RSS {r['peak_rss_mib']:6.0f} MiB  "
            f"x{summary[name]['speedup_vs_first']:.2f} wall (paired x{paired[name][0]:.3f}, "
            f"{paired[name][1]:.3f}-{paired[name][2]:.3f}) x{summary[name]['cpu_speedup_vs_first']:.2f} CPU  "
            f"same output {same}/{len(lines)}  BLEU {summary[name].get('bleu', '-')}"
        )
    print(
        json.dumps(
            {
                "bench": "decode_ab",
                "model": args.model or "random small",
                "sentences": len(lines),
                "threads": args.threads,
                "rounds": args.rounds,
                "variants": summary,
            }
        )
    )


if __name__ == "__main__":
    main()
