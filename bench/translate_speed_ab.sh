#!/bin/bash
# bench/translate_speed.py for two checkouts, in the order A B B A (a drifting load on a shared machine falls on
# both alike); prints each run's JSON line. Compare the sums of the seconds.
#   bench/translate_speed_ab.sh /tmp/mtkit-before . --limit 300     # (git archive BRANCH | tar -x -C /tmp/mtkit-before)
# Each checkout's bench reads the Multi30k test set that ships in its mtkit/data/multi30k.
set -u
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); shift 2
PY=${PYTHON:-python}
for v in A B B A; do
  dir=$A; [ "$v" = B ] && dir=$B
  echo "== variant $v ($dir)"
  (cd "$dir" && PYTHONPATH="$dir" "$PY" bench/translate_speed.py "$@" 2>/dev/null | tail -1)
done
