#!/usr/bin/env bash
# Multi30k-noisy: what web-like noise costs a Multi30k En-De model, and how much of it `mtkit clean` wins back.
#   bash run.sh                                   # three 25-minute trainings: clean, noisy, cleaned
#   bash run.sh --steps 1590                      # 1,590 updates each instead of 25 minutes (any load)
#   bash run.sh --systems 'noisy cleaned'         # only those (the clean one is the Multi30k recipe's run)
#   bash run.sh --systems dual                    # the cleaned set cleaned again by dual cross-entropy
#   bash run.sh --dry-run                         # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

usage() {
    cat <<EOF
usage: run.sh [--data DIR] [--minutes M | --steps N] [--seed N] [--max-char-ratio R] [--systems S]
              [--dual-xent-drop SHARE] [--out DIR] [--dry-run]

Builds Multi30k-noisy (noise.py: the 29,000 training pairs with about 30% noise:
misaligned pairs, French or Czech targets, copies, truncations, HTML, duplicates), cleans it with
mtkit clean --all --max-char-ratio R, and reports what each rule removed (OUT/report.md). Then trains
the Multi30k recipe's 'small' model for M minutes on each of the clean, the noisy and the cleaned
training sets (the same dev and test sets), averages its last 5 checkpoints, translates
test_2016_flickr (beam 4, alpha 1.4) and scores it (OUT/SYSTEM/scores.test.json).

The system 'dual' goes one step further: a De->En model trained alike on the cleaned set (OUT/backward)
and the cleaned system's En->De model score every pair the rules keep by dual conditional cross-entropy,
and mtkit clean --dual-xent-drop SHARE drops the worst-scored share (OUT/dual/train, OUT/report-dual.md);
the same model is then trained on what is left. It needs the cleaned system's model: train both at once,
or the cleaned one first.

  --data DIR          Multi30k's files (train, val and test_2016_flickr, .en/.de/.fr/.cs.gz); default: the
                      copy that ships with mtkit (mtkit/data/multi30k)
  --minutes M         training budget of each run in minutes (default 25)
  --steps N           instead, N updates each (checkpoints every N/25): the same models whatever else
                      the machine runs, e.g. the update count the 25 minutes reach on this CPU
  --seed N            seed of the noise and of each run (default 1)
  --max-char-ratio R  mtkit clean's character ratio limit (default 2)
  --systems S         which of clean, noisy, cleaned and dual to train, space-separated (default: the
                      first three; the clean one trains exactly as recipes/multi30k-en-de does, whose run
                      can stand in)
  --dual-xent-drop S  the share of the rule-cleaned pairs the dual system drops (default 0.04)
  --out DIR           everything the recipe makes (default: $here/out)
  --dry-run           print every command, one a line, and run none
EOF
}

die() {
    printf 'run.sh: error: %s\n' "$1" >&2
    exit 2
}

data=$root/mtkit/data/multi30k minutes=25 steps="" seed=1 ratio=2 out="" systems="clean noisy cleaned" drop=0.04
DRY_RUN=0
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        --data | --minutes | --steps | --seed | --max-char-ratio | --systems | --dual-xent-drop | --out)
            if (($# < 2)) || [[ -z $2 || $2 == --* ]]; then die "$1 needs a value"; fi
            case $1 in
                --data) data=$2 ;; --minutes) minutes=$2 ;; --steps) steps=$2 ;; --seed) seed=$2 ;; --max-char-ratio) ratio=$2 ;;
                --systems) systems=$2 ;; --dual-xent-drop) drop=$2 ;; --out) out=$2 ;;
            esac
            shift ;;
        *) die "unknown argument '$1' (run.sh --help lists the options)" ;;
    esac
    shift
