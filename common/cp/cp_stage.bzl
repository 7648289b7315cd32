"""long_sequence_stage: the tests every long-sequence (context-parallel) stage has.

    load("//common/cp:cp_stage.bzl", "long_sequence_stage")
    cc_binary(name = "train", srcs = ["main.cc"], deps = [...])   # the stage's own
    long_sequence_stage(stage = "ulysses", core = "//common/cp:ulysses")

adds, next to the stage's cc_binary `train`:
  <stage>_test             mpi_test at p = 1, 2, 4 of <stage>_test.cc (tests/cp_test_util.h)
  bad_input_test           the shared bad-input cases (the batch is not split: any B is valid;
                           --recompute is refused by the stage, so partition_refused is not its;
                           --precision bf16 is taken)
  cp_bad_input_test        the stage's own refusals (common/cp/cp_bad_input_test.sh <stage>)
"""

load("//common/testing:mpi_test.bzl", "mpi_test")
load("//tests:bad_input_tests.bzl", "bad_input_test")

def long_sequence_stage(stage, core):
    mpi_test(
        name = stage + "_test",
        srcs = [stage + "_test.cc"],
        ranks = [1, 2, 4],
        deps = [
            core,
            "//tests:cp_test_util",
        ],
    )
    bad_input_test(
        shared_defaults = {"--world_size": "2"},
        skip = ["indivisible_batch", "partition_refused"],
        takes_precision = True,
    )
    native.sh_test(
        name = "cp_bad_input_test",
        size = "medium",
        srcs = ["//common/cp:cp_bad_input_test.sh"],
        args = [
            "$(location :train)",
            stage,
        ],
        data = [
            ":train",
            "//common/testing:expect_error.sh",
        ],
    )
