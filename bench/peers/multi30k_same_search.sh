#!/usr/bin/env bash
# fairseq 0.12 against an mtkit run of the Multi30k recipe, like for like: the same checkpoint choice (each
# system's last checkpoint) and the same search (beam 4, length normalisation |Y|^alpha: fairseq's --lenpen,
# mtkit's --lenpen fairseq), with alpha chosen on the validation set for each system separately from ALPHAS, and
# beside it each system at its own default search (fairseq: --lenpen 1; mtkit: its GNMT penalty, alpha 0.6).
# test_2016_flickr is translated once per system and setting, after the choice; sacreBLEU scores the detokenized
# output. fairseq trains as multi30k_budget.sh trains it (run that first, same MINUTES and SEED).
#   bash bench/peers/multi30k_same_search.sh MTKIT_RUN_DIR [MINUTES] [SEED]
#   (MTKIT_RUN_DIR: recipes/multi30k-en-de's OUT/run, trained with the same budget and seed)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
PEERS=${PEERS:-/tmp/peers}
mtkit_run=${1:?give the mtkit run directory (recipes/multi30k-en-de OUT/run)}
minutes=${2:-25}
seed=${3:-1}
alphas=(${ALPHAS:-0.6 1.0 1.4})
work=$PEERS/multi30k
run=$PEERS/results/multi30k_budget_seed$seed
[[ -f $run/checkpoint_last.pt ]] || { echo "no fairseq run in $run: bash $here/multi30k_budget.sh $minutes $seed" >&2; exit 2; }
data=$root/mtkit/data/multi30k
out=$PEERS/results/same_search_seed$seed
mkdir -p "$out"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2}

bleu() {  # bleu HYP REF: sacreBLEU's score alone
    "$PEERS/venv/bin/sacrebleu" "$2" -i "$1" -m bleu -b
}
fairseq_translate() {  # fairseq_translate SUBSET ALPHA OUT
    "$PEERS/venv/bin/fairseq-generate" "$work/bin" --path "$run/checkpoint_last.pt" --gen-subset "$1" --beam 4 \
        --lenpen "$2" --batch-size 64 --cpu --remove-bpe sentencepiece >"$3.log"
    grep '^H-' "$3.log" | sed 's/^H-//' | sort -n | cut -f3 >"$3"
}
mtkit_translate() {  # mtkit_translate SPLIT_FILE ALPHA OUT [more mtkit translate options]
    local input=$1 alpha=$2 hyp=$3
    shift 3
    python -m mtkit translate --model "$mtkit_run/checkpoint_last.pt" --input "$input" --output "$hyp" --beam 4 \
        --alpha "$alpha" "$@"
}
zcat "$data/val.de.gz" >"$out/val.de"
zcat "$data/val.en.gz" >"$out/val.en"
zcat "$data/test_2016_flickr.de.gz" >"$out/test.de"
zcat "$data/test_2016_flickr.en.gz" >"$out/test.en"

best_fs="" best_fs_bleu=-1 best_mt="" best_mt_bleu=-1
for alpha in "${alphas[@]}"; do
    fairseq_translate valid "$alpha" "$out/fairseq.val.$alpha"
    b=$(bleu "$out/fairseq.val.$alpha" "$work/raw/val.de")
    echo "dev: fairseq lenpen $alpha: $b"
    if python -c "import sys; sys.exit(not $b > $best_fs_bleu)"; then best_fs=$alpha best_fs_bleu=$b; fi
    mtkit_translate "$out/val.en" "$alpha" "$out/mtkit.val.$alpha" --lenpen fairseq
    b=$(bleu "$out/mtkit.val.$alpha" "$out/val.de")
    echo "dev: mtkit --lenpen fairseq --alpha $alpha: $b"
    if python -c "import sys; sys.exit(not $b > $best_mt_bleu)"; then best_mt=$alpha best_mt_bleu=$b; fi
done
fairseq_translate test "$best_fs" "$out/fairseq.test.best"
fairseq_translate test 1 "$out/fairseq.test.default"
mtkit_translate "$out/test.en" "$best_mt" "$out/mtkit.test.best" --lenpen fairseq
mtkit_translate "$out/test.en" 0.6 "$out/mtkit.test.default"
printf '| system | search | test_2016_flickr sacreBLEU |\n|---|---|---|\n'
printf '| fairseq 0.12, last checkpoint | beam 4, lenpen %s (dev-best) | %s |\n' "$best_fs" "$(bleu "$out/fairseq.test.best" "$out/test.de")"
printf '| mtkit, last checkpoint | beam 4, --lenpen fairseq --alpha %s (dev-best) | %s |\n' "$best_mt" "$(bleu "$out/mtkit.test.best" "$out/test.de")"
printf '| fairseq 0.12, last checkpoint | beam 4, lenpen 1 (its default) | %s |\n' "$(bleu "$out/fairseq.test.default" "$out/test.de")"
printf '| mtkit, last checkpoint | beam 4, GNMT alpha 0.6 (its default) | %s |\n' "$(bleu "$out/mtkit.test.default" "$out/test.de")"
