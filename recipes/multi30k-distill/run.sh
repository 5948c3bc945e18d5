#!/usr/bin/env bash
# Multi30k English->German: the recipe's 25-minute teacher distilled into a small, fast student, measured.
#   bash ../multi30k-en-de/run.sh && bash run.sh    # the teacher first, then the student (see README.md)
#   bash run.sh --teacher T.pt --data DIR            # another teacher and its data directory
#   bash run.sh --dry-run                            # print every command, run none
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../lib.sh
source "$here/../lib.sh"

usage() {
    cat <<EOF
usage: run.sh [--teacher MODEL]... [--data DIR] [--mix M] [--preset P] [--minutes M | --steps N] [--seed N]
              [--out DIR] [--record FILE] [--dry-run]

Distils a teacher into a student: the teacher translates Multi30k's 29,000 training sources with
beam 4 (mtkit distill, resumable), the student trains on its translations for a wall-clock budget
with a deep encoder and a shallow decoder (--preset, default student-fast: 6+1 layers, 256 wide),
its last 5 checkpoints are averaged, it gets a lexical shortlist learnt from the distilled data
(mtkit shortlist), and both models are exported to CTranslate2 int8 (the student with its
vocabulary map). Then results.py measures, one system at a time: BLEU on test_2016_flickr and
sentences/s and source words/s at 1 and 2 threads (and as 2 workers of 1 thread) of the teacher
(mtkit fp32, beam 4), the student (mtkit int8, shortlist, greedy) and CTranslate2 int8 running each
(the student with and without its vocabulary map), with peak memory and model sizes, into OUT/results.md.

  --teacher MODEL  the teacher (repeat for an ensemble); default: the Multi30k recipe's model,
                   $here/../multi30k-en-de/out/model.pt
  --data DIR       the teacher's data directory (default: the Multi30k recipe's out/data)
  --mix M          what the student learns from: 1best (the teacher's best translation of each of the 29,000
                   sources; the default, best on dev), 1best+refs (and the 29,000 references: 58,000 pairs) or
                   2best+refs (its two best translations and the references: 87,000 pairs); mixes.py compares
                   them on dev.
                   Another mix is another distillation: give it another --out
  --preset P       the student's shape: student-fast (default, 6+1 layers) or student-tiny (6+2)
  --minutes M      the student's training budget in minutes (default 25, the teacher's)
  --steps N        instead, N updates (checkpoints every N/25): the same student whatever else the
                   machine runs, e.g. the number of updates the teacher made in its 25 minutes
  --seed N         the student's seed (default 1)
  --out DIR        everything the recipe makes (default: $here/out)
  --record FILE    also keep results.py's measurements as a record (the commit, the machine, every pass),
                   e.g. docs/results/NAME.json, which docs/gen_figures.py renders
  --dry-run        print every command, one a line, and run none
EOF
}

die() {
    printf 'run.sh: error: %s\n' "$1" >&2
    exit 2
}

teachers=() data="" mix=1best preset=student-fast minutes=25 steps="" seed=1 out="" record=""
recipe_args=("$@")  # the command a record names
DRY_RUN=0
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        --teacher | --data | --mix | --preset | --minutes | --steps | --seed | --out | --record)
            if (($# < 2)) || [[ -z $2 || $2 == --* ]]; then die "$1 needs a value"; fi
            case $1 in
                --teacher) teachers+=("$2") ;;
                --data) data=$2 ;;
                --mix) mix=$2 ;;
                --preset) preset=$2 ;;
                --minutes) minutes=$2 ;;
                --steps) steps=$2 ;;
                --seed) seed=$2 ;;
                --out) out=$2 ;;
                --record) record=$2 ;;
            esac
            shift ;;
        *) die "unknown argument '$1' (run.sh --help lists the options)" ;;
    esac
    shift
done
((${#teachers[@]})) || teachers=("$here/../multi30k-en-de/out/model.pt")
data=${data:-$here/../multi30k-en-de/out/data}
out=${out:-$here/out}
case $mix in
    1best) mix_opts=(--nbest 1) ;;
    1best+refs) mix_opts=(--nbest 1 --mix-references) ;;
    2best+refs) mix_opts=(--nbest 2 --mix-references) ;;
    *) die "--mix must be 1best, 1best+refs or 2best+refs, got '$mix'" ;;
