# shellcheck shell=bash
# The WMT14 pipeline of "Attention Is All You Need" (sections 5 and 6.1), shared by recipes/wmt14-*/run.sh.
#
# A recipe sets PAIR, SRC, TGT, VOCAB, DROPOUT_BASE, DROPOUT_BIG and PAPER_BASE/PAPER_BIG, then calls
# `wmt14_main RECIPE_DIR "$@"`. Each step is one mtkit command, printed shell-quoted (stderr) before it
# runs; --dry-run prints them on stdout, one a line, and runs nothing. Rerunning the same command
# resumes: prepare and bpe skip finished work, train continues from checkpoint_last.pt.

# The paper's update: about 25,000 source and 25,000 target tokens (5.1). The recipe passes --max-tokens auto:
# mtkit train probes how many tokens a step fit on each GPU and splits each GPU's share of the update evenly
# over the fewest steps that fit (one step on an 80 GB GPU), and picks --update-freq for the world size itself
# (TrainConfig.update_tokens; mtkit/train/probe.py), so the recipe never passes it. `--max-tokens N` fixes it.

wmt14_usage() {
    cat <<EOF
usage: run.sh base|big [--gpus N] [--nodes N --node-rank R --master ADDR:PORT] [--data DIR] [--out DIR]
                       [--mirror DIR] [--max-tokens N] [--precision auto|bf16|fp16|fp32] [--dry-run]

The paper's $PAIR recipe: prepare, joint BPE ($VOCAB), train base (100k updates) or big (300k),
average the last 5 / 20 checkpoints (written every 10 minutes), translate newstest2014 (beam 4,
alpha 0.6, max length source + 50), score with sacreBLEU and the paper's tokenized BLEU,
and write OUT/results.md.

  --gpus N          GPUs on this node (default 1; more than one: torchrun, one process a GPU)
  --nodes N         machines (default 1); with more, run the same command on every node with its
                    own --node-rank, and --master = node 0's address and a free port. DATA and
                    OUT must be on a filesystem that all nodes share; node 0 prepares the data.
  --data DIR        prepared corpus (default: RECIPE/out/data)
  --out DIR         run directory, translations, scores, results.md (default: RECIPE/out/PRESET)
  --mirror DIR      a directory holding the WMT14 archives (no download)
  --max-tokens N    tokens per batch and side on each GPU (default: auto, the most that fit, probed
                    by mtkit train at start); mtkit train picks --update-freq for ~25,000 an update
  --precision P     auto (default: bf16 where a training pass measures it faster than fp32 on the GPU
                    at start, else fp32), bf16, fp16 (V100 and older), fp32
  --dry-run         print every command, one a line, and run none
EOF
}

wmt14_die() {
    printf 'run.sh: error: %s\n' "$1" >&2
    exit 2
}

# step NAME CMD...: print CMD; unless dry-running, run it and record its wall-clock under NAME.
# step_to NAME FILE CMD...: the same with stdout into FILE (through FILE.tmp, so FILE is whole or absent).
STEPS=()
TIMES=()
step() {
    local name=$1 line
    shift
    printf -v line '%q ' "$@"
    step_run "$name" "${line% }" "" "$@"
}

step_to() {
    local name=$1 file=$2 line target
    shift 2
    printf -v line '%q ' "$@"
    printf -v target '%q' "$file"
    step_run "$name" "${line% } > $target" "$file" "$@"
}

step_run() {
    local name=$1 line=$2 file=$3 start=$SECONDS
    shift 3
    STEPS+=("$line")
    if ((DRY_RUN)); then
        printf '%s\n' "$line"
        return 0
    fi
    printf '+ %s\n' "$line" >&2
    if [[ -n $file ]]; then
        "$@" >"$file.tmp"
        mv -f "$file.tmp" "$file"
    else
        "$@"
    fi
    local took=$((SECONDS - start))
    TIMES+=("$(printf '| %s | %d:%02d:%02d |' "$name" $((took / 3600)) $((took / 60 % 60)) $((took % 60)))")
}

