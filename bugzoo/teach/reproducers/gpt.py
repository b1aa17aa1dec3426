"""The gpt reproducer: a seeded language with long-range agreement, a tiny causal transformer
whose output head is its tied input embedding, next-token targets with padding masked, token-
weighted gradient accumulation, and a generation check for a left-padded batch of prompts."""

from __future__ import annotations

from bugzoo.bugs import Delta
from bugzoo.teach.reproducers._shared import HEADER

DEFAULTS: dict[str, object] = {"STEPS": 300, "LR": 1e-2, "BATCH": 32, "ACCUMULATE": 1,
                               "N_TRAIN": 4000}

TEMPLATE = HEADER + '''
torch.manual_seed(0)
torch.set_num_threads(1)
STEPS, BATCH, ACCUMULATE, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, ${BATCH}, ${ACCUMULATE}, ${LR}, 50, 64, 4
PAD, BOS, EOS, WIDTH, VERB_RATE = 0, 1, 2, 33, 0.25  # a sentence: <bos> subject words <eos>
SUBJECT, VERB, FILLER, VOCAB = 3, 19, 35, 67  # first id of each kind; 4 classes of 4 each
grammar = torch.stack([torch.randperm(32)[:4] for _ in range(32)])  # each filler's successors


def make_split(n):  # every verb agrees with the subject's class, however far back it is
    classes, ends = torch.randint(0, 4, (n,)), torch.randint(8, WIDTH, (n,))
    x = torch.full((n, WIDTH), PAD)
    x[:, 0], x[:, 1] = BOS, SUBJECT + 4 * classes + torch.randint(0, 4, (n,))
    state = torch.randint(0, 32, (n,))
    for t in range(2, WIDTH):
        verb, follow = torch.rand(n) < VERB_RATE, grammar[state, torch.randint(0, 4, (n,))]
        word = torch.where(verb, VERB + 4 * classes + torch.randint(0, 4, (n,)), FILLER + follow)
        x[:, t] = torch.where(t < ends, word, torch.where(t == ends, EOS, PAD))
        state = torch.where(verb, state, follow)
    return x


train, val, hold = make_split(${N_TRAIN}), make_split(1000), make_split(1000)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)

    def forward(self, x, padded):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)
        causal = torch.ones(s, s, dtype=torch.bool).tril()  # key j <= query i
        allowed = causal & (~padded[:, None, None, :] | torch.eye(s, dtype=torch.bool))
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(DIM), Attention(), nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x, padded):
        x = x + self.attn(self.norm1(x), padded)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(64, DIM)
        self.blocks, self.norm = nn.ModuleList(Block() for _ in range(2)), nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
        self.head.weight = self.tokens.weight  # tied: one matrix reads and writes tokens

    def forward(self, tokens):
        padded = tokens == PAD
        positions = ((~padded).long().cumsum(1) - 1).clamp_min(0)  # real tokens before each
        x = self.tokens(tokens) + self.positions(positions)
        for block in self.blocks:
            x = block(x, padded)
        return self.head(self.norm(x))


model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 20, 0.5 * (
    1 + math.cos(math.pi * min(s / STEPS, 1.0)))))


def targets_of(x):
    targets = torch.cat([x[:, 1:], torch.full_like(x[:, :1], PAD)], dim=1)  # token t + 1
    return targets.masked_fill(targets == PAD, -100)  # padding is no target


def token_loss(x):  # the sum over the batch's target tokens, and how many there are
    targets = targets_of(x)
    return F.cross_entropy(model(x).flatten(0, 1), targets.flatten(), ignore_index=-100,
                           reduction="sum"), (targets != -100).sum()


def evaluate(x):  # mean loss and accuracy over the target tokens
    model.eval()
    with torch.no_grad():
        targets = targets_of(x)
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        correct = (logits.argmax(-1) == targets).sum() / (targets != -100).sum()
    model.train()
    return loss.item(), correct.item()


losses, step = [], 0
while step < STEPS:
    order = torch.randperm(len(train))
    for i in range(0, len(order) - BATCH * ACCUMULATE + 1, BATCH * ACCUMULATE):
        if step == STEPS:
            break
        micro = [train[order[i + j * BATCH:i + (j + 1) * BATCH]] for j in range(ACCUMULATE)]
        tokens_in_step = sum((targets_of(x) != -100).sum() for x in micro)
        optimizer.zero_grad()
        step_loss = 0.0
        for x in micro:
            total, count = token_loss(x)
            loss = total / tokens_in_step  # each token weighs the same in the step
            loss.backward()
            step_loss += loss.item()
        optimizer.step()
        scheduler.step()
        losses.append(step_loss)
        step += 1
        if step % EVAL_EVERY == 0:
            print(f"step {step:4d}  loss {losses[-1]:.4f}  val loss/acc {evaluate(val)}")


first = torch.bincount(grammar.flatten(), minlength=32) / grammar.numel()  # a first filler


def source_scores(sentence):  # the language's log-probability of each word where it stands
    cls, last, scores = (int(sentence[1]) - SUBJECT) // 4, None, []
    for t in range(2, len(sentence)):
        w, end = int(sentence[t]), (1 / (WIDTH - t) if t >= 8 else 0.0)  # P(<eos> here)
        if w == EOS:
            p = end
        elif VERB + 4 * cls <= w < VERB + 4 * cls + 4:
            p = (1 - end) * VERB_RATE / 4
        elif FILLER <= w < VOCAB:
            follows = first[w - FILLER] if last is None else (w - FILLER in grammar[last]) / 4
            p, last = (1 - end) * (1 - VERB_RATE) * float(follows), w - FILLER
        else:
            p = 0.0
        scores.append(math.log(max(p, 1e-6)))  # a word it cannot write costs 13.8 nats
    return scores


model.eval()  # serve: openings of validation sentences, left-padded into one batch
cut = 2 + (torch.rand(200) * 6).long()
batch = torch.stack([F.pad(val[r, :cut[r]], (int(cut.max() - cut[r]), 0)) for r in range(200)])
with torch.no_grad():
    for _ in range(WIDTH - int(cut.min())):
        batch = torch.cat([batch, model(batch)[:, -1].softmax(-1).multinomial(1)], dim=1)
written = []
for row, c in zip(batch, cut.tolist()):
    row = row[int(cut.max()) - c:]  # the prompt, then what the model wrote
    ends = (row[c:] == EOS).nonzero()
    written += source_scores(row[: c + int(ends[0]) + 1] if len(ends) else row[:WIDTH])[c - 2:]
(val_loss, val_acc), (hold_loss, _) = evaluate(val), evaluate(hold)
summary = {"final_val_loss": val_loss, "final_val_acc": val_acc, "initial_loss": losses[0],
           "generation_gap": -sum(written) / len(written) - hold_loss}
print(f"SYMPTOM ${METRIC}={summary['${METRIC}']:.6g}")
'''

# Healthy variants of the fixed script, named after the clean scenarios they mirror
# (scenarios/gpt-clean-<name>.yaml)
HEALTHY: dict[str, Delta] = {
    "accumulate4": Delta((), {"BATCH": 8, "ACCUMULATE": 4}),
    "batch16": Delta((), {"BATCH": 16}),
    "lr_x0p3": Delta((), {"LR": 3e-3}),
}
