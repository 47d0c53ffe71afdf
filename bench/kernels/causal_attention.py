import torch
import triton
import triton.language as tl


@triton.jit
def _causal_attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr,
                                 stride_qz, stride_qh, stride_qm, stride_qd,
                                 stride_kz, stride_kh, stride_kn, stride_kd,
                                 stride_vz, stride_vh, stride_vn, stride_vd,
                                 stride_oz, stride_oh, stride_om, stride_od,
                                 H, seq_len, sm_scale,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # softmax via exp2: fold log2(e) into the scale
    # Keys after the last query of this block are never attended to: stop there.
    hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                    mask=cols[:, None] < seq_len, other=0.0)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=cols[:, None] < seq_len, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < seq_len), qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, acc.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < seq_len)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    B, H, S, D = q.shape
    o = torch.empty_like(q)
    BLOCK_M, BLOCK_N = 128, 64
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    _causal_attention_fwd_kernel[grid](q, k, v, o,
                                       q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                                       k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                                       v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                                       o.stride(0), o.stride(1), o.stride(2), o.stride(3),
                                       H, S, D ** -0.5,
                                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, num_warps=8, num_stages=3)
    return o
