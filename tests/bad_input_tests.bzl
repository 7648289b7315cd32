"""bad_input_test: the shared bad-input cases (tests/bad_input_test.sh) against a stage's train.

    load("//tests:bad_input_tests.bzl", "bad_input_test")
    bad_input_test(shared_defaults = {"--world_size": "2"}, skip = ["indivisible_batch"])

adds, next to the stage's cc_binary `train`, the sh_test `bad_input_test`: the cases every stage
shares (flags, data, checkpoints). Some of them run the tiny preset (L = 2, H = 2), which not
every stage can run at its default world size (2 layers cannot be cut into 4 pipeline stages,
2 heads cannot be split over 4 tensor-parallel ranks); so they run through a wrapper that adds
each flag of `shared_defaults` the command line does not set (e.g. --world_size 2). `skip` names
cases that do not apply to the stage (a stage that does not split the batch over its ranks takes
any global batch). `takes_precision` False (the 2D/2.5D/3D stages) adds the case that
--precision bf16 is refused by name; tensor and sequence parallelism, hybrid_3d, moe, the
long-sequence stages (common/cp/cp_stage.bzl) and the pipelines (tests/pipeline_tests.bzl;
PipeDream-2BW takes bf16 only) pass True, and the
data-parallel stages declare their sh_test without --fp32_only. `save_world_size`: the ranks of
the run that writes the checkpoint the checkpoint cases load (1 unless the stage cannot run on one
rank, as Chimera, whose p must be even).
"""

def bad_input_test(shared_defaults = {}, skip = [], takes_precision = False, save_world_size = 1):
    lines = [
        "cat > $@ <<'EOF'",
        "#!/usr/bin/env bash",
        "# The stage's train binary with these flags unless the command line sets them: %s" %
        " ".join(["%s %s" % (f, v) for f, v in shared_defaults.items()]),
        "extra=()",
    ]
    for flag, value in shared_defaults.items():
        lines += [
            "case \" $$* \" in *\" %s \"*|*\" %s=\"*) ;; *) extra+=(%s %s) ;; esac" %
            (flag, flag, flag, value),
        ]
    lines += [
        "exec \"$$(dirname \"$$0\")/train\" \"$${extra[@]}\" \"$$@\"",
        "EOF",
    ]
    native.genrule(
        name = "train_with_defaults",
        outs = ["train_with_defaults.sh"],
        cmd = "\n".join(lines),
        executable = True,
    )
    native.sh_test(
        name = "bad_input_test",
        size = "medium",
        srcs = ["//tests:bad_input_test.sh"],
        args = ["$(location :train_with_defaults.sh)"] + ["--skip=" + s for s in skip] +
               ([] if takes_precision else ["--fp32_only"]) +
               ([] if save_world_size == 1 else ["--save_world_size=%d" % save_world_size]),
        data = ["//common/testing:expect_error.sh", ":train", ":train_with_defaults.sh"],
    )
