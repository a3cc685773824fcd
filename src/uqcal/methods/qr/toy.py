"""The isotonic-recalibration toy of QR Sec. 3 / Fig. 2.

Bayesian linear regression (scikit-learn BayesianRidge, App. C.1) on 256 points y = 3x + eps,
x ~ U[-4, 4], eps ~ N(0, 1); the isotonic map is fitted on a calibration set of 32 points. Applied to one
test forecast, the recalibrated density is spiky (Claim 1), its mean moves to mu - delta * sigma (Claim 3)
and its support ends at F^-1(c_(m)) (App. B.2); the (1, 1) endpoint fix removes the truncation.

``isotonic_toy(seed)`` returns the numbers the figure plots; ``draw_isotonic_toy(seed)`` draws it (the qr
report's ``function`` figure calls it); ``python -m uqcal.methods.qr.toy out.png`` writes it from the shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.linear_model import BayesianRidge

from uqcal.methods.qr.isotonic_gaussian import StandardisedRecalibration, isotonic_knots


def isotonic_toy(seed: int = 0, n_train: int = 256, n_calibration: int = 32, x_test: float = 1.0,
                 grid_size: int = 2001) -> dict:
    rng = np.random.default_rng(seed)

    def draw(n):
        x = rng.uniform(-4.0, 4.0, n)
        return x, 3.0 * x + rng.normal(0.0, 1.0, n)

    x_train, y_train = draw(n_train)
    x_cal, y_cal = draw(n_calibration)
    model = BayesianRidge().fit(x_train[:, None], y_train)
    mu_cal, sd_cal = model.predict(x_cal[:, None], return_std=True)
    pit_cal = norm.cdf((y_cal - mu_cal) / sd_cal)
    knots = isotonic_knots(pit_cal)
    knots_fix = isotonic_knots(pit_cal, endpoint_fix=True)
    recal, recal_fix = StandardisedRecalibration(*knots), StandardisedRecalibration(*knots_fix)
    mu, sd = (float(v[0]) for v in model.predict(np.array([[x_test]]), return_std=True))
    y_grid = np.linspace(mu - 4.5 * sd, mu + 4.5 * sd, grid_size)
    z_grid = (y_grid - mu) / sd
    c_sorted = np.sort(pit_cal)
    return {
        "x_train": x_train, "y_train": y_train, "x_cal": x_cal, "y_cal": y_cal,
        "pit_cal": pit_cal, "empirical_levels": np.arange(1, n_calibration + 1) / n_calibration,
        "knots_u": knots[0], "knots_r": knots[1], "knots_fix_u": knots_fix[0], "knots_fix_r": knots_fix[1],
        "x_test": x_test, "mu": mu, "sigma": sd, "y_grid": y_grid,
        "pdf_base": norm.pdf(y_grid, mu, sd),
        "pdf_iso": recal.pdf(z_grid) / sd, "cdf_iso": recal.cdf(z_grid),
        "pdf_iso_fix": recal_fix.pdf(z_grid) / sd,
        "mean_iso": mu - recal.delta * sd, "mean_iso_fix": mu - recal_fix.delta * sd,
        "truncation_point": mu + sd * norm.ppf(c_sorted[-1]),
        "max_pdf_ratio": float(np.max(recal.pdf(z_grid) / norm.pdf(z_grid))),
    }


def draw_isotonic_toy(seed: int = 0):
    """Fig. 2 of the paper: training data, isotonic map, base vs recalibrated PDF (+ the (1,1) fix).
    Returns (matplotlib figure, the toy's numbers)."""
    import matplotlib.pyplot as plt

    toy = isotonic_toy(seed)
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    ax = axes[0]
    ax.scatter(toy["x_train"], toy["y_train"], s=6, alpha=0.6)
    ax.set(title="(a) training data, y = 3x + e", xlabel="x", ylabel="y")
    ax = axes[1]
    ax.plot(toy["knots_u"], toy["knots_r"], "o-", ms=3, label="isotonic map (paper)")
    ax.plot(toy["knots_fix_u"], toy["knots_fix_r"], "--", lw=1, label="with (1, 1) fix")
    ax.plot([0, 1], [0, 1], ":", color="grey")
    ax.set(title=f"(b) isotonic map, m = {toy['pit_cal'].size}", xlabel="predicted F(y)",
           ylabel="empirical frequency")
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.plot(toy["y_grid"], toy["pdf_base"], label="base N(mu, sigma^2)")
    ax.axvline(toy["mu"], color="C0", ls=":", label="base mean")
    ax.axvline(toy["mean_iso"], color="C3", ls="--", label="mean after iso (mu - delta sigma)")
    ax.axvline(toy["truncation_point"], color="k", ls="-.", label="truncation F^-1(c_(m))")
    ax.set(title=f"(c) forecast at x = {toy['x_test']:g}", xlabel="y", ylabel="density")
    ax.legend(fontsize=7)
    ax = axes[3]
    ax.plot(toy["y_grid"], toy["pdf_iso"], lw=1, color="C3", label="after isotonic")
    ax.plot(toy["y_grid"], toy["pdf_iso_fix"], lw=0.8, color="C2", alpha=0.7, label="with (1, 1) fix")
    ax.plot(toy["y_grid"], toy["pdf_base"], lw=0.8, color="C0", ls=":", label="base")
    ax.set(title="(d) PDF after isotonic calibration", xlabel="y")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, toy


def isotonic_toy_figure(out_path: str | Path, seed: int = 0) -> dict:
    """Draw the toy into ``out_path`` (format from its suffix); returns the toy's numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uqcal.core.io import atomic_path

    fig, toy = draw_isotonic_toy(seed)
    out_path = Path(out_path)
    with atomic_path(out_path) as tmp:
        fig.savefig(tmp, format=out_path.suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)
    return toy


if __name__ == "__main__":  # pragma: no cover - shell hook for the report
    isotonic_toy_figure(sys.argv[1] if len(sys.argv) > 1 else "isotonic_toy.png")
