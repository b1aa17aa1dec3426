"""``lstm``: embedding -> LSTM -> linear sentiment classifier that respects padding."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from bugzoo.data import DataBundle
from bugzoo.models import ModelSpec


class SequenceEncoder(nn.Module):
    """Embeds tokens and runs an LSTM over the true (unpadded) part of each sequence."""

    def __init__(self, vocab_size: int, pad_id: int, embed_dim: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        packed = pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        return h_n[-1]  # the state after each sequence's last real token


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0, embed_dim: int = 32,
                 hidden: int = 64):
        super().__init__()
        self.backbone = SequenceEncoder(vocab_size, pad_id, embed_dim, hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return self.head(self.backbone(tokens, lengths))


def build(data: DataBundle, **params) -> nn.Module:
    return LSTMClassifier(data.vocab_size, data.num_classes, data.pad_id, **params)


SPEC = ModelSpec(
    name="lstm", dataset="reviews", description="embedding -> LSTM -> linear sentiment classifier", build=build,
    params={"embed_dim": 32, "hidden": 64},
    run_cost_s=5.6,
)
