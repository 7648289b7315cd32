#!/usr/bin/env bash
# Every stage takes --recompute and --recompute_every through the shared walk, and recomputation
# changes no bit of the result: after 3 steps of the tiny model with 4 blocks, the checkpoint
# (parameters, Adam m and v) of a run with --recompute full, full every 2 and 3 and selective is
# byte for byte the checkpoint of the run without (cmp). The context-parallel stages (ulysses,
# ring_attention, ring_self_attention) recompute whole blocks only: full, every 2 and 3 (their
# cores' forward communication runs again, and their reports say so). moe and baseline_moe train
# moe-tiny with 4 blocks (2 of them mixtures: a recomputed one routes and all_to_alls again).
# tp_2d and tp_3d recompute in their own walks, on a 2×2 grid (its SUMMA products and grid
# LayerNorms again) and a 2×2×2 cube (its 3D linears' collectives again).
# Each run's report must show the measured
# recomputed FLOPs next to the formula with "ok" (a stage whose walk ignored the policy shows 0),
# and no row of it may differ from its formula (what recomputation adds to a stage's traffic,
# e.g. tensor parallelism's g all_reduces or ZeRO-3's tiles gathered again, is in its formula).
#   usage: recompute_test.sh NAME=path/to/train ...
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
for arg in "$@"; do
  name=${arg%%=*} bin=${arg#*=}
  ranks=2 extra=() model=tiny
  policies=("full" "full --recompute_every 2" "full --recompute_every 3" "selective")
  case "$name" in
    moe) model=moe-tiny ;;  # the routing and both all_to_alls of a recomputed MoE block again
    baseline_moe) model=moe-tiny ranks=1 ;;
    ulysses|ring_attention|ring_self_attention) unset 'policies[3]' ;;
    tp_2d) ranks=4 ;;  # a 2×2 grid: its own walk (common/tp2d/gpt_2p5d.h), SUMMA run again
    tp_3d) ranks=8 ;;  # a 2×2×2 cube: its own walk (common/tp3d/gpt_3d.h)
    baseline) ranks=1 ;;
    mixed_bf16) extra=(--precision bf16) ;;
    zero3_tiled) extra=(--tile_factor 2) ;;  # recomputation gathers the tiles again
  esac
  common=(--model "$model" --layers 4 --global_batch 8 --world_size "$ranks" --eval_every 0
          --steps 3 --quiet --timeout 120 "${extra[@]}")
  run() {  # run LABEL FLAGS...: trains, saves $tmp/$name.LABEL.safetensors, keeps the log
    local label=$1; shift
    if ! timeout 300 "$bin" "${common[@]}" "$@" --save "$tmp/$name.$label.safetensors" \
         >"$tmp/$name.$label.log" 2>&1; then
      echo "FAIL $name $label: the run failed:"; cat "$tmp/$name.$label.log"
      fails=$((fails + 1)); return 1
    fi
  }
  run none --recompute none || continue
  for policy in "${policies[@]}"; do
    label=${policy// /_}
    # shellcheck disable=SC2086
    run "$label" --recompute $policy || continue
    if ! cmp -s "$tmp/$name.none.safetensors" "$tmp/$name.$label.safetensors"; then
      echo "FAIL $name: --recompute $policy changed the trained state (checkpoints differ)"
      fails=$((fails + 1))
    fi
    row=$(grep "recomputed forward FLOPs per step" "$tmp/$name.$label.log")
    if [ -z "$row" ] || grep -q DIFFERS "$tmp/$name.$label.log" || ! grep -q ok <<<"$row"; then
      echo "FAIL $name: --recompute $policy: the recomputed-FLOPs row is missing, or a row differs:"
      grep -B2 -A20 "recomputed\|DIFFERS" "$tmp/$name.$label.log" | head -40
      fails=$((fails + 1))
    fi
  done
  [ "$fails" -eq 0 ] && echo "ok   $name: --recompute none = $(IFS=,; echo "${policies[*]}"), bit for bit"
done
[ "$fails" -eq 0 ]
