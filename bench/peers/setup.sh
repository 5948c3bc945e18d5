#!/usr/bin/env bash
# The peers' virtual environment, $PEERS/venv (default /tmp/peers/venv), from the package registries: PyTorch's CPU
# build first (Linux: PyTorch's CPU index, so that no CUDA packages come), then fairseq 0.12 and CTranslate2.
#   bash bench/peers/setup.sh
#   TORCH_INDEX_URL= bash bench/peers/setup.sh     # torch from pip's configured index instead of PyTorch's CPU index
set -euo pipefail
PEERS=${PEERS:-/tmp/peers}
venv=$PEERS/venv
mkdir -p "$PEERS"
[[ -d $venv ]] || python3 -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
python -m pip install --quiet --upgrade pip setuptools wheel
# TORCH_INDEX_URL overrides that index: empty means pip's configured index, for a machine that serves CPU wheels
# of its own (a mirror, or a wheel directory) and cannot reach PyTorch's.
torch_index=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
if [[ $(uname -s) == Linux && -n $torch_index ]]; then
    python -m pip install --quiet torch==2.13.0 --index-url "$torch_index"
else
    python -m pip install --quiet torch==2.13.0
fi
# fairseq 0.12's own requirements, pinned to versions it runs with, and the tools the scripts use.
python -m pip install --quiet cffi "cython==3.3.1" "hydra-core==1.3.2" "omegaconf==2.3.0" "numpy==2.4.6" regex tqdm \
    bitarray scikit-learn packaging "sacrebleu==2.6.0" "sentencepiece==0.2.3" "sacremoses==0.2.0" "ctranslate2==4.8.5"
# --no-deps: its requirements include torchaudio, which would replace the CPU torch above (speech tasks only);
# --no-build-isolation: its C++/Cython extensions compile against the torch installed here.
python -m pip install --quiet --no-deps --no-build-isolation "fairseq-fixed==0.12.3.1"
python - <<'PY'
import ctranslate2
import fairseq
import torch
from fairseq.data import data_utils_fast, token_block_utils_fast  # noqa: F401  (the compiled extensions)

print("peers ready: torch", torch.__version__, "| fairseq", fairseq.__version__, "| ctranslate2", ctranslate2.__version__)
PY
