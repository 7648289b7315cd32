#!/usr/bin/env python3
"""hf_check.py: does transformers read our exported GPT-2 the way we do?

    bazel run //tools:export_hf -- --load /tmp/mini.safetensors --out /tmp/mini_hf
    python3 tools/hf_check.py /tmp/mini_hf [--resave /tmp/mini_hf_resaved]

Loads the folder with transformers' GPT2LMHeadModel.from_pretrained (config.json and
model.safetensors as tools/export_hf wrote them), checks that the LM head is tied to wte, computes
the mean cross-entropy on eval.json's tokens (B, T) and compares it with the loss our own forward
computed on the same tokens (written by export_hf into eval.json). Exits 1 when they differ by
more than --tol (relative).

--resave DIR also writes the loaded model back the two ways Hugging Face users do, for --load to
read: DIR/pretrained/ (save_pretrained: model.safetensors + config.json) and
DIR/state_dict.safetensors (safetensors.torch.save_file of the state_dict, lm_head included).

A checkpoint of a --precision bf16 / fp16 run works the same: it holds the fp32 master weights.

Not a dependency of the build or of CI: needs torch, transformers and safetensors
(e.g. Debian's python3-torch and `pip install 'transformers<4.40' safetensors`).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from transformers import GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", help="folder written by //tools:export_hf")
    # Measured on mini after 100 steps (8 x 64 tokens): 6.0e-8 with gelu_new, 1.07e-6 when
    # config.json says "gelu" (the erf form): the default tolerance tells the two GELUs apart.
    ap.add_argument("--tol", type=float, default=5e-7, help="largest relative loss difference")
    ap.add_argument("--resave", help="also write the model back with save_pretrained / save_file")
    args = ap.parse_args()

    model = GPT2LMHeadModel.from_pretrained(args.folder)
    model.eval()
    tied = model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    print(f"from_pretrained({args.folder}): {sum(p.numel() for p in model.parameters())} "
          f"parameters, lm_head tied to wte: {tied}, activation {model.config.activation_function}, "
          f"layer_norm_epsilon {model.config.layer_norm_epsilon}")

    with open(os.path.join(args.folder, "eval.json")) as f:
        ev = json.load(f)
    B, T = ev["B"], ev["T"]
    tokens = torch.tensor(ev["tokens"], dtype=torch.long).view(B, T)
    targets = torch.tensor(ev["targets"], dtype=torch.long).view(B, T)
    with torch.no_grad():
        logits = model(tokens).logits  # (B, T, V)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)).item()
    ours = ev["loss"]
    rel = abs(loss - ours) / abs(ours)
    print(f"mean cross-entropy on {B} x {T} tokens: transformers {loss:.6f}, llmp {ours:.6f}, "
          f"relative difference {rel:.2e} (tolerance {args.tol:g})")

    if args.resave:
        os.makedirs(args.resave, exist_ok=True)
        model.save_pretrained(os.path.join(args.resave, "pretrained"), safe_serialization=True)
        from safetensors.torch import save_file
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        save_file(sd, os.path.join(args.resave, "state_dict.safetensors"))
        print(f"wrote {args.resave}/pretrained/ (save_pretrained) and "
              f"{args.resave}/state_dict.safetensors (save_file, {len(sd)} tensors)")

    ok = tied and rel <= args.tol
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
