"""``transformer``: a mini encoder with its own readable attention and padding masks."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from bugzoo.data import DataBundle
from bugzoo.models import ModelSpec


class SelfAttention(nn.Module):
    """Multi-head self-attention; padded keys are masked in the scores, before softmax."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def attention_weights(self, scores: Tensor, key_padding: Tensor) -> Tensor:
        """Softmax over keys with padded keys excluded. ``key_padding``: [B, 1, 1, S], True=pad."""
        scores = scores.masked_fill(key_padding, float("-inf"))
        return scores.softmax(dim=-1)

    def forward(self, x: Tensor, key_padding: Tensor) -> Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        weights = self.attention_weights(scores, key_padding[:, None, None, :])
        return self.out((weights @ v).transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, key_padding: Tensor) -> Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), key_padding))
        return x + self.dropout(self.mlp(self.norm2(x)))


class Encoder(nn.Module):
    """Token + position embeddings, encoder layers, then a mean over the real tokens (each
    RMS-normalised first, with ``token_norm``)."""

    def __init__(self, vocab_size: int, pad_id: int, dim: int, heads: int, layers: int,
                 max_len: int, dropout: float, token_norm: bool = False):
        super().__init__()
        self.pad_id, self.token_norm = pad_id, token_norm
        self.tokens = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.positions = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        key_padding = tokens == self.pad_id
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tokens(tokens) + self.positions(positions)
        for layer in self.layers:
            x = layer(x, key_padding)
        keep = (~key_padding).unsqueeze(-1).to(x.dtype)
        x = x * keep
        if self.token_norm:
            x = self.rms_normalise(x)
        return self.norm(x.sum(1) / keep.sum(1).clamp_min(1))

    def rms_normalise(self, x: Tensor) -> Tensor:
        """Each token divided by its root mean square; padded tokens (all zero) stay zero."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0, dim: int = 32,
                 heads: int = 2, layers: int = 2, max_len: int = 32, dropout: float = 0.1,
                 token_norm: bool = False):
        super().__init__()
        self.backbone = Encoder(vocab_size, pad_id, dim, heads, layers, max_len, dropout,
                                token_norm)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return self.head(self.backbone(tokens, lengths))


def build(data: DataBundle, **params) -> nn.Module:
    return TransformerClassifier(data.vocab_size, data.num_classes, data.pad_id, **params)


SPEC = ModelSpec(
    name="transformer", dataset="reviews", description="mini encoder, own attention with padding masks", build=build,
    # token_norm: RMS-normalise each token before pooling
    params={"dim": 32, "heads": 2, "layers": 2, "max_len": 32, "dropout": 0.1, "token_norm": False},
    run_cost_s=5.8,
)
