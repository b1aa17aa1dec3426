"""The confined side of sealed grading: ``python -m bugzoo.teach.tasks.sealed_server``.

Started by :mod:`bugzoo.teach.tasks.sealed_runs` inside new namespaces
(:mod:`bugzoo.harness.sandbox`), as the first process of its PID namespace. It loads torch and
nothing of bugzoo's beyond this module and the sandbox, seals the filesystem (read-only; the
key, bugzoo's code, results and cache covered), then serves one run of a task script at a
time. For each run it forks a child that enters a private job (namespaces, temporary folder and
``/dev/shm`` of its own, no capabilities, CPU and memory limits), writes the script into its
temporary folder and runs it with the seed on its command line. The child then reports what it
trained (:func:`facts`, and the tail of its output); only after that does the grader send the held-out inputs, so the script
never sees them while it trains. The child answers with its model's outputs, and the server ends
whatever the run left running and reports the CPU time the run's whole process tree used,
counted by the kernel as the tree's processes are reaped: a budget the script cannot reach.

Every message is JSON and raw tensor bytes (:func:`pack`), never a pickle, both ways.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import select
import socket
import struct
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from bugzoo.harness import sandbox
from bugzoo.harness.sandbox import read_message, write_message

MAX_MESSAGE = 512 << 20  # bytes a run may send back in one message
LOG_TAIL = 20_000  # characters of a run's output sent back for the grader's log
DTYPES = {str(d): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64,
                              torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                              torch.bool)}


class WireError(ValueError):
    """A message that is not what the protocol allows."""


def pack(meta: dict, tensors: dict[str, torch.Tensor] | None = None) -> bytes:
    """``meta`` (plain JSON values) and ``tensors`` as one message body: the length of a JSON
    header, the header (``meta`` and each tensor's dtype and shape), then the tensors' bytes."""
    described, blobs = [], []
    for name, tensor in (tensors or {}).items():
        tensor = tensor.detach().cpu().contiguous()
        if str(tensor.dtype) not in DTYPES:
            raise WireError(f"tensor {name!r} of dtype {tensor.dtype}")
        blobs.append(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        described.append({"name": name, "dtype": str(tensor.dtype),
                          "shape": list(tensor.shape), "bytes": len(blobs[-1])})
    header = json.dumps({"meta": meta, "tensors": described}).encode()
    return struct.pack(">I", len(header)) + header + b"".join(blobs)


def unpack(body: bytes) -> tuple[dict, dict[str, torch.Tensor]]:
    """The ``meta`` and tensors of a :func:`pack` body, each part checked against the header."""
    try:
        (size,) = struct.unpack(">I", body[:4])
        header = json.loads(body[4:4 + size])
        meta, described = header["meta"], header["tensors"]
        offset, tensors = 4 + size, {}
        for item in described:
            dtype, shape, count = DTYPES[item["dtype"]], [int(n) for n in item["shape"]], \
                int(item["bytes"])
            numel = 1
            for n in shape:
                numel *= n
            if min(shape, default=0) < 0 or count != numel * dtype.itemsize or \
                    offset + count > len(body):
                raise WireError(f"tensor {item['name']!r} does not fit its header")
            raw = bytearray(body[offset:offset + count])
            tensors[str(item["name"])] = (torch.frombuffer(raw, dtype=torch.uint8).view(dtype)
                                          .reshape(shape) if count else
                                          torch.empty(shape, dtype=dtype))
            offset += count
    except (KeyError, TypeError, ValueError, struct.error) as e:
        raise WireError(f"a malformed message ({type(e).__name__}: {e})") from None
    if offset != len(body) or not isinstance(meta, dict):
        raise WireError("a message with bytes its header does not describe")
    return meta, tensors


# ----------------------------------------------------------------- in a run's own child
def facts(scope: dict, steps: int, source: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """What a finished script left for the grader's checks: its step count (by the hook), the
    layers of its ``model``, its logs and ``summary``, and its data source (the global
    ``source``)."""
    model = scope.get("model")
    layers = Counter(type(m).__name__ for m in model.modules()
                     if any(True for _ in m.parameters(recurse=False))) \
        if isinstance(model, nn.Module) else Counter()

    def floats(values: object) -> list[float]:
        try:
            return [float(v) for v in values]  # type: ignore[union-attr]
        except (TypeError, ValueError):
            return []

    summary = scope.get("summary")
    meta = {"steps": steps, "model": isinstance(model, nn.Module),
            "layers": dict(sorted(layers.items())), "losses": floats(scope.get("losses", ())),
            "grad_norms": floats(scope.get("grad_norms", ())),
            "observed": {str(k): float(v) for k, v in summary.items()
                         if isinstance(v, int | float)} if isinstance(summary, dict) else {}}
    found = scope.get(source)
    return meta, {"source": found} if isinstance(found, torch.Tensor) else {}


def run_script(job: dict, channel: socket.socket, private_tmp: Path, limits: dict,
               confined: bool) -> None:
    """The run's child: enter a private job, train the script, report, answer one evaluation."""
    if confined:
        sandbox.enter_private_job(private_tmp, limits["cpu_s"], limits["memory_bytes"])
    os.chdir(private_tmp)
    script = private_tmp / "train.py"
    script.write_text(job["script"])
    output = os.open(private_tmp / "output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    steps = [0]
    register_optimizer_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    sys.argv = [str(script), str(job["seed"])]
    print(f"$ python train.py {job['seed']}", flush=True)
    error = None
    try:
        scope = runpy.run_path(str(script), run_name="__main__")
    except BaseException as e:  # noqa: B036 - the script's own failure is a finding
        traceback.print_exc()
        error, scope = f"{type(e).__name__}: {e}"[:300], {}
    meta, tensors = facts(scope, steps[0], job["source"])
    sys.stdout.flush()
    sys.stderr.flush()
    log = (private_tmp / "output.log").read_text(errors="replace")[-LOG_TAIL:]
    send(channel, pack({**meta, "error": error, "log": log}, tensors))
    _, inputs = unpack(receive(channel))
    model = scope.get("model")
    if not isinstance(model, nn.Module):
        send(channel, pack({"error": "the script left no nn.Module named 'model'"}))
        return
    model.eval()
    try:
        with torch.no_grad():
            outputs = model(*(inputs[str(i)] for i in range(len(inputs))))
        send(channel, pack({"error": None}, {"outputs": outputs.detach().float()}))
    except Exception as e:
        send(channel, pack({"error": f"{type(e).__name__}: {e}"[:300]}))


def send(channel: socket.socket, body: bytes) -> None:
    channel.sendall(struct.pack(">I", len(body)) + body)


def receive(channel: socket.socket, deadline: float | None = None) -> bytes:
    """One message from ``channel`` by ``deadline`` (a ``time.monotonic`` time)."""
    def exactly(count: int) -> bytes:
        chunks, left = [], count
        while left:
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([channel], [], [], wait)[0]:
                    raise TimeoutError
            chunk = channel.recv(min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (size,) = struct.unpack(">I", exactly(4))
    if size > MAX_MESSAGE:
        raise WireError(f"a message of over {MAX_MESSAGE} bytes")
    return exactly(size)


# ----------------------------------------------------------------- the server
def serve_run(job: dict, stdin, stdout, private_tmp: Path, limits: dict, confined: bool) -> None:
    """Fork a child for one run; relay its report, the grader's inputs and its outputs; end
    what it left running; then send the CPU time the run's process tree used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the server's pipes, then the run
        ours.close()
        code = 0
        try:
            run_script(job, theirs, private_tmp, limits, confined)
        except BaseException:  # noqa: B036 - a run that cannot report is reported by its parent
            code = 1
        os._exit(code)
    theirs.close()
    error = None
    for phase in ("trained", "evaluated"):
        try:
            if error is None:
                body = receive(ours, time.monotonic() + limits["wall_s"])
                unpack(body)  # checked here, so the grader gets only well-formed messages
            else:
                body = pack({"error": error})
        except TimeoutError:
            error = f"the run took over {limits['wall_s']:.0f} s and was ended"
            body = pack({"error": error})
        except (EOFError, OSError, WireError) as e:
            error = f"the run ended without a reply ({type(e).__name__}: a crash or a limit)"
            body = pack({"error": error})
        write_message(stdout, body)
        if phase == "trained":
            inputs = read_message(stdin)
            if error is None:
                try:
                    send(ours, inputs or b"")
                except OSError:
                    error = "the run ended before its evaluation"
    ours.close()
    if confined:
        sandbox.end_strays()
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    write_message(stdout, pack({"cpu_s": cpu_s}))


def warm_up() -> None:
    """Pay torch's first-use costs once, in the server, for every child: an optimizer's first
    step costs about a second of CPU in a fresh process, which would swamp the CPU budget of a
    small script (a forward, backward and step of each common kind of layer and optimizer)."""
    layers = nn.ModuleDict({"linear": nn.Linear(4, 4), "conv": nn.Conv2d(1, 2, 3, padding=1),
                            "norm": nn.BatchNorm2d(2), "lstm": nn.LSTM(4, 4, batch_first=True),
                            "embed": nn.Embedding(8, 4), "layer_norm": nn.LayerNorm(4),
                            "encoder": nn.TransformerEncoderLayer(4, 2, 8, batch_first=True)})
    for kind in (torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD):
        optimizer = kind(layers.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        tokens = layers["embed"](torch.randint(0, 8, (2, 3)))
        sequence = layers["encoder"](layers["layer_norm"](layers["lstm"](tokens)[0]))
        image = layers["norm"](layers["conv"](torch.randn(2, 1, 4, 4)))
        logits = layers["linear"](sequence.mean(1) + image.mean((1, 2, 3))[:, None])
        optimizer.zero_grad()
        nn.functional.cross_entropy(logits, torch.tensor([0, 1])).backward()
        nn.utils.clip_grad_norm_(layers.parameters(), 1.0)
        optimizer.step()
        scheduler.step()


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    header = json.loads(read_message(stdin))
    confined = header["confinement"] == sandbox.NAMESPACES
    torch.set_num_threads(1)
    warm_up()
    if confined:
        sandbox.seal_filesystem([Path(p) for p in header["hidden"]])
    write_message(stdout, json.dumps({"ready": header["confinement"]}).encode())
    while (message := read_message(stdin)) is not None:
        serve_run(json.loads(message), stdin, stdout, Path(header["private_tmp"]),
                  header["limits"], confined)
    return 0


if __name__ == "__main__":
    sys.exit(main())