esac
[[ $preset == student-tiny || $preset == student-fast ]] || die "--preset must be student-fast or student-tiny, got '$preset'"
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--minutes must be a number, got '$minutes'"
awk -v m="$minutes" 'BEGIN { exit !(m > 0) }' || die "--minutes must be above 0, got '$minutes'"
[[ -z $steps ]] || is_count "$steps" || die "--steps must be a positive whole number, got '$steps'"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a whole number, got '$seed'"
if ((DRY_RUN == 0)); then  # said now, not after an hour of decoding
    for teacher in "${teachers[@]}"; do
        [[ -e $teacher ]] || die "no teacher at $teacher: run ../multi30k-en-de/run.sh first, or give --teacher"
    done
    [[ -d $data ]] || die "no data directory at $data: give the teacher's with --data"
    python -c 'import ctranslate2' 2>/dev/null || die "the recipe measures CTranslate2 too: pip install 'mtkit[ct2]'"
fi
teacher_opts=()
for teacher in "${teachers[@]}"; do teacher_opts+=(-m "$teacher"); done
training_budget "$minutes" "$steps"  # BUDGET: the options of either budget (../lib.sh)
distilled=$out/data run=$out/run

# 1. The teacher's beam-4 translations of the training sources (sequence-level distillation, Kim & Rush 2016),
#    in chunks a rerun resumes from; the valid and test splits keep their references. With the search the
#    Multi30k recipe picked on its dev set (GNMT alpha 1.4, exact stop): alpha 0.6 gave targets 19% shorter
#    than the references (349,345 pieces against 430,059) and 268 empty ones, which a student learns. --mix: the
#    best translation of each line (29,000 pairs, the default: best on dev in mixes.py's sweep of three seeds,
#    docs/results/distill-mixes-seeds.json), and the references after them (58,000), or the two best and the references
#    (87,000); mixes.py trains a student on each and scores it on dev.
step distill mtkit distill "$data" "${teacher_opts[@]}" --out "$distilled" --beam 4 --alpha 1.4 --early-stop exact \
    "${mix_opts[@]}"
# 2. The student, with the settings the Multi30k recipe measured for its teacher on this data (the small
#    preset's): the same budget, checkpoint cadence, cooldown and averaging window.
step train mtkit train "$distilled" --out "$run" --preset "$preset" --max-tokens 2048 --warmup 400 \
    --lr-scale 0.64 "${BUDGET[@]}" --lr-cooldown 0.2 --seed "$seed" --keep-last 5 --valid-every 200 \
    --valid-bleu 500 --log-every 50
step average mtkit average "$run" --last 5 --output "$out/averaged.pt"
# 3. The shortlist, from the distilled pairs the student learnt from: 50 candidates a source piece and the
#    100 most frequent pieces, carried in the student's file.
step shortlist mtkit shortlist "$out/averaged.pt" "$distilled" --output "$out/student.pt" --k 50 --frequent 100
# The teacher's own, from its training data, for its CTranslate2 export's vocabulary map.
step "shortlist teacher" mtkit shortlist "${teachers[0]}" "$data" --output "$out/teacher-shortlist.pt" --k 50 \
    --frequent 100
# 4. Each model as CTranslate2 int8, with its shortlist as vmap.txt (results.py measures it with and without).
step "export teacher" mtkit export "$out/teacher-shortlist.pt" --format ctranslate2 --quantization int8 \
    -o "$out/ct2-teacher"
step "export student" mtkit export "$out/student.pt" --format ctranslate2 --quantization int8 -o "$out/ct2-student"
((DRY_RUN == 0)) || exit 0

# 5. One system at a time, nothing else running: BLEU, speed at 1 and 2 threads and as 2 workers, peak memory, sizes.
record_opts=()
[[ -z $record ]] || record_opts=(--record "$record" --recipe-args "${recipe_args[@]}")
python "$here/results.py" "$out" "$data" "${teachers[@]}" "${record_opts[@]}" >"$out/results.md.tmp"
mv -f "$out/results.md.tmp" "$out/results.md"
printf 'wrote %s\n' "$out/results.md" >&2
