"""The report's colours, chosen to survive colour-vision deficiency: the Okabe–Ito palette (Okabe & Ito 2008,
"Color Universal Design") for the figures' series and for the verdict badges, and the checks that prove it (a
simulated protanope's and deuteranope's view, Machado, Oliveira & Fernandes 2009, severity 1, and the CIE 1976
colour difference ΔE*ab between every two colours used together).

Verdict badges carry an icon and a word as well as a colour, so no reader depends on the colour alone."""

from __future__ import annotations

from itertools import combinations

import numpy as np

# Okabe–Ito, in the order series take them (black last: it is the reference lines' colour).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")

# Machado et al. 2009, Table 1 at severity 1.0, applied to linear RGB.
MACHADO_2009 = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
VISIONS = ("normal", *MACHADO_2009)
MIN_DELTA_E = 10.0  # CIE76: two colours used together stay this far apart under every vision


def hex_to_rgb(colour: str) -> np.ndarray:
    """'#rrggbb' -> sRGB in [0, 1]."""
    value = colour.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"colour {colour!r}: expected #rrggbb")
    return np.array([int(value[i:i + 2], 16) / 255 for i in (0, 2, 4)])


def _linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def simulate(colour: str, vision: str) -> np.ndarray:
    """Linear RGB of ``colour`` as a reader with ``vision`` sees it (Machado 2009; 'normal': unchanged)."""
    rgb = _linear(hex_to_rgb(colour))
    return rgb if vision == "normal" else np.clip(MACHADO_2009[vision] @ rgb, 0.0, 1.0)


def lab(linear_rgb: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D65) of a linear-RGB colour."""
    to_xyz = np.array([[0.4124564, 0.3575761, 0.1804375],
                       [0.2126729, 0.7151522, 0.0721750],
                       [0.0193339, 0.1191920, 0.9503041]])
    xyz = to_xyz @ linear_rgb / np.array([0.95047, 1.0, 1.08883])
    delta = 6 / 29
    f = np.where(xyz > delta ** 3, np.cbrt(xyz), xyz / (3 * delta ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    """CIE76 ΔE*ab between two colours as a reader with ``vision`` sees them."""
    return float(np.linalg.norm(lab(simulate(a, vision)) - lab(simulate(b, vision))))


def closest_pairs(colours, min_delta: float = MIN_DELTA_E) -> list[str]:
    """Every pair of ``colours`` closer than ``min_delta`` under some vision, as 'a / b: ΔE (vision)'."""
    found = []
    for a, b in combinations(dict.fromkeys(colours), 2):
        for vision in VISIONS:
            if (d := delta_e(a, b, vision)) < min_delta:
                found.append(f"{a} / {b}: ΔE {d:.1f} ({vision})")
    return found


def relative_luminance(colour: str) -> float:
    r, g, b = _linear(hex_to_rgb(colour))
    return float(0.2126 * r + 0.7152 * g + 0.0722 * b)


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio (AA needs 4.5 for body text)."""
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)
