#!/usr/bin/env bash
# DDP's own flags: a bad --bucket_mb or --grad_accum ends the run before any rank starts, with one
# line "error: ..." naming the value and exit status 2. (The shared flags are covered by
# tests/bad_input_test.sh.) Usage: ddp_flags_test.sh path/to/train
set -u
bin=$1
fails=0

# expect NAME EXPECTED_SUBSTRING -- ARGS...   (the message must contain EXPECTED_SUBSTRING, or be
# exactly "error: EXPECTED" when EXPECTED_SUBSTRING is written "=EXPECTED")
expect() {
  local name=$1 want=$2
  shift 3
  local err rc
  err=$(timeout 60 "$bin" --steps 1 --eval_every 0 --quiet "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $name: exit status $rc (expected 2): $err"; fails=$((fails + 1))
  elif [ "$(grep -c '^error: ' <<<"$err")" -ne 1 ] ||
    { [ "${want:0:1}" = "=" ] && ! grep -qxF -- "error: ${want:1}" <<<"$err"; } ||
    ! grep -qF -- "${want#=}" <<<"$err"; then
    echo "FAIL $name: expected one 'error:' line naming '$want', got: $err"; fails=$((fails + 1))
  else
    echo "ok   $name: $err"
  fi
}

expect zero_bucket "=--bucket_mb must be > 0, got 0" -- --bucket_mb 0
expect negative_bucket "=--bucket_mb must be > 0, got -1" -- --bucket_mb -1
expect text_bucket "abc" -- --bucket_mb abc
expect zero_accum "--grad_accum must be >= 1, got 0" -- --grad_accum 0
expect indivisible_accum "global batch 12 is not divisible by data-parallel size 4 × grad_accum 2" \
  -- --global_batch 12 --world_size 4 --grad_accum 2
exit $((fails > 0))
