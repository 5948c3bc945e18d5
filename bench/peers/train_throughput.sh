#!/usr/bin/env bash
# fairseq 0.12's training throughput on Multi30k (prep_multi30k.sh): N updates of batches of 4,096 tokens on 2
# threads, the first 10 untimed; prints the per-interval log, then one "steady" line (target tokens/s, s/update)
# and the peak RSS, which bench/train_throughput.py --fairseq reads.
#   bash bench/peers/train_throughput.sh small 60      # or: big 20 (the paper's base)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEERS=${PEERS:-/tmp/peers}
name=${1:?usage: train_throughput.sh small|big [UPDATES]}
updates=${2:-40}
# shellcheck source=SCRIPTDIR/arch.sh
source "$here/arch.sh"
peer_arch "$name"
# shellcheck disable=SC1091
source "$PEERS/venv/bin/activate"
export OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2}
out=$PEERS/results
mkdir -p "$out"
log=$out/train_throughput_$name.log
/usr/bin/time -v -o "$out/train_throughput_$name.time" \
    fairseq-train "$PEERS/multi30k/bin" "${ARCH[@]}" --share-all-embeddings --cpu --seed 1 \
    --optimizer adam --adam-betas '(0.9, 0.98)' --lr 7e-4 --lr-scheduler inverse_sqrt --warmup-updates 4000 \
    --warmup-init-lr 1e-7 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
    --max-tokens 4096 --max-update "$updates" --log-interval 10 --log-format simple --num-workers 0 \
    --no-save --disable-validation --save-dir "$out/unused" >"$log" 2>&1
python - "$log" "$out/train_throughput_$name.time" <<'PY'
import re
import sys

log, timing = sys.argv[1], sys.argv[2]
rows = []
for line in open(log, encoding="utf-8"):
    if "| train_inner |" in line:
        fields = dict(re.findall(r"(\w+)=([-\d.e+]+)", line.split("train_inner", 1)[1]))
        rows.append({k: float(v) for k, v in fields.items()})
if not rows:
    sys.exit(f"no train_inner lines in {log}")
# fairseq prints updates/s with two decimals only: seconds per update are its tokens per batch over tokens/s.
for r in rows:
    print(f"update {int(r['num_updates']):>5}: {r['wps']:>8.1f} tgt tok/s, {r['wpb'] / r['wps']:.2f} s/update")
steady = rows[1:] or rows  # the first interval (updates 1-10) warms up
tokens = sum(10 * r["wpb"] for r in steady)
seconds = sum(10 * r["wpb"] / r["wps"] for r in steady)
first, last = int(steady[0]["num_updates"]) - 9, int(steady[-1]["num_updates"])
print(f"steady (updates {first}-{last}): {tokens / seconds:.0f} tgt tok/s, {seconds / (10 * len(steady)):.2f} s/update")
for line in open(timing, encoding="utf-8"):
    if "Maximum resident set size" in line or "Elapsed (wall" in line:
        print(line.strip())
PY
