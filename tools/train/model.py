"""Llama-architecture decoder, written to match the hqekv engine's llama forward exactly.

Conventions (all shapes are [batch B, time T, ...]):
- RMSNorm: x * rsqrt(mean(x^2) + eps) * weight, eps 1e-5.
- RoPE in the GGUF "llama" (llama2.c) convention: ADJACENT pairs (2i, 2i+1) of each head are rotated
  by angle pos * theta^(-2i/head_dim). Because training uses this layout directly, Q/K weights are
  exported without the HF-to-GGUF row permutation.
- GQA: query head h reads KV head h // (n_head / n_kv_head) (contiguous groups, as llama.cpp).
- SwiGLU FFN: w2(silu(w1 x) * w3 x); w1 = ffn_gate, w3 = ffn_up, w2 = ffn_down.
- Tied embeddings: logits = final_norm(h) @ tok_embeddings.weight^T (no separate output matrix).
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab_size: int = 4096
    dim: int = 256
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 704  # SwiGLU 2/3*4*dim = 683, rounded up to a multiple of 32
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 2048

    @property
    def head_dim(self):
        return self.dim // self.n_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, max_len, theta, device=None):
    """cos/sin tables [max_len, head_dim/2] for adjacent-pair rotation."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)


def apply_rope(x, cos, sin):
    """x: [B, T, H, D]; cos/sin: [T, D/2]. Rotates (x[2i], x[2i+1]) pairs."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        c, hd = self.cfg, self.cfg.head_dim
        q = apply_rope(self.wq(x).view(B, T, c.n_heads, hd), cos, sin)
        k = apply_rope(self.wk(x).view(B, T, c.n_kv_heads, hd), cos, sin)
        v = self.wv(x).view(B, T, c.n_kv_heads, hd)
        rep = c.n_heads // c.n_kv_heads
        k = k.repeat_interleave(rep, dim=2)  # KV head j serves query heads j*rep .. j*rep+rep-1
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + mask
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, c.n_heads * hd)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)  # gate
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)  # up
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)  # down

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2 style scaled init of residual outputs
            if name.endswith("wo.weight") or name.endswith("w2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, tokens):
        """tokens [B, T] int64 -> logits [B, T, vocab] float32."""
        B, T = tokens.shape
        h = self.tok_embeddings(tokens)
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        mask = torch.full((T, T), float("-inf"), device=tokens.device).triu(1)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.norm(h) @ self.tok_embeddings.weight.t()

    def num_params(self):
        return sum(p.numel() for p in self.parameters())
