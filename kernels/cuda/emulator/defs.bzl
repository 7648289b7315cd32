"""The CUDA emulator's builds: a CUDA library's own sources built by g++ for the emulator
(emulated_cuda_library), and kernels/cuda's targets declared once for both builds (twinned_*)."""

load("@local_cuda//:defs.bzl", "cuda_cc_library", "cuda_cc_test", "cuda_library")

# nvcc's #pragma unroll means nothing to g++.
EMULATED_COPTS = ["-Wno-unknown-pragmas"]

def emulated_cuda_library(name, srcs = [], hdrs = [], deps = [], launch_hdrs = [], **kwargs):
    """A cc_library of `srcs` for the CUDA emulator (kernels/cuda/emulator).

    Each .cu file is rewritten by cu_to_cc (its launches as calls of emu::launcher) into
    emulated/<file>.cu.cc; the other sources are compiled as they are, against the emulator's
    toolkit headers. alwayslink, as the CUDA libraries are: the kernel table and the allocator
    register themselves when linked.

    Args:
      name: the target.
      srcs: .cu, .cc and private .h files, as the CUDA library lists them.
      hdrs: public headers.
      deps: the emulated twins of the CUDA library's deps, and its plain ones.
      launch_hdrs: headers in this package that launch kernels themselves (column_sums.h):
        inlined into each .cu that includes them, and rewritten with it.
      **kwargs: passed to cc_library.
    """
    cc_srcs = []
    for src in srcs:
        if src.endswith(".cu"):
            out = "emulated/" + src + ".cc"
            native.genrule(
                name = name + "_" + src.replace(".", "_").replace("/", "_"),
                srcs = [src] + launch_hdrs,
                outs = [out],
                cmd = " ".join(
                    ["$(location //kernels/cuda/emulator:cu_to_cc) $(location %s) $@" % src] +
                    ["$(location %s)" % h for h in launch_hdrs],
                ),
                tools = ["//kernels/cuda/emulator:cu_to_cc"],
            )
            cc_srcs.append(out)
        else:
            cc_srcs.append(src)
    kwargs.pop("alwayslink", None)  # always, below
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        copts = EMULATED_COPTS,
        deps = deps + ["//kernels/cuda/emulator"],
        alwayslink = True,
        **kwargs
    )

# ---- One declaration, two builds: a kernels/cuda target and its emulated twin -----------------

# The kernels/cuda libraries with an emulated twin (<name>_emulated): a dependency on one of them
# is a dependency on its twin in the emulated build.
_TWINNED = [
    "context",
    "nccl",
    "pinned_host_allocator",
    "cuda_check",
    "device_allocator",
    "fill_copy",
    "kernels",
    "ops",
    "round_stats",
    "tp_grid",
]

def _twin_deps(deps):
    """deps for the emulated build: twinned libraries by their twins, no @local_cuda."""
    out = []
    for d in deps:
        if d.startswith("@local_cuda//"):
            continue
        name = d.split(":")[-1]
        local = d.startswith(":") or d.startswith("//kernels/cuda:")
        out.append(d + "_emulated" if local and name in _TWINNED else d)
    return out

def _twinned(rule, name, srcs, hdrs, deps, launch_hdrs, emulated_deps = [], **kwargs):
    """`rule` (a CUDA build, defined only with the toolkit) and its emulated twin."""
    rule(name = name, srcs = srcs, hdrs = hdrs, deps = deps, **kwargs)
    emulated_cuda_library(
        name = name + "_emulated",
        srcs = srcs,
        hdrs = hdrs,
        deps = _twin_deps(deps) + emulated_deps,
        launch_hdrs = launch_hdrs,
        **kwargs
    )

def twinned_cuda_library(name, srcs = [], hdrs = [], deps = [], launch_hdrs = [], **kwargs):
    """cuda_library `name` (nvcc; defined only with the toolkit) and its emulated twin.

    Args:
      name: the CUDA library; the twin is name + "_emulated".
      srcs: as cuda_library's.
      hdrs: as cuda_library's.
      deps: as cuda_library's; the twin gets _twin_deps(deps).
      launch_hdrs: see emulated_cuda_library.
      **kwargs: passed to both.
    """
    _twinned(cuda_library, name, srcs, hdrs, deps, launch_hdrs, **kwargs)

def twinned_cuda_cc_library(name, srcs = [], hdrs = [], deps = [], emulated_deps = [], **kwargs):
    """cuda_cc_library `name` (g++ against the toolkit; only with it) and its emulated twin.

    Args:
      name: the library; the twin is name + "_emulated".
      srcs: as cuda_cc_library's.
      hdrs: as cuda_cc_library's.
      deps: as cuda_cc_library's; the twin gets _twin_deps(deps).
      emulated_deps: the twin's only (//kernels/cuda/emulator:nccl for NCCL's callers).
      **kwargs: passed to both.
    """
    _twinned(cuda_cc_library, name, srcs, hdrs, deps, [], emulated_deps, **kwargs)

def twinned_cuda_cc_test(name, srcs = [], deps = [], **kwargs):
    """cuda_cc_test `name` (SKIPPED without a GPU) and the same test on the emulator.

    The twin is named with "_emulated_test" for the trailing "_test" (kernels_twin_test:
    kernels_twin_emulated_test); it exists on every machine and needs no GPU.
    """
    cuda_cc_test(name = name, srcs = srcs, deps = deps, **kwargs)
    native.cc_test(
        name = name[:-len("_test")] + "_emulated_test",
        srcs = srcs,
        copts = EMULATED_COPTS,
        deps = _twin_deps(deps),
        **kwargs
    )
