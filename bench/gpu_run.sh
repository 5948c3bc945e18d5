#!/usr/bin/env bash
# The GPU checks in one pass, for a GPU machine whose time is short: eager training throughput of base and
# big in bf16 at 4,096 tokens a batch and at the paper's ~25k-token update in as few steps as fit (--max-tokens
# auto), with MFU(6N), s/update and peak GPU memory; the compiled step of base at that update (torch.compile,
# without CUDA graphs unless COMPILE_MODE says otherwise); the Multi30k recipe trained (--minutes 1, --precision
# and --compile auto), averaged, decoded and scored on the GPU; and decoding on the GPU
# (bench/translate_speed.py --device cuda, mtkit fp32 and bf16) of the assets' model, and of a distilled student
# when the assets hold one.
# At most 8.5 minutes of parts (75 + 75 + 150 + 140 + 35 + 35 s limits). Every part has its own time limit and
# the script goes on after a part fails, so that one call gives every figure it can; each part's output is also
# kept in $OUT, at most 7 files (the device tool brings back 8: room for `... | tee $OUT/all.txt`).
#
#   ASSETS=DIR OUT=DIR bash bench/gpu_run.sh
#
# ASSETS holds what the machine cannot download: model.pt (a Multi30k model, e.g. the recipe's), multi30k/ (the
# six .gz files of mtkit/data/multi30k/*.{en,de}.gz), optionally student.pt (a distilled student of the same
# data) and whl/ (wheels of packages missing there,
# installed with --no-deps first; the script's first lines name any of mtkit's dependencies that do not import).
# mtkit itself runs from this checkout (PYTHONPATH), through a `mtkit` shim.
# DEVICE (default cuda), MINUTES (the recipe's training budget, default 1), STEPS (timed updates per training
# configuration, after WARMUP untimed: defaults 20 and 10) and COMPILE_MODE (torch.compile's mode in the compile
# part, default "default") can be set, and for a dry run of the whole script on a CPU (tests/test_bench_scripts.py)
# also PRESETS ("base big"), PRECISION (bf16), COMPILES ("off on": the compile part measures those not off and is
# skipped when none are), TRAIN_ARGS (more bench/train_throughput.py options, e.g. a smaller synthetic corpus),
# RECIPE_ARGS (more run.sh options, e.g. --dry-run), SYSTEMS (the decoding rows, "mtkit-fp32,mtkit-bf16") and
# DECODE_ARGS (more bench/translate_speed.py options, e.g. --limit 4).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
assets=$(cd "${ASSETS:?set ASSETS to the assets directory}" && pwd)
out=${OUT:?set OUT to a directory for the logs}
device=${DEVICE:-cuda} minutes=${MINUTES:-1} steps=${STEPS:-20} warmup=${WARMUP:-10}
precision=${PRECISION:-bf16} systems=${SYSTEMS:-mtkit-fp32,mtkit-bf16}
read -ra presets <<<"${PRESETS:-base big}"
read -ra compiles <<<"${COMPILES:-off on}"
read -ra train_args <<<"${TRAIN_ARGS:-}"
read -ra recipe_args <<<"${RECIPE_ARGS:-}"
read -ra decode_args <<<"${DECODE_ARGS:-}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
python=${PYTHON:-python3}

part() {  # part NAME SECONDS COMMAND...: run it with a limit, its output to the log and $OUT/NAME.txt
    local name=$1 limit=$2
    shift 2
    printf '\n=== %s (limit %s s, %s)\n' "$name" "$limit" "$(date +%T)"
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
    printf '=== %s: exit %s after %s s\n' "$name" "${PIPESTATUS[0]}" "$((SECONDS - start))"
}

