"""A character-level GRU on a synthetic text, written as a tutorial writes it (not from bugzoo)."""
import sys

import torch
from torch import nn

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"]
text = " ".join(words[i] for i in torch.randint(0, len(words), (3000,)).tolist())
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text])


class CharRNN(nn.Module):
    def __init__(self, vocab, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, 32)
        self.rnn = nn.GRU(32, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.out(h)


model = CharRNN(len(chars))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()
seq_len, batch = 32, 32


def train(steps=250):
    for it in range(steps):
        starts = torch.randint(0, len(data) - seq_len - 1, (batch,))
        x = torch.stack([data[s:s + seq_len] for s in starts])
        y = torch.stack([data[s + 1:s + seq_len + 1] for s in starts])
        logits = model(x)
        loss = loss_fn(logits.reshape(-1, len(chars)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if it % 50 == 0:
            print(f"iter {it} loss {loss.item():.3f}")


train()
