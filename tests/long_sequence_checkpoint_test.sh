#!/usr/bin/env bash
# Checkpoints move between the long-sequence stages and the baseline (through the GPT-2 names of
# the whole model): for each stage S, on 2 ranks with tiny --heads 4 --ctx 32,
#   1. the baseline trains 3 steps and saves; S and the baseline each resume from it for 2 steps:
#      the same training loss (printed to 4 decimals);
#   2. S trains 3 steps and saves; S and the baseline each resume from it for 1 step: the same loss.
#   usage: long_sequence_checkpoint_test.sh path/to/baseline/train NAME=path/to/train ...
set -u
base=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# The training loss of the last line "done: N steps | train loss X | ..." (an info line: the runs
# below are not --quiet).
loss() { grep -o 'train loss [0-9.]*' | tail -1 | awk '{print $3}'; }
run() { timeout 300 "$@" --model tiny --heads 4 --ctx 32 --global_batch 4 --eval_every 0 --log_every 1000 2>&1; }

run "$base" --world_size 1 --steps 3 --save "$tmp/base.safetensors" >/dev/null ||
  { echo "FAIL the baseline could not save"; exit 1; }
want=$(run "$base" --world_size 1 --steps 2 --load "$tmp/base.safetensors" | loss)
for arg in "$@"; do
  name=${arg%%=*}
  bin=${arg#*=}
  got=$(run "$bin" --world_size 2 --steps 2 --load "$tmp/base.safetensors" | loss)
  if [ -z "$got" ] || [ "$got" != "$want" ]; then
    echo "FAIL $name resumed from the baseline's checkpoint: loss '$got', the baseline's '$want'"
    fails=$((fails + 1))
  else
    echo "ok   $name resumed from the baseline's checkpoint: loss $got"
  fi
  if ! run "$bin" --world_size 2 --steps 3 --save "$tmp/$name.safetensors" >"$tmp/out" ; then
    echo "FAIL $name could not save:"; cat "$tmp/out"; fails=$((fails + 1)); continue
  fi
  a=$(run "$bin" --world_size 2 --steps 1 --load "$tmp/$name.safetensors" | loss)
  b=$(run "$base" --world_size 1 --steps 1 --load "$tmp/$name.safetensors" | loss)
  if [ -z "$a" ] || [ "$a" != "$b" ]; then
    echo "FAIL $name's checkpoint: $name resumes at loss '$a', the baseline at '$b'"
    fails=$((fails + 1))
  else
    echo "ok   $name's checkpoint resumed by $name and by the baseline: loss $a"
  fi
done
echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
