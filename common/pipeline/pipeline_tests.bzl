"""pipeline_bad_input_tests: the bad-input tests of a pipeline stage's train binary.

    load("//common/pipeline:pipeline_tests.bzl", "pipeline_bad_input_tests")
    pipeline_bad_input_tests(kind = "plain", shared_defaults = {"--world_size": "2"})

adds, next to the stage's cc_binary `train`:
  bad_input_test           tests/bad_input_test.sh, the cases every stage shares (flags, data,
                           checkpoints). Those run the tiny preset (L = 2), and 2 layers cannot
                           be cut into the default 4 pipeline stages (or 2 ranks × 2 chunks); so
                           they run through a wrapper that adds each flag of `shared_defaults`
                           the command line does not set (e.g. --world_size 2, --chunks 1).
  pipeline_bad_input_test  common/pipeline/pipeline_bad_input_test.sh `kind`: layers not
                           divisible by p·v, micro-batches (plain, interleaved), chunks.
"""

def pipeline_bad_input_tests(kind, shared_defaults):
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
        # naive_pp has one micro-batch: every global batch is valid, the case does not apply.
        args = ["$(location :train_with_defaults.sh)"] +
               (["--skip=indivisible_batch"] if kind == "naive" else []),
        data = [":train", ":train_with_defaults.sh"],
    )
    native.sh_test(
        name = "pipeline_bad_input_test",
        size = "medium",
        srcs = ["//common/pipeline:pipeline_bad_input_test.sh"],
        args = ["$(location :train)", kind],
        data = [":train"],
    )
