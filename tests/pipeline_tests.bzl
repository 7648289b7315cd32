"""pipeline_bad_input_tests: the bad-input tests of a pipeline stage's train binary.

    load("//tests:pipeline_tests.bzl", "pipeline_bad_input_tests")
    pipeline_bad_input_tests(kind = "plain", shared_defaults = {"--world_size": "2"})

adds, next to the stage's cc_binary `train`:
  bad_input_test           tests/bad_input_test.sh, the cases every stage shares (flags, data,
                           checkpoints), through bad_input_tests.bzl's wrapper: the tiny preset
                           (L = 2) cannot be cut into the default 4 pipeline stages (or 2 ranks ×
                           2 chunks), so each flag of `shared_defaults` is added unless set.
  pipeline_bad_input_test  common/pipeline/pipeline_bad_input_test.sh `kind`: layers not
                           divisible by p·v (p for chimera), micro-batches (plain,
                           interleaved, chimera: m % p and odd p), chunks.
"""

load("//tests:bad_input_tests.bzl", "bad_input_test")

def pipeline_bad_input_tests(kind, shared_defaults, takes_precision = True):
    # naive_pp has one micro-batch: every global batch is valid, the case does not apply.
    # Chimera cannot run on one rank (p must be even): its checkpoint is written by 2.
    # takes_precision: the PipelineStrategy stages train in bf16/fp16; PipeDream-2BW in bf16 only.
    bad_input_test(
        shared_defaults,
        skip = ["indivisible_batch"] if kind == "naive" else [],
        takes_precision = takes_precision,
        save_world_size = 2 if kind == "chimera" else 1,
    )
    native.sh_test(
        name = "pipeline_bad_input_test",
        size = "medium",
        srcs = ["//common/pipeline:pipeline_bad_input_test.sh"],
        args = ["$(location :train)", kind],
        data = ["//common/testing:expect_error.sh", ":train"],
    )
