#!/usr/bin/env bash
# Issue 9's GPU checks in one pass, for a lent GPU machine whose time is short: the attention kernels at
# translation's changing shapes, training throughput (base and big in bf16, fp32 and fp16, bf16 at a larger batch),
# the Multi30k recipe trained, averaged, decoded and scored on the GPU, and decoding speed by precision.
# About 8 minutes on an H200, the machine's start not counted. Every part has its own time limit and the script
# goes on after a part fails, so that one call gives every figure it can; each part's output is also kept in
# $OUT, 7 files (the device tool brings back 8: room for the whole log, `... | tee $OUT/all.txt`).
#
#   ASSETS=DIR OUT=DIR bash bench/gpu_run.sh
#
# ASSETS holds what the machine cannot download: model.pt (a Multi30k model, e.g. the recipe's), multi30k/ (the
# six .gz files of ../shared/data/multi30k-en-de) and, optionally, whl/ (wheels of packages missing there,
# installed with --no-deps first). mtkit itself runs from this checkout (PYTHONPATH), through a `mtkit` shim.
# DEVICE (default cuda), MINUTES (the recipe's training budget, default 1.5) and STEPS (timed updates per training
# configuration, after 10 untimed; default 30) can be set, e.g. for a dry run of the script on a CPU.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
assets=$(cd "${ASSETS:?set ASSETS to the assets directory}" && pwd)
out=${OUT:?set OUT to a directory for the logs}
device=${DEVICE:-cuda} minutes=${MINUTES:-1.5} steps=${STEPS:-30}
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
shim=$(mktemp -d)
printf '#!/bin/sh\nexec %s -m mtkit "$@"\n' "$python" >"$shim/mtkit"
printf '#!/bin/sh\nexec %s "$@"\n' "$python" >"$shim/python"  # the recipe calls `python`; some images have only python3
chmod +x "$shim/mtkit" "$shim/python"
export PATH=$shim:$PATH

bench=("$python" "$root/bench/train_throughput.py" --device "$device" --steps "$steps" --warmup-steps 10)
[[ $device != cuda* ]] || part attention 60 "$python" "$root/bench/cuda_attention.py"
# fp16 (with its loss scaler) runs only on CUDA, and had not run anywhere when this script was written.
precisions=(--precision bf16 --precision fp32)
[[ $device != cuda* ]] || precisions+=(--precision fp16)
part train-4096 200 "${bench[@]}" --preset base --preset big "${precisions[@]}" --max-tokens 4096
part train-bf16-16384 120 "${bench[@]}" --preset base --preset big --precision bf16 --max-tokens 16384

recipe=$(mktemp -d)/multi30k
part recipe 240 bash "$root/recipes/multi30k-en-de/run.sh" --minutes "$minutes" --mirror "$assets/multi30k" \
    --out "$recipe"
cp "$recipe/results.md" "$out/recipe-results.md" 2>/dev/null

speed=("$python" "$root/bench/translate_speed.py" --model "$assets/model.pt" --device "$device"
    --input "$assets/multi30k/test_2016_flickr.en.gz" --ref "$assets/multi30k/test_2016_flickr.de.gz")
systems=mtkit-fp32,mtkit-bf16,mtkit-fp16
[[ $device == cuda* ]] || systems=mtkit-fp32
part decode-4096 90 "${speed[@]}" --systems "$systems" --batch-tokens 4096
part decode-16384 90 "${speed[@]}" --systems "$systems" --batch-tokens 16384
printf '\n=== done (%s)\n' "$(date +%T)"
