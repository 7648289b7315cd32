#!/usr/bin/env bash
# Checkpoints of the mixture-of-experts stage move between expert-parallel sizes and to the
# baseline, because every expert is saved under its own name ("h.1.mlp.experts.<e>.c_fc.weight",
# whole model's layout): on moe-tiny (E = 4, top-2, c = 1, so tokens are dropped), B = 8,
#   0. the MoE stage trains 5 steps uninterrupted on 4 ranks (--ep 4): the reference;
#   1. it trains 3 steps at --ep 4 and saves; the stage at --ep 2 (4 ranks), at --ep 1 (2 ranks)
#      and the baseline (1 rank) each resume from it for 2 steps: steps 4 and 5 print the
#      reference's losses (4 decimals), and the last step's routing line is the reference's
#      (the same tokens per expert kept and dropped);
#   2. the baseline trains 3 steps and saves; the stage at --ep 4 resumes for 2: the same.
#   usage: moe_checkpoint_test.sh path/to/baseline/train path/to/moe/train
set -u
base=$1
moe=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# "step 4/5 | loss 5.3672 | ..." lines: "4 5.3672" per step; and the routing line.
losses() {
  grep -o '^step [0-9]*/[0-9]* | loss [0-9.]*' | awk '{split($2, s, "/"); print s[1], $5}'
}
routing() { grep -o 'routing (last step.*' | tail -1; }
run() { timeout 300 "$@" --model moe-tiny --global_batch 8 --eval_every 0 --log_every 1 2>&1; }

run "$moe" --world_size 4 --ep 4 --steps 5 >"$tmp/ref.out" ||
  { echo "FAIL the 5-step reference run:"; cat "$tmp/ref.out"; exit 1; }
want=$(losses <"$tmp/ref.out" | awk '$1 >= 4')
want_routing=$(routing <"$tmp/ref.out")
echo "reference (5 steps, ep 4): steps 4 and 5: $(echo $want)"
[ "$(echo "$want" | wc -l)" -eq 2 ] ||
  { echo "FAIL no step 4 and 5 losses in the reference"; exit 1; }

# check NAME OUTPUT_FILE: steps 4, 5 and the routing line against the reference.
check() {
  local name=$1 got got_routing
  got=$(losses <"$2")
  got_routing=$(routing <"$2")
  if [ "$got" != "$want" ]; then
    echo "FAIL $name: steps 4 and 5 '$(echo $got)', uninterrupted '$(echo $want)'"; cat "$2"
    fails=$((fails + 1))
  elif [ "$got_routing" != "$want_routing" ]; then
    echo "FAIL $name: routing '$got_routing', uninterrupted '$want_routing'"; fails=$((fails + 1))
  else
    echo "ok   $name: steps 4 and 5 $(echo $got)"
  fi
}

run "$moe" --world_size 4 --ep 4 --steps 3 --save "$tmp/ep4.safetensors" >"$tmp/save.out" ||
  { echo "FAIL the ep 4 run could not save:"; cat "$tmp/save.out"; exit 1; }
run "$moe" --world_size 4 --ep 2 --steps 2 --load "$tmp/ep4.safetensors" >"$tmp/ep2.out"
check "ep 4 -> ep 2 (4 ranks)" "$tmp/ep2.out"
run "$moe" --world_size 2 --ep 1 --steps 2 --load "$tmp/ep4.safetensors" >"$tmp/ep1.out"
check "ep 4 -> ep 1 (2 ranks)" "$tmp/ep1.out"
run "$base" --world_size 1 --steps 2 --load "$tmp/ep4.safetensors" >"$tmp/base.out"
check "ep 4 -> baseline" "$tmp/base.out"

run "$base" --world_size 1 --steps 3 --save "$tmp/base.safetensors" >"$tmp/bsave.out" ||
  { echo "FAIL the baseline could not save:"; cat "$tmp/bsave.out"; exit 1; }
run "$moe" --world_size 4 --ep 4 --steps 2 --load "$tmp/base.safetensors" >"$tmp/from_base.out"
check "baseline -> ep 4" "$tmp/from_base.out"

echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
