"""A regression MLP on a synthetic function, written as a tutorial writes it (not from bugzoo)."""
import sys

import torch
from torch import nn

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
X = torch.rand(4096, 6) * 4 - 2
y = (torch.sin(X[:, :1]) + X[:, 1:2] ** 2 - X[:, 2:3] * X[:, 3:4]) + 0.1 * torch.randn(4096, 1)

model = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)

model.train()
for step in range(300):
    idx = torch.randint(0, len(X), (128,))
    pred = model(X[idx])
    loss = loss_fn(pred, y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 100 == 0:
        print(f"step {step} mse {loss.item():.4f}")
