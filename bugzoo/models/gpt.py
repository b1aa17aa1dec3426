"""``gpt``: a tiny decoder-only language model, with its own readable causal attention.

Learned positions, pre-norm blocks, and an output head tied to the input embedding (one
matrix, as GPT-2's). Rows may be padded on the right (training) or on the left (batched
generation): padded keys are masked, and each token's position counts its row's real tokens
before it, so a row's logits do not depend on how much padding its batch holds.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from bugzoo.data import DataBundle
from bugzoo.models import ModelSpec

INIT_STD = 0.02  # GPT-2's: small enough that the tied head's first logits give about log(V)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position sees itself and the real tokens before it."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        """Scaled dot products ``[B, H, S, S]``: divided by sqrt(head width), so they keep unit
        scale whatever the width."""
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])

    def allowed(self, key_padding: Tensor) -> Tensor:
        """``[B, 1, S, S]``, True where query ``i`` may attend to key ``j``: ``j <= i``, and key
        ``j`` is a real token (a padded query sees itself, so its row is never empty)."""
        s = key_padding.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool, device=key_padding.device).tril()
        itself = torch.eye(s, dtype=torch.bool, device=key_padding.device)
        return causal & (~key_padding[:, None, None, :] | itself)

    def forward(self, x: Tensor, key_padding: Tensor) -> Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = self.scores(q, k).masked_fill(~self.allowed(key_padding), float("-inf"))
        return self.out((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, key_padding: Tensor) -> Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), key_padding))
        return x + self.dropout(self.mlp(self.norm2(x)))


class Decoder(nn.Module):
    """Token and position embeddings, causal blocks, a final norm: one vector per token."""

    def __init__(self, vocab_size: int, pad_id: int, dim: int, heads: int, layers: int,
                 max_len: int, dropout: float):
        super().__init__()
        self.pad_id = pad_id
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList(Block(dim, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def position_ids(self, key_padding: Tensor) -> Tensor:
        """Each token's position: how many real tokens of its row come before it (padding on
        the left does not count; padded slots take position 0)."""
        return ((~key_padding).long().cumsum(1) - 1).clamp_min(0)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """``[B, S, dim]``; padding is read from the tokens, so ``lengths`` is not needed."""
        key_padding = tokens == self.pad_id
        x = self.tokens(tokens) + self.positions(self.position_ids(key_padding))
        for layer in self.layers:
            x = layer(x, key_padding)
        return self.norm(x)


class GPT(nn.Module):
    def __init__(self, vocab_size: int, pad_id: int = 0, dim: int = 64, heads: int = 4,
                 layers: int = 2, max_len: int = 64, dropout: float = 0.0):
        super().__init__()
        self.backbone = Decoder(vocab_size, pad_id, dim, heads, layers, max_len, dropout)
        self.head = nn.Linear(dim, vocab_size, bias=False)
        self.apply(self.init_weights)
        self.head.weight = self.backbone.tokens.weight  # tied: one matrix reads and writes tokens

    @staticmethod
    def init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=INIT_STD)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Next-token logits ``[B, S, V]`` at every position (``lengths`` is not needed: padding
        is read from the tokens)."""
        return self.head(self.backbone(tokens, lengths))


def build(data: DataBundle, **params) -> nn.Module:
    return GPT(data.vocab_size, data.pad_id, **params)


SPEC = ModelSpec(
    name="gpt", dataset="language",
    description="tiny decoder-only language model, own causal attention, tied embeddings",
    build=build,
    # max_len: the position table; longer than a sentence (33 tokens), so that a position
    # counted from a row's first slot under left padding still has an embedding
    params={"dim": 64, "heads": 4, "layers": 2, "max_len": 64, "dropout": 0.0},
    run_cost_s=8.0,
)
