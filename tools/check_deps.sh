#!/usr/bin/env bash
# The layering rule of the monorepo, proved with bazel query: nothing under common/ depends on a
# stage or on the cross-stage tests, and no stage depends on another stage (stages share code
# only through common/). Prints the offending targets and exits 1 when the rule is broken.
#   tools/check_deps.sh        (CI runs it before the tests: .ci/run)
set -uo pipefail
cd "$(dirname "$0")/.."
fails=0

query() { bazel query --noshow_progress "$1" 2>"$err"; }
err=$(mktemp)
trap 'rm -f "$err"' EXIT

bad=$(query 'kind(rule, deps(//common/...)) intersect (//stages/... + //tests/...)') ||
  { echo "FAIL bazel query:"; cat "$err"; exit 1; }
if [ -n "$bad" ]; then
  echo "FAIL common/ depends on stages/ or tests/:"; echo "$bad"; fails=$((fails + 1))
else
  echo "ok   common/ depends on no stage and no test target"
fi

for dir in stages/*/; do
  s=$(basename "$dir")
  # Direct dependencies only: a stage's test may use //tests, which itself uses the baseline.
  others=$(query "kind(rule, deps(//stages/$s/..., 1)) intersect (//stages/... except //stages/$s/...)") ||
    { echo "FAIL bazel query:"; cat "$err"; exit 1; }
  if [ -n "$others" ]; then
    echo "FAIL stages/$s depends on another stage:"; echo "$others"
    fails=$((fails + 1))
  fi
done
[ "$fails" -eq 0 ] && echo "ok   no stage depends on another stage"
[ "$fails" -eq 0 ]
