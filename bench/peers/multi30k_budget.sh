#!/usr/bin/env bash
# fairseq 0.12 under the Multi30k recipe's budget: the same data, `small` architecture and 8k joint vocabulary
# (prep_multi30k.sh), the paper's schedule at a peak of 2e-3 after 400 warmup updates and batches of 2,048
# tokens (the recipe's), dropout and label smoothing 0.1, fp32 on the CPU, stopped after MINUTES of training;
# the last checkpoint translates test_2016_flickr with beam 4 (fairseq's length penalty 1), and sacreBLEU scores
# the detokenized output.
#   bash bench/peers/multi30k_budget.sh 25
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEERS=${PEERS:-/tmp/peers}
minutes=${1:-25}
seed=${2:-1}
# shellcheck source=SCRIPTDIR/arch.sh
source "$here/arch.sh"
peer_arch small
# shellcheck disable=SC1091
source "$PEERS/venv/bin/activate"
export OMP_NUM_THREADS=${THREADS:-2} MKL_NUM_THREADS=${THREADS:-2}
# fairseq 0.12 pickles an argparse.Namespace into its checkpoints, which torch.load's default since PyTorch 2.6
# (weights_only=True) refuses; the checkpoints read here are the ones this script trains, so plain pickle is safe.
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
work=$PEERS/multi30k
run=$PEERS/results/multi30k_budget_seed$seed
rm -rf "$run"  # a fresh run every time: fairseq-train would resume from a checkpoint_last.pt left there
mkdir -p "$run"
hours=$(python -c "print($minutes / 60)")
fairseq-train "$work/bin" "${ARCH[@]}" --share-all-embeddings --cpu --seed "$seed" \
    --optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 400 \
    --warmup-init-lr 1e-7 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
    --max-tokens 2048 --stop-time-hours "$hours" --max-epoch 1000 --num-workers 0 --log-format simple \
    --log-interval 50 --save-dir "$run" --no-epoch-checkpoints --save-interval-updates 1000000 \
    --keep-last-epochs 1 2>&1 | tee "$run/train.log"
fairseq-generate "$work/bin" --path "$run/checkpoint_last.pt" --gen-subset test --beam 4 \
    --batch-size 64 --cpu --remove-bpe sentencepiece >"$run/generate.log"
grep '^H-' "$run/generate.log" | sed 's/^H-//' | sort -n | cut -f3 >"$run/test.hyp.de"
sacrebleu "$work/raw/test_2016_flickr.de" -i "$run/test.hyp.de" -m bleu chrf
