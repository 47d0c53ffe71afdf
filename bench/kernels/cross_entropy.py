import torch
import triton
import triton.language as tl


@triton.jit
def _cross_entropy_row_kernel(logits_ptr, target_ptr, loss_ptr, stride, n_classes, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row * stride
    m = tl.full((), -float("inf"), tl.float32)
    d = tl.zeros((), dtype=tl.float32)
    for start in range(0, n_classes, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(base + cols, mask=cols < n_classes, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    t = tl.load(target_ptr + row)
    x_t = tl.load(base + t).to(tl.float32)
    tl.store(loss_ptr + row, m + tl.log(d) - x_t)


@triton.jit
def _mean_kernel(loss_ptr, out_ptr, n_rows, BLOCK_SIZE: tl.constexpr):
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_rows, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(loss_ptr + offs, mask=offs < n_rows, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n_rows)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    n_rows, n_classes = logits.shape
    losses = torch.empty((n_rows,), device=logits.device, dtype=torch.float32)
    out = torch.empty((), device=logits.device, dtype=torch.float32)
    BLOCK_SIZE = min(triton.next_power_of_2(n_classes), 1024)
    _cross_entropy_row_kernel[(n_rows,)](logits, target, losses, logits.stride(0), n_classes,
                                         BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    _mean_kernel[(1,)](losses, out, n_rows, BLOCK_SIZE=1024, num_warps=4)
    return out
