#!/usr/bin/env bash
# --constant_buffer_mb on a stage's train binary (ddp, zero1, zero2, zero3): a bad value ends the
# run before any rank starts with one line "error: ..." naming the value, exit status 2; a good
# one reaches the strategy: a 2-rank run of tiny prints the report row "comm buffer, peak in
# step" at the bound, 16384 bytes for 1/64 MiB. Usage: constant_buffer_flag_test.sh path/to/train
set -u
bin=$1
fails=0

# expect NAME "=EXACT MESSAGE" -- ARGS...   (exit status 2 and exactly the line "error: MESSAGE")
expect() {
  local name=$1 want=${2#=}
  shift 3
  local err rc
  err=$(timeout 60 "$bin" --steps 1 --eval_every 0 --quiet "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $name: exit status $rc (expected 2): $err"; fails=$((fails + 1))
  elif [ "$(grep -c '^error: ' <<<"$err")" -ne 1 ] || ! grep -qxF -- "error: $want" <<<"$err"; then
    echo "FAIL $name: expected the one line 'error: $want', got: $err"; fails=$((fails + 1))
  else
    echo "ok   $name: $err"
  fi
}

expect zero "=--constant_buffer_mb must be a finite number > 0, got 0" -- --constant_buffer_mb 0
expect negative "=--constant_buffer_mb must be a finite number > 0, got -0.5" -- \
  --constant_buffer_mb -0.5
expect nan "=--constant_buffer_mb must be a finite number > 0, got nan" -- --constant_buffer_mb nan
expect inf "=--constant_buffer_mb must be a finite number > 0, got inf" -- --constant_buffer_mb inf
expect below_one_element \
  "=--constant_buffer_mb 2e-06 is 2 bytes, less than one 4-byte gradient element" -- \
  --constant_buffer_mb 2e-6
expect below_one_bf16_element \
  "=--constant_buffer_mb 1e-06 is 1 bytes, less than one 2-byte gradient element" -- \
  --precision bf16 --constant_buffer_mb 1e-6

# Wired through: the report's measured row at the bound (the "exact bytes" line of rank 0).
out=$(timeout 120 "$bin" --model tiny --world_size 2 --steps 2 --eval_every 0 --quiet \
  --constant_buffer_mb 0.015625 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "comm buffer, peak in step 16384" <<<"$out"; then
  echo "FAIL wired: exit $rc, no 'comm buffer, peak in step 16384' in:"; echo "$out"
  fails=$((fails + 1))
else
  echo "ok   wired: $(grep -o 'comm buffer, peak in step 16384[^)]*' <<<"$out")"
fi
exit $((fails > 0))
