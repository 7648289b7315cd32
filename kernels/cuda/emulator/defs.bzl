"""emulated_cuda_library: a CUDA library's own sources built by g++ for the CUDA emulator."""

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
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        copts = EMULATED_COPTS,
        deps = deps + ["//kernels/cuda/emulator"],
        alwayslink = True,
        **kwargs
    )
