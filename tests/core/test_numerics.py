"""Numerics modes (uqcal.core.numerics; issue 48): the portable pins win over the environment a job starts in,
reach the libraries (checked in a fresh process: they read them when they load), and a CPU below the floor
gets one clear error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from uqcal.core import numerics
from uqcal.core.numerics import NumericsError

# An outer environment as a CPU without AVX2 would give, and then some: every variable lower than the pins.
SCALAR_MACHINE = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "MKL_CBWR": "COMPATIBLE",
                  "ONEDNN_MAX_CPU_ISA": "SSE41", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4",
                  "OPENBLAS_CORETYPE": "Nehalem", "OMP_NUM_THREADS": "2"}


def test_portable_pins_win_over_the_outer_environment_and_native_changes_nothing():
    pinned = numerics.pinned_env("portable", {**SCALAR_MACHINE, "HOME": "/x"})
    assert {k: pinned[k] for k in numerics.PORTABLE_ENV} == numerics.PORTABLE_ENV
    assert pinned["HOME"] == "/x" and pinned[numerics.MODE_VARIABLE] == "portable"
    native = numerics.pinned_env("native", SCALAR_MACHINE)
    assert native == {**SCALAR_MACHINE, numerics.MODE_VARIABLE: "native"}


def test_an_unknown_mode_is_one_error_naming_the_modes():
    with pytest.raises(NumericsError, match="portable, native; got 'fast'"):
        numerics.pinned_env("fast")


def test_the_identity_of_native_names_the_cpu_and_portable_does_not(monkeypatch):
    monkeypatch.setattr(numerics, "cpu_flags", lambda: {"sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                                                        "avx512dq"})
    monkeypatch.setattr(numerics, "cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert numerics.identity("portable") == "portable"
    assert numerics.identity("native") == "native (AuthenticAMD, avx512)"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # a lowered dispatch is another numerical path
    assert numerics.identity("native") == "native (AuthenticAMD, avx2)"
    assert numerics.mode_of(numerics.identity("native")) == "native"
    assert numerics.mode_of("portable") == "portable"


def test_portable_below_the_avx2_floor_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(numerics, "cpu_flags", lambda: {"sse2", "sse4_2", "avx"})
    with pytest.raises(NumericsError, match=r"x86-64-v3 CPU \(AVX2 and FMA\); this CPU lacks avx2, fma.*native"):
        numerics.activate("portable")
    monkeypatch.setattr(numerics, "cpu_flags", lambda: {"sse2", "avx", "avx2", "fma"})
    numerics.check_floor()  # at the floor: fine


PROBE = """
import json, numpy, threadpoolctl, torch
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
from uqcal.core.numerics import configure_torch
configure_torch()
found = [name for name in __cpu_dispatch__ if __cpu_features__[name]]
blas = sorted({i.get("architecture") for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"})
print(json.dumps({"numpy": found, "openblas": blas, "aten": torch.backends.cpu.get_cpu_capability(),
                  "mkldnn": torch.backends.mkldnn.enabled, "deterministic": torch.are_deterministic_algorithms_enabled(),
                  "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
                  "dynamo": "torch._dynamo" in __import__("sys").modules}))
"""


def test_the_pins_reach_numpy_openblas_and_torch_in_a_fresh_process():
    env = numerics.pinned_env("portable", {**__import__("os").environ, **SCALAR_MACHINE})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # numpy's dispatch names are the lock's numpy's (>= 2.4): if an upgrade renames them, this fails
    assert found["numpy"] == ["X86_V3"]
    assert found["openblas"] == ["Haswell"]
    assert found["aten"] == "AVX2"
    assert found["mkldnn"] is True and found["deterministic"] is True  # oneDNN stays, capped at AVX2 (cheaper)
    assert found["warn_only"] is True  # ops without a deterministic kernel warn (use_deterministic_algorithms' warn_only)
    assert found["dynamo"] is False  # the flag is set without importing torch._inductor / torch._dynamo (1.5-2 CPU s)


def test_portable_results_of_another_architecture_are_another_job(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")  # its kernels are not the x86-64 ones
    assert numerics.identity("portable") == "portable (aarch64)"
    assert numerics.mode_of(numerics.identity("portable")) == "portable"
