"""stage_trainer: a stage's `bazel run //stages/<name>:train` binary, and its emulated twin."""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")

def stage_trainer(name, deps, srcs = ["main.cc"], visibility = None):
    """Defines `name` (the stage's `train`) and `name` + "_emulated" from the stage's main.cc.

    train: with the CUDA kernel table, allocator and NCCL backend linked in when the toolkit was
    found (they register themselves, so `--device cuda` runs on a GPU, over NCCL with one GPU per
    rank); without them `--device cuda` is refused by name.
    train_emulated: the same with the CUDA table under the CUDA emulator (kernels/cuda/emulator),
    so `--device cuda` runs the GPU path's own kernels, cuBLAS and NCCL calls on the CPU, on any
    machine (NCCL over MPI, with $LLMP_CUDA_EMULATOR_DEVICES GPUs). Tagged manual: built only
    for what runs it (tests:stage_equivalence_emulated_test).

    Args:
      name: "train", what `bazel run //stages/<stage>:train` runs.
      deps: the stage's libraries and train_main.
      srcs: the binary's sources.
      visibility: train's, when other packages than the default run it (tools/ for a tool over
        the stages); None: the package's default.
    """
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps + (["//common/comm:nccl", "//kernels/cuda:ops"] if CUDA_AVAILABLE else []),
        visibility = visibility,
    )
    native.cc_binary(
        name = name + "_emulated",
        srcs = srcs,
        deps = deps + ["//common/comm:nccl_emulated", "//kernels/cuda:ops_emulated"],
        tags = ["manual"],
    )
