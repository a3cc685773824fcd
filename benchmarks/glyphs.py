"""Time the glyphs source (one core): discovery of classes, distortion, the whole load().

Run: python benchmarks/glyphs.py  (prints a table; target: 500+ classes x 20 examples in < 60 s on 1 core)
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from uqcal.data.sources import glyphs  # noqa: E402


def main() -> None:
    rows = []
    start = time.process_time()
    classes = glyphs.discover_classes(min_fonts=2, master_size=56)
    rows.append(("discover classes (render masters)", len(classes), time.process_time() - start))

    rng = np.random.default_rng(0)
    start = time.process_time()
    for glyph in classes[:500]:
        glyphs.distort(glyph.masters, rng.integers(0, len(glyph.masters), 20), 28, rng)
    rows.append(("distort 500 classes x 20", 500 * 20, time.process_time() - start))

    glyphs._discover_cached.cache_clear()
    start = time.process_time()
    frame, provenance = glyphs.load({"type": "glyphs"}, name="glyphs", cache_dir=None)
    seconds = time.process_time() - start
    rows.append((f"load() default: {provenance['n_classes']} classes", len(frame), seconds))

    glyphs._discover_cached.cache_clear()
    start = time.process_time()
    frame, _ = glyphs.load({"type": "glyphs", "max_classes": 500}, name="glyphs", cache_dir=None)
    rows.append(("load() max_classes=500", len(frame), time.process_time() - start))

    print(f"{'step':44s} {'items':>8s} {'cpu s':>8s}")
    for step, items, seconds in rows:
        print(f"{step:44s} {items:8d} {seconds:8.2f}")


if __name__ == "__main__":
    main()
