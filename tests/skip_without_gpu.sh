# skip_without_gpu.sh — sourced by the test scripts that train with --device cuda
# (tests/stage_equivalence_test.sh, tests/mixed_precision_runs_test.sh; the GPU kit carries it
# beside them in scripts/).
#
#   skip_without_gpu SUITE CASE LOG -- COMMAND...
# runs COMMAND (a one-step --device cuda probe), its output into LOG. If it trains, returns 0. If
# it is refused because there is no GPU (or no CUDA in the binary), prints "SKIPPED: ..." with
# the reason, writes a skipped test case CASE of suite SUITE to $XML_OUTPUT_FILE (Bazel's
# test.xml: result="skipped"), and exits the script with 0, as the GPU twin tests skip. Any other
# refusal on a machine with a GPU prints "FAIL: ..." and exits the script with 1.
skip_without_gpu() {
  local suite=$1 case=$2 log=$3 why
  shift 4
  "$@" </dev/null >"$log" 2>&1 && return 0
  why=$(grep -m1 'error:' "$log")
  if grep -qE -- '--device cuda: (no CUDA device|no kernels for device cuda)' <<<"$why"; then
    echo "SKIPPED: no GPU to train on ($why)"
    if [ -n "${XML_OUTPUT_FILE:-}" ]; then
      cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" skipped="1"><testsuite name="$suite" tests="1" skipped="1"><testcase name="$case" result="skipped"><skipped message="no GPU"/></testcase></testsuite></testsuites>
XML
    fi
    exit 0
  fi
  echo "FAIL: baseline --device cuda refused on this machine: $why"
  exit 1
}
