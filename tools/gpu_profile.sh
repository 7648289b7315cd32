#!/usr/bin/env bash
# Where a GPU training step's time goes (issue 16's benchmark), on a machine with a GPU and
# Nsight Compute (ncu): the baseline trainer on the gpt2 preset, every kernel of a short run timed
# by ncu (gpu__time_duration), summed per kernel name, beside the step's wall time without ncu.
# The gap between the two is what the GPU did not spend in kernels: launches, host
# synchronisations, allocator calls, host-side work.
#
#   tools/gpu_profile.sh [TRAIN] [ARGS...]
#     TRAIN   the baseline trainer (default: GPU_BENCH_BIN/baseline/train, else bazel-bin's)
#     ARGS    more trainer flags (e.g. --precision bf16)
# GPU_BENCH_BATCH (8 sequences) and GPU_PROFILE_STEPS (2) set the run; NCU (ncu on PATH, else
# the newest /opt/nvidia/nsight-compute/*/ncu) the profiler.
# Prints the wall time per step, the kernels' total per step and the 25 costliest kernel names.
set -euo pipefail
train=${1:-${GPU_BENCH_BIN:-bazel-bin/stages}/baseline/train}
shift || true
batch=${GPU_BENCH_BATCH:-8}
steps=${GPU_PROFILE_STEPS:-2}
ncu=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort | tail -1)}
[ -x "$train" ] || { echo "error: no trainer at '$train'" >&2; exit 2; }
[ -n "$ncu" ] && [ -x "$ncu" ] || { echo "error: no ncu found (set NCU)" >&2; exit 2; }
args=(--device cuda --world_size 1 --model gpt2 --global_batch "$batch" --eval_every 0
      --log_every 1000 "$@")

wall=$("$train" "${args[@]}" --steps $((steps + 3)) 2>&1 | grep -m1 'done:' |
       sed -E 's/.* ([0-9.]+) ms\/step.*/\1/')
echo "wall: $wall ms/step (${args[*]}, $((steps + 3)) steps, the first not timed)"

csv=$(mktemp)
"$ncu" --metrics gpu__time_duration.sum --csv --print-units base "$train" "${args[@]}" \
  --steps "$steps" >"$csv" 2>/dev/null || true
# One CSV row per kernel launch: "ID","Process ID",...,"Kernel Name",...,"Metric Value".
python3 - "$csv" "$steps" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if not rows or "Kernel Name" not in rows[0]:
    sys.exit("error: ncu wrote no kernel table")
head, body = rows[0], rows[1:]
name, val = head.index("Kernel Name"), head.index("Metric Value")
steps = int(sys.argv[2])
total, count = collections.Counter(), collections.Counter()
for r in body:
    k = r[name].split("(")[0][:70]
    total[k] += float(r[val].replace(",", "")) / 1e6  # ns -> ms
    count[k] += 1
s = sum(total.values())
print(f"kernels: {sum(count.values())} launches, {s / steps:.1f} ms per step of GPU time "
      f"(the whole run / {steps} steps: initialisation's kernels included)")
print(f"{'ms/step':>8} {'share':>6} {'launches':>8}  kernel")
for k, t in total.most_common(25):
    print(f"{t / steps:8.2f} {100 * t / s:5.1f}% {count[k]:8d}  {k}")
PY
rm -f "$csv"
