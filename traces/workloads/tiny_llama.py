"""A small Llama-style decoder (RMSNorm, grouped-query attention, SwiGLU MLP) trained with
FSDP2 (`fully_shard`, one unit per block plus the root) or FSDP1 (`FullyShardedDataParallel`
with a per-block wrap policy)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
from torch import nn


@dataclass(frozen=True)
class TinyLlamaConfig:
    vocab: int = 64
    dim: int = 32
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 64
    seq: int = 16
    batch: int = 2


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, c: TinyLlamaConfig) -> None:
        super().__init__()
        self.c = c
        head_dim = c.dim // c.heads
        self.attn_norm, self.mlp_norm = RMSNorm(c.dim), RMSNorm(c.dim)
        self.wq = nn.Linear(c.dim, c.dim, bias=False)
        self.wk = nn.Linear(c.dim, c.kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(c.dim, c.kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(c.dim, c.dim, bias=False)
        self.gate = nn.Linear(c.dim, c.ffn, bias=False)
        self.up = nn.Linear(c.dim, c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        c, hd = self.c, self.c.dim // self.c.heads
        h = self.attn_norm(x)
        q = self.wq(h).view(b, s, c.heads, hd).transpose(1, 2)
        k = self.wk(h).view(b, s, c.kv_heads, hd).transpose(1, 2).repeat_interleave(c.heads // c.kv_heads, dim=1)
        v = self.wv(h).view(b, s, c.kv_heads, hd).transpose(1, 2).repeat_interleave(c.heads // c.kv_heads, dim=1)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, c.dim))
        h = self.mlp_norm(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class TinyLlama(nn.Module):
    def __init__(self, c: TinyLlamaConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


FP32 = 4


def parameter_counts(c: TinyLlamaConfig) -> tuple[int, int, int]:
    """(whole model, one block, the root: embedding, final norm and head) in parameters, by the
    zoo's formulas for the same shape (traces/models.py)."""
    from ..models import ModelSpec

    m = ModelSpec("tiny-llama", "llama", c.layers, c.dim, c.ffn, c.heads, c.kv_heads, c.vocab)
    return m.total_params(), m.layer_params(), m.embedding_params() + m.final_norm_params() + m.head_params()


def memory_bytes(c: TinyLlamaConfig, world: int) -> int:
    """Estimated peak bytes of one rank (fp32; SGD without momentum keeps no optimizer state).

    Every rank builds the whole model before sharding it. During a step it holds its shards of
    the parameters and gradients, one FSDP unit gathered whole with its whole gradient, and the
    activations saved for backward: per token about 10 dim + 4 ffn floats a block, plus the
    log-softmax over the vocabulary (measured with saved-tensor hooks; no seq^2 term: the CPU and
    flash SDPA kernels keep none)."""
    total, block, root = parameter_counts(c)
    activations = c.batch * c.seq * (c.layers * (10 * c.dim + 4 * c.ffn) + c.vocab + 4 * c.dim)
    step = 2 * -(-total // world) + 2 * max(block, root) + activations
    return FP32 * max(total, step)


def _train_step(ctx, model: nn.Module, c: TinyLlamaConfig):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1000 + ctx.rank)  # each rank its own data, as in data parallelism

    def step() -> None:
        tokens = torch.randint(0, c.vocab, (c.batch, c.seq + 1), generator=gen).to(ctx.device)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, c.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    ctx.record("config", asdict(c))
    return step


def _model(ctx, **kw) -> tuple[TinyLlama, TinyLlamaConfig]:
    c = TinyLlamaConfig(**kw)
    torch.manual_seed(0)  # identical initial weights on every rank
    return TinyLlama(c).to(ctx.device), c


def build_fsdp2(ctx, **kw):
    """FSDP2: `fully_shard` on every block, then on the root (embedding, final norm, head)."""
    from torch.distributed.fsdp import fully_shard

    model, c = _model(ctx, **kw)
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    return _train_step(ctx, model, c)


def build_fsdp1(ctx, **kw):
    """FSDP1: one FlatParameter per block plus the root's; on CPU it needs `device_id=cpu`."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    model, c = _model(ctx, **kw)
    wrapped = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=ctx.device,
                                       use_orig_params=True)
    return _train_step(ctx, wrapped, c)


# The options `trace capture --option` may pass (checked before any rank starts).
build_fsdp2.option_names = build_fsdp1.option_names = [f.name for f in fields(TinyLlamaConfig)]
