"""One training epoch (forward + backward + Adam) of a 2-ISAB Set Transformer on variable-size sets.

skset (length-sorted batches under a padded-element budget, masked attention) against a
straightforward padded implementation of the same architecture written here (every set padded to the
longest of the whole batch, one batch, no bucketing; torch.nn.MultiheadAttention with a key padding
mask). Also checks that the two give identical outputs on equal-size sets once they share weights.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_set_transformer_step.py            # full
    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_set_transformer_step.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from skset._sets import pack
from skset.neural_network._training import epoch_batches
from skset.nn import SetTransformer


class PaddedMAB(nn.Module):
    """Post-norm MAB with torch's multi-head attention: LN(H + relu(W H)), H = LN(X + MHA)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ff = nn.Linear(dim, dim)
        self.ln0 = nn.LayerNorm(dim)
        self.ln1 = nn.LayerNorm(dim)

    def forward(self, x, y, pad=None):
        h = self.ln0(x + self.attn(x, y, y, key_padding_mask=pad, need_weights=False)[0])
        return self.ln1(h + F.relu(self.ff(h)))


class PaddedST(nn.Module):
    def __init__(self, in_dim, dim, heads, m, n_layers=2):
        super().__init__()
        self.input = nn.Linear(in_dim, dim)
        self.inducing = nn.ParameterList([nn.Parameter(torch.randn(m, dim) * 0.1)
                                          for _ in range(n_layers)])
        self.mab1 = nn.ModuleList([PaddedMAB(dim, heads) for _ in range(n_layers)])
        self.mab2 = nn.ModuleList([PaddedMAB(dim, heads) for _ in range(n_layers)])
        self.seed = nn.Parameter(torch.randn(1, dim) * 0.1)
        self.pool_ff = nn.Linear(dim, dim)
        self.pool = PaddedMAB(dim, heads)
        self.dec1 = nn.Linear(dim, dim)
        self.dec2 = nn.Linear(dim, 1)

    def forward(self, x, pad=None):
        B = x.shape[0]
        h = self.input(x)
        for ind, m1, m2 in zip(self.inducing, self.mab1, self.mab2, strict=True):
            hh = m1(ind.expand(B, -1, -1), h, pad)
            h = m2(h, hh)
        z = F.relu(self.pool_ff(h))
        s = self.pool(self.seed.expand(B, -1, -1), z, pad).flatten(1)
        return self.dec2(F.relu(self.dec1(s)))


def _copy_mab(dst: PaddedMAB, src):
    a = src.attn
    with torch.no_grad():
        dst.attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight,
                                                 a.v_proj.weight]))
        dst.attn.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
        dst.attn.out_proj.weight.copy_(a.out_proj.weight)
        dst.attn.out_proj.bias.copy_(a.out_proj.bias)
        dst.ff.load_state_dict(src.ff.state_dict())
        dst.ln0.load_state_dict(src.norm0.state_dict())
        dst.ln1.load_state_dict(src.norm1.state_dict())


def copy_weights(padded: PaddedST, ours: SetTransformer):
    with torch.no_grad():
        padded.input.load_state_dict(ours.input.state_dict())
        for i, blk in enumerate(ours.blocks):
            padded.inducing[i].copy_(blk.inducing)
            _copy_mab(padded.mab1[i], blk.mab1)
            _copy_mab(padded.mab2[i], blk.mab2)
        padded.seed.copy_(ours.pool.seeds)
        padded.pool_ff.load_state_dict(ours.pool.ff.state_dict())
        _copy_mab(padded.pool, ours.pool.mab)
        padded.dec1.load_state_dict(ours.decoder[0].state_dict())
        padded.dec2.load_state_dict(ours.decoder[2].state_dict())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sets, 1 repeat")
    ap.add_argument("--n-sets", type=int, default=64)
    ap.add_argument("--min-len", type=int, default=100)
    ap.add_argument("--max-len", type=int, default=1000)
    ap.add_argument("--in-dim", type=int, default=3)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--inducing", type=int, default=16)
    ap.add_argument("--max-elements", type=int, default=16384,
                    help="skset's budget of padded elements per batch")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if args.quick:
        args.min_len, args.max_len, args.repeats, args.n_sets = 10, 100, 2, 16
        args.max_elements = 400
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)

    rng = np.random.default_rng(0)
    lengths = np.linspace(args.min_len, args.max_len, args.n_sets).astype(int)
    rng.shuffle(lengths)
    sets = [rng.normal(size=(int(n), args.in_dim)).astype(np.float32) for n in lengths]
    y = torch.from_numpy(np.array([s.var() for s in sets], dtype=np.float32))[:, None].to(dev)

    torch.manual_seed(0)
    ours = SetTransformer(args.in_dim, args.dim, 1, 2, args.heads, n_inducing=args.inducing,
                          n_seeds=1, norm="layer", residual="original").to(dev)
    padded = PaddedST(args.in_dim, args.dim, args.heads, args.inducing).to(dev)
    copy_weights(padded, ours)

    # identical outputs on equal-size sets (no padding involved)
    eq = torch.randn(8, 50, args.in_dim, device=dev)
    with torch.no_grad():
        diff = (ours(eq) - padded(eq)).abs().max().item()
    # and the padded baseline is mask-correct too: ragged batch vs skset
    Xr, Mr = pack(sets[:8], device=dev)
    with torch.no_grad():
        diff_ragged = (ours(Xr, Mr) - padded(Xr, ~Mr)).abs().max().item()

    opt_o = torch.optim.Adam(ours.parameters(), lr=1e-4)
    opt_p = torch.optim.Adam(padded.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def epoch_skset():
        n_pad = 0
        for idx in epoch_batches(lengths, batch_size=args.n_sets,
                                 max_elements=args.max_elements, generator=gen):
            X, M = pack([sets[i] for i in idx], device=dev)
            n_pad += X.shape[0] * X.shape[1]
            loss = F.mse_loss(ours(X, M), y[torch.as_tensor(idx, device=dev)])
            opt_o.zero_grad()
            loss.backward()
            opt_o.step()
        sync()
        return n_pad

    def epoch_padded():
        X, M = pack(sets, device=dev)
        loss = F.mse_loss(padded(X, ~M), y)
        opt_p.zero_grad()
        loss.backward()
        opt_p.step()
        sync()
        return X.shape[0] * X.shape[1]

    times = {"skset": [], "padded": []}
    pads = {}
    epoch_skset(), epoch_padded()  # warm-up
    for _ in range(args.repeats):
        for name, fn in (("skset", epoch_skset), ("padded", epoch_padded)):
            t = time.perf_counter()
            pads[name] = fn()
            times[name].append(time.perf_counter() - t)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"device={dev} threads={args.threads} sets={args.n_sets} lengths {args.min_len}.."
          f"{args.max_len} (sum {lengths.sum()}) dim={args.dim} heads={args.heads} "
          f"inducing={args.inducing} repeats={args.repeats}")
    print(f"max |out_skset - out_padded| on equal-size sets: {diff:.2e}; on a ragged masked "
          f"batch: {diff_ragged:.2e}")
    for k in ("skset", "padded"):
        print(f"{k:7s}: median {med[k]:.3f} s/epoch  (padded elements processed {pads[k]}; "
              f"all: {', '.join(f'{t:.3f}' for t in times[k])})")
    print(f"speedup skset vs padded: {med['padded'] / med['skset']:.2f}x")


if __name__ == "__main__":
    main()
