#!/usr/bin/env bash
# PipeDream-2BW's own bad input (the shared pipeline cases run in pipeline_bad_input_test):
# m < p micro-batches cannot keep two weight versions enough (a rank must finish batch t-1's
# backwards before batch t+1 starts, pipedream_2bw.h), and fp16 is refused. Through the launcher and inside the
# ranks, one line "error: ..." naming m and p, and exit status 2 on EVERY rank.
#   usage: pipedream_2bw_bad_input_test.sh path/to/train
set -u
bin=$1
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)
want="pipedream_2bw needs m >= p micro-batches (a rank finishes batch t-1 before batch t+1 starts): m=2, p=4"
expect micro_batches_below_p "$want" -- "$bin" --micro_batches 2 "${fast[@]}"
expect micro_batches_below_p_in_ranks "$want" -- mpiexec -n 4 "$bin" --micro_batches 2 "${fast[@]}"

# Every rank's own exit status: each of the 4 prints "rank-exit N" after its train ends.
codes=$(timeout 120 mpiexec -n 4 bash -c '"$0" "$@" 2>/dev/null; echo "rank-exit $?"' \
  "$bin" --micro_batches 2 "${fast[@]}" | grep -c '^rank-exit 2$')
if [ "$codes" -eq 4 ]; then
  echo "ok   micro_batches_below_p_every_rank: 4 of 4 ranks exit 2"
else
  echo "FAIL micro_batches_below_p_every_rank: $codes of 4 ranks exit 2"; fails=$((fails + 1))
fi

# fp16 is refused by name (its loss scale may change between a batch's two segments), before
# launch and inside the ranks; bf16 runs.
want="pipedream_2bw trains in fp32 or bf16, not fp16"
expect fp16_refused "$want" -- "$bin" --model tiny --layers 4 --micro_batches 4 --precision fp16 \
  "${fast[@]}"
expect fp16_refused_in_ranks "$want" -- mpiexec -n 4 "$bin" --model tiny --layers 4 \
  --micro_batches 4 --precision fp16 "${fast[@]}"
if timeout 120 "$bin" --model tiny --layers 4 --micro_batches 4 --precision bf16 "${fast[@]}" \
  >/dev/null 2>&1; then
  echo "ok   bf16_runs"
else
  echo "FAIL bf16_runs: --precision bf16 must run"; fails=$((fails + 1))
fi

# m = p is the smallest m that works.
if timeout 120 "$bin" --model tiny --layers 4 --micro_batches 4 "${fast[@]}" >/dev/null 2>&1; then
  echo "ok   micro_batches_equal_p: runs"
else
  echo "FAIL micro_batches_equal_p: m = p = 4 must run"; fails=$((fails + 1))
fi

finish
