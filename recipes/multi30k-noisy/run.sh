#!/usr/bin/env bash
# Multi30k-noisy: what web-like noise costs a Multi30k En-De model, and how much of it `mtkit clean` wins back.
#   bash run.sh --data DIR                        # three 25-minute trainings: clean, noisy, cleaned
#   bash run.sh --data DIR --steps 1590            # 1,590 updates each instead of 25 minutes (any load)
#   bash run.sh --data DIR --systems 'noisy cleaned'  # only those (the clean one is the Multi30k recipe's run)
#   bash run.sh --data DIR --dry-run              # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

usage() {
    cat <<EOF
usage: run.sh --data DIR [--minutes M | --steps N] [--seed N] [--max-char-ratio R] [--systems S] [--out DIR] [--dry-run]

Builds Multi30k-noisy (bench/multi30k_noisy.py: the 29,000 training pairs with about 30% noise:
misaligned pairs, French or Czech targets, copies, truncations, HTML, duplicates), cleans it with
mtkit clean --all --max-char-ratio R, and reports what each rule removed (OUT/report.md). Then trains
the Multi30k recipe's 'small' model for M minutes on each of the clean, the noisy and the cleaned
training sets (the same dev and test sets), averages its last 5 checkpoints, translates
test_2016_flickr (beam 4, alpha 1.4) and scores it (OUT/SYSTEM/scores.test.json).

  --data DIR          a directory holding multi30k-en-de/ and multi30k-fr-cs/ with Multi30k's .gz files
  --minutes M         training budget of each run in minutes (default 25)
  --steps N           instead, N updates each (checkpoints every N/25): the same models whatever else
                      the machine runs, e.g. the update count the 25 minutes reach on this CPU
  --seed N            seed of the noise and of each run (default 1)
  --max-char-ratio R  mtkit clean's character ratio limit (default 2)
  --systems S         which of clean, noisy and cleaned to train, space-separated (default: all three;
                      the clean one trains exactly as recipes/multi30k-en-de does, whose run can stand in)
  --out DIR           everything the recipe makes (default: $here/out)
  --dry-run           print every command, one a line, and run none
EOF
}

die() {
    printf 'run.sh: error: %s\n' "$1" >&2
    exit 2
}

data="" minutes=25 steps="" seed=1 ratio=2 out="" systems="clean noisy cleaned"
DRY_RUN=0
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        --data | --minutes | --steps | --seed | --max-char-ratio | --systems | --out)
            if (($# < 2)) || [[ -z $2 || $2 == --* ]]; then die "$1 needs a value"; fi
            case $1 in
                --data) data=$2 ;; --minutes) minutes=$2 ;; --steps) steps=$2 ;; --seed) seed=$2 ;; --max-char-ratio) ratio=$2 ;;
                --systems) systems=$2 ;; --out) out=$2 ;;
            esac
            shift ;;
        *) die "unknown argument '$1' (run.sh --help lists the options)" ;;
    esac
    shift
done
[[ -n $data ]] || die "give --data DIR, the directory holding multi30k-en-de/ and multi30k-fr-cs/"
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--minutes must be a number, got '$minutes'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$seed'"
[[ -z $steps ]] || is_count "$steps" || die "--steps must be a positive whole number, got '$steps'"
read -ra chosen <<<"$systems"
((${#chosen[@]})) || die "--systems names none of clean, noisy and cleaned"
for system in "${chosen[@]}"; do
    [[ $system == clean || $system == noisy || $system == cleaned ]] ||
        die "--systems takes clean, noisy and cleaned, got '$system'"
done
out=${out:-$here/out}
# recipes/multi30k-en-de/run.sh's cadence: a checkpoint every 1/25 of the budget, the last 5 averaged.
training_budget "$minutes" "$steps"  # BUDGET: the options of either budget (../lib.sh)
m30k=$data/multi30k-en-de

step "build noisy" python "$root/bench/multi30k_noisy.py" build --data "$data" --out "$out/noisy" --seed "$seed"
step "clean noisy" mtkit clean "$out/noisy/train.en" "$out/noisy/train.de" --out "$out/cleaned/train" --all \
    --max-char-ratio "$ratio"
step_to "report" "$out/report.md" python "$root/bench/multi30k_noisy.py" report "$out/noisy" --all \
    --max-char-ratio "$ratio"
for system in "${chosen[@]}"; do
    case $system in
        clean) train=("$m30k/train.en.gz" "$m30k/train.de.gz") ;;
        noisy) train=("$out/noisy/train.en" "$out/noisy/train.de") ;;
        cleaned) train=("$out/cleaned/train.en" "$out/cleaned/train.de") ;;
    esac
    dir=$out/$system
    step "prepare $system" mtkit prepare custom --out "$dir/data" --train-src "${train[0]}" --train-tgt "${train[1]}" \
        --valid-src "$m30k/val.en.gz" --valid-tgt "$m30k/val.de.gz" \
        --test-src "$m30k/test_2016_flickr.en.gz" --test-tgt "$m30k/test_2016_flickr.de.gz"
    step "bpe $system" mtkit bpe "$dir/data" --vocab-size 8000
    # recipes/multi30k-en-de/run.sh's training, averaging, decoding and scoring, unchanged.
    step "train $system" mtkit train "$dir/data" --out "$dir/run" --preset small --max-tokens 2048 --warmup 400 \
        --lr-scale 0.64 --dropout 0.1 --label-smoothing 0.1 "${BUDGET[@]}" --lr-cooldown 0.2 --seed "$seed" \
        --keep-last 5 --valid-every 200 --valid-bleu 500 --log-every 50
    step "average $system" mtkit average "$dir/run" --last 5 --output "$dir/averaged.pt"
    step "translate $system" mtkit translate --model "$dir/averaged.pt" --input "$dir/data/raw/test.en" \
        --output "$dir/test.de" --beam 4 --alpha 1.4 --early-stop exact
    step_to "score $system" "$dir/scores.test.json" mtkit score "$dir/test.de" --ref "$dir/data/raw/test.de" \
        --lang de --json
done
((DRY_RUN == 0)) || exit 0
for system in "${chosen[@]}"; do
    printf '%s: %s\n' "$system" "$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["scores"][0]["text"])' "$out/$system/scores.test.json")"
done
