# mode: check
"""LLM pretraining with FSDP: a class-defined transformer built under
init_module(empty_init=True), set up before its optimizer is created, in the
shape of litgpt's pretrain script."""
import math
import os
import time
from functools import partial
from pathlib import Path

import lightning as L
import torch
import torch.nn as nn
from lightning.fabric.strategies import FSDPStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

out_dir = Path("out") / "pretrain"
learning_rate = 6e-4
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.95
max_iters = 600000
warmup_iters = 2000
micro_batch_size = 4
gradient_accumulation_steps = 8


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.attn(x).split(C, dim=2)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.norm_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.norm_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.norm_1(x))
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size: int = 50304, n_layer: int = 12, n_head: int = 12, n_embd: int = 768) -> None:
        super().__init__()
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            h=nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer)),
            ln_f=nn.LayerNorm(n_embd),
        ))

    def forward(self, idx):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def get_lr(it: int) -> float:
    if it < warmup_iters:
        return learning_rate * it / warmup_iters
    decay_ratio = (it - warmup_iters) / (max_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return 6e-5 + coeff * (learning_rate - 6e-5)


def main(fabric: L.Fabric, data_dir: Path, resume: bool) -> None:
    if fabric.global_rank == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
    fabric.seed_everything(1337, workers=True)

    with fabric.init_module(empty_init=True):
        model = GPT()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=learning_rate, weight_decay=weight_decay, betas=(beta1, beta2), foreach=False
    )
    model, optimizer = fabric.setup(model, optimizer)  # error: The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported unless you to set up the model and optimizer(s) separately. Create and set up the model first through `model = fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`.
    fabric.print(f"Total parameters: {model.num_params():,}")
    state = {"model": model, "optimizer": optimizer, "iter_num": 0}
    if resume:
        fabric.load(out_dir / "last.pth", state)

    train_data = torch.randint(0, 50304, (1024, 1025))
    t0 = time.perf_counter()
    for iter_num in range(max_iters):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        input_ids = train_data[:micro_batch_size, :-1]
        targets = train_data[:micro_batch_size, 1:]
        is_accumulating = (iter_num + 1) % gradient_accumulation_steps != 0
        with fabric.no_backward_sync(model, enabled=is_accumulating):
            logits = model(input_ids)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            fabric.backward(loss / gradient_accumulation_steps)
        if not is_accumulating:
            fabric.clip_gradients(model, optimizer, max_norm=1.0)
            optimizer.step()
            optimizer.zero_grad()
        if iter_num % 100 == 0:
            fabric.print(f"iter {iter_num}: loss {loss.item():.4f}, time: {(time.perf_counter() - t0) * 1000:.2f}ms")
        if iter_num % 1000 == 0:
            fabric.save(out_dir / f"iter-{iter_num:06d}-ckpt.pth", state)


def setup(devices: int = 4, data_dir: Path = Path("data/openwebtext"), resume: bool = False) -> None:
    auto_wrap_policy = partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    strategy = FSDPStrategy(auto_wrap_policy=auto_wrap_policy, activation_checkpointing_policy={Block})
    fabric = L.Fabric(devices=devices, strategy=strategy, precision="bf16-mixed")
    fabric.launch(main, data_dir, resume)


if __name__ == "__main__":
    torch.set_float32_matmul_precision("high")
    setup()
