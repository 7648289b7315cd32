#!/usr/bin/env bash
# The GPU kit: everything the GPU checks of issue 16 run, built here and packed for a machine
# that has a GPU but no Bazel, no MPICH and no corpus (the GPU machines lent to this project's
# sessions: CUDA's runtime, cuBLAS and NCCL, nothing else of ours).
#
#   tools/gpu_kit.sh [DIR]     build, then pack DIR (default .gpu_kit, ignored by git):
#                                DIR/kit.tar.xz   the kit
#                                DIR/run.sh       unpacks it to /tmp/llmp_kit and runs it
#   bash DIR/run.sh            on the GPU machine (tools/gpu_kit_run.sh says what it runs)
#
# In the kit (kit/MANIFEST lists every file and the commit it was built from):
#   stages/<stage>/train   every stage's trainer (tests/stage_equivalence_test.sh's layout)
#   tests/<test>           the GPU gtest binaries: every cc_test under //kernels/cuda (the kernels
#                          against their CPU twins), common/tensor:tensor_device_test, the NCCL
#                          process group's test (2 ranks: it needs 2 GPUs and skips on 1), the
#                          softmax_kernel lab's reference on the GPU (reference_gpu_test)
#   bin/                   compare_checkpoints, MPICH's mpiexec.hydra and hydra_pmi_proxy
#   lib/                   every shared library those load but the C/C++ runtime and NVIDIA's
#                          driver, cuBLAS and NCCL (hundreds of MiB, on the GPU machine already):
#                          MPICH, UCX (and its shared-memory module, lib/ucx), hwloc, spdlog, fmt,
#                          the CUDA runtime, Bazel's shared objects of the test binaries
#   scripts/               stage_equivalence_test.sh, clip_grad_test.sh, gpu_bench.sh, gpu_profile.sh,
#                          device_flag_test.sh, mixed_precision_runs_test.sh and what they source
#                          (skip_without_gpu.sh, expect_error.sh);
#                          run.sh (tools/gpu_kit_run.sh)
#   data/fortunes/         the default corpus (/usr/share/games/fortunes)
# The device tool carries at most 64 MiB: the binaries are stripped and the kit xz-compressed;
# the script fails, naming the size, when it is larger.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu_kit}
readonly kCarryLimit=$((60 * 1024 * 1024))  # 64 MiB less the working tree that travels with it

if [ ! -x "$(command -v nvcc || true)" ]; then
  echo "error: no nvcc on PATH: the kit needs the CUDA targets built (a CUDA toolkit)" >&2
  exit 2
fi
# every stage the cross-stage tests train, and the two table tools (run.sh runs them on the GPU)
stages=$( (sed -n 's#^ *"//stages/\([a-z0-9_]*\):train",#\1#p' tests/BUILD
           echo recompute; echo long_sequences) | sort -u)
gpu_tests=$(bazel query 'kind(cc_test, //kernels/cuda/...)' 2>/dev/null)
gpu_tests+=" //common/tensor:tensor_device_test //common/comm:nccl_process_group_test_np2"
gpu_tests+=" //labs/softmax_kernel:reference_gpu_test"
targets=(//tools:compare_checkpoints //tests:cpu_only_stage $gpu_tests)
for s in $stages; do targets+=("//stages/$s:train"); done
echo "building ${#targets[@]} targets"
bazel build "${targets[@]}" >/dev/null 2>&1 || bazel build "${targets[@]}"

kit=$(mktemp -d)/kit
trap 'rm -rf "$(dirname "$kit")"' EXIT
mkdir -p "$kit"/{stages,tests,bin,lib/ucx,scripts,data}
binaries=() sources=()  # the kit's copies, and the bazel-bin files they came from
add() {  # add SRC DEST: one binary into the kit
  cp "$1" "$2"
  sources+=("$1")
  binaries+=("$2")
}
for s in $stages; do
  mkdir -p "$kit/stages/$s"
  add "bazel-bin/stages/$s/train" "$kit/stages/$s/train"
done
for t in $gpu_tests; do
  path=bazel-bin/$(sed 's#^//##; s#:#/#' <<<"$t")
  add "$path" "$kit/tests/$(basename "$path")"
done
add bazel-bin/tools/compare_checkpoints "$kit/bin/compare_checkpoints"
add bazel-bin/tests/cpu_only_stage "$kit/bin/cpu_only_stage"
add "$(readlink -f "$(command -v mpiexec.hydra)")" "$kit/bin/mpiexec.hydra"
add "$(readlink -f "$(command -v hydra_pmi_proxy)")" "$kit/bin/hydra_pmi_proxy"

# The shared libraries: ldd of every binary where Bazel built it (so the test binaries' RPATH
# resolves Bazel's _solib objects), less what the GPU machine has and must supply itself.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnccl)\.so'
for src in "${sources[@]}"; do
  ldd "$src" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  grep -qE "$skip" <<<"$name" || cp -L "$path" "$kit/lib/$name"
done
if ucx=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libucs.so.0 /{ print $NF; exit }')")")/ucx &&
   [ -d "$ucx" ]; then
  # shared memory between processes (cma); UCX's InfiniBand modules would need libibverbs
  cp -L "$ucx"/libuct_cma.so.0 "$kit/lib/ucx/" 2>/dev/null || true
fi
strip --strip-unneeded "${binaries[@]}" "$kit"/lib/*.so* "$kit"/lib/ucx/*.so* 2>/dev/null || true

cp tests/stage_equivalence_test.sh tests/device_flag_test.sh tests/clip_grad_test.sh \
   tests/mixed_precision_runs_test.sh tests/skip_without_gpu.sh tools/gpu_bench.sh tools/gpu_profile.sh common/testing/expect_error.sh "$kit/scripts/"
cp tools/gpu_kit_run.sh "$kit/run.sh"
cp -r /usr/share/games/fortunes "$kit/data/fortunes"
{
  echo "llmp GPU kit, commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ uncommitted changes)'), built $(date -u +%FT%TZ) on $(hostname)"
  (cd "$kit" && find . -type f | sort)
} >"$kit/MANIFEST"

mkdir -p "$out"
tar -C "$(dirname "$kit")" -cJf "$out/kit.tar.xz" kit
cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# Unpacks the GPU kit beside this file (tools/gpu_kit.sh) to /tmp/llmp_kit and runs it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/llmp_kit && mkdir -p /tmp/llmp_kit
tar -C /tmp/llmp_kit -xJf "$here/kit.tar.xz"
exec bash /tmp/llmp_kit/kit/run.sh "$@"
EOF
size=$(stat -c %s "$out/kit.tar.xz")
if [ "$size" -gt "$kCarryLimit" ]; then
  echo "error: $out/kit.tar.xz is $((size / 1048576)) MiB, over the $((kCarryLimit / 1048576)) MiB the device tool carries" >&2
  exit 1
fi
echo "wrote $out/kit.tar.xz ($((size / 1024)) KiB: $(wc -l <"$kit/MANIFEST") files) and $out/run.sh"
echo "on a GPU machine: two device runs, carry [\"$out\"], commands \"bash $out/run.sh tests\" then \"bash $out/run.sh bench\""
