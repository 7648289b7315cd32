#!/usr/bin/env bash
# A stage's grid (StageSpec::grid) that does not fit the world ends the run with exactly one line
# "error: dp D × pp P × tp T = X does not match the world size N" and exit status 2: checked by
# the launcher before any rank starts, and by every rank (ProcessGrid, all_ranks_ok) when mpiexec
# started them directly. A hang is a failure (timeout).
# Usage: grid_mismatch_test.sh path/to/grid_probe
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect NAME EXPECTED_LINE -- COMMAND...
expect() {
  local name=$1 want=$2
  shift 3
  timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(grep -c '^error: ' "$tmp/err")
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $name: exit status $rc, expected 2:"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1))
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL $name: expected one 'error:' line, got $lines:"; cat "$tmp/err"; fails=$((fails + 1))
  elif ! grep -qxF -- "$want" "$tmp/err"; then
    echo "FAIL $name: no line '$want' in:"; cat "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok   $name: $want"
  fi
}

fast=(--model tiny --steps 1 --eval_every 0 --quiet)
expect before_launch "error: dp 2 × pp 2 × tp 1 = 4 does not match the world size 2" -- \
  "$bin" --world_size 2 "${fast[@]}"
expect before_launch_3 "error: dp 3 × pp 2 × tp 1 = 6 does not match the world size 3" -- \
  "$bin" --world_size 3 "${fast[@]}"
expect in_ranks "error: dp 2 × pp 2 × tp 1 = 4 does not match the world size 2" -- \
  mpiexec -n 2 "$bin" --world_size 2 "${fast[@]}"
expect in_ranks_3 "error: dp 3 × pp 2 × tp 1 = 6 does not match the world size 3" -- \
  mpiexec -n 3 "$bin" --world_size 3 "${fast[@]}"

echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