is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# training_budget MINUTES [STEPS]: a Multi30k recipe's budget options, into the array BUDGET. MINUTES of training
# with a checkpoint every 1/25 of them; or, given STEPS, that many updates with a checkpoint every STEPS/25 (the
# cooldown then follows the updates, not the clock: the same model whatever else the machine runs).
training_budget() {
    local minutes=$1 steps=${2:-}
    if [[ -n $steps ]]; then
        BUDGET=(--max-minutes 0 --max-steps "$steps" --save-every-minutes 0 --save-every-steps "$(((steps + 24) / 25))")
    else
        BUDGET=(--max-minutes "$minutes" --max-steps 1000000 --save-every-steps 0
            --save-every-minutes "$(awk -v m="$minutes" 'BEGIN { printf "%g", m / 25 }')")
    fi
}

wmt14_main() {
    local here=$1
    shift
    local preset="" gpus=1 nodes=1 node_rank="" master="" data="" out="" mirror="" max_tokens=auto precision=auto
    DRY_RUN=0
    while (($#)); do
        case $1 in
            base | big) [[ -z $preset ]] || wmt14_die "give one preset, base or big"; preset=$1 ;;
            --dry-run) DRY_RUN=1 ;;
            -h | --help) wmt14_usage; return 0 ;;
            --gpus | --nodes | --node-rank | --master | --data | --out | --mirror | --max-tokens | --precision)
                if (($# < 2)) || [[ -z $2 || $2 == --* ]]; then wmt14_die "$1 needs a value"; fi
                case $1 in
                    --gpus) gpus=$2 ;; --nodes) nodes=$2 ;; --node-rank) node_rank=$2 ;; --master) master=$2 ;;
                    --data) data=$2 ;; --out) out=$2 ;; --mirror) mirror=$2 ;; --max-tokens) max_tokens=$2 ;;
                    --precision) precision=$2 ;;
                esac
                shift ;;
            *) wmt14_die "unknown argument '$1' (run.sh --help lists the options)" ;;
        esac
        shift
    done
    [[ -n $preset ]] || wmt14_die "name the model: run.sh base or run.sh big"
    is_count "$gpus" || wmt14_die "--gpus must be a positive integer, got '$gpus'"
    is_count "$nodes" || wmt14_die "--nodes must be a positive integer, got '$nodes'"
    [[ $max_tokens == auto ]] || is_count "$max_tokens" || wmt14_die "--max-tokens must be a positive integer or auto"
    [[ $precision =~ ^(auto|bf16|fp16|fp32)$ ]] || wmt14_die "--precision must be auto, bf16, fp16 or fp32, got '$precision'"
    if ((nodes > 1)); then
        if ! [[ $node_rank =~ ^[0-9]+$ ]] || ((node_rank >= nodes)); then
            wmt14_die "--nodes $nodes needs --node-rank R with 0 <= R < $nodes"
        fi
        [[ $master =~ ^[^:]+:[0-9]+$ ]] || wmt14_die "--nodes $nodes needs --master ADDR:PORT (node 0's address)"
    else
        [[ -z $node_rank && -z $master ]] || wmt14_die "--node-rank and --master are for --nodes 2 or more"
        node_rank=0
    fi
    data=${data:-$here/out/data}
    out=${out:-$here/out/$preset}

    local steps=100000 last=5 dropout=$DROPOUT_BASE paper=$PAPER_BASE
    if [[ $preset == big ]]; then
        steps=300000 last=20 dropout=$DROPOUT_BIG paper=$PAPER_BIG
    fi
    local world=$((gpus * nodes))
    local -a launch=(mtkit) mirror_opt=()
    if ((nodes > 1)); then
        launch=(torchrun --nnodes "$nodes" --nproc_per_node "$gpus" --node_rank "$node_rank"
            --master_addr "${master%:*}" --master_port "${master##*:}" -m mtkit)
    elif ((gpus > 1)); then
        launch=(torchrun --standalone --nproc_per_node "$gpus" -m mtkit)
    fi
    [[ -z $mirror ]] || mirror_opt=(--mirror "$mirror")

    if ((node_rank == 0)); then
        step prepare mtkit prepare "$PAIR" --out "$data" "${mirror_opt[@]}"
        step bpe mtkit bpe "$data" --vocab-size "$VOCAB"
    elif ((DRY_RUN)); then
        printf '# node %s waits for %q (node 0 prepares the data)\n' "$node_rank" "$data/bpe.json"
    else
        printf 'node %s: waiting for %s (node 0 prepares the data)\n' "$node_rank" "$data/bpe.json" >&2
        until [[ -f $data/bpe.json ]]; do sleep 30; done
    fi
    step train "${launch[@]}" train "$data" --out "$out/run" --preset "$preset" --max-tokens "$max_tokens" \
        --max-steps "$steps" --dropout "$dropout" --precision "$precision" --save-every-minutes 10 \
        --keep-last "$last"
    ((node_rank == 0)) || return 0
    step average mtkit average "$out/run" --last "$last" --output "$out/model.pt"
    local which model
    for which in last averaged; do
        model=$out/model.pt
        [[ $which == averaged ]] || model=$out/run/checkpoint_last.pt
        step "translate ($which)" mtkit translate --model "$model" --input "$data/raw/test.$SRC" \
            --output "$out/newstest2014.$which.$TGT" --beam 4 --alpha 0.6 --max-len-a 1 --max-len-b 50
        step_to "score ($which)" "$out/scores.$which.txt" mtkit score "$out/newstest2014.$which.$TGT" \
            --ref "$data/raw/test.$TGT" --paper-bleu --lang "$TGT"
    done
    if ((DRY_RUN == 0)); then
        wmt14_results "$out" "$preset" "$paper" "$last" "$world" "$max_tokens" >"$out/results.md.tmp"
        mv -f "$out/results.md.tmp" "$out/results.md"
        printf 'wrote %s\n' "$out/results.md" >&2
    fi
}

