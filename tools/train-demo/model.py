"""Kimi K3's forward pass in PyTorch (model.md §6), written from the spec as a second reading of it.

float32 throughout, batched over sequences [B, T]; autograd-ready for training. Module and
parameter names follow the released tensor names (§3) so that `state_dict()` keys, prefixed
with `language_model.`, are the checkpoint's names; the routed experts are held stacked
([Ne, rows, cols] per w1/w2/w3) and split into `experts.{e}.w*` by the export.

Evaluation orders are PyTorch's (this is a reference, not the engine): the contract with the
engine is the §8.5 tolerance, and with tools/reference the same.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as Fn

from config import Config


def rmsnorm(x: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = x * r
    return y if w is None else w * y


def l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + 1e-6)


def situ_glu(gate: torch.Tensor, up: torch.Tensor, beta1: float, beta2: float) -> torch.Tensor:
    """§6.3: the sigmoid takes the UNCAPPED gate; both halves are capped by beta*tanh(x/beta)."""
    return (beta1 * torch.tanh(gate / beta1)) * torch.sigmoid(gate) * (beta2 * torch.tanh(up / beta2))


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w.t()


class Weight(nn.Module):
    """A module holding one tensor called `weight`, so the state-dict key ends in `.weight`."""

    def __init__(self, *shape: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(*shape))


def attn_res(sources: list[torch.Tensor], norm_w: torch.Tensor, proj_w: torch.Tensor, eps: float) -> torch.Tensor:
    """§6.8: keys are the RMS-normalised sources, values the raw ones; phi = norm ⊙ proj."""
    if len(sources) == 1:
        return sources[0]
    s = torch.stack(sources, dim=0)                      # [n, ..., E]
    phi = norm_w * proj_w.reshape(-1)
    keys = rmsnorm(s, None, eps)
    p = torch.softmax((keys * phi).sum(dim=-1), dim=0)   # [n, ...]
    return (p.unsqueeze(-1) * s).sum(dim=0)


# ---------------------------------------------------------------------------------------- KDA

def kda_recurrence_loop(q, k, v, g, beta, S0=None):
    """§6.6's recurrence, one position at a time. q (already scaled), k, v, g (log decay) [B,T,H,D];
    beta [B,T,H]; S [B,H,D,D] with row i = key channel, column j = value channel."""
    B, T, H, D = q.shape
    S = torch.zeros(B, H, D, D, dtype=q.dtype) if S0 is None else S0
    alpha = torch.exp(g)
    outs = []
    for t in range(T):
        S = alpha[:, t, :, :, None] * S                                    # (a) decay rows
        u = torch.einsum("bhi,bhij->bhj", k[:, t], S)                      # (b) read the decayed state
        S = S + (k[:, t] * beta[:, t, :, None])[..., None] * (v[:, t] - u)[..., None, :]  # (c) delta write
        outs.append(torch.einsum("bhi,bhij->bhj", q[:, t], S))             # (d) output from the updated state
    return torch.stack(outs, dim=1), S


def kda_recurrence_chunked(q, k, v, g, beta, S0=None, chunk: int = 16):
    """The same recurrence, C positions at a time (for training speed; checked against the loop).

    Within a chunk with cumulative log decay G_r = sum_{s<=r} g_s (per key channel), the deltas
    d_r = beta_r (v_r - S'_r^T k_r) satisfy (I + A) Δ = diag(beta) (V - K~ S0) with
    A_rs = beta_r sum_i k_ri k_si exp(G_ri - G_si) for s < r (strictly lower), K~ = k ⊙ exp(G);
    outputs O = (q ⊙ exp(G)) S0 + tril(Q K^ exp) Δ (diagonal kept: each output reads the state after
    its own write); the next state exp(G_C) ⊙ S0 + sum_s (k_s ⊙ exp(G_C - G_s)) d_s^T. Exponents are
    taken relative to the chunk's middle so neither factor of a product over- or underflows.
    """
    B, T, H, D = q.shape
    pad = (-T) % chunk
    if pad:
        z = lambda x: Fn.pad(x, (0, 0, 0, 0, 0, pad)) if x.dim() == 4 else Fn.pad(x, (0, 0, 0, pad))
        q, k, v, g, beta = z(q), z(k), z(v), z(g), z(beta)
    n = q.shape[1] // chunk
    rs = lambda x: x.reshape(B, n, chunk, *x.shape[2:]).transpose(2, 3) if x.dim() == 4 else x.reshape(B, n, chunk, H).transpose(2, 3)
    q, k, v, g, beta = rs(q), rs(k), rs(v), rs(g), rs(beta)     # [B, n, H, C, D] and [B, n, H, C]
    G = torch.cumsum(g, dim=3)
    ref = G[:, :, :, chunk // 2 : chunk // 2 + 1, :]
    k_fwd = k * torch.exp(G - ref)        # k_r ⊙ exp(G_r - ref)
    k_back = k * torch.exp(ref - G)       # k_s ⊙ exp(ref - G_s)
    q_fwd = q * torch.exp(G - ref)
    strict = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=-1)
    lower = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool))
    A = (k_fwd @ k_back.transpose(-1, -2)) * beta[..., None]
    A = A.masked_fill(~strict, 0.0)
    eye = torch.eye(chunk, dtype=q.dtype)
    Bqk = (q_fwd @ k_back.transpose(-1, -2)).masked_fill(~lower, 0.0)
    eG = torch.exp(G)
    k_start = k * eG                      # K~: keys decayed back to the chunk start
    q_start = q * eG
    k_end = k * torch.exp(G[:, :, :, -1:, :] - G)
    S = torch.zeros(B, H, D, D, dtype=q.dtype) if S0 is None else S0
    # Per-chunk views by unbind (one backward for all chunks; indexing [:, c] would zero-fill a
    # full-size gradient per chunk).
    per = lambda x: x.unbind(1)
    beta_c, v_c, ks_c, A_c, qs_c, B_c, ke_c = map(per, (beta, v, k_start, eye + A, q_start, Bqk, k_end))
    decay_c = per(eG[:, :, :, -1, :, None])
    outs = []
    for c in range(n):
        rhs = beta_c[c][..., None] * (v_c[c] - ks_c[c] @ S)
        delta = torch.linalg.solve_triangular(A_c[c], rhs, upper=False, unitriangular=True)
        outs.append(qs_c[c] @ S + B_c[c] @ delta)
        S = decay_c[c] * S + ke_c[c].transpose(-1, -2) @ delta
    o = torch.stack(outs, dim=1).transpose(2, 3).reshape(B, n * chunk, H, D)
    return o[:, :T], S


class ShortConv(nn.Module):
    """§6.5 depthwise causal conv with the SiLU fused; `weight` [P, 1, Kc], tap Kc-1 = current input."""

    def __init__(self, P: int, Kc: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(P, 1, Kc))

    def forward(self, x: torch.Tensor, history: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        # x [B, T, P]; history [B, P, Kc-1] of earlier raw inputs, oldest first
        B, T, P = x.shape
        Kc = self.weight.shape[-1]
        xt = x.transpose(1, 2)
        past = torch.zeros(B, P, Kc - 1, dtype=x.dtype) if history is None else history
        full = torch.cat([past, xt], dim=2)
        pre = Fn.conv1d(full, self.weight, groups=P)
        return Fn.silu(pre).transpose(1, 2), full[:, :, full.shape[2] - (Kc - 1):]


class KDA(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        P, E, D, Hk = c.P, c.E, c.D, c.Hk
        self.q_proj, self.k_proj, self.v_proj = Weight(P, E), Weight(P, E), Weight(P, E)
        self.q_conv1d, self.k_conv1d, self.v_conv1d = ShortConv(P, c.Kc), ShortConv(P, c.Kc), ShortConv(P, c.Kc)
        self.f_a_proj, self.f_b_proj = Weight(D, E), Weight(P, D)
        self.b_proj = Weight(Hk, E)
        self.A_log = nn.Parameter(torch.zeros(D))   # per HEAD: only the first Hk are used (§3.3)
        self.dt_bias = nn.Parameter(torch.zeros(P))
        self.g_proj = Weight(P, E)
        self.o_norm = Weight(D)
        self.o_proj = Weight(E, P)
        self.chunked = True

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        c = self.c
        B, T, _ = x.shape
        hist = state or {}
        q, hq = self.q_conv1d(linear(x, self.q_proj.weight), hist.get("conv_q"))
        k, hk = self.k_conv1d(linear(x, self.k_proj.weight), hist.get("conv_k"))
        v, hv = self.v_conv1d(linear(x, self.v_proj.weight), hist.get("conv_v"))
        heads = lambda t: t.reshape(B, T, c.Hk, c.D)
        q, k, v = l2norm(heads(q)), l2norm(heads(k)), heads(v)
        beta = torch.sigmoid(linear(x, self.b_proj.weight))                         # [B, T, Hk]
        z = linear(linear(x, self.f_a_proj.weight), self.f_b_proj.weight)            # [B, T, P]
        a = torch.exp(self.A_log[: c.Hk]).repeat_interleave(c.D)                     # one value per head
        g = c.gmin * torch.sigmoid(a * (z + self.dt_bias))                          # log decay in [gmin, 0]
        q = q * (1.0 / math.sqrt(c.D))
        S0 = hist.get("S")
        if self.chunked and T > 1:   # one position: the loop is the same recurrence, without padding
            o, S = kda_recurrence_chunked(q, k, v, heads(g), beta, S0)
        else:
            o, S = kda_recurrence_loop(q, k, v, heads(g), beta, S0)
        if state is not None:
            state.update(S=S, conv_q=hq, conv_k=hk, conv_v=hv)
        o = rmsnorm(o, self.o_norm.weight, c.eps).reshape(B, T, c.P)                 # norm first,
        y = o * torch.sigmoid(linear(x, self.g_proj.weight))                         # then the gate
        return linear(y, self.o_proj.weight)


# ---------------------------------------------------------------------------------------- MLA

class MLA(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        E, H = c.E, c.H
        self.q_a_proj, self.q_a_layernorm = Weight(c.Rq, E), Weight(c.Rq)
        self.q_b_proj = Weight(H * c.dq, c.Rq)
        self.kv_a_proj_with_mqa, self.kv_a_layernorm = Weight(c.Rkv + c.dr, E), Weight(c.Rkv)
        self.kv_b_proj = Weight(H * (c.dn + c.dv), c.Rkv)
        if c.mla_gate:
            self.g_proj = Weight(H * c.dv, E)
        self.o_proj = Weight(E, H * c.dv)

    def forward(self, x: torch.Tensor, state: dict | None = None) -> torch.Tensor:
        c = self.c
        B, T, _ = x.shape
        Q = linear(rmsnorm(linear(x, self.q_a_proj.weight), self.q_a_layernorm.weight, c.eps), self.q_b_proj.weight)
        Q = Q.reshape(B, T, c.H, c.dq)
        qn, qr = Q[..., : c.dn], Q[..., c.dn :]
        C = linear(x, self.kv_a_proj_with_mqa.weight)
        c_kv = rmsnorm(C[..., : c.Rkv], self.kv_a_layernorm.weight, c.eps)           # latent only
        kr = C[..., c.Rkv :]                                                          # raw, never rotated
        past = 0
        if state is not None:
            if "c_kv" in state:
                past = state["c_kv"].shape[1]
                c_kv = torch.cat([state["c_kv"], c_kv], dim=1)
                kr = torch.cat([state["kr"], kr], dim=1)
            state.update(c_kv=c_kv, kr=kr)
        KV = linear(c_kv, self.kv_b_proj.weight).reshape(B, past + T, c.H, c.dn + c.dv)
        kn, v = KV[..., : c.dn], KV[..., c.dn :]
        # score = (qn·kn + qr·kr) / sqrt(dq): the rope slot is scored (one key shared by all heads)
        q_full = torch.cat([qn, qr], dim=-1).transpose(1, 2)                                         # [B, H, T, dq]
        k_full = torch.cat([kn, kr[:, :, None, :].expand(B, past + T, c.H, c.dr)], dim=-1).transpose(1, 2)
        allowed = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past)       # causal, offset by the cache
        O = Fn.scaled_dot_product_attention(q_full, k_full, v.transpose(1, 2), attn_mask=allowed, scale=1.0 / math.sqrt(c.dq))
        O = O.transpose(1, 2).reshape(B, T, c.H * c.dv)
        if c.mla_gate:
            O = O * torch.sigmoid(linear(x, self.g_proj.weight))
        return linear(O, self.o_proj.weight)


# ---------------------------------------------------------------------------------------- FFN

class DenseMLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.gate_proj, self.up_proj, self.down_proj = Weight(c.Id, c.E), Weight(c.Id, c.E), Weight(c.E, c.Id)

    def forward(self, x):
        c = self.c
        return linear(situ_glu(linear(x, self.gate_proj.weight), linear(x, self.up_proj.weight), c.beta1, c.beta2), self.down_proj.weight)


class Router(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c.Ne, c.E))
        # Frozen selection bias (§6.10): not trained by gradient; the trainer balances load with it.
        self.register_buffer("e_score_correction_bias", torch.zeros(c.Ne))


class SharedExperts(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = Weight(c.Is, c.E), Weight(c.Is, c.E), Weight(c.E, c.Is)


class LatentMoE(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.gate = Router(c)
        self.routed_expert_down_proj = Weight(c.Lam, c.E)
        self.routed_expert_up_proj = Weight(c.E, c.Lam)
        self.routed_expert_norm = Weight(c.Lam)
        self.shared_experts = SharedExperts(c)
        # Stacked routed experts: w1 gate [I, Λ], w3 up [I, Λ], w2 down [Λ, I] (§3.5's naming trap).
        self.experts_w1 = nn.Parameter(torch.zeros(c.Ne, c.I, c.Lam))
        self.experts_w2 = nn.Parameter(torch.zeros(c.Ne, c.Lam, c.I))
        self.experts_w3 = nn.Parameter(torch.zeros(c.Ne, c.I, c.Lam))
        self.last_load: torch.Tensor | None = None
        self.last_choice: torch.Tensor | None = None

    def route(self, x: torch.Tensor):
        c = self.c
        s = torch.sigmoid(linear(x, self.gate.weight))                  # independent scores
        biased = s + self.gate.e_score_correction_bias                 # the bias selects only
        order = torch.sort(biased.detach(), dim=-1, descending=True, stable=True).indices  # ties: lowest index
        top = order[..., : c.k]
        w = torch.gather(s, -1, top)                                   # weights from UNBIASED scores
        if c.renorm:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return top, w * c.rho

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.c
        shape = x.shape
        x = x.reshape(-1, c.E)
        top, w = self.route(x)
        z = linear(x, self.routed_expert_down_proj.weight)
        acc = torch.zeros(x.shape[0], c.Lam, dtype=x.dtype)
        flat = top.reshape(-1)
        token = torch.arange(x.shape[0]).repeat_interleave(c.k)
        weight = w.reshape(-1)
        self.last_load = torch.bincount(flat, minlength=c.Ne).detach()
        self.last_choice = top.detach()
        order = torch.argsort(flat, stable=True)
        counts = self.last_load.tolist()
        start = 0
        for e in range(c.Ne):
            n = counts[e]
            if n == 0:
                continue
            sel = order[start : start + n]
            start += n
            rows = token[sel]
            ze = z[rows]
            t = situ_glu(linear(ze, self.experts_w1[e]), linear(ze, self.experts_w3[e]), c.beta1, c.beta2)
            acc = acc.index_add(0, rows, weight[sel, None] * linear(t, self.experts_w2[e]))
        n = rmsnorm(acc, self.routed_expert_norm.weight, c.eps) if c.latent_norm else acc   # once, on the aggregate
        y_r = linear(n, self.routed_expert_up_proj.weight)
        se = self.shared_experts
        y_s = linear(situ_glu(linear(x, se.gate_proj.weight), linear(x, se.up_proj.weight), c.beta1, c.beta2), se.down_proj.weight)
        return (y_r + y_s).reshape(shape)                               # shared added with no weight


# ---------------------------------------------------------------------------------------- layers

class DecoderLayer(nn.Module):
    def __init__(self, c: Config, layer: int):
        super().__init__()
        self.c, self.layer = c, layer
        E = c.E
        self.input_layernorm, self.post_attention_layernorm = Weight(E), Weight(E)
        self.self_attention_res_norm, self.self_attention_res_proj = Weight(E), Weight(1, E)
        self.mlp_res_norm, self.mlp_res_proj = Weight(E), Weight(1, E)
        self.self_attn = MLA(c) if c.is_mla(layer) else KDA(c)
        if c.is_dense(layer):
            self.mlp = DenseMLP(c)
        else:
            self.block_sparse_moe = LatentMoE(c)

    def forward(self, r: torch.Tensor, blocks: list[torch.Tensor], state: dict | None):
        """§6.9: returns the new running sum; `blocks` is updated in place at a boundary."""
        c = self.c
        a = attn_res(blocks + [r], self.self_attention_res_norm.weight, self.self_attention_res_proj.weight, c.eps) if blocks else r
        partial: torch.Tensor | None = r
        if c.is_boundary(self.layer):
            blocks.append(r)
            partial = None
        u = self.self_attn(rmsnorm(a, self.input_layernorm.weight, c.eps), state)
        r = u if partial is None else partial + u
        m = attn_res(blocks + [r], self.mlp_res_norm.weight, self.mlp_res_proj.weight, c.eps)
        h = rmsnorm(m, self.post_attention_layernorm.weight, c.eps)
        f = self.mlp(h) if c.is_dense(self.layer) else self.block_sparse_moe(h)
        return r + f


class Body(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = Weight(c.V, c.E)
        self.layers = nn.ModuleList(DecoderLayer(c, l) for l in range(c.L))
        self.norm = Weight(c.E)
        self.output_attn_res_norm, self.output_attn_res_proj = Weight(c.E), Weight(1, c.E)


class K3(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.model = Body(c)
        if not c.tie:
            self.lm_head = Weight(c.V, c.E)

    def set_chunked(self, on: bool) -> None:
        for m in self.modules():
            if isinstance(m, KDA):
                m.chunked = on

    def hidden(self, ids: torch.Tensor, state: list | None = None) -> torch.Tensor:
        """ids [B, T] -> the final-normed hidden [B, T, E]. `state` (one dict per layer) carries
        KDA and conv state and the MLA latent cache across calls (§9)."""
        c = self.c
        body = self.model
        r = body.embed_tokens.weight[ids]                      # exact row, no scaling
        blocks: list[torch.Tensor] = []
        for l, layer in enumerate(body.layers):
            r = layer(r, blocks, None if state is None else state[l])
        h = attn_res(blocks + [r], body.output_attn_res_norm.weight, body.output_attn_res_proj.weight, c.eps)
        return rmsnorm(h, body.norm.weight, c.eps)

    def head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.c.tie else self.lm_head.weight

    def forward(self, ids: torch.Tensor, state: list | None = None) -> torch.Tensor:
        return linear(self.hidden(ids, state), self.head_weight())

    def new_state(self) -> list[dict]:
        return [dict() for _ in range(self.c.L)]


@torch.no_grad()
def greedy(model: K3, prompt: list[int], n: int, incremental: bool = True, stop: set[int] | None = None):
    """Greedy decode (ties to the lowest id). Returns (ids, logits of each choosing step [n, V])."""
    ids = list(prompt)
    chosen, rows = [], []
    state = model.new_state() if incremental else None
    feed = ids
    for _ in range(n):
        if incremental:
            logits = model(torch.tensor([feed]), state)[0, -1]
        else:
            logits = model(torch.tensor([ids]))[0, -1]
        nxt = int(torch.argmax(logits))
        rows.append(logits.clone())
        chosen.append(nxt)
        ids.append(nxt)
        feed = [nxt]
        if stop and nxt in stop:
            break
    return chosen, torch.stack(rows)
