"""A plain PyTorch training loop that knows nothing of greentrain: the command the docs run under
``greentrain run`` and ``greentrain monitor``.

    python examples/train.py --epochs 3

A small regression on CPU: a few seconds per epoch; prints the loss of each epoch.
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1, help="passes over the data (default 1)")
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps per epoch (default 50)")
    args = parser.parse_args()
    torch.manual_seed(0)
    inputs = torch.randn(1024, 64)
    targets = inputs @ torch.randn(64, 1) + 0.1 * torch.randn(1024, 1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for step in range(args.steps):
            batch = slice((step * 64) % 1024, (step * 64) % 1024 + 64)
            loss = torch.nn.functional.mse_loss(model(inputs[batch]), targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
