#!/usr/bin/env python3
"""make_gpt2_reference.py: GPT-2 computed by someone else, frozen for a test.

    /usr/bin/python3 tools/make_gpt2_reference.py common/train/testdata/gpt2_reference

Writes, with Hugging Face transformers' GPT2LMHeadModel (the reference implementation of GPT-2,
not this project's code), a small GPT-2 and what transformers computes with it:

    config.json, model.safetensors   save_pretrained's folder (tied lm_head, "transformer." names)
    reference.json                   B sequences of T tokens and targets; for every sequence b
                                     and prefix length t the mean cross-entropy of its first t
                                     positions (prefix_losses[b][t-1], nats); the mean over all
                                     B·T positions (loss); the L2 norm of every parameter's
                                     gradient of that mean (grad_norms, GPT-2 names); the
                                     losses of 4 training steps on that batch with
                                     torch.optim.AdamW and clip_grad_norm_ (train: its
                                     hyper-parameters and losses); versions

common/train:gpt2_reference_test loads the folder through --load's reader (read_checkpoint, a
"foreign" file) and wants this project's forward and backward to give the same numbers. Every
other test compares the project with itself (a stage against the baseline, the backward against
finite differences of the forward); this one ties the forward to GPT-2 as others wrote it.

The weights are random, not trained, and drawn so that every part of the block shows in the loss:
attention scores of order 1 (not the near-uniform softmax of GPT-2's 0.02 initialisation, where a
wrong 1/√d scale would not show), LayerNorm gains and biases away from 1 and 0, a residual stream
of small variance (5e-3: LayerNorm's ε = 1e-5 then moves its outputs by ~1e-3), GELU inputs on
both sides of 0, and a final LayerNorm gain of ~4 so the logits spread over ~1 nat.

Not a dependency of the build or of CI (which read the files it wrote): needs torch, transformers
and safetensors (Debian's python3-torch; `pip install 'transformers<4.40' safetensors` in a venv
with --system-site-packages). The files in the repository were written with the versions that
reference.json names.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

B, T = 3, 16  # T = n_positions: the whole context
# The training steps: nanoGPT's optimizer (AdamW, weight decay on the tensors of >= 2 dimensions
# only) and clipping by the global norm; lr large enough that 3 updates move the loss by ~1 nat.
TRAIN = {"steps": 4, "lr": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1,
         "clip_grad": 1.0}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_gpt2_reference.py OUT_DIR")
    out = sys.argv[1]
    cfg = GPT2Config(vocab_size=256, n_positions=T, n_embd=32, n_layer=2, n_head=4,
                     activation_function="gelu_new", layer_norm_epsilon=1e-5,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True)
    torch.manual_seed(20261129)
    model = GPT2LMHeadModel(cfg)
    model.eval()
    with torch.no_grad():
        for name, p in model.transformer.named_parameters():
            n = torch.randn_like(p)
            if name in ("wte.weight", "wpe.weight"):
                p.copy_(0.05 * n)  # residual stream variance ~5e-3 at layer 0
            elif name == "ln_f.weight":
                p.copy_(4.0 + 0.5 * n)  # logits = ln_f(x) · wteᵀ spread over ~1 nat
            elif name.endswith("weight") and ("ln_1" in name or "ln_2" in name):
                p.copy_(1.0 + 0.3 * n)
            elif name.endswith("bias"):
                p.copy_(0.1 * n)
            else:  # the four linear weights (in, out): outputs of order 1 from unit inputs
                p.copy_(n / p.shape[0] ** 0.5 * 1.4)
    tokens = torch.randint(0, cfg.vocab_size, (B, T))
    targets = torch.randint(0, cfg.vocab_size, (B, T))

    logits = model(tokens).logits  # (B, T, V)
    token_losses = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1),
                                   reduction="none").view(B, T).double()
    prefix = token_losses.cumsum(dim=1) / torch.arange(1, T + 1, dtype=torch.float64)
    loss = token_losses.mean()
    F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1)).backward()
    grad_norms = {name: p.grad.double().norm().item()
                  for name, p in model.transformer.named_parameters()}

    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)  # the weights before any step

    # Training: loss and ‖g‖ (before clipping) at each step t = 1..steps, then the update.
    params = dict(model.transformer.named_parameters())
    decay = [p for n, p in params.items() if p.dim() >= 2]
    no_decay = [p for n, p in params.items() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": TRAIN["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=TRAIN["lr"], betas=(TRAIN["beta1"], TRAIN["beta2"]),
                            eps=TRAIN["eps"])
    train_losses, train_norms = [], []
    for _ in range(TRAIN["steps"]):
        opt.zero_grad()
        logits = model(tokens).logits
        step_loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1))
        step_loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), TRAIN["clip_grad"])
        train_losses.append(step_loss.item())
        train_norms.append(norm.item())
        opt.step()
    gen = os.path.join(out, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    ref = {
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "script": "tools/make_gpt2_reference.py"},
        "B": B, "T": T,
        "tokens": tokens.view(-1).tolist(), "targets": targets.view(-1).tolist(),
        "loss": loss.item(),
        "prefix_losses": prefix.tolist(),
        "grad_norms": grad_norms,
        "train": dict(TRAIN, losses=train_losses, grad_norms=train_norms),
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    print(f"wrote {out}: loss {loss.item():.6f} over {B} x {T} tokens, "
          f"{len(grad_norms)} gradient norms (torch {torch.__version__}, "
          f"transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
