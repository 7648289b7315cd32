#!/usr/bin/env bash
# Where a GPU training step's time goes (issue 16's benchmark), on a machine with a GPU and
# Nsight Compute (ncu): the baseline trainer on the gpt2 preset, every kernel of a short run timed
# by ncu (gpu__time_duration, and its DRAM traffic: dram__bytes_read/write), summed per kernel
# name, beside the step's wall time without ncu.
# The gap between the two is what the GPU did not spend in kernels: launches, host
# synchronisations, allocator calls, host-side work.
#
#   tools/gpu_profile.sh [TRAIN] [ARGS...]
#     TRAIN   the baseline trainer (default: GPU_BENCH_BIN/baseline/train, else bazel-bin's)
#     ARGS    more trainer flags (e.g. --precision bf16)
# GPU_BENCH_BATCH (8 sequences) and GPU_PROFILE_STEPS (2) set the run; NCU (ncu on PATH, else
# the newest /opt/nvidia/nsight-compute/*/ncu) the profiler.
# Prints the wall time per step, the kernels' total per step and the 25 costliest kernel names,
# each with its DRAM bytes per step and the rate it moved them at (GB/s: a kernel near the GPU's
# memory bandwidth is bandwidth-bound; one far below it, with little time, is launch-bound).
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
"$ncu" --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  --print-units base "$train" "${args[@]}" --steps "$steps" >"$csv" 2>/dev/null || true
# One CSV row per kernel launch and metric: "ID",...,"Kernel Name",...,"Metric Name",
# "Metric Unit","Metric Value" (the time in ns, the bytes in bytes: --print-units base).
python3 - "$csv" "$steps" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if not rows or "Kernel Name" not in rows[0] or "Metric Name" not in rows[0]:
    sys.exit("error: ncu wrote no kernel table")
head, body = rows[0], rows[1:]
col = {c: head.index(c) for c in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
steps = int(sys.argv[2])
launches = collections.defaultdict(dict)  # launch ID -> {"name": ..., metric: value}
for r in body:
    launch = launches[r[col["ID"]]]
    launch["name"] = r[col["Kernel Name"]].split("(")[0][:60]
    launch[r[col["Metric Name"]]] = float(r[col["Metric Value"]].replace(",", ""))
ms, gb, count = collections.Counter(), collections.Counter(), collections.Counter()
for launch in launches.values():
    k = launch["name"]
    ms[k] += launch.get("gpu__time_duration.sum", 0.0) / 1e6  # ns -> ms
    gb[k] += (launch.get("dram__bytes_read.sum", 0.0) +
              launch.get("dram__bytes_write.sum", 0.0)) / 1e9
    count[k] += 1
s = sum(ms.values())
print(f"kernels: {sum(count.values())} launches, {s / steps:.1f} ms per step of GPU time, "
      f"{sum(gb.values()) / steps:.2f} GB of DRAM traffic per step "
      f"(the whole run / {steps} steps: initialisation's kernels included)")
# GB/s: what a kernel moved over its time; near the GPU's DRAM bandwidth (3.35 TB/s on an H100
# SXM) it is bandwidth-bound, and only fewer bytes make it faster.
print(f"{'ms/step':>8} {'share':>6} {'launches':>8} {'GB/step':>8} {'GB/s':>7}  kernel")
for k, t in ms.most_common(25):
    rate = gb[k] / (t / 1e3) if t > 0 else 0.0
    print(f"{t / steps:8.2f} {100 * t / s:5.1f}% {count[k]:8d} {gb[k] / steps:8.3f} "
          f"{rate:7.0f}  {k}")
PY
rm -f "$csv"
