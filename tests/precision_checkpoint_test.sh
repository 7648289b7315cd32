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
refusal=$(timeout 60 "$fp32_only" --model tiny --precision bf16 --world_size 2 --steps 1 2>&1)
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
  extra=()
  case "$name" in
    gpipe|1f1b|zero_bubble|chimera) extra=(--micro_batches 2) ;;
    interleaved_1f1b) extra=(--micro_batches 2 --chunks 1) ;;
    # 3D: two stages of one replica (the fp16 skip agreed over the world, the master on the
    # ZeRO shard of a one-rank dp group)
    hybrid_3d) extra=(--dp 1 --pp 2 --tp 1 --micro_batches 2) ;;
  esac
  ckpt="$tmp/$name.safetensors"
  # S0 = 2^30 overflows at once and backs off: on tiny every one of the 6 steps overflows, on
  # every stage (S ends at 2^24, 6 skipped; the window of 2 never sees two clean steps). The
  # saved state is not S0. Lower S0 would make the stages' patterns differ (2^20: the data-
  # parallel stages skip 3 and regrow, the pipelines skip 1, interleaved 1F1B at L = 8 none).
  common=(--model tiny --precision fp16 --global_batch 4 --world_size "$ranks" --eval_every 0
          --initial_loss_scale 1073741824 --loss_scale_window 2 --timeout 120 "${extra[@]}")
  if ! timeout 300 "$bin" "${common[@]}" --steps 6 --quiet --save "$ckpt" >"$tmp/$name.save.log" 2>&1
  then
    echo "FAIL $name: the fp16 run with --save failed:"; cat "$tmp/$name.save.log"
    fails=$((fails + 1)); continue
  fi
  meta=$(head -c 8192 "$ckpt" | tr -c '[:print:]' '\n' | grep -o '"__metadata__":{[^}]*}')
  scale=$(grep -o '"loss_scale":"[^"]*"' <<<"$meta" | cut -d'"' -f4)
  skipped=$(grep -o '"loss_scale_skipped_steps":"[^"]*"' <<<"$meta" | cut -d'"' -f4)
  if ! grep -q '"precision":"fp16"' <<<"$meta" || [ -z "$scale" ] || [ "$scale" = 1073741824 ] ||
     [ "${skipped:-0}" -lt 1 ]; then
    echo "FAIL $name: metadata lacks fp16's precision or scaler state (scale '$scale', skipped" \
         "'$skipped'): $meta"
    fails=$((fails + 1)); continue
  fi
  if ! timeout 300 "$bin" "${common[@]}" --steps 1 --load "$ckpt" --log_every 1 \
       >"$tmp/$name.load.log" 2>&1; then
    echo "FAIL $name: --load of its own fp16 checkpoint failed:"; cat "$tmp/$name.load.log"
    fails=$((fails + 1)); continue
  fi
  if ! grep -q "loss scaler restored: scale $scale," "$tmp/$name.load.log" ||
     ! grep -q "skipped $skipped\b" "$tmp/$name.load.log"; then
    echo "FAIL $name: the resumed run did not restore scale $scale / skipped $skipped:"
    grep -i "scale" "$tmp/$name.load.log" | head -5
    fails=$((fails + 1)); continue
  fi
  echo "ok   $name: precision fp16, loss scale $scale, skipped $skipped saved and restored"
done
[ "$fails" -eq 0 ]
