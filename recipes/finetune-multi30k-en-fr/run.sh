#!/usr/bin/env bash
# Multi30k English->French from a few thousand pairs: an English->German model fine-tuned on them, against the same
# pairs trained from scratch, at equal updates.
#   bash run.sh --mirror DIR1 --mirror DIR2      # the corpus files from there, not the copy mtkit ships
#   bash run.sh --base MODEL ...      # start from this En-De model instead of training one
#   bash run.sh --dry-run             # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

usage() {
    cat <<EOF
usage: run.sh [--base MODEL] [--base-updates B] [--pairs N] [--updates U] [--vocab-size V] [--seed N]
              [--out DIR] [--mirror DIR]... [--dry-run]

Trains an English->German 'small' model on Multi30k (B updates with recipes/multi30k-en-de --quick's
settings; or takes --base), prepares Multi30k En-Fr and keeps its first N training pairs (the full
validation and test sets), then trains two models of U updates each on those pairs: the En-De model
fine-tuned (mtkit bpe --from, mtkit train --init: its 8,000-piece En-De vocabulary, its
architecture) and a 'small' model from scratch (its own V-piece BPE learned on the N pairs), with
the same settings otherwise. The two runs alternate in two rounds (A B B A: each is resumed for its
second half), so that a shared machine's load falls on both. Both translate test_2016_flickr
(beam 4) and are scored with sacreBLEU; OUT/results.md has the table.

  --base MODEL      the English->German model to fine-tune (default: train one, OUT/run-en-de)
  --base-updates B  updates of the En-De model (default 600)
  --pairs N         En-Fr training pairs kept, the first N of Multi30k's 29,000 (default 3000)
  --updates U       updates of each of the two runs, even (default 400)
  --vocab-size V    the from-scratch model's joint BPE (default 2000)
  --seed N          seed for weights, dropout and batch order (default 1)
  --out DIR         everything the recipe makes (default: $here/out)
  --mirror DIR      read the corpus files from DIR instead of the copy that ships with mtkit; give it twice
                    to read from two directories
  --dry-run         print every command, one a line, and run none
EOF
}

die() {
    printf 'run.sh: error: %s\n' "$1" >&2
    exit 2
}

base="" base_updates=600 pairs=3000 updates=400 vocab=2000 seed=1 out="" mirror_opt=()
DRY_RUN=0
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        --base | --base-updates | --pairs | --updates | --vocab-size | --seed | --out | --mirror)
            if (($# < 2)) || [[ -z $2 || $2 == --* ]]; then die "$1 needs a value"; fi
            case $1 in
                --base) base=$2 ;; --base-updates) base_updates=$2 ;; --pairs) pairs=$2 ;; --updates) updates=$2 ;;
                --vocab-size) vocab=$2 ;; --seed) seed=$2 ;; --out) out=$2 ;; --mirror) mirror_opt+=(--mirror "$2") ;;
            esac
            shift ;;
        *) die "unknown argument '$1' (run.sh --help lists the options)" ;;
    esac
    shift
done
[[ $base_updates =~ ^[1-9][0-9]*$ ]] || die "--base-updates must be a whole number above 0, got '$base_updates'"
[[ $pairs =~ ^[1-9][0-9]*$ ]] || die "--pairs must be a whole number above 0, got '$pairs'"
[[ $updates =~ ^[1-9][0-9]*$ ]] && ((updates % 2 == 0)) || die "--updates must be an even number above 0, got '$updates'"
[[ $vocab =~ ^[1-9][0-9]*$ ]] || die "--vocab-size must be a whole number above 0, got '$vocab'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$seed'"
out=${out:-$here/out}
data=$out/data
half=$((updates / 2))
# Decoding as recipes/multi30k-en-de --quick: beam 4, length penalty 0.6, the patience stop.
decode=(--beam 4 --alpha 0.6 --early-stop patience)

