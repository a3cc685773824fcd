"""Which operations give different numbers on different x86-64 CPUs (issue 48), emulated on one machine.

Each family's hot operations run on small fixed inputs in a fresh process per emulated CPU kind; the script
prints, per operation, whether its result bits differ from the first kind's and by how much. A CPU kind is
a set of environment variables read when the libraries load: torch's ATen dispatch (``ATEN_CPU_CAPABILITY``),
MKL inside torch (``MKL_ENABLE_INSTRUCTIONS`` / ``MKL_CBWR``), oneDNN (``ONEDNN_MAX_CPU_ISA``), numpy's SIMD
dispatch (``NPY_DISABLE_CPU_FEATURES``) and OpenBLAS in numpy/scipy (``OPENBLAS_CORETYPE``).

    python docs/experiments/numerics_dispatch.py            # the machine's own kind against emulated ones
    python docs/experiments/numerics_dispatch.py --portable  # the same, each kind under uqcal's portable pins

With ``--portable`` each kind's variables are the *outer* environment and `uqcal.core.numerics.pinned_env`
overrides them, as the job runner does: every row must then read "same".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# Emulated CPU kinds: the machine's own (nothing set), an AVX2-only x86-64 (the reference run's AMD EPYC),
# and a CPU without AVX2 (ATen's scalar `default` path; numpy and OpenBLAS at their baselines).
NO_AVX512_NUMPY = "X86_V4 AVX512_ICL AVX512_SPR"
KINDS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "NPY_DISABLE_CPU_FEATURES": NO_AVX512_NUMPY, "OPENBLAS_CORETYPE": "Haswell"},
    # MKL's own choice of code path (Intel CPUs get its AVX-512 kernels, AMD ones its AVX2 ones)
    "mkl-avx512": {"MKL_CBWR": "AVX512"},
    "scalar": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
               "NPY_DISABLE_CPU_FEATURES": "X86_V3 " + NO_AVX512_NUMPY, "OPENBLAS_CORETYPE": "Nehalem"},
}

PROBE = r'''
import hashlib, json, sys
import numpy as np, scipy.linalg, torch
from uqcal.core import numerics
numerics.configure_torch(sys.argv[1])
torch.manual_seed(0)
rng = np.random.default_rng(0)
out = {}
def keep(name, value):
    a = value.detach().double().numpy() if torch.is_tensor(value) else np.asarray(value, dtype=float)
    out[name] = (hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12], a.ravel().tolist())
x32 = torch.randn(64, 48); w32 = torch.randn(48, 40); x64 = x32.double(); w64 = w32.double()
keep("torch sgemm (MKL)", x32 @ w32)                        # every family's linear layers
keep("torch dgemm (MKL)", x64 @ w64)                        # GP kernels (rio, metareg, fewshot md/dkt, bo)
a = x64.T @ x64 + 48 * torch.eye(48, dtype=torch.float64)
keep("torch cholesky (MKL LAPACK)", torch.linalg.cholesky(a))
keep("torch exp/log f32 (ATen)", torch.exp(x32) + torch.log1p(x32.abs()))
keep("torch softplus/tanh f32 (ATen)", torch.nn.functional.softplus(x32) * torch.tanh(x32))
keep("torch sum over rows f32 (ATen)", x32.sum(0))
keep("torch sum contiguous f32 (ATen)", torch.randn(100, 1000).sum(1))
keep("torch softmax f32 (ATen)", torch.softmax(torch.randn(50, 1000), 1))
keep("torch logsumexp f32 (ATen)", torch.logsumexp(x32, 1))
img = torch.randn(25, 1, 28, 28); k = torch.randn(8, 1, 3, 3)
keep("torch conv2d f32 (oneDNN/native)", torch.nn.functional.conv2d(img, k, padding=1))
net = torch.nn.Sequential(torch.nn.Linear(48, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for _ in range(20):
    opt.zero_grad(); loss = ((net(x32) - 1.0) ** 2).mean(); loss.backward(); opt.step()
keep("torch 20 Adam steps (ATen+MKL)", torch.cat([p.detach().ravel() for p in net.parameters()]))
z = rng.standard_normal((300, 40))
keep("numpy exp/log (SIMD dispatch)", np.exp(z) + np.log(np.abs(z) + 1))
keep("numpy sum (SIMD pairwise)", z.sum(0))
keep("numpy dot (OpenBLAS)", z.T @ z)
keep("scipy cholesky (OpenBLAS)", scipy.linalg.cholesky(z.T @ z + 40 * np.eye(40), lower=True))
keep("numpy sort (SIMD)", np.sort(z.ravel()))
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "ops": out}))
'''


def probe(outer: dict, mode: str) -> dict:
    from uqcal.core import numerics

    env = {**os.environ, **outer}
    env = numerics.pinned_env(mode, env)
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--portable", action="store_true", help="each kind under uqcal's portable pins")
    args = parser.parse_args(argv)
    mode = "portable" if args.portable else "native"
    results = {kind: probe(outer, mode) for kind, outer in KINDS.items()}
    first, *others = results
    print(f"numerics mode: {mode}; ATen capability per kind: "
          + ", ".join(f"{k}={r['capability']}" for k, r in results.items()))
    print(f"{'operation':36}" + "".join(f" | {k} vs {first}" for k in others))
    for op, (digest, values) in results[first]["ops"].items():
        cells = []
        for kind in others:
            other_digest, other_values = results[kind]["ops"][op]
            if other_digest == digest:
                cells.append("same")
            else:
                diff = max(abs(a - b) for a, b in zip(values, other_values, strict=True))
                cells.append(f"differs (max |d| {diff:.1e})")
        print(f"{op:36}" + "".join(f" | {c:>22}" for c in cells))


if __name__ == "__main__":
    main()
