#!/usr/bin/env bash
# The binary's side-by-side table, end to end: one command, four runs, the rows and what they
# must show (fp16 S = 1 flushes gradients, dynamic S does not and grows after its window, the
# bytes per parameter 4 + 4 + 8 and 2 + 2 + 12), and one-line refusals of what it sets itself.
#   side_by_side_test.sh TRAIN_BINARY EXPECT_ERROR_SH
set -u
train=$1
source "$2"

out=$(mktemp)
# The train loss of every row must be the true mean loss, growth steps included (fp16's last
# step is a growth step here: unscaled with the new S it would read half of fp32's).
# 20 clean steps with S = 1024 and --loss_scale_window 5: S doubles 4 times, to 16384.
if ! timeout 300 "$train" --model tiny --steps 20 --eval_every 20 --initial_loss_scale 1024 \
    --loss_scale_window 5 >"$out" 2>&1; then
  echo "FAIL: the side-by-side run failed:"; cat "$out"; exit 1
fi
table=$(sed -n '/=== the same model, seed and batches in four precisions ===/,$p' "$out")
echo "$table"
check() {  # check NAME CONDITION-EXIT-STATUS
  if [ "$2" -ne 0 ]; then echo "FAIL $1"; fails=$((fails + 1)); else echo "ok $1"; fi
}
# Field k from the end of a row: 0 tokens/s, 1 underflow %, 2 final S, 3 skipped.
field() { echo "$table" | grep "^$1 " | awk -v k="$2" '{print $(NF - k)}'; }
for label in "fp32" "bf16" "fp16, dynamic S" "fp16, S = 1"; do
  [ "$(echo "$table" | grep -c "^$label ")" -ge 1 ]; check "row '$label'" $?
done
[ "$(field 'fp16, dynamic S' 2)" = "16384" ]; check "dynamic S grew 1024 -> 16384 (4 windows)" $?
[ "$(field 'fp16, dynamic S' 3)" = "0" ]; check "dynamic S skipped no step" $?
awk -v d="$(field 'fp16, dynamic S' 1 | tr -d %)" -v u="$(field 'fp16, S = 1' 1 | tr -d %)" \
  'BEGIN { exit !(d * 100 < u) }'
check "dynamic S flushed under 1/100 of what S = 1 did" $?
[ "$(field 'fp16, S = 1' 2)" = "1" ]; check "S = 1 stays 1" $?
awk -v u="$(field 'fp16, S = 1' 1 | tr -d %)" 'BEGIN { exit !(u > 0) }'
check "S = 1 flushed gradients to zero" $?
[ "$(field 'bf16' 1)" = "0.0000%" ]; check "bf16 flushed no gradient" $?
echo "$table" | grep -q "^  fp32 *4 + 4 + 8 = 16 bytes"; check "fp32 measured 4 + 4 + 8" $?
echo "$table" | grep -q "^  bf16 *2 + 2 + 12 = 16 bytes"; check "bf16 measured 2 + 2 + 12" $?
awk -v a="$(echo "$table" | grep '^fp32 ' | awk '{print $2}')" \
  -v b="$(echo "$table" | grep '^fp16, dynamic S ' | awk '{print $4}')" \
  'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }'
check "fp16 dynamic S's last train loss (a growth step) within 0.01 of fp32's" $?
rm -f "$out"

expect precision "--precision: mixed_precision sets it itself" -- "$train" --precision bf16
expect loss_scale "--loss_scale: mixed_precision sets it itself" -- "$train" --loss_scale 8
expect world_size "one rank, not --world_size 2" -- "$train" --world_size 2 --model tiny
expect save "--save" -- "$train" --model tiny --save /tmp/x.safetensors
expect steps "--steps 0" -- "$train" --model tiny --steps 0
finish
