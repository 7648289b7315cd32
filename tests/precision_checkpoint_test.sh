#!/usr/bin/env bash
# Every stage that takes --precision saves what an fp16 run needs to resume: the precision and
# the loss scaler's state in the checkpoint's metadata (Strategy::extra_state, forwarded to
# MixedPrecision), and restores the scaler on --load. A stage that forgets to forward writes
# "precision":"fp32" and resumes fp16 at the initial scale.
# And the refusal a stage without --precision prints (common/train/launch_checks.cc) lists every
# stage here among those that take it: the list is written by hand, and went stale once.
#   usage: precision_checkpoint_test.sh --fp32_only=path/to/train NAME=path/to/train ...
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fp32_only=${1#--fp32_only=}
shift
refusal=$(timeout 60 "$fp32_only" --model tiny --precision bf16 --world_size 4 --steps 1 2>&1)
for arg in "$@"; do
  name=${arg%%=*}
  if ! grep -qE "[ (]$name[ ,)]" <<<"$refusal"; then
    echo "FAIL $name: not listed among the mixed-precision stages in: $refusal"
    fails=$((fails + 1))
  fi
done
for arg in "$@"; do
  name=${arg%%=*} bin=${arg#*=}
  ranks=2
  [ "$name" = baseline ] && ranks=1
  # The pipelines: 2 micro-batches of the global batch of 4 (naive_pp has 1, and no flag);
  # interleaved with one chunk, since tiny's 2 layers cannot be cut into 2·2 virtual stages.
  extra=() model=tiny
  case "$name" in
    gpipe|1f1b|zero_bubble|chimera) extra=(--micro_batches 2) ;;
    interleaved_1f1b) extra=(--micro_batches 2 --chunks 1) ;;
    # 3D: two stages of one replica (the fp16 skip agreed over the world, the master on the
    # ZeRO shard of a one-rank dp group)
    hybrid_3d) extra=(--dp 1 --pp 2 --tp 1 --micro_batches 2) ;;
    moe) model=moe-tiny ;;  # a mixture of experts (ep = 2): the skip agreed over both ranks
  esac
  ckpt="$tmp/$name.safetensors"
  # S0 = 2^22 overflows at first and backs off, then trains clean: on tiny, 8 steps end with
  # every one of the three fields away from its start on every stage (measured: the stages
  # whose gradients are 16-bit skip 6 and end with 2 clean steps at 2^16; the pipelines, whose
  # gradients are fp32, skip 2 and end with 6 clean at 2^20). The window of 1000 never regrows
  # S. So the resumed run must restore a scale that is not S0, a nonzero skipped count and a
  # nonzero clean-step count.
  common=(--model "$model" --precision fp16 --global_batch 4 --world_size "$ranks" --eval_every 0
          --initial_loss_scale 4194304 --timeout 120 "${extra[@]}")
  if ! timeout 300 "$bin" "${common[@]}" --loss_scale_window 1000 --steps 8 --quiet \
       --save "$ckpt" >"$tmp/$name.save.log" 2>&1
  then
    echo "FAIL $name: the fp16 run with --save failed:"; cat "$tmp/$name.save.log"
    fails=$((fails + 1)); continue
  fi
  meta=$(head -c 8192 "$ckpt" | tr -c '[:print:]' '\n' | grep -o '"__metadata__":{[^}]*}')
  scale=$(grep -o '"loss_scale":"[^"]*"' <<<"$meta" | cut -d'"' -f4)
  skipped=$(grep -o '"loss_scale_skipped_steps":"[^"]*"' <<<"$meta" | cut -d'"' -f4)
  clean=$(grep -o '"loss_scale_clean_steps":"[^"]*"' <<<"$meta" | cut -d'"' -f4)
  if ! grep -q '"precision":"fp16"' <<<"$meta" || [ -z "$scale" ] || [ "$scale" = 4194304 ] ||
     [ "${skipped:-0}" -lt 1 ] || [ "${clean:-0}" -lt 1 ]; then
    echo "FAIL $name: metadata lacks fp16's precision or scaler state (scale '$scale', skipped" \
         "'$skipped', clean '$clean'): $meta"
    fails=$((fails + 1)); continue
  fi
  # Resumed with a window of clean + 1: the restored counter makes the first step's S double
  # (one more clean step completes the window), which a counter said but not applied would not.
  if ! timeout 300 "$bin" "${common[@]}" --loss_scale_window $((clean + 1)) --steps 1 \
       --load "$ckpt" --log_every 1 \
       >"$tmp/$name.load.log" 2>&1; then
    echo "FAIL $name: --load of its own fp16 checkpoint failed:"; cat "$tmp/$name.load.log"
    fails=$((fails + 1)); continue
  fi
  restored="loss scaler restored: scale $scale, clean steps in a row $clean, skipped $skipped"
  if ! grep -qF "$restored" "$tmp/$name.load.log"; then
    echo "FAIL $name: the resumed run did not say '$restored':"
    grep -i "scale" "$tmp/$name.load.log" | head -5
    fails=$((fails + 1)); continue
  fi
  if ! grep -qE "loss scale $((scale * 2)) \| skipped $skipped\b" "$tmp/$name.load.log"; then
    echo "FAIL $name: S did not double on the resumed run's first clean step (window" \
         "$((clean + 1)), $clean clean steps restored):"
    grep -i "scale" "$tmp/$name.load.log" | head -5
    fails=$((fails + 1)); continue
  fi
  echo "ok   $name: precision fp16, loss scale $scale, clean $clean, skipped $skipped saved and" \
       "restored"
done
[ "$fails" -eq 0 ]
