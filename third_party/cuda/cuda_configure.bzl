"""Finds the CUDA toolkit and exposes it as @local_cuda.

Search order: $CUDA_PATH, then /usr/local/cuda. The toolkit counts as found when bin/nvcc exists.

@local_cuda//:defs.bzl gives CUDA_AVAILABLE (bool) and cuda_library(), a macro that compiles .cu
sources with nvcc for sm_80 and sm_90 into a static archive and wraps it as a cc_library. When the
toolkit is absent CUDA_AVAILABLE is False and cuda_library() defines nothing, so `bazel test //...`
still builds and passes on a machine without CUDA. @local_cuda//:cuda links cudart, cuBLAS and NCCL
(NCCL is looked for inside the toolkit and in the system library directory).
"""

_DEFS_AVAILABLE = '''
CUDA_AVAILABLE = True

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """Compiles .cu files with nvcc (sm_80, sm_90) and links them with @local_cuda//:cuda."""
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + native.glob(["**/*.h", "**/*.cuh"]),
            outs = [obj],
            cmd = ("%NVCC% -std=c++17 -O3 -Xcompiler -fPIC -I. -I$(GENDIR) " +
                   "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 " +
                   " ".join(copts) + " -c $(location " + src + ") -o $@"),
            tags = ["no-sandbox"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        alwayslink = 1,
        **kwargs
    )
'''

_DEFS_MISSING = '''
CUDA_AVAILABLE = False

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """No CUDA toolkit was found: CUDA targets are left out of the build."""
    pass
'''

_BUILD_AVAILABLE = '''
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(["cuda/include/**/*.h", "cuda/include/**/*.hpp"], allow_empty = True),
    includes = ["cuda/include"],
    linkopts = [
        "-L%LIBDIR%",
        "-Wl,-rpath,%LIBDIR%",
        %NCCL_LINK%
        "-lcublas",
        "-lcudart",
        "-ldl",
        "-lpthread",
        "-lrt",
    ],
)

exports_files(["defs.bzl"])
'''

_BUILD_MISSING = '''
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")

exports_files(["defs.bzl"])
'''

def _find_lib(ctx, dirs, name):
    for d in dirs:
        if ctx.path(d + "/" + name).exists:
            return d
    return None

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "") or "/usr/local/cuda"
    nvcc = ctx.path(root + "/bin/nvcc")
    if not nvcc.exists:
        ctx.file("BUILD", _BUILD_MISSING)
        ctx.file("defs.bzl", _DEFS_MISSING)
        return
    real_root = str(ctx.path(root).realpath)
    ctx.symlink(real_root, "cuda")
    libdir = None
    for d in [real_root + "/lib64", real_root + "/lib", real_root + "/targets/x86_64-linux/lib"]:
        if ctx.path(d + "/libcudart.so").exists:
            libdir = d
            break
    if libdir == None:
        libdir = real_root + "/lib64"
    nccl_dir = _find_lib(ctx, [libdir, "/usr/lib/x86_64-linux-gnu", "/usr/lib64"], "libnccl.so")
    nccl_link = ""
    if nccl_dir != None:
        nccl_link = '"-L%s", "-lnccl",' % nccl_dir
    ctx.file("BUILD", _BUILD_AVAILABLE.replace("%LIBDIR%", libdir).replace("%NCCL_LINK%", nccl_link))
    ctx.file("defs.bzl", _DEFS_AVAILABLE.replace("%NVCC%", str(nvcc.realpath)))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
