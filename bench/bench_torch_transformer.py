"""PyTorch's nn.TransformerEncoder at the sizes of bench/bench_flax_transformer.py: the same train
step (forward, backward, Adam update) on a CUDA GPU, so that jaxenc's and plain flax's step times
there have a PyTorch counterpart.

The encoder: a trainable 10,000 x 300 word table, sinusoidal positions, 2 post-LayerNorm layers
of 6-head self-attention (no dropout on the attention weights, as the flax encoders) and a
600-wide ReLU feed-forward, dropout 0.1 (`--dropout`) on the inputs, the sublayer outputs and the
feed-forward's hidden layer, mean pooling over the words, a linear classifier over 6 classes,
softmax cross-entropy, torch.optim.Adam; batch 64 of full-length random sentences with a padding
mask. Eager PyTorch, float32 matmuls in TF32 (JAX's default precision on such GPUs).
Without torch or a CUDA device it prints why and measures nothing.

    python -m bench.bench_torch_transformer --lengths=16,64,256 --repeats=10
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence

import numpy as np

VOCAB, WIDTH, LAYERS, HEADS, FFN, CLASSES = 10_000, 300, 2, 6, 600, 6  # bench_flax_transformer's


def parse_ints(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item.strip()]


def sinusoids(length: int, width: int) -> np.ndarray:
    """float32[length, width]: sin on the even features, cos on the odd ones."""
    position = np.arange(length)[:, None]
    rates = np.exp(np.arange(0, width, 2) * (-math.log(10000.0) / width))
    table = np.zeros((length, width), np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(position * rates), np.cos(position * rates)
    return table


def cuda_missing() -> str | None:
    """Why no PyTorch CUDA step can run here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def build(dropout: float, max_length: int):
    """The classifier (an nn.Module: tokens, lengths -> logits)."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH)
            self.register_buffer("positions", torch.from_numpy(sinusoids(max_length, WIDTH)))
            self.dropout = nn.Dropout(dropout)
            layer = nn.TransformerEncoderLayer(WIDTH, HEADS, FFN, dropout, activation="relu",
                                               batch_first=True, norm_first=False)
            layer.self_attn.dropout = 0.0  # the flax encoders drop no attention weights
            self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
            self.classify = nn.Linear(WIDTH, CLASSES)

        def forward(self, tokens, lengths):
            length = tokens.shape[1]
            valid = torch.arange(length, device=tokens.device)[None, :] < lengths[:, None]
            x = self.dropout(self.embed(tokens) + self.positions[:length])
            x = self.encoder(x, src_key_padding_mask=~valid)
            weights = valid.unsqueeze(-1).to(x.dtype)
            return self.classify((x * weights).sum(1) / weights.sum(1))

    return Classifier()


def step_ms(length: int, batch: int, repeats: int, dropout: float) -> float:
    """Median wall ms of the CUDA train step at `length` (after 3 warm-up steps)."""
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")
    torch.manual_seed(0)
    model = build(dropout, length).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(length)
    tokens = torch.as_tensor(rng.integers(4, VOCAB, (batch, length)), device=device)
    lengths = torch.full((batch,), length, device=device)
    labels = torch.as_tensor(rng.integers(0, CLASSES, batch), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(tokens, lengths), labels).backward()
        optimizer.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def measure(lengths: Sequence[int], batch: int, repeats: int, dropout: float) -> list[dict]:
    """One row per length: the median train-step ms on the CUDA device."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    rows = []
    for length in lengths:
        torch_ms = step_ms(length, batch, repeats, dropout)
        rows.append(dict(length=length, torch_ms=torch_ms, batch=batch,
                         device=torch.cuda.get_device_name(), torch=torch.__version__))
        print(f"L {length}: torch {torch_ms:.2f} ms", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> list[dict]:
    """The rows (length, torch_ms, ...); [] with a printed line where torch has no CUDA."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_torch_transformer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=parse_ints, default=[16, 64, 256],
                        help="sentence lengths (comma-separated)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per step")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps per length")
    parser.add_argument("--dropout", type=float, default=0.1,
                        help="dropout on the inputs, sublayer outputs and feed-forward hidden "
                             "layer")
    args = parser.parse_args(argv)
    missing = cuda_missing()
    if missing:
        print(f"PyTorch step skipped: {missing}", flush=True)
        return []
    return measure(args.lengths, args.batch, args.repeats, args.dropout)


if __name__ == "__main__":
    main()
