# expect_error.sh — sourced by the bad-input test scripts (tests/bad_input_test.sh,
# common/pipeline/pipeline_bad_input_test.sh, common/tp/tp_bad_input_test.sh).
#
#   expect NAME EXPECTED_SUBSTRING -- COMMAND...
# runs COMMAND and counts a failure (in $fails) unless it exits non-zero within 120 s and prints
# exactly one line "error: ..." to stderr, containing EXPECTED_SUBSTRING. A hang is a failure.
# $skip may list case names that do not apply to the stage (" name1 name2 "). The command's exit
# status is left in $expect_rc ("skip" for a skipped case).
#   expect_exit_2 NAME EXPECTED_SUBSTRING -- COMMAND...
# expect, and the exit status must be exactly 2: bad input, refused by user_error before the
# launch or by all_ranks_ok inside the ranks (the command runs once).
#   finish    prints the number of failed cases and returns non-zero when there was one.
expect_tmp=$(mktemp -d)
trap 'rm -rf "$expect_tmp"' EXIT
fails=0
skip=${skip:-" "}

expect() {
  local name=$1 want=$2
  shift 3
  expect_rc=skip
  if [[ "$skip" == *" $name "* ]]; then
    echo "skip $name (does not apply to this stage)"
    return
  fi
  local out="$expect_tmp/out" err="$expect_tmp/err" rc errors
  timeout 120 "$@" >"$out" 2>"$err"
  rc=$?
  expect_rc=$rc
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

expect_exit_2() {
  local name=$1
  expect "$@"
  [ "$expect_rc" = skip ] && return
  if [ "$expect_rc" -ne 2 ]; then
    echo "FAIL $name: exit status $expect_rc, expected 2 (bad input)"; fails=$((fails + 1))
  fi
}

finish() {
  echo "$fails case(s) failed"
  [ "$fails" -eq 0 ]
}
