#!/usr/bin/env bash
# --tile_factor k (memory-centric tiling): a k below 1 or one that does not divide C ends every
# rank with one line "error: ..." naming k and C, exit 2 before launch; and inside ranks that
# mpiexec started directly. Usage: tiling_bad_input_test.sh path/to/zero3/train
set -u
bin=$1
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish
fast=(--steps 1 --eval_every 0 --quiet)

expect zero_tile_factor "--tile_factor must be >= 1, got 0" -- "$bin" --tile_factor 0
expect negative_tile_factor "got -2" -- "$bin" --tile_factor -2
expect indivisible_tile_factor "--tile_factor 3 does not divide C=128" -- "$bin" --tile_factor 3
expect tile_factor_above_c "--tile_factor 64 does not divide C=32" -- \
  "$bin" --model tiny --tile_factor 64
# Refused before launch: exit status 2 (user_error).
timeout 120 "$bin" --tile_factor 3 >/dev/null 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then echo "FAIL exit status $rc, expected 2"; fails=$((fails + 1)); fi
# Inside the ranks: every rank ends, one message.
expect indivisible_tile_factor_in_ranks "--tile_factor 3 does not divide C=32" -- \
  mpiexec -n 2 "$bin" --world_size 2 --model tiny "${fast[@]}" --tile_factor 3
finish
