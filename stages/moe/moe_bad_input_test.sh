#!/usr/bin/env bash
# Bad mixture-of-experts input: each case must end every rank with a non-zero exit and one line
# "error: ..." naming the offending values (common/testing/expect_error.sh); a hang is a failure.
#   usage: moe_bad_input_test.sh [--moe=path/to/moe/train] [--baseline=path/to/baseline/train]
#                                [--dense=path/to/a/dense/stage/train] [--skip=CASE ...]
# --moe: the MoE stage's flags (E not divisible by ep, k > E, c <= 0, ep not dividing the world
# size, a dense model, an indivisible batch), refused before launch (exit 2), and
# some inside the ranks (mpiexec directly: the launcher's checks are skipped, every rank ends).
# --baseline: the single-rank trainer refuses k > E on moe-tiny. --dense: a dense stage refuses a
# mixture of experts by name. --skip names a case left out (see the BUILD rule's comment).
set -u
moe="" base="" dense="" skip=" "
for a in "$@"; do
  case "$a" in
    --moe=*) moe=${a#--moe=} ;;
    --baseline=*) base=${a#--baseline=} ;;
    --dense=*) dense=${a#--dense=} ;;
    --skip=*) skip+="${a#--skip=} " ;;
    *) echo "unknown argument $a"; exit 2 ;;
  esac
done
source "${TEST_SRCDIR:+$TEST_SRCDIR/$TEST_WORKSPACE/}common/testing/expect_error.sh"  # expect, finish

fast=(--steps 1 --eval_every 0 --quiet)

# Refused before any rank starts: expect's one line, and exit status 2 (user_error).

# Inside the ranks (4 of them, started by mpiexec): the job ends (no hang, non-zero exit), and
# every "error:" line it prints names the values (each rank may print its own).
expect_in_ranks() {
  local name=$1 want=$2
  shift 3
  if [[ "$skip" == *" $name "* ]]; then
    echo "skip $name (left out by --skip: see the BUILD rule)"; return
  fi
  local err="$expect_tmp/err" rc lines named
  timeout 120 mpiexec -n 4 "$@" >/dev/null 2>"$err"
  rc=$?
  lines=$(grep -c '^error: ' "$err")
  named=$(grep '^error: ' "$err" | grep -cF -- "$want")
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $name: hung (killed after 120 s)"; fails=$((fails + 1))
  elif [ "$rc" -eq 0 ]; then
    echo "FAIL $name: exit status 0 (trained anyway)"; fails=$((fails + 1))
  elif [ "$lines" -lt 1 ] || [ "$named" -ne "$lines" ]; then
    echo "FAIL $name: $named of $lines 'error:' lines name '$want':"; cat "$err"
    fails=$((fails + 1))
  else
    echo "ok   $name (exit $rc, $lines line(s)): $(grep -m1 '^error: ' "$err")"
  fi
}

if [ -n "$moe" ]; then
  expect_exit_2 experts_not_divisible_by_ep \
    "experts E=6 are not divisible by expert-parallel size ep=4" -- \
    "$moe" "${fast[@]}" --experts 6 --ep 4
  expect_exit_2 top_k_exceeds_experts "top_k=9 exceeds experts=8" -- \
    "$moe" "${fast[@]}" --model moe-mini --top_k 9
  expect_exit_2 capacity_zero "capacity factor 0 must be > 0" -- \
    "$moe" "${fast[@]}" --capacity_factor 0
  expect_exit_2 capacity_negative "capacity factor -1 must be > 0" -- \
    "$moe" "${fast[@]}" --capacity_factor -1
  expect_exit_2 ep_not_dividing_world "--ep 3 does not divide world size 4" -- \
    "$moe" "${fast[@]}" --world_size 4 --ep 3
  expect_exit_2 ep_negative "--ep -2" -- "$moe" "${fast[@]}" --ep -2
  expect_exit_2 dense_model "--model mini has no experts" -- "$moe" "${fast[@]}" --model mini
  expect_exit_2 indivisible_batch_moe "global batch 6 is not divisible by world size 4" -- \
    "$moe" "${fast[@]}" --world_size 4 --global_batch 6
  # The same refusals inside the ranks: every rank ends.
  expect_in_ranks experts_not_divisible_in_ranks \
    "experts E=6 are not divisible by expert-parallel size ep=4" -- \
    "$moe" --world_size 4 "${fast[@]}" --experts 6 --ep 4
  expect_in_ranks top_k_in_ranks "top_k=9 exceeds experts=8" -- \
    "$moe" --world_size 4 "${fast[@]}" --top_k 9
  expect_in_ranks capacity_in_ranks "capacity factor 0" -- \
    "$moe" --world_size 4 "${fast[@]}" --capacity_factor 0
  expect_in_ranks ep_not_dividing_in_ranks "--ep 3" -- \
    "$moe" --world_size 4 "${fast[@]}" --ep 3
fi

if [ -n "$base" ]; then
  expect_exit_2 baseline_top_k_exceeds_experts "top_k=9 exceeds experts=4" -- \
    "$base" "${fast[@]}" --model moe-tiny --top_k 9
  expect_exit_2 baseline_capacity_zero "capacity factor 0 must be > 0" -- \
    "$base" "${fast[@]}" --model moe-tiny --capacity_factor 0
fi

if [ -n "$dense" ]; then
  expect_exit_2 dense_stage_refuses_moe_preset "trains dense models only" -- \
    "$dense" "${fast[@]}" --model moe-tiny
  expect_exit_2 dense_stage_names_the_model "--model moe-tiny (experts=4)" -- \
    "$dense" "${fast[@]}" --model moe-tiny
  expect_exit_2 dense_stage_refuses_experts_flag "(experts=4)" -- \
    "$dense" "${fast[@]}" --model tiny --experts 4
fi

finish
