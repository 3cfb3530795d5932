"""A Mixture-of-Experts layer with expert parallelism: `ep` experts (default: one per rank),
top-1 routing, token dispatch and combine by `all_to_all_single` with per-peer split sizes
(all-to-all-v) inside each expert-parallel group of `ep` consecutive ranks, the shared router
kept in sync by an all-reduce of its gradient over every rank. With `ep` < world, the ranks
holding the same expert (r mod ep) all-reduce its gradient (expert data parallelism). The step
records the tokens it routes to each peer, counted from the routing decisions, so tests can
check the trace's split sizes against them."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with per-peer splits; its gradient goes back by the reverse all-to-all."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, send: list[int], recv: list[int], group) -> torch.Tensor:
        ctx.send, ctx.recv, ctx.group = send, recv, group
        out = x.new_empty(sum(recv), *x.shape[1:])
        dist.all_to_all_single(out, x.contiguous(), recv, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        back = grad.new_empty(sum(ctx.send), *grad.shape[1:])
        dist.all_to_all_single(back, grad.contiguous(), ctx.send, ctx.recv, group=ctx.group)
        return back, None, None, None


def memory_bytes(world: int, tokens: int = 16, dim: int = 8, ffn: int = 16, ep: int = 0, **_) -> int:
    """Estimated peak bytes of one rank (fp32; SGD without momentum keeps no optimizer state): the
    router and this rank's expert (not sharded) with their gradients and the flat copy the expert's
    replicas all-reduce, and the activations, counting the most tokens the expert can receive
    (every peer of its group routing all of its tokens to it)."""
    ep = ep or world
    expert = 2 * dim * ffn + ffn + dim
    params = dim * ep + expert
    received = tokens * ep
    activations = tokens * (6 * dim + 3 * ep) + received * (3 * dim + 2 * ffn)
    return 4 * (2 * params + expert + activations)


def build(ctx, tokens: int = 16, dim: int = 8, ffn: int = 16, delay_rank: int = -1, delay_ms: float = 0.0,
          ep: int = 0):
    """`delay_rank` sleeps `delay_ms` before the dispatch, to make its peers wait (a straggler).
    `ep` (0 = world): experts, one per rank of each expert-parallel group; must divide world."""
    world, ep = ctx.world, ep or ctx.world  # ep divides world: checked before ranks start (`check_values`)
    # Every rank creates every group, in the same order (c10d requires it).
    ep_groups = [dist.new_group(list(range(b, b + ep))) for b in range(0, world, ep)] if ep < world else [None]
    edp_groups = [dist.new_group(list(range(e, world, ep))) for e in range(ep)] if ep < world else [None]
    ep_group, edp_group = ep_groups[ctx.rank // ep if ep < world else 0], edp_groups[ctx.rank % ep if ep < world else 0]
    torch.manual_seed(0)
    router = nn.Linear(dim, ep, bias=False).to(ctx.device)  # expert e lives on rank e of each EP group
    torch.manual_seed(1 + ctx.rank % ep)  # replicas of an expert start equal
    expert = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim)).to(ctx.device)
    params = list(router.parameters()) + list(expert.parameters())
    opt = torch.optim.SGD(params, lr=1e-2)
    gen = torch.Generator().manual_seed(7 + ctx.rank)
    # A skewed input so that experts get unequal loads (all-to-all-v, not all-to-all).
    skew = torch.linspace(0.0, 2.0, dim)

    def step() -> None:
        x = (torch.randn(tokens, dim, generator=gen) + skew).to(ctx.device)
        expert_of = router(x).argmax(dim=-1)  # top-1
        order = torch.argsort(expert_of, stable=True)
        send_counts = torch.bincount(expert_of, minlength=ep)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=ep_group)  # tell each peer how many tokens to expect
        send, recv = send_counts.tolist(), recv_counts.tolist()
        ctx.record("send_tokens", send)
        ctx.record("recv_tokens", recv)
        if ctx.rank == delay_rank:
            time.sleep(delay_ms / 1e3)
        gate = torch.softmax(router(x), dim=-1).gather(1, expert_of[:, None])
        dispatched = _AllToAll.apply(x[order], send, recv, ep_group)
        combined = _AllToAll.apply(expert(dispatched), recv, send, ep_group)
        y = torch.empty_like(combined)
        y[order] = combined
        loss = (y * gate).pow(2).mean()
        loss.backward()
        for p in router.parameters():  # the router is replicated: average its gradient
            dist.all_reduce(p.grad)
            p.grad /= world
        if edp_group is not None:  # replicas of this rank's expert average its gradient (one flat buffer)
            flat = torch.cat([p.grad.flatten() for p in expert.parameters()])
            dist.all_reduce(flat, group=edp_group)
            flat /= world // ep
            for p, g in zip(expert.parameters(), flat.split([p.numel() for p in expert.parameters()])):
                p.grad.copy_(g.view_as(p))
        opt.step()
        opt.zero_grad()

    return step
