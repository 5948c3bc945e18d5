#!/usr/bin/env bash
# WMT14 English->German exactly as "Attention Is All You Need" trained it; see README.md here.
#   bash run.sh base                 # one GPU
#   bash run.sh big --gpus 8         # eight GPUs on this machine (torchrun)
#   bash run.sh base --dry-run       # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

PAIR=wmt14-en-de SRC=en TGT=de
VOCAB=37000                        # joint BPE, about 37,000 tokens (5.1)
DROPOUT_BASE=0.1 DROPOUT_BIG=0.3   # P_drop (5.4, Table 3)
PAPER_BASE=27.3 PAPER_BIG=28.4     # newstest2014 BLEU, Table 2
wmt14_main "$here" "$@"