# Every run has recipes/multi30k-en-de --quick's settings (batches of 768 tokens, 600 warmup updates, --lr-scale
# 0.64, dropout and label smoothing 0.1), at a fixed number of updates rather than minutes: on a shared machine
# the updates a budget of minutes buys vary with the load, the updates themselves do not. --update-freq 1 for
# every run: without a preset, `train --init` would take the default preset's 25,000 tokens an update (33 batches).
settings=(--max-tokens 768 --update-freq 1 --warmup 600 --lr-scale 0.64 --dropout 0.1 --label-smoothing 0.1 --seed "$seed"
    --save-every-minutes 0 --save-every-steps 0 --keep-last 1 --log-every 50)

# The En-De model, unless one is given: Multi30k En-De, its 8,000-piece joint BPE, the 'small' preset, the last
# fifth of its updates cooling the learning rate down to 0, as the En-De recipe does (its --quick run makes about
# 400 to 550 updates in its 3 minutes on 2 cores).
if [[ -z $base ]]; then
    base=$out/run-en-de/checkpoint_last.pt
    step "prepare en-de" mtkit prepare multi30k-en-de --out "$data/en-de" "${mirror_opt[@]}"
    step "bpe en-de" mtkit bpe "$data/en-de" --vocab-size 8000
    step "train en-de" mtkit train "$data/en-de" --out "$out/run-en-de" --preset small "${settings[@]}" \
        --max-steps "$base_updates" --lr-cooldown 0.2 --valid-every "$base_updates"
elif ((DRY_RUN == 0)) && [[ ! -e $base ]]; then
    die "--base $base: no such model"
fi

# The first N En-Fr pairs as a corpus of their own (the full validation and test sets), twice: the fine-tuned
# run's copy is encoded with the En-De model's tokenizer, the from-scratch run's with a BPE learned on it.
step "prepare en-fr" mtkit prepare multi30k-en-fr --out "$data/en-fr" "${mirror_opt[@]}"
((DRY_RUN)) || mkdir -p "$data/pairs"
for lang in en fr; do
    step_to "first $pairs pairs ($lang)" "$data/pairs/train.$lang" head -n "$pairs" "$data/en-fr/raw/train.$lang"
done
for system in finetuned scratch; do
    step "prepare $system" mtkit prepare custom --out "$data/$system" \
        --train-src "$data/pairs/train.en" --train-tgt "$data/pairs/train.fr" \
        --valid-src "$data/en-fr/raw/valid.en" --valid-tgt "$data/en-fr/raw/valid.fr" \
        --test-src "$data/en-fr/raw/test.en" --test-tgt "$data/en-fr/raw/test.fr"
done
step "bpe finetuned" mtkit bpe "$data/finetuned" --from "$base"
step "bpe scratch" mtkit bpe "$data/scratch" --vocab-size "$vocab"

# The two runs differ only in where they start: the En-De model's weights and vocabulary (--init), or random
# weights and a vocabulary of the N pairs' own (--preset small). No cooldown: each run is resumed with a larger
# --max-steps for its second round, and the schedule must not depend on it.
# train SYSTEM STEPS: one round of a run (the same command with more steps resumes it), validated at its end.
train() {
    local -a start=(--init "$base")
    [[ $1 == finetuned ]] || start=(--preset small)
    step "train $1 to $2" mtkit train "$data/$1" --out "$out/run-$1" "${start[@]}" "${settings[@]}" \
        --max-steps "$2" --valid-every "$half"
}
train finetuned "$half"
train scratch "$half"
train scratch "$updates"
train finetuned "$updates"

for system in finetuned scratch; do
    step "translate $system" mtkit translate --model "$out/run-$system/checkpoint_last.pt" \
        --input "$data/en-fr/raw/test.en" --output "$out/test.$system.fr" --beam 4 --alpha 0.6 --early-stop patience
    step_to "score $system" "$out/scores.$system.json" mtkit score "$out/test.$system.fr" \
        --ref "$data/en-fr/raw/test.fr" --json
done
((DRY_RUN == 0)) || exit 0

python "$here/results.py" "$out" "$base" "$pairs" "$updates" "$vocab" -- "${TIMES[@]}" >"$out/results.md.tmp"
mv -f "$out/results.md.tmp" "$out/results.md"
printf 'wrote %s\n' "$out/results.md" >&2