done
((DRY_RUN)) || [[ -f $data/train.cs.gz && -f $data/test_2016_flickr.de.gz ]] ||
    die "$data does not hold Multi30k's files (train.{en,de,fr,cs}.gz, val and test_2016_flickr .en/.de.gz)"
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--minutes must be a number, got '$minutes'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$seed'"
[[ -z $steps ]] || is_count "$steps" || die "--steps must be a positive whole number, got '$steps'"
read -ra chosen <<<"$systems"
((${#chosen[@]})) || die "--systems names none of clean, noisy, cleaned and dual"
for system in "${chosen[@]}"; do
    [[ $system == clean || $system == noisy || $system == cleaned || $system == dual ]] ||
        die "--systems takes clean, noisy, cleaned and dual, got '$system'"
done
[[ $drop =~ ^0?[.][0-9]+$ ]] || die "--dual-xent-drop must be a share between 0 and 1, e.g. 0.04, got '$drop'"
ordered=()  # dual needs cleaned's model: train in this order whatever the order given
for system in clean noisy cleaned dual; do
    [[ " ${chosen[*]} " == *" $system "* ]] && ordered+=("$system")
done
chosen=("${ordered[@]}")
out=${out:-$here/out}
# recipes/multi30k-en-de/run.sh's cadence: a checkpoint every 1/25 of the budget, the last 5 averaged.
if [[ " ${chosen[*]} " == *" dual "* && " ${chosen[*]} " != *" cleaned "* ]] && ((DRY_RUN == 0)) &&
    [[ ! -f $out/cleaned/averaged.pt ]]; then
    die "the dual system needs the cleaned system's model ($out/cleaned/averaged.pt): --systems 'cleaned dual'"
fi
training_budget "$minutes" "$steps"  # BUDGET: the options of either budget (../lib.sh)
m30k=$data

step "build noisy" python "$here/noise.py" build --data "$data" --out "$out/noisy" --seed "$seed"
step "clean noisy" mtkit clean "$out/noisy/train.en" "$out/noisy/train.de" --out "$out/cleaned/train" --all \
    --max-char-ratio "$ratio"
step_to "report" "$out/report.md" python "$here/noise.py" report "$out/noisy" --all \
    --max-char-ratio "$ratio"
# train_system NAME SRC TGT VALID_SRC VALID_TGT TEST_SRC TEST_TGT: the Multi30k recipe's training, averaging,
# decoding and scoring, unchanged, on one training set (OUT/NAME)
train_system() {
    local name=$1 dir=$out/$1 src_lang=${6%.gz} lang=${7%.gz}
    src_lang=${src_lang##*.} lang=${lang##*.}
    step "prepare $name" mtkit prepare custom --out "$dir/data" --train-src "$2" --train-tgt "$3" \
        --valid-src "$4" --valid-tgt "$5" --test-src "$6" --test-tgt "$7"
    step "bpe $name" mtkit bpe "$dir/data" --vocab-size 8000
    step "train $name" mtkit train "$dir/data" --out "$dir/run" --preset small --max-tokens 2048 --warmup 400 \
        --lr-scale 0.64 --dropout 0.1 --label-smoothing 0.1 "${BUDGET[@]}" --lr-cooldown 0.2 --seed "$seed" \
        --keep-last 5 --valid-every 200 --valid-bleu 500 --log-every 50
    step "average $name" mtkit average "$dir/run" --last 5 --output "$dir/averaged.pt"
    step "translate $name" mtkit translate --model "$dir/averaged.pt" --input "$dir/data/raw/test.$src_lang" \
        --output "$dir/test.$lang" --beam 4 --alpha 1.4 --early-stop exact
    step_to "score $name" "$dir/scores.test.json" mtkit score "$dir/test.$lang" --ref "$dir/data/raw/test.$lang" \
        --lang "$lang" --json
}
heldout=("$m30k/val.en.gz" "$m30k/val.de.gz" "$m30k/test_2016_flickr.en.gz" "$m30k/test_2016_flickr.de.gz")
for system in "${chosen[@]}"; do
    case $system in
        clean) train_system clean "$m30k/train.en.gz" "$m30k/train.de.gz" "${heldout[@]}" ;;
        noisy) train_system noisy "$out/noisy/train.en" "$out/noisy/train.de" "${heldout[@]}" ;;
        cleaned) train_system cleaned "$out/cleaned/train.en" "$out/cleaned/train.de" "${heldout[@]}" ;;
        dual)
            # The backward model: De->En, trained alike on the cleaned set; it is scored on the test set too.
            train_system backward "$out/cleaned/train.de" "$out/cleaned/train.en" "$m30k/val.de.gz" "$m30k/val.en.gz" \
                "$m30k/test_2016_flickr.de.gz" "$m30k/test_2016_flickr.en.gz"
            models=("$out/cleaned/averaged.pt" "$out/backward/averaged.pt")
            step "clean dual" mtkit clean "$out/noisy/train.en" "$out/noisy/train.de" --out "$out/dual/train" --all \
                --max-char-ratio "$ratio" --dual-xent "${models[@]}" --dual-xent-drop "$drop"
            step_to "report dual" "$out/report-dual.md" python "$here/noise.py" report "$out/noisy" \
                --all --max-char-ratio "$ratio" --dual-xent "${models[@]}" --dual-xent-drop "$drop"
            train_system dual "$out/dual/train.en" "$out/dual/train.de" "${heldout[@]}"
            ;;
    esac
done
((DRY_RUN == 0)) || exit 0
for system in "${chosen[@]}"; do
    printf '%s: %s\n' "$system" "$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["scores"][0]["text"])' "$out/$system/scores.test.json")"
done
