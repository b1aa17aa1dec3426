"""Fine-tuning a new head on a frozen backbone, written as a tutorial writes it (not from bugzoo).

The backbone is first trained on one task, then frozen, and a new head is trained on another
task from its features, as transfer learning is usually shown.
"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
centres = torch.randn(12, 20) * 2
blob = torch.randint(0, 12, (3000,))
features = centres[blob] + torch.randn(3000, 20)
pretrain_labels, task_labels = blob % 6, blob % 3

backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
pretrain_head = nn.Linear(32, 6)
pretrain = nn.Sequential(backbone, pretrain_head)
optimizer = torch.optim.Adam(pretrain.parameters(), lr=3e-3)
for _ in range(150):
    idx = torch.randint(0, 3000, (64,))
    loss = nn.functional.cross_entropy(pretrain(features[idx]), pretrain_labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

for param in backbone.parameters():
    param.requires_grad = False
model = nn.Sequential(backbone, nn.Linear(32, 3))
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05,
                            momentum=0.9)
criterion = nn.CrossEntropyLoss()
for _ in range(150):
    idx = torch.randint(0, 3000, (64,))
    outputs = model(features[idx])
    loss = criterion(outputs, task_labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"fine-tuned loss {loss.item():.3f}")
