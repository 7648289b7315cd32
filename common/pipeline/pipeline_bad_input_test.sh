#!/usr/bin/env bash
# Bad input to a pipeline stage's train binary (after tests/bad_input_test.sh's shared cases):
# each case must end every rank with a non-zero exit and exactly one line "error: ..." naming
# the offending value; a hang is a failure (timeout).
#   usage: pipeline_bad_input_test.sh path/to/train [plain|naive|interleaved]
#   plain: --micro_batches; naive: no --micro_batches (m = 1); interleaved: also --chunks.
set -u
bin=$1
kind=${2:-plain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect NAME EXPECTED_SUBSTRING -- COMMAND...
expect() {
  local name=$1 want=$2
  shift 3
  local out="$tmp/out" err="$tmp/err" rc errors
  timeout 120 "$@" >"$out" 2>"$err"
  rc=$?
  errors=$(grep -c '^error: ' "$err")
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $name: hung (killed after 120 s)"; fails=$((fails + 1))
  elif [ "$rc" -eq 0 ]; then
    echo "FAIL $name: exit status 0"; fails=$((fails + 1))
  elif [ "$errors" -ne 1 ]; then
    echo "FAIL $name: expected one 'error:' line, got $errors:"; cat "$err"; fails=$((fails + 1))
  elif ! grep -qF -- "$want" "$err"; then
    echo "FAIL $name: message does not name '$want':"; cat "$err"; fails=$((fails + 1))
  else
    echo "ok   $name (exit $rc): $(grep '^error: ' "$err")"
  fi
}

fast=(--steps 1 --eval_every 0 --quiet)
# tiny has L = 2 layers: 4 ranks cannot hold p·v ≥ 4 equal slices.
expect layers_not_divisible "layers 2 not divisible by p·v" -- \
  "$bin" --model tiny --layers 2 --world_size 4 "${fast[@]}"
expect layers_not_divisible_in_ranks "layers 2 not divisible by p·v" -- \
  mpiexec -n 4 "$bin" --model tiny --layers 2 --world_size 4 "${fast[@]}"

if [ "$kind" != naive ]; then
  expect micro_batches_not_dividing_batch "global batch 16 is not divisible by 3 micro-batches" -- \
    "$bin" --global_batch 16 --micro_batches 3 "${fast[@]}"
  expect zero_micro_batches "--micro_batches 0 must be at least 1" -- \
    "$bin" --micro_batches 0 "${fast[@]}"
  # Inside the ranks (mpiexec directly: the launcher's checks are skipped), every rank must end.
  expect micro_batches_in_ranks "global batch 16 is not divisible by 3 micro-batches" -- \
    mpiexec -n 2 "$bin" --world_size 2 --model tiny --micro_batches 3 "${fast[@]}"
else
  expect no_micro_batches_flag "--micro_batches" -- "$bin" --micro_batches 4 "${fast[@]}"
fi

if [ "$kind" = interleaved ]; then
  # Megatron's interleaved schedule needs m % p == 0: m = 1 < p = 2 micro-batches.
  expect too_few_micro_batches "interleaved_1f1b needs m % p == 0" -- \
    "$bin" --world_size 2 --micro_batches 1 "${fast[@]}"
  expect too_few_micro_batches_in_ranks "interleaved_1f1b needs m % p == 0" -- \
    mpiexec -n 2 "$bin" --world_size 2 --micro_batches 1 "${fast[@]}"
  expect zero_chunks "--chunks 0 must be at least 1" -- "$bin" --chunks 0 "${fast[@]}"
  expect chunks_not_dividing_layers "layers 4 not divisible by p·v = 6 (p=2, v=3)" -- \
    "$bin" --world_size 2 --layers 4 --chunks 3 "${fast[@]}"
fi

echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
