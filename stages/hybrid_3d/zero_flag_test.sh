#!/usr/bin/env bash
# Bad --zero values for hybrid_3d and the PP + ZeRO table's bad flags: each run must end with one
# line "error: ..." naming the value and exit status 2 (common/testing/expect_error.sh).
#   usage: zero_flag_test.sh path/to/hybrid_3d/train path/to/pp_zero_table
set -u
train=$1 table=$2
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish
grid=(--world_size 4 --dp 2 --pp 2 --tp 1 --model tiny --steps 1 --eval_every 0 --quiet)
expect_exit_2 zero_3 "--zero 3 must be 1 or 2" -- "$train" "${grid[@]}" --zero 3
expect_exit_2 zero_0 "--zero 0 must be 1 or 2" -- "$train" "${grid[@]}" --zero 0
expect_exit_2 table_preset "--preset gpt2 must be tiny or mini" -- "$table" --preset gpt2
expect_exit_2 table_steps "--steps 0 must be at least 1" -- "$table" --steps 0
finish