printf '=== machine\n'
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 || true
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
lscpu | grep -E '^(Model name|CPU\(s\))' || true
if compgen -G "$assets/whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$assets"/whl/*.whl &&
        export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
# mtkit's own dependencies (pyproject.toml) that this machine's Python cannot import: the parts that need them fail
# (the recipe's `mtkit prepare` needs sacremoses, which GPU images often lack), so say so once, first.
"$python" - "$root/pyproject.toml" <<'PY' || true
import importlib, re, sys
try:
    import tomllib
except ImportError:  # Python 3.10
    sys.exit(print("=== packages: not checked (Python 3.10 has no tomllib)"))
with open(sys.argv[1], "rb") as f:
    names = [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in tomllib.load(f)["project"]["dependencies"]]
missing = []
for name in names:
    try:
        importlib.import_module({"pyyaml": "yaml"}.get(name, name))
    except ImportError:
        missing.append(name)
print(f"=== packages: missing {', '.join(missing)} (put their wheels in ASSETS/whl)" if missing else
      "=== packages: all of mtkit's dependencies import")
PY
shim=$(mktemp -d)
printf '#!/bin/sh\nexec %s -m mtkit "$@"\n' "$python" >"$shim/mtkit"
printf '#!/bin/sh\nexec %s "$@"\n' "$python" >"$shim/python"  # the recipe calls `python`; some images have only python3
chmod +x "$shim/mtkit" "$shim/python"
export PATH=$shim:$PATH

bench=("$python" "$root/bench/train_throughput.py" --device "$device" --steps "$steps" --warmup-steps "$warmup"
    --precision "$precision" "${train_args[@]}")
eager=("${bench[@]}" --compile off)
for preset in "${presets[@]}"; do eager+=(--preset "$preset"); done
# Eager base and big in bf16 at 4,096 tokens a batch and with --max-tokens auto (the paper's ~25k-token update in as
# few steps as the probe finds fit: one on an H200, its first log line says why; the probe's trials are inside the
# part's limit); MFU(6N) = 6 x params x target tok/s / peak. About 25 s a configuration on an H200.
part train-4096 75 "${eager[@]}" --max-tokens 4096
part train-auto 75 "${eager[@]}" --max-tokens auto
# The compiled step, base at the ~25k update, against train-auto's eager line. The first H200 run compiled in
# mode reduce-overhead (CUDA graphs, one recording per batch shape): it died after ~140 s with no Python error,
# so this part compiles without CUDA graphs unless COMPILE_MODE says otherwise; the bench names how a failed
# configuration ended (exit status or signal).
settings=()
for setting in "${compiles[@]}"; do [[ $setting == off ]] || settings+=(--compile "$setting"); done
if ((${#settings[@]})); then
    part compile 150 env MTKIT_COMPILE_MODE="${COMPILE_MODE:-default}" "${bench[@]}" --preset "${presets[0]}" \
        "${settings[@]}" --max-tokens auto
fi

recipe=$(mktemp -d)/multi30k
part recipe 140 bash "$root/recipes/multi30k-en-de/run.sh" --minutes "$minutes" --mirror "$assets/multi30k" \
    --out "$recipe" "${recipe_args[@]}"
{  # the recipe's table and its run's first log line (precision and compile, as auto decided them), one file
    cat "$recipe/results.md" 2>/dev/null
    printf '\n## First log line\n\n'
    grep -h '"event": "start"' "$recipe"/*/metrics.jsonl 2>/dev/null | head -1
} | tee "$out/recipe-results.md" | tail -1

# Decoding on the device, mtkit fp32 and bf16 at the default 4,096-token batches (the first H200 run: 1,079 and
# 928 sentences/s; at 16,384 tokens 2,117 and 1,210), and a distilled student when ASSETS holds one (student.pt,
# e.g. recipes/multi30k-distill's), greedy as it decodes by default.
part decode-4096 35 "$python" "$root/bench/translate_speed.py" --model "$assets/model.pt" --device "$device" \
    --input "$assets/multi30k/test_2016_flickr.en.gz" --ref "$assets/multi30k/test_2016_flickr.de.gz" \
    --systems "$systems" "${decode_args[@]}"
if [[ -f $assets/student.pt ]]; then
    part decode-student 35 "$python" "$root/bench/translate_speed.py" --model "$assets/student.pt" \
        --device "$device" --input "$assets/multi30k/test_2016_flickr.en.gz" \
        --ref "$assets/multi30k/test_2016_flickr.de.gz" --systems "$systems" --beam 1 "${decode_args[@]}"
fi

printf '\n=== done (%s)\n' "$(date +%T)"
