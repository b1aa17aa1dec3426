"""A small CNN on synthetic 16x16 images, written as a tutorial writes it (not from bugzoo)."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
num_classes = 4
prototypes = torch.randn(num_classes, 1, 16, 16)
labels = torch.randint(0, num_classes, (2048,))
images = prototypes[labels] + 0.8 * torch.randn(2048, 1, 16, 16)
dataset = torch.utils.data.TensorDataset(images, labels)
loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

for epoch in range(4):
    running_loss = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    print(f"epoch {epoch + 1} loss {running_loss / len(loader):.3f}")
