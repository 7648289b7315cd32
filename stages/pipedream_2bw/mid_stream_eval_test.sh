#!/usr/bin/env bash
# mid_stream_eval_test.sh TRAIN — validation in the middle of PipeDream-2BW's flush-free stream.
#
# Between two steps of the stream, backward messages of the previous batch are still on their
# way (a rank receives them in its next segment). A forward-only pass that waited for every
# pending send would wait for those too, and with messages past MPICH's eager size (the mini
# model's 2·64·128 floats = 64 KiB) the send cannot complete before its receiver's next segment:
# the run hangs. So: mini, 4 ranks, a validation pass after every step, the watchdog at 30 s;
# the run must end with status 0 and print a finite validation loss after each of the 3 steps.
set -u
train=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 300 "$train" --steps 3 --eval_every 1 --eval_batches 1 --timeout 30 >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: exit status $rc (124: a rank waited 30 s: the mid-stream eval hung)"; tail -5 "$out"
  exit 1
fi
evals=$(grep -cE '^step [0-9]+ \| train loss [0-9.]+ \| val loss [0-9.]+$' "$out")
if [ "$evals" -ne 3 ]; then
  echo "FAIL: expected 3 validation lines, got $evals"; cat "$out"; exit 1
fi
echo "PASS: 3 validation passes in the middle of the stream"
