# What cuBLAS gives on gpt2's matrix products (README "On a GPU", what bounds the benchmark), run
# with the GPU machine's own PyTorch (a peer for measuring, never a dependency of the project):
# fp32, TF32 and bf16 operands for the linear layers' shapes (8,192 rows = 8 sequences of 1,024),
# the LM head with V = 50,257 (odd: the logits rows unaligned) and 50,304 (a multiple of 64), and
# one layer's attention scores. Median of 30 runs after 5 warm-ups, timed with CUDA events, random
# inputs. On a GPU machine with PyTorch: python3 tools/gpu_gemm_probe.py (or carry it in .gpu_kit).
import torch


def median_ms(fn, n=30):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    torch.manual_seed(0)
    n = 8192
    shapes = [("qkv  x@W", n, 768, 2304), ("proj x@W", n, 768, 768), ("fc   x@W", n, 768, 3072),
              ("fcp  x@W", n, 3072, 768), ("head V=50257", n, 768, 50257),
              ("head V=50304", n, 768, 50304), ("head dWt V=50257 (dyT@x)", 50257, n, 768),
              ("head dWt V=50304", 50304, n, 768)]
    print(f"{'product (M,K,N)':34} {'fp32 ms':>8} {'tf32 ms':>8} {'bf16 ms':>8} "
          f"{'tf32 TF/s':>9} {'bf16 TF/s':>9}")
    for name, m, k, cols in shapes:
        flops = 2.0 * m * k * cols
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(k, cols, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        f32 = median_ms(lambda: a @ b)
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = median_ms(lambda: a @ b)
        a16, b16 = a.bfloat16(), b.bfloat16()
        bf16 = median_ms(lambda: a16 @ b16)
        print(f"{name + f' ({m},{k},{cols})':34} {f32:8.3f} {tf32:8.3f} {bf16:8.3f} "
              f"{flops / tf32 / 1e9:9.0f} {flops / bf16 / 1e9:9.0f}")
    # One layer's attention scores: B·H = 96 batched (T, hs) @ (hs, T).
    for name, dtype in (("fp32", torch.float32), ("tf32", torch.float32),
                        ("bf16", torch.bfloat16)):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        q = torch.randn(96, 1024, 64, device="cuda", dtype=dtype)
        kt = torch.randn(96, 64, 1024, device="cuda", dtype=dtype)
        ms = median_ms(lambda: torch.bmm(q, kt))
        print(f"attention Q@K^T (96 x 1024x64x1024) {name}: {ms:.3f} ms, "
              f"{2 * 96 * 1024 * 1024 * 64 / ms / 1e9:.0f} TF/s")


if __name__ == "__main__":
    main()
