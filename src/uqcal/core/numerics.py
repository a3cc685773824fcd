"""CPU-independent numerics: the same numbers from every job on any x86-64 CPU with AVX2 (issue 48).

The libraries pick their kernels from the CPU they run on, and kernels for different instruction sets round
differently (lane widths change summation orders; exp/log approximations differ in the last bits): torch's ATen
dispatch (scalar / AVX2 / AVX-512), MKL inside torch (and its Intel/AMD paths), oneDNN's convolutions (blocked
by the CPU's caches), numpy's SIMD loops (AVX2 / AVX-512 exp, log, sums) and OpenBLAS in numpy and scipy (per-core
kernels). A run on an AVX-512 machine and one on an AVX2 machine then train different networks from the same
seed, and verdicts near a boundary flip (docs/pipeline.md, "Numerics"; docs/experiments/numerics_dispatch.py).

``numerics: portable`` (the default) pins every one of them to its AVX2 (x86-64-v3) path, which every x86-64
CPU of the last decade has, with fixed thread counts; ``native`` pins nothing (each library's fastest path
for the CPU at hand). The variables are read when the libraries load, so the `uqcal` command sets them
(`activate`) before any step imports numpy or torch; `configure_torch` sets what torch only takes at run time.
This module imports neither at import time.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

MODES = ("portable", "native")
DEFAULT_MODE = "portable"

# numpy >= 2.4 names its dispatch targets by x86-64 level: X86_V4 is AVX-512 (SKX); disabling it disables
# the targets above it too. Names differ in older numpy (AVX512F, AVX512_SKX ...): the lock pins numpy, and
# tests/core/test_numerics.py checks that only the X86_V3 targets remain under these pins.
_NUMPY_ABOVE_AVX2 = "X86_V4 AVX512_ICL AVX512_SPR"

# What `portable` sets in every step's environment. Measured in docs/experiments/numerics_dispatch.py.
PORTABLE_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",           # torch's vectorised kernels (exp, sums, softplus, Adam, ...)
    "MKL_CBWR": "AVX2,STRICT",              # MKL's conditional numerical reproducibility: one code path on
                                            # Intel and AMD, the strict mode independent of alignment
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",      # an outer environment's lower setting must not win over the branch
    "ONEDNN_MAX_CPU_ISA": "AVX2",           # oneDNN's convolutions (the few-shot Conv4): its AVX2 kernels
    "NPY_DISABLE_CPU_FEATURES": _NUMPY_ABOVE_AVX2,
    "OPENBLAS_CORETYPE": "Haswell",         # numpy's and scipy's OpenBLAS: Haswell's AVX2 kernels, not SkylakeX's
    "OPENBLAS_NUM_THREADS": "1",            # BLAS threads split work by core count; torch_threads sets torch's
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MKL_DYNAMIC": "FALSE",
}
# Set by `native` too: they only describe (ours), the libraries do not read them.
MODE_VARIABLE = "UQCAL_NUMERICS"

# The CPU features the portable pins need (x86-64-v3's AVX2 and FMA): /proc/cpuinfo's names.
PORTABLE_FLOOR = ("avx2", "fma")

LOG = logging.getLogger("uqcal.numerics")


class NumericsError(RuntimeError):
    """A numerics mode this machine cannot run (portable on a CPU without AVX2), or an unknown mode."""


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise NumericsError(f"numerics must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags as Linux names them (/proc/cpuinfo); None where the file does not exist."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return None


def cpu_vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    import platform

    return platform.machine() or "unknown"


def cpu_kind() -> str:
    """The widest SIMD level the libraries dispatch to here (ATen's names), lowered by ``ATEN_CPU_CAPABILITY``."""
    flags = cpu_flags()
    if flags is None:
        found = "unknown"
    elif {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        found = "avx512"
    elif set(PORTABLE_FLOOR) <= flags:
        found = "avx2"
    else:
        found = "default"
    order = ["default", "avx2", "avx512"]
    asked = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if found in order and asked in order and order.index(asked) < order.index(found):
        return asked
    return found


def check_floor() -> None:
    """Portable numerics need AVX2 and FMA (x86-64-v3): below it, one clear error rather than a crash in a
    BLAS kernel the CPU cannot execute. Non-x86 machines (no such flags) run other kernels altogether."""
    flags = cpu_flags()
    if flags is None or not ({"sse2"} <= flags):  # not Linux on x86-64: nothing to check here
        return
    missing = [flag for flag in PORTABLE_FLOOR if flag not in flags]
    if missing:
        raise NumericsError(
            f"numerics: portable needs an x86-64-v3 CPU (AVX2 and FMA); this CPU lacks {', '.join(missing)}. "
            "Run with `numerics: native` (config) to use this CPU's own kernels; its results are then recorded "
            "as native and are not interchangeable with portable ones (a DVC remote's portable results are stale here).")


def is_x86_64() -> bool:
    import platform

    return platform.machine().lower() in ("x86_64", "amd64")


def identity(mode: str) -> str:
    """What a job's identity holds for its numerics: ``portable`` (on x86-64; elsewhere with the machine's
    architecture, whose kernels are others), or ``native`` with the CPU's vendor and SIMD level (a native
    result from another kind of CPU is another job)."""
    import platform

    check_mode(mode)
    if mode == "portable":
        return mode if is_x86_64() else f"portable ({platform.machine()})"
    return f"native ({cpu_vendor()}, {cpu_kind()})"


def mode_of(identity_value: str) -> str:
    """The mode of an `identity` value (``native (AuthenticAMD, avx2)`` -> ``native``)."""
    return check_mode(identity_value.partition(" ")[0])


def pinned_env(mode: str, env: dict | None = None) -> dict:
    """``env`` (default: this process's) with the mode's pins set; the pins win over the outer environment."""
    env = dict(os.environ if env is None else env)
    check_mode(mode)
    env[MODE_VARIABLE] = mode
    if mode == "portable":
        env.update(PORTABLE_ENV)
    return env


def activate(mode: str) -> None:
    """Set this process's pins before numpy or torch load (the `uqcal` command calls it first thing).

    Where one of them is already loaded (the command called in-process, as a library), it has read its
    variables: the environment is left as it is, with a warning, and `describe` reports what is in effect.
    """
    check_mode(mode)
    if mode == "portable":
        check_floor()
    wanted = pinned_env(mode)
    late = [name for name in ("numpy", "torch") if name in sys.modules]
    changed = [key for key, value in wanted.items() if os.environ.get(key) != value and key != MODE_VARIABLE]
    if late and changed:
        LOG.warning("numerics %s not applied: %s already loaded in this process (run the `uqcal` command)",
                    mode, " and ".join(late))
        return
    os.environ.update(wanted)


def configure_torch(mode: str | None = None, threads: int | None = None) -> None:
    """What torch takes at run time: under ``portable``, oneDNN's convolutions capped at AVX2
    (``ONEDNN_MAX_CPU_ISA``), no NNPACK (its own CPU dispatch), and deterministic algorithms. ATen's own
    convolutions (im2col and MKL's GEMM under CBWR) would not depend on oneDNN's cache-based blocking, but cost
    1.5-1.9x oneDNN's at the few-shot backbone's width 32 against 1.24x for the capped oneDNN (docs/pipeline.md, "Numerics"):
    issue 48 keeps the cheaper setting where one costs over a quarter, and `make numerics-check` on a second
    machine is what shows whether oneDNN's blocking moved a bit there. ``mode``:
    default, the one `activate` set for this process (``native`` when none: a library user's process).
    ``threads`` sets torch's intra-op threads (the config's ``torch_threads``)."""
    import torch

    mode = check_mode(mode or os.environ.get(MODE_VARIABLE, "native"))
    if threads is not None:
        torch.set_num_threads(int(threads))
    if mode == "portable":
        torch.backends.nnpack.set_flags(False)
        # torch.use_deterministic_algorithms(True, warn_only=True)'s flag, through torch's documented second
        # interface, which does not import torch._inductor and torch._dynamo (1.5-2 CPU s a process; inductor's
        # own `deterministic` only matters to torch.compile, which uqcal does not use). The modules that step a
        # torch optimiser import torch._dynamo themselves: an optimiser's first step imports it (torch/optim/
        # optimizer.py, _use_grad), and imported up front it lands in no timed region (train_seconds,
        # predict_seconds_per_task); processes that never step one (marginal, isotonic, BO) skip it
        # (tests/core/test_numerics_startup.py).
        torch.set_deterministic_debug_mode("warn")
        capability = torch.backends.cpu.get_cpu_capability()
        if capability != "AVX2" and is_x86_64():
            check_floor()
            raise NumericsError(f"numerics: portable asked torch for its AVX2 kernels and got {capability} "
                                f"(ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')!r}); "
                                "run through the `uqcal` command, which sets it before torch loads")


def describe(mode: str | None = None) -> dict[str, str]:
    """Provenance: the mode and what is in effect in this process (strings, for train_stats.json)."""
    mode = mode or os.environ.get(MODE_VARIABLE, "native")
    info = {"numerics": mode, "numerics_cpu": f"{cpu_vendor()}, {cpu_kind()}"}
    pins = {key: os.environ[key] for key in PORTABLE_ENV if key in os.environ}
    info["numerics_env"] = " ".join(f"{key}={value}" for key, value in sorted(pins.items()))
    if "torch" in sys.modules:
        import torch

        info["numerics_torch"] = (f"capability={torch.backends.cpu.get_cpu_capability()} "
                                  f"mkldnn={torch.backends.mkldnn.enabled} nnpack={torch._C._get_nnpack_enabled()} "
                                  f"deterministic={torch.are_deterministic_algorithms_enabled()} "
                                  f"threads={torch.get_num_threads()}")
        if torch.cuda.is_available():  # the GPU path's own determinism (uqcal.core.device.deterministic_cuda)
            info["numerics_cuda"] = (f"CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG')} "
                                     f"cudnn.deterministic={torch.backends.cudnn.deterministic} "
                                     f"cudnn.benchmark={torch.backends.cudnn.benchmark}")
    return info
