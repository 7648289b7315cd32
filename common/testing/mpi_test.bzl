"""mpi_test: one gtest source, run at several world sizes.

    load("//common/testing:mpi_test.bzl", "mpi_test")
    mpi_test(
        name = "process_group_test",
        srcs = ["process_group_test.cc"],
        deps = [":comm"],
        ranks = [1, 2, 3, 4],
    )

gives cc_test targets process_group_test_np1 ... _np4 (each runs its binary with --ranks=N, which
//common/testing:mpi_gtest_main turns into `mpiexec -n N`), and a test_suite process_group_test
holding them all. The sources are compiled once, into a testonly cc_library that every size links.
A generated binary also runs by hand, but then pass the size yourself: bazel-bin/<pkg>/<name>_np4
--ranks=4 (the --ranks argument comes from Bazel; without it the binary runs on one rank).

Sandboxing: hydra's mpiexec runs fine in Bazel's sandboxes (it forks its proxies locally and
talks to them over localhost sockets; MPICH/UCX shared memory lives in /dev/shm, which stays
writable): the .bazelrc's processwrapper-sandbox and linux-sandbox alike, so no
"no-sandbox"/"local" tag is needed. The tests are "medium" (300 s): with
4 ranks on 2 cores every rank runs at half speed or less. Each size N > 1 is tagged "cpu:N": Bazel
then starts it only when N of its local CPUs are free (all of them on a smaller machine), so one
test's ranks do not compete with another test or a compile, while single-rank tests run side by
side (.bazelrc).
"""

def mpi_test(name, srcs, deps = [], ranks = [1, 2, 3, 4], size = "medium", tags = [], **kwargs):
    """One cc_test per world size, `<name>_np<N>`, plus the test_suite `<name>`.

    Args:
      name: the test_suite's name; each world size N adds `<name>_np<N>`.
      srcs: gtest sources (no main(): //common/testing:mpi_gtest_main provides it).
      deps: libraries under test.
      ranks: world sizes to run at.
      size: Bazel test size of every generated test.
      tags: added to every generated test, with "mpi", "np<N>" and, for N > 1, "cpu:<N>".
      **kwargs: passed to each cc_test (timeout, data, env, ...); copts go to the library.
        Leave shard_count unset: every rank of a job must run the same tests.
    """
    lib = name + "_lib"
    native.cc_library(
        name = lib,
        testonly = True,
        srcs = srcs,
        deps = deps + ["@gtest//:gtest"],
        alwayslink = True,  # keep the TEST() registrations: nothing references them by name
        copts = kwargs.pop("copts", []),
    )
    tests = []
    for n in ranks:
        test = "%s_np%d" % (name, n)
        native.cc_test(
            name = test,
            args = ["--ranks=%d" % n],
            size = size,
            tags = tags + ["mpi", "np%d" % n] + (["cpu:%d" % n] if n > 1 else []),
            deps = [":" + lib, "//common/testing:mpi_gtest_main"],
            **kwargs
        )
        tests.append(":" + test)

    # A test_suite's tags filter its tests rather than label the suite, except "manual", which
    # keeps the suite itself out of `//...` (a suite naming manual tests would otherwise run them).
    native.test_suite(name = name, tests = tests, tags = ["manual"] if "manual" in tags else [])
