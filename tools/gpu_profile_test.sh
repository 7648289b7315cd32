#!/usr/bin/env bash
# tools/gpu_profile.sh against a stub trainer and a stub ncu: the wall time read from the
# trainer's "done:" line, and ncu's table (one CSV row per launch and metric: time in ns, DRAM
# bytes read and written) summed per kernel name over the steps: ms, share, launches, GB per step
# and the rate, worked by hand below. A kernel's parameter list is cut from its name (its
# template arguments stay: each instantiation is its own row), so its launches add up.
#
#   gpu_profile_test.sh PROFILE
set -u
profile=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

cat >"$tmp/train" <<'SH'
#!/usr/bin/env bash
echo "done: 5 steps | train loss 3.0 | val loss - | 1000 tokens/s | 123.4 ms/step | 1 FLOP/token"
SH
# Two steps: gemm_kernel twice (4 ms and 6 GB of DRAM traffic per launch), adamw once (1 ms, 3 GB).
cat >"$tmp/ncu" <<'SH'
#!/usr/bin/env bash
h='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
h+='"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
echo "$h"
row() {  # ID, kernel, metric, unit, value
  printf '"%s","1","train","h","%s","1","7","(256, 1, 1)","(9, 1, 1)","0","9.0","x",' "$1" "$2"
  printf '"%s","%s","%s"\n' "$3" "$4" "$5"
}
for id in 0 1; do
  row $id "void gemm_kernel<float>(float *, int)" gpu__time_duration.sum ns "4,000,000"
  row $id "void gemm_kernel<float>(float *, int)" dram__bytes_read.sum byte "4000000000"
  row $id "void gemm_kernel<float>(float *, int)" dram__bytes_write.sum byte "2000000000"
done
row 2 "adamw_kernel(float *, Runs, Hyper)" gpu__time_duration.sum ns "1000000"
row 2 "adamw_kernel(float *, Runs, Hyper)" dram__bytes_read.sum byte "2000000000"
row 2 "adamw_kernel(float *, Runs, Hyper)" dram__bytes_write.sum byte "1000000000"
SH
chmod +x "$tmp/train" "$tmp/ncu"

out=$(NCU="$tmp/ncu" GPU_PROFILE_STEPS=2 bash "$profile" "$tmp/train" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || fail "exit status $rc"
# 9 ms and 15 GB over 2 steps: 4.5 ms and 7.50 GB per step.
grep -q '^wall: 123.4 ms/step' <<<"$out" || fail "the wall time"
grep -q '^kernels: 3 launches, 4.5 ms per step of GPU time, 7.50 GB of DRAM traffic per step' \
  <<<"$out" || fail "the totals line"
# gemm: 8 ms / 2 = 4.00 ms/step, 88.9%, 2 launches, 12 GB / 2 = 6.000 GB/step, 12 GB / 8 ms.
grep -qE '^ +4\.00 +88\.9% +2 +6\.000 +1500  void gemm_kernel<float>$' <<<"$out" ||
  fail "gemm_kernel's row (4.00 ms, 88.9%, 2 launches, 6.000 GB, 1500 GB/s)"
# adamw: 1 ms / 2 = 0.50, 11.1%, 1 launch, 3 GB / 2 = 1.500 GB/step, 3 GB / 1 ms.
grep -qE '^ +0\.50 +11\.1% +1 +1\.500 +3000  adamw_kernel$' <<<"$out" ||
  fail "adamw_kernel's row (0.50 ms, 11.1%, 1 launch, 1.500 GB, 3000 GB/s)"

# ncu writing no table (no GPU, no permission): a one-line error and a non-zero exit.
printf '#!/usr/bin/env bash\necho "==ERROR== no device"\n' >"$tmp/ncu"
out=$(NCU="$tmp/ncu" bash "$profile" "$tmp/train" 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q 'error: ncu wrote no kernel table' <<<"$out" ||
  fail "ncu without a table: exit $rc, output: $out"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