# wmt14_results OUT PRESET PAPER LAST WORLD MAX_TOKENS: results.md from the score files and the run's log.
wmt14_results() {
    local out=$1 preset=$2 paper=$3 last=$4 world=$5 max_tokens=$6 which
    local log=$out/run/metrics.jsonl gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) || gpu="no GPU seen by nvidia-smi"
    printf '# %s, %s: results\n\n' "$PAIR" "$preset"
    printf 'newstest2014 (3003 sentences), beam 4, alpha 0.6, max length source + 50. The paper (Vaswani et al.\n'
    printf '2017, Table 2) reports %s tokenized BLEU with compound splitting, the last column here.\n\n' "$paper"
    printf '| model | sacreBLEU | chrF2 | tokenized BLEU, compound-split (paper: %s) |\n|---|---|---|---|\n' "$paper"
    for which in last averaged; do
        awk -v name="$([[ $which == last ]] && echo "last checkpoint" || echo "average of the last $last")" '
            /^BLEU = / { bleu[++n] = $3 } /^chrF2 = / { chrf = $3 }
            END { printf "| %s | %s | %s | %s |\n", name, bleu[1], chrf, bleu[2] }' "$out/scores.$which.txt"
    done
    printf '\n## Training\n\n'
    printf -- '- %s GPU(s) (%s), --max-tokens %s a GPU; the trainer'"'"'s effective batch: %s\n' "$world" "$gpu" \
        "$max_tokens" "$(grep '"event": "start"' "$log" | tail -1 | sed -n 's/.*"effective_batch": "\([^"]*\)".*/\1/p')"
    printf -- '- seconds per update (last log window): %s\n' \
        "$(grep '"event": "train"' "$log" | tail -1 | sed -n 's/.*"s_per_update": \([0-9.e+-]*\).*/\1/p')"
    printf -- '- versions: %s; %s\n' "$(mtkit --version)" \
        "$(python -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}")' 2>/dev/null)"
    printf '\n## Wall-clock of each stage (this invocation; a resumed stage counts only its own part)\n\n'
    printf '| stage | wall-clock (h:mm:ss) |\n|---|---|\n'
    printf '%s\n' "${TIMES[@]}"
    printf '\n## Commands\n\n```bash\n'
    printf '%s\n' "${STEPS[@]}"
    printf '```\n\n## Scores with their signatures\n'
    local fence='```'
    for which in last averaged; do
        printf '\n%s:\n\n%s\n%s\n%s\n' "$which" "$fence" "$(cat "$out/scores.$which.txt")" "$fence"
    done
}
