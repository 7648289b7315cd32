"""lab: the four targets of a lab (labs/README.md, "Writing a lab").

    load("//labs:lab.bzl", "lab")
    lab(
        name = "ring_all_reduce",
        deps = ["//common/comm:process_group", "//common/tensor"],
        test_deps = ["//common/comm"],
    )

gives, in the lab's package:
  header, tests    <name>.h alone, and <name>_test.cc compiled once against it
  starter          cc_library: starter.cc, implementing :header (the student's)
  reference        cc_library: solution/reference.cc, implementing it too (the instructors')
  reference_test   <name>_test.cc against :reference, at `ranks` MPI world sizes (mpi_test:
                   reference_test_np1 ...), or one process (cc_test) when ranks is []; in
                   `bazel test //...` and CI, must pass
  student_test     the same source against :starter, at `student_ranks`; tagged "manual" (the
                   suite too), so `//...` and `:all` leave it out and it runs only when named
"""

load("//common/testing:mpi_test.bzl", "mpi_test")

def lab(name, deps, test_deps = [], ranks = [1, 2, 3, 4], student_ranks = [2, 3, 4]):
    """The starter and reference libraries of lab `name` and their tests.

    Args:
      name: the lab's name: its header is <name>.h, its tests <name>_test.cc.
      deps: what starter.cc and solution/reference.cc may use.
      test_deps: what the test source needs beyond the library under test (gtest is added).
      ranks: world sizes of reference_test; [] for a lab without MPI (one cc_test).
      student_ranks: world sizes of student_test (ignored when ranks is []).
    """

    # The header alone, and the tests compiled once against it: reference_test and student_test
    # link the same object with a different implementation.
    native.cc_library(name = "header", hdrs = [name + ".h"], deps = deps)
    for lib, src in [("starter", "starter.cc"), ("reference", "solution/reference.cc")]:
        native.cc_library(name = lib, srcs = [src], deps = [":header"] + deps)
    native.cc_library(
        name = "tests",
        testonly = True,
        srcs = [name + "_test.cc"],
        deps = [":header", "@gtest//:gtest"] + test_deps,
        alwayslink = True,  # keep the TEST() registrations: nothing references them by name
    )
    # student_test is visible to //labs:starters_fail_test, which checks that the starter fails.
    for test, lib, tags, sizes in [
        ("reference_test", ":reference", [], ranks),
        ("student_test", ":starter", ["manual"], student_ranks),
    ]:
        if ranks:
            mpi_test(
                name = test,
                srcs = [],
                ranks = sizes,
                tags = tags,
                deps = [":tests", lib],
                visibility = ["//labs:__pkg__"],
            )
        else:
            native.cc_test(
                name = test,
                size = "small",
                tags = tags,
                deps = [":tests", lib, "@gtest//:gtest_main"],
                visibility = ["//labs:__pkg__"],
            )
