#!/usr/bin/env bash
# Every lab's untouched starter must fail its tests (labs/README.md, "Writing a lab"): a starter
# that passes means the TODO was solved in the repository, or the tests can no longer tell a
# starter from a solution. Runs each student test binary given (an MPI one, *_npN, at N ranks;
# at most 120 s each) and fails, naming it, when one exits 0 or reports no failed test.
#
#   labs/starters_fail_test.sh BINARY...   (labs/BUILD passes every lab's student_test)
set -uo pipefail
bad=0
for bin in "$@"; do
  args=()
  [[ "$bin" =~ _np([0-9]+)$ ]] && args=(--ranks="${BASH_REMATCH[1]}")
  out=$(timeout 120 "$bin" "${args[@]}" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "FAIL: $bin passed: its starter must fail (exit 0)"
    bad=1
  elif ! grep -qE '^\[  FAILED  \]|Failure' <<<"$out"; then
    echo "FAIL: $bin exited $rc without a failed test (a crash or a timeout, not the tests):"
    tail -5 <<<"$out"
    bad=1
  else
    n=$(grep -cE '^\[  FAILED  \] [A-Za-z]+\.' <<<"$out")
    echo "ok: $bin fails ($n failure lines, exit $rc)"
  fi
done
exit "$bad"
