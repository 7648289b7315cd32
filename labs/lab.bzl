"""lab: the four targets of a lab (labs/README.md, "Writing a lab").

    load("//labs:lab.bzl", "lab")
    lab(
        name = "ring_all_reduce",
        deps = ["//common/comm:process_group", "//common/tensor"],
        test_deps = ["//common/comm"],
    )

gives, in the lab's package:
  starter          cc_library: starter.cc behind <name>.h (the student's)
  reference        cc_library: solution/reference.cc behind the same header (the instructors')
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
    for lib, src in [("starter", "starter.cc"), ("reference", "solution/reference.cc")]:
        native.cc_library(name = lib, srcs = [src], hdrs = [name + ".h"], deps = deps)
    for test, lib, tags, sizes in [
        ("reference_test", ":reference", [], ranks),
        ("student_test", ":starter", ["manual"], student_ranks),
    ]:
        if ranks:
            mpi_test(
                name = test,
                srcs = [name + "_test.cc"],
                ranks = sizes,
                tags = tags,
                deps = [lib] + test_deps,
            )
        else:
            native.cc_test(
                name = test,
                size = "small",
                srcs = [name + "_test.cc"],
                tags = tags,
                deps = [lib] + test_deps + ["@gtest//:gtest_main"],
            )
