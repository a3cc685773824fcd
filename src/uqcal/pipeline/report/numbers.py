"""Numbers as the report writes them: by their uncertainty (the standard error or spread keeps two significant
digits and the value is rounded to the same decimal place), counts as integers, one p-value notation."""

from __future__ import annotations

import math


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def decimals_for(se: float) -> int:
    """Decimal places that leave ``se`` two significant digits (never negative: 1234 ± 56 stays an integer)."""
    if not _finite(se) or float(se) == 0:
        return 0
    return max(0, 1 - math.floor(math.log10(abs(float(se)))))


def fmt_num(value, sig: int = 3) -> str:
    """A number without an uncertainty: ``sig`` significant digits, integers as integers, scientific notation
    beyond 1e5 or below 1e-3; '–' for missing."""
    if not _finite(value):
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    value = float(value)
    if value.is_integer() and abs(value) < 1e6:
        return str(int(value))
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.{sig - 1}e}"
    decimals = max(0, sig - 1 - math.floor(math.log10(magnitude)))
    return f"{value:.{decimals}f}"


def fmt_at(value, decimals: int) -> str:
    return "–" if not _finite(value) else f"{float(value):.{decimals}f}"


def fmt_se(value, se) -> str:
    """'value ± se' with the se at two significant digits and the value at the same decimal place; a missing
    or zero se (a single run, a constant) gives the value alone (no '± 0')."""
    if not _finite(value):
        return "–"
    if not _finite(se) or float(se) == 0:
        return fmt_num(value)
    digits = decimals_for(se)
    if digits > 6 or abs(float(value)) >= 1e5:  # beyond fixed notation's reach: each in scientific notation
        return f"{fmt_num(value)} ± {fmt_num(se, 2)}"
    return f"{fmt_at(value, digits)} ± {fmt_at(se, digits)}"


def fmt_p(p) -> str:
    """One p-value notation everywhere: 'p < 0.001' or 'p = 0.023' (two significant digits)."""
    if not _finite(p):
        return "p = –"
    p = float(p)
    if p < 0.001:
        return "p < 0.001"
    return f"p = {fmt_num(p, 2)}"


