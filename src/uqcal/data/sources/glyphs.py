"""Omniglot-like few-shot classification set rendered from the fonts matplotlib ships.

A class is one character of one script (Latin, Greek, Cyrillic, Armenian, Georgian, Hebrew, Arabic,
Canadian syllabics, Tifinagh, ...).  Its examples are that character drawn by the fonts that really
contain it (DejaVu Sans/Serif/Mono, STIX, Computer Modern for ASCII letters), each under a random affine
map (rotation, shear, scale, translation) and a smooth elastic displacement field (Simard et al., 2003),
as a stand-in for Omniglot's 20 hand drawings per character (Lake et al., 2015).  The script is recorded
so that class splits can be script-disjoint, like Omniglot's background/evaluation alphabets.

Rendering goes straight through FreeType (``matplotlib.ft2font.FT2Font``), never through figures: a
glyph is rasterised once per font at twice the output resolution, and every example is a single
``scipy.ndimage.map_coordinates`` resampling of that master image.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import ndimage

from uqcal.data.errors import DataSourceError, check_source_keys

DEFAULTS = {
    "examples_per_class": 20,
    "image_size": 28,
    "min_fonts": 2,
    "seed": None,  # None -> the ``seed`` argument of load()
    "max_classes": None,
    "max_classes_per_script": None,
    "scripts": None,  # None -> every script in SCRIPT_BLOCKS
}

# Unicode blocks of each script.  Only letters (general category L*) without a canonical or
# compatibility decomposition are classes: precomposed accented letters and presentation forms would
# be near-duplicates of their base letter.
SCRIPT_BLOCKS: dict[str, list[tuple[int, int]]] = {
    "latin": [(0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F)],
    "ipa": [(0x0250, 0x02AF)],
    "greek": [(0x0370, 0x03FF)],
    "coptic": [(0x2C80, 0x2CFF)],
    "cyrillic": [(0x0400, 0x052F)],
    "armenian": [(0x0530, 0x058F)],
    "hebrew": [(0x0590, 0x05FF)],
    "arabic": [(0x0600, 0x06FF)],
    "nko": [(0x07C0, 0x07FF)],
    "lao": [(0x0E80, 0x0EFF)],
    "georgian": [(0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2F)],
    "canadian_syllabics": [(0x1400, 0x167F)],
    "ogham": [(0x1680, 0x169F)],
    "runic": [(0x16A0, 0x16FF)],
    "tifinagh": [(0x2D30, 0x2D7F)],
    "lisu": [(0xA4D0, 0xA4FF)],
    "old_italic": [(0x10300, 0x1032F)],
}
LETTER_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lo"})

ASCII_LETTERS = frozenset(range(0x41, 0x5B)) | frozenset(range(0x61, 0x7B))
# font file stem -> codepoints it may draw (None: whatever its charmap says).  The Computer Modern
# fonts bundled with matplotlib use TeX's own encoding outside ASCII letters, so their charmap above
# ASCII does not mean what Unicode says; only their letters are trusted.
FONTS: dict[str, frozenset[int] | None] = {
    "DejaVuSans": None,
    "DejaVuSans-Bold": None,
    "DejaVuSans-Oblique": None,
    "DejaVuSans-BoldOblique": None,
    "DejaVuSerif": None,
    "DejaVuSerif-Bold": None,
    "DejaVuSerif-Italic": None,
    "DejaVuSerif-BoldItalic": None,
    "DejaVuSansMono": None,
    "DejaVuSansMono-Bold": None,
    "DejaVuSansMono-Oblique": None,
    "DejaVuSansMono-BoldOblique": None,
    "STIXGeneral": None,
    "STIXGeneralBol": None,
    "STIXGeneralItalic": None,
    "STIXGeneralBolIta": None,
    "cmr10": ASCII_LETTERS,
    "cmb10": ASCII_LETTERS,
    "cmss10": ASCII_LETTERS,
    "cmti10": ASCII_LETTERS,
    "cmtt10": ASCII_LETTERS,
    "cmmi10": ASCII_LETTERS,
}

# Distortion ranges (output pixels / radians), chosen so glyphs stay inside the frame and recognisable.
ROTATION_MAX = np.deg2rad(12.0)
SHEAR_MAX = 0.25
SCALE_RANGE = (0.80, 1.00)
ANISOTROPY_MAX = 0.08
TRANSLATION_MAX = 1.5
ELASTIC_RMS = 0.9  # root-mean-square elastic displacement, output pixels
ELASTIC_SIGMA = 3.0  # smoothness of the displacement field, output pixels
EM_FRACTION = 0.95  # font size (em) relative to the master canvas
FIT_FRACTION = 0.78  # glyphs larger than this fraction of the canvas are shrunk to fit
# Marks smaller than this fraction of the em in both directions (dots, short ticks such as the Canadian
# final "ᐧ") are not characters one would draw alone; they are dropped.
MIN_EXTENT_FRACTION = 0.25


@dataclass
class GlyphClass:
    script: str
    codepoint: int
    fonts: list[str] = field(default_factory=list)
    masters: list[np.ndarray] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.script}:{chr(self.codepoint)}"


def font_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def _open_fonts(master_size: int) -> dict:
    from matplotlib.ft2font import FT2Font

    fonts = {}
    for name in FONTS:
        path = font_dir() / f"{name}.ttf"
        if not path.exists():  # a matplotlib build without this font: use the rest
            continue
        font = FT2Font(str(path))
        font.set_size(EM_FRACTION * master_size, 72)  # 72 dpi: 1 pt == 1 px
        fonts[name] = font
    if not fonts:
        raise DataSourceError(f"glyphs: no fonts found in {font_dir()}")
    return fonts


def covers(font_name: str, font, codepoint: int) -> bool:
    """True if the font really has a glyph for ``codepoint`` (never the .notdef "tofu" box)."""
    allowed = FONTS[font_name]
    if allowed is not None and codepoint not in allowed:
        return False
    return font.get_char_index(codepoint) != 0


def render_master(font, codepoint: int, master_size: int) -> np.ndarray | None:
    """Rasterise one glyph, crop to ink, shrink if too large, centre on a float32 master canvas.

    Returns None for a blank or tiny glyph.
    """
    from matplotlib.ft2font import LoadFlags

    font.clear()
    font.set_text(chr(codepoint), 0.0, flags=LoadFlags.NO_HINTING)
    font.draw_glyphs_to_bitmap(antialiased=True)
    return _place(np.asarray(font.get_image(), dtype=np.float32) / 255.0, master_size)


def _place(bitmap: np.ndarray, master_size: int) -> np.ndarray | None:
    rows = np.flatnonzero(bitmap.max(axis=1) > 0.1)
    cols = np.flatnonzero(bitmap.max(axis=0) > 0.1)
    if rows.size == 0 or cols.size == 0:
        return None  # blank glyph (space-like, or an empty outline)
    ink = bitmap[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    if max(ink.shape) < MIN_EXTENT_FRACTION * EM_FRACTION * master_size:
        return None
    fit = FIT_FRACTION * master_size
    if max(ink.shape) > fit:
        ink = ndimage.zoom(ink, fit / max(ink.shape), order=1, grid_mode=True, mode="grid-constant")
        ink = np.clip(ink, 0, 1)
    canvas = np.zeros((master_size, master_size), dtype=np.float32)
    top = (master_size - ink.shape[0]) // 2
    left = (master_size - ink.shape[1]) // 2
    canvas[top : top + ink.shape[0], left : left + ink.shape[1]] = ink
    # Masters are drawn at 2x: blur before the 2:1 resampling so that thin strokes do not alias.
    return ndimage.gaussian_filter(canvas, 0.5)


def candidate_codepoints(scripts: list[str]) -> list[tuple[str, int]]:
    out = []
    for script in scripts:
        for lo, hi in SCRIPT_BLOCKS[script]:
            for codepoint in range(lo, hi + 1):
                char = chr(codepoint)
                if unicodedata.category(char) in LETTER_CATEGORIES and not unicodedata.decomposition(char):
                    out.append((script, codepoint))
    return out


def discover_classes(
    *, min_fonts: int, master_size: int, scripts: list[str] | None = None, fonts: dict | None = None
) -> list[GlyphClass]:
    """Every letter of the scripts drawn (non-blank) by >= ``min_fonts`` fonts, homoglyphs removed.

    Two codepoints whose glyphs are pixel-identical in the first font that draws both (Latin "A",
    Greek "Α", Cyrillic "А") would be one class under two labels; the first in script order is kept.
    """
    fonts = fonts if fonts is not None else _open_fonts(master_size)
    scripts = list(SCRIPT_BLOCKS) if scripts is None else scripts
    seen_renders: set[bytes] = set()
    classes = []
    for script, codepoint in candidate_codepoints(scripts):
        names = [name for name, font in fonts.items() if covers(name, font, codepoint)]
        if len(names) < min_fonts:
            continue
        glyph = GlyphClass(script, codepoint)
        for name in names:
            master = render_master(fonts[name], codepoint, master_size)
            if master is not None:
                glyph.fonts.append(name)
                glyph.masters.append(master)
        if len(glyph.fonts) < min_fonts:
            continue
        key = hashlib.sha1(glyph.fonts[0].encode() + np.round(glyph.masters[0], 3).tobytes()).digest()
        if key in seen_renders:
            continue
        seen_renders.add(key)
        classes.append(glyph)
    return classes


def _select(classes: list[GlyphClass], max_classes, max_per_script) -> list[GlyphClass]:
    """Cap classes per script, then round-robin across scripts so a small subset stays script-diverse."""
    by_script: dict[str, list[GlyphClass]] = {}
    for glyph in classes:
        by_script.setdefault(glyph.script, []).append(glyph)
    if max_per_script is not None:
        by_script = {s: g[:max_per_script] for s, g in by_script.items()}
    if max_classes is None:
        return [g for group in by_script.values() for g in group]
    chosen: list[GlyphClass] = []
    depth = 0
    while len(chosen) < max_classes and any(depth < len(g) for g in by_script.values()):
        for group in by_script.values():
            if depth < len(group) and len(chosen) < max_classes:
                chosen.append(group[depth])
        depth += 1
    order = {id(g): i for i, g in enumerate(classes)}
    return sorted(chosen, key=lambda g: order[id(g)])


def distort(masters: list[np.ndarray], font_index: np.ndarray, image_size: int, rng) -> np.ndarray:
    """Draw one example per entry of ``font_index``: random affine + elastic warp of that master.

    Returns uint8 images (n, image_size, image_size), ink = 255.
    """
    n = len(font_index)
    master_size = masters[0].shape[0]
    ratio = master_size / image_size
    centre = (image_size - 1) / 2.0
    grid = np.mgrid[0:image_size, 0:image_size].astype(np.float64) - centre  # (2, S, S): row, col

    angle = rng.uniform(-ROTATION_MAX, ROTATION_MAX, n)
    shear = rng.uniform(-SHEAR_MAX, SHEAR_MAX, n)
    scale = rng.uniform(*SCALE_RANGE, n)
    aniso = rng.uniform(-ANISOTROPY_MAX, ANISOTROPY_MAX, n)
    shift = rng.uniform(-TRANSLATION_MAX, TRANSLATION_MAX, (n, 2))
    # Elastic field: white noise smoothed by a Gaussian, rescaled to the requested RMS displacement.
    noise = ndimage.gaussian_filter(rng.standard_normal((n, 2, image_size, image_size)),
                                    sigma=(0, 0, ELASTIC_SIGMA, ELASTIC_SIGMA), mode="reflect")
    noise *= ELASTIC_RMS / np.sqrt(np.mean(noise**2, axis=(1, 2, 3), keepdims=True))

    out = np.empty((n, image_size, image_size), dtype=np.uint8)
    for i in range(n):
        cos, sin = np.cos(angle[i]), np.sin(angle[i])
        forward = (
            np.array([[cos, -sin], [sin, cos]])
            @ np.array([[1.0, shear[i]], [0.0, 1.0]])
            @ np.diag([scale[i] * (1 + aniso[i]), scale[i] * (1 - aniso[i])])
        )
        # Output pixel -> (elastic) -> undo translation -> inverse affine -> master pixel.
        points = (grid + noise[i]).reshape(2, -1) - shift[i][:, None]
        source = np.linalg.solve(forward, points) * ratio + (master_size - 1) / 2.0
        values = ndimage.map_coordinates(masters[font_index[i]], source, order=1, cval=0.0)
        out[i] = np.clip(np.rint(values * 255.0), 0, 255).astype(np.uint8).reshape(image_size, image_size)
    return out


def _validate(spec: dict, seed: int) -> dict:
    check_source_keys(spec, DEFAULTS, "glyphs")
    params = {**DEFAULTS, **{k: v for k, v in spec.items() if k != "type"}}
    if params["seed"] is None:
        params["seed"] = seed
    for key in ("examples_per_class", "image_size", "min_fonts"):
        if not isinstance(params[key], int) or params[key] < 1:
            raise DataSourceError(f"glyphs source: {key} must be a positive integer, got {params[key]!r}")
    if params["image_size"] < 8:
        raise DataSourceError(f"glyphs source: image_size must be >= 8, got {params['image_size']}")
    for key in ("max_classes", "max_classes_per_script"):
        if params[key] is not None and (not isinstance(params[key], int) or params[key] < 1):
            raise DataSourceError(f"glyphs source: {key} must be null or a positive integer")
    if params["scripts"] is not None:
        bad = [s for s in params["scripts"] if s not in SCRIPT_BLOCKS]
        if bad:
            raise DataSourceError(f"glyphs source: unknown script(s) {bad}; known: {list(SCRIPT_BLOCKS)}")
    return params


@functools.lru_cache(maxsize=4)
def _discover_cached(min_fonts: int, master_size: int, scripts: tuple[str, ...] | None) -> tuple:
    # Rendering every master takes seconds; repeated loads in one process (tests, previews) reuse it.
    return tuple(discover_classes(min_fonts=min_fonts, master_size=master_size,
                                  scripts=None if scripts is None else list(scripts)))


def generate(params: dict) -> tuple[pd.DataFrame, list[GlyphClass]]:
    size = params["image_size"]
    scripts = None if params["scripts"] is None else tuple(params["scripts"])
    classes = list(_discover_cached(params["min_fonts"], 2 * size, scripts))
    classes = _select(classes, params["max_classes"], params["max_classes_per_script"])
    if not classes:
        raise DataSourceError(f"glyphs source: no classes for {params} (too few fonts draw these scripts)")
    n_per = params["examples_per_class"]
    labels, scripts, font_names, images = [], [], [], []
    for glyph in classes:
        # One stream per (seed, character): a class's images do not depend on which other classes exist.
        rng = np.random.default_rng([params["seed"], glyph.codepoint])
        # Every covering font is used about equally often, in random order.
        font_index = rng.permutation(np.resize(np.arange(len(glyph.fonts)), n_per))
        images.append(distort(glyph.masters, font_index, size, rng))
        labels += [glyph.label] * n_per
        scripts += [glyph.script] * n_per
        font_names += [glyph.fonts[j] for j in font_index]
    pixels = np.concatenate(images).reshape(len(labels), size * size)
    frame = pd.concat(
        [
            pd.DataFrame({"label": labels, "script": scripts, "font": font_names}),
            pd.DataFrame(pixels, columns=[f"px{i}" for i in range(size * size)]),
        ],
        axis=1,
    )
    return frame, classes


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    import matplotlib
    from matplotlib import ft2font

    params = _validate(spec, seed)
    try:
        frame, classes = generate(params)
    except DataSourceError as error:
        raise DataSourceError(f"dataset {name!r}: {error}") from None
    used_fonts = sorted({f for g in classes for f in g.fonts})
    provenance = {
        "source": "glyphs",
        "params": params,
        "image_shape": [params["image_size"], params["image_size"]],
        "n_classes": len(classes),
        "classes_per_script": frame.groupby("script")["label"].nunique().to_dict(),
        "matplotlib": matplotlib.__version__,
        "freetype": ft2font.__freetype_version__,
        "fonts": {f: hashlib.sha256((font_dir() / f"{f}.ttf").read_bytes()).hexdigest() for f in used_fonts},
        "distortion": {
            "rotation_deg": float(np.rad2deg(ROTATION_MAX)), "shear": SHEAR_MAX, "scale": SCALE_RANGE,
            "anisotropy": ANISOTROPY_MAX, "translation_px": TRANSLATION_MAX,
            "elastic_rms_px": ELASTIC_RMS, "elastic_sigma_px": ELASTIC_SIGMA,
        },
    }
    return frame, provenance


def render_preview(path: str | Path, *, n_classes: int = 24, n_examples: int = 10, seed: int = 0) -> Path:
    """Save a PNG grid: one row per class (script-diverse), one column per example."""
    import matplotlib.pyplot as plt

    from uqcal.core.io import atomic_path

    params = _validate({"examples_per_class": n_examples, "max_classes": n_classes}, seed)
    frame, _ = generate(params)
    size = params["image_size"]
    pixels = frame.filter(regex=r"^px\d+$").to_numpy().reshape(-1, n_examples, size, size)
    pad = np.pad(pixels, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=40)
    grid = pad.transpose(0, 2, 1, 3).reshape(pad.shape[0] * (size + 2), n_examples * (size + 2))
    path = Path(path)
    with atomic_path(path) as tmp:
        plt.imsave(tmp, 255 - grid, cmap="gray", vmin=0, vmax=255, format="png")
    return path
