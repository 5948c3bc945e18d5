#!/usr/bin/env bash
# Multi30k En-De for fairseq: the copy that ships with mtkit, a joint SentencePiece BPE of 8,000 pieces learned on
# the training text (as `mtkit bpe --vocab-size 8000` does), and fairseq-preprocess's binarized data with one
# joined dictionary. Writes $PEERS/multi30k/{raw,spm,bin}.
#   bash bench/peers/prep_multi30k.sh
set -euo pipefail
PEERS=${PEERS:-/tmp/peers}
corpus=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/mtkit/data/multi30k
work=$PEERS/multi30k
# shellcheck disable=SC1091
source "$PEERS/venv/bin/activate"
mkdir -p "$work/raw" "$work/spm"
for split in train val test_2016_flickr; do
    for lang in en de; do
        gzip -dc "$corpus/$split.$lang.gz" >"$work/raw/$split.$lang"
    done
done
python - "$work" <<'PY'
import sys

import sentencepiece as spm

work = sys.argv[1]
spm.SentencePieceTrainer.train(
    input=f"{work}/raw/train.en,{work}/raw/train.de", model_prefix=f"{work}/spm", vocab_size=8000,
    model_type="bpe", character_coverage=1.0, num_threads=2, minloglevel=1,
)
model = spm.SentencePieceProcessor(model_file=f"{work}/spm.model")
for split in ("train", "val", "test_2016_flickr"):
    for lang in ("en", "de"):
        with open(f"{work}/raw/{split}.{lang}", encoding="utf-8") as src, \
                open(f"{work}/spm/{split}.{lang}", "w", encoding="utf-8") as out:
            out.writelines(" ".join(model.encode(line.rstrip("\n"), out_type=str)) + "\n" for line in src)
PY
rm -rf "$work/bin"
fairseq-preprocess --source-lang en --target-lang de --joined-dictionary --workers 2 --destdir "$work/bin" \
    --trainpref "$work/spm/train" --validpref "$work/spm/val" --testpref "$work/spm/test_2016_flickr"
echo "wrote $work/bin"
