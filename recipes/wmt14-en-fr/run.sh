#!/usr/bin/env bash
# WMT14 English->French exactly as "Attention Is All You Need" trained it; see README.md here.
#   bash run.sh big --gpus 8         # eight GPUs on this machine (torchrun)
#   bash run.sh base                 # one GPU
#   bash run.sh big --dry-run        # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

PAIR=wmt14-en-fr SRC=en TGT=fr
VOCAB=32000                        # 32,000 shared word pieces (5.1); here joint SentencePiece BPE
DROPOUT_BASE=0.1 DROPOUT_BIG=0.1   # "the big model for English-to-French used P_drop = 0.1, instead of 0.3" (6.1)
PAPER_BASE=38.1 PAPER_BIG=41.0     # newstest2014 BLEU, Table 2 (41.0 in the NeurIPS version, 41.8 in arXiv v5)
wmt14_main "$here" "$@"
