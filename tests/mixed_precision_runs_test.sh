#!/usr/bin/env bash
# Every stage that takes --precision trains in 16 bits as a user runs it, on the CPU or on a GPU:
# each binary trains tiny (L = 4, H = 4) for 5 steps in bf16 (and the stages of each kind in fp16
# too), must exit 0, print every report row "ok" (measured == its closed form: the 16-bit model
# states and messages, in the device's bytes under --device cuda) and end within kLoss of the
# baseline's printed training loss in the same precision on the same device. The in-process tests
# (stages/*/..._test, tests/*mixed_precision*) compare 16-bit runs more finely on the CPU; this
# is their check of the binaries (flags, the precision reaching each strategy) and, on a GPU, the
# one that runs every 16-bit stage there (the kit: tools/gpu_kit_run.sh). The mixture-of-experts
# stage trains moe-tiny (same L and H; blocks 1 and 3 hold 4 experts each) at ep = 2 against the
# baseline's moe-tiny run in the same precision.
#
#   mixed_precision_runs_test.sh DEVICE BASELINE
#     DEVICE     cpu or cuda (every run gets --device DEVICE)
#     BASELINE   stages/baseline/train (or train_emulated); every other stage's binary is beside
#                it, at ../<stage>/ under the same name (bazel-bin's layout and the GPU kit's)
#
# Bound. kLoss = 2e-3 on the printed loss (4 decimals, ≈ 5.30 after 5 steps): on the CPU every
# stage ends within 2e-4 of the baseline (measured: tensor_parallel 5.3026 against 5.3024 in
# bf16; every fp16 run equal to the printed digit), where the in-process tests see ≤ 1.5e-5
# relative; a GPU sums each product in another order, which moves a bf16 loss by a few of its
# ulps, not by 1e-3. The check can fail: pipedream_2bw (stale weights by design) ends 6.7e-2
# away in bf16 and must differ by more than kLoss (the negative control).
#
# DEVICE cuda without a GPU (or in a binary built without CUDA): skipped with the reason, a
# skipped test case in $XML_OUTPUT_FILE, exit 0 (as stage_equivalence_test.sh).
set -u
source "$(dirname "$0")/skip_without_gpu.sh"
device=$1 stages=$(dirname "$(dirname "$2")") trainer=$(basename "$2")
readonly kLoss=2e-3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--layers 4 --heads 4 --global_batch 8 --eval_every 0 --timeout 120 --device "$device")
model=tiny  # run's --model (the MoE runs set moe-tiny)
failures=()

# run NAME STAGE PRECISION WORLD [FLAGS...]: prints the final training loss; 1 on failure.
run() {
  local name=$1 stage=$2 precision=$3 world=$4
  shift 4
  if ! "$stages/$stage/$trainer" --model "$model" "${common[@]}" --steps 5 \
       --precision "$precision" --world_size "$world" "$@" </dev/null >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: $stage --precision $precision --world_size $world $* exited non-zero:" >&2
    tail -5 "$tmp/$name.log" >&2
    return 1
  fi
  if grep -q 'DIFFERS' "$tmp/$name.log" || ! grep -q ' ok$' "$tmp/$name.log"; then
    echo "FAIL $name: a report row differs from its closed form (or no report):" >&2
    grep -E 'DIFFERS|formula' "$tmp/$name.log" >&2
    return 1
  fi
  grep -o '^done: [0-9]* steps | train loss [0-9.]*' "$tmp/$name.log" | awk '{print $NF}'
}

if [ "$device" = cuda ]; then
  skip_without_gpu mixed_precision_runs_cuda every_16_bit_stage_on_the_gpu "$tmp/probe.log" -- \
    "$stages/baseline/$trainer" --model tiny "${common[@]}" --steps 1
fi

# close A B: |A − B| <= kLoss.
close() { awk -v a="$1" -v b="$2" -v k="$kLoss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= k) }'; }

for precision in bf16 fp16; do
  if ! ref=$(run "baseline_$precision" baseline "$precision" 1); then
    failures+=("baseline_$precision")
    continue
  fi
  echo "ok   baseline in $precision on $device: train loss $ref"
  # stage world [flags]: bf16 for every stage; fp16 for one of each kind (pipedream_2bw is bf16
  # only, and is checked below as the control).
  while read -r stage world which flags; do
    [ -z "$stage" ] && continue
    [ "$which" = bf16 ] && [ "$precision" = fp16 ] && continue
    name=${stage}_$precision
    # shellcheck disable=SC2086  # flags are words
    if ! loss=$(run "$name" "$stage" "$precision" "$world" $flags); then
      failures+=("$name")
    elif close "$loss" "$ref"; then
      echo "ok   $name: train loss $loss, every report row ok (baseline $ref, bound $kLoss)"
    else
      echo "FAIL $name: train loss $loss, baseline $ref (bound $kLoss)"
      failures+=("$name")
    fi
  done <<'EOF'
naive_dp 2 bf16
ddp 2 bf16
zero1 2 bf16
zero2 2 bf16
zero3 2 both
naive_pp 2 bf16
gpipe 2 bf16
1f1b 2 both
interleaved_1f1b 2 bf16
zero_bubble 2 bf16
chimera 2 bf16
tensor_parallel 2 both
sequence_parallel 2 bf16
hybrid_3d 8 both
ulysses 2 both
ring_attention 2 both
ring_self_attention 2 both
EOF
  # A mixture of experts against the baseline's moe-tiny run: tokens dispatched and returned in
  # 16 bits by the all_to_alls of 2 expert-parallel ranks, the router and the combine in fp32.
  model=moe-tiny
  if ! ref=$(run "baseline_moe_$precision" baseline "$precision" 1); then
    failures+=("baseline_moe_$precision")
  elif ! loss=$(run "moe_$precision" moe "$precision" 2); then
    failures+=("moe_$precision")
  elif close "$loss" "$ref"; then
    echo "ok   moe_$precision: train loss $loss, every report row ok (baseline moe-tiny $ref," \
         "bound $kLoss)"
  else
    echo "FAIL moe_$precision: train loss $loss, baseline moe-tiny $ref (bound $kLoss)"
    failures+=("moe_$precision")
  fi
  model=tiny
done

# The negative control: PipeDream-2BW's stale weights do not end at the baseline's loss.
if ref=$(grep -o '^done: [0-9]* steps | train loss [0-9.]*' "$tmp/baseline_bf16.log" 2>/dev/null |
         awk '{print $NF}') && [ -n "$ref" ]; then
  if ! loss=$(run pipedream_2bw_bf16 pipedream_2bw bf16 2); then
    failures+=(pipedream_2bw_bf16)
  elif close "$loss" "$ref"; then
    echo "FAIL pipedream_2bw_bf16: train loss $loss within $kLoss of the baseline's $ref: the" \
         "check could not fail"
    failures+=(pipedream_2bw_bf16)
  else
    echo "ok   pipedream_2bw_bf16 differs from the baseline beyond $kLoss, as it must: $loss" \
         "against $ref"
  fi
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "${#failures[@]} failed: ${failures[*]}"
  exit 1
fi
echo "every 16-bit stage on $device trains to the 16-bit baseline's loss, its report rows ok"
