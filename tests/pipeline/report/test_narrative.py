"""The reproduction report's words and colours (uqcal.pipeline.report.narrative, numbers, palette, markdown):
verdict display labels, a better-than-the-paper result never shown as a failure, each claim's line with its numbers
and reason, the new claims.json fields of CONTRACT.md on hand-made claims, numbers written by their uncertainty,
the colour-blind check (Machado 2009 protanopia / deuteranopia, CIE76 ΔE ≥ 10) and AA contrast, and the
family notes (deviations.yaml) of every paper."""

from __future__ import annotations

import re
from html import escape

import numpy as np
import pytest

from uqcal.methods.api import builtin_families
from uqcal.metrics import replication as R
from uqcal.pipeline.report import html as H
from uqcal.pipeline.report import narrative as N
from uqcal.pipeline.report.numbers import fmt_num, fmt_p, fmt_se
from uqcal.pipeline.report.palette import (
    MACHADO_2009,
    MIN_DELTA_E,
    OKABE_ITO,
    closest_pairs,
    contrast_ratio,
    delta_e,
    simulate,
)
from uqcal.pipeline.report.verdicts import PAPER_DATA, STAND_INS, ClaimResult, Evidence


def row(verdict_test: R.RowTest, label="concrete / holdout", group=PAPER_DATA, runs=10, n80=None) -> Evidence:
    """An evidence row decided by the library's own rule (row_verdict), as the claim engine makes it."""
    e = Evidence(label, "detail", "concrete", "holdout", verdict_test, "ttest", runs, runs, n80, group)
    e.outcome = R.row_verdict(verdict_test)
    return e


def claim(rows: list[Evidence], **extra) -> ClaimResult:
    verdict = extra.pop("verdict", None) or R.combine_verdicts([e.verdict for e in rows], "every_row")
    res = ClaimResult(extra.pop("id", "c1"), extra.pop("text", "RIO beats the NN"), verdict, "summary", rows,
                      by_data={rows[0].group: (verdict, "s")} if rows else {}, runs_declared=10)
    for key, value in extra.items():  # the fields other branches add (CONTRACT.md): decided_on, stability, ours, ...
        setattr(res, key, value)
    return res


# RMSE differences a − b (lower is better: direction −1); the paper's −0.26 ± 0.1. BETTER_TEST: our RMSE against
# the paper's 5.97 ± 0.05 (a 'match' row, as within_paper_spread makes), far lower: better than published.
BETTER_TEST = R.RowTest("match", 5.00, 0.05, 9, 1e-6, -1, paper_estimate=5.97, paper_se=0.05, paper_df=99)
LOWER_TEST = R.RowTest("match", 7.00, 0.05, 9, 1e-6, -1, paper_estimate=5.97, paper_se=0.05, paper_df=99)
WORSE_TEST = R.RowTest("superiority", 0.40, 0.05, 9, 1e-5, -1, paper_estimate=-0.26, paper_se=0.1, paper_df=99)
SAME_TEST = R.RowTest("superiority", -0.27, 0.05, 9, 1e-4, -1, paper_estimate=-0.26, paper_se=0.1, paper_df=99)


def test_rows_are_what_the_library_decides():
    """The hand-made rows carry the verdicts these displays are about (the library's rule, not ours)."""
    assert row(BETTER_TEST).verdict == R.CONTRADICTED and row(BETTER_TEST).outcome["side"] == "above"
    assert row(WORSE_TEST).verdict == R.CONTRADICTED
    assert row(LOWER_TEST).verdict == R.CONTRADICTED and row(LOWER_TEST).outcome["side"] == "below"
    assert row(SAME_TEST).verdict == R.REPRODUCED


def test_better_than_the_paper_is_never_a_failure():
    better = claim([row(BETTER_TEST)], verdict=R.CONTRADICTED)
    worse = claim([row(WORSE_TEST)], verdict=R.CONTRADICTED)
    assert N.display_key(better) == N.BETTER and N.display(better).key != N.FAILED
    assert N.display_key(worse) == R.CONTRADICTED and N.display(worse).key == N.FAILED
    assert "better than published" in N.claim_reason(better)
    assert "opposite direction" in N.claim_reason(worse)
    lower = claim([row(LOWER_TEST)], verdict=R.CONTRADICTED)
    assert N.display_key(lower) == R.CONTRADICTED and "unfavourable side" in N.claim_reason(lower)
    # mixed: one row better, one worse -> a failure (the worse row decides)
    mixed = claim([row(BETTER_TEST), row(WORSE_TEST, label="other")], verdict=R.CONTRADICTED)
    assert N.display_key(mixed) == R.CONTRADICTED
    assert "(other): significant in the opposite direction" in N.claim_reason(mixed)  # the line quotes the failure


def test_claim_line_has_our_number_the_papers_and_the_reason():
    same = row(SAME_TEST)
    line = N.claim_reason(claim([same], verdict=R.REPRODUCED))
    assert line.startswith("ours -0.270 ± 0.050 vs the paper's -0.26 ± 0.10")
    pi = (same.outcome["pi_low"], same.outcome["pi_high"])  # the row's own interval (t at its Welch df)
    assert pi[0] < -0.27 < pi[1]
    assert f"[{pi[0]:.3f}, {pi[1]:.3f}]" in line and "p < 0.001" in line
    two = N.claim_reason(claim([row(SAME_TEST), row(WORSE_TEST, label="b")], verdict=R.REPRODUCED))
    assert two.endswith("1 of 2 rows give this verdict")


def test_stand_in_rows_say_there_is_no_paper_number():
    test = R.RowTest("superiority", -0.5, 0.1, 9, 0.001, -1)
    res = claim([row(test, group=STAND_INS)], verdict=R.GENERALISES)
    assert N.display(res).label == "Holds, direction only"
    assert "significant in the claimed direction (p = 0.0010)" in N.claim_reason(res)
    assert "vs the paper's" not in N.claim_reason(res)
    assert N.claim_data(res) == "on stand-in data only: no paper number to compare"


def test_contract_fields_render_and_their_absence_does_not_crash():
    """decided_on, stability (fragile), ours, and not_run's config / needs (CONTRACT.md), on hand-made claims."""
    fragile = claim([row(SAME_TEST)], verdict=R.REPRODUCED, id="fr", decided_on="on 1 of the 12 datasets (concrete)",
                    stability={"share": 0.62, "replications": 200, "method": "bootstrap over runs", "fragile": True,
                               "n_stable_at_paper_effect": 40})
    ours = claim([row(SAME_TEST)], verdict=R.REPRODUCED, id="ours1", text="our own check", ours=True)
    not_run = ClaimResult("nr", "a claim on the paper's 12 datasets", R.NOT_RUN, "not run")
    not_run.config, not_run.needs = "config/paper.yaml", "downloads and about 40 CPU hours"
    plain = claim([row(SAME_TEST)], verdict=R.REPRODUCED, id="plain")  # none of the new fields
    page = H.claims_html([fragile, ours, not_run, plain])
    assert page.index('id="claim-fr"') < page.index("Our checks") < page.index('id="claim-ours1"')
    assert 'id="claim-plain"' in page[:page.index("Our checks")]
    assert "fragile" in page and "62%" in page and "on 1 of the 12 datasets (concrete)" in page
    assert "run by config/paper.yaml; needs downloads and about 40 CPU hours" in page
    assert N.claim_data(plain) == "on the paper's own data" and not N.is_fragile(plain)


def test_summary_sentence_counts_and_gives_reasons():
    claims = [claim([row(SAME_TEST)], verdict=R.REPRODUCED, id="a"),
              claim([row(BETTER_TEST)], verdict=R.CONTRADICTED, id="b"),
              claim([row(WORSE_TEST)], verdict=R.CONTRADICTED, id="c", text="NN beats RIO"),
              ClaimResult("d", "not run one", R.NOT_RUN, "")]
    lines = N.summary_paragraph(claims)
    assert lines[0] == ("1 of 4 claims held on the paper's own data; 1 came out better than published; "
                        "1 not reproduced; 1 not run in this configuration.")
    assert any(line.startswith("“NN beats RIO”: not reproduced, because ours 0.400 ± 0.050") for line in lines)
    assert N.counts_text(claims) == "1 reproduced; 1 better than the paper; 1 not reproduced; 1 not run here"


@pytest.mark.parametrize(("value", "se", "expected"), [
    (745.3, 361.171, "745 ± 361"), (1000.0, 0.0, "1000"), (-11.93, 2.5, "-11.9 ± 2.5"),
    (0.01234, 0.00056, "0.01234 ± 0.00056"), (5.97, None, "5.97"), (3.2e-9, 1e-10, "3.20e-09 ± 1.0e-10"),
    (float("nan"), 1.0, "–"),
])
def test_numbers_are_written_by_their_uncertainty(value, se, expected):
    assert fmt_se(value, se) == expected


def test_one_p_value_notation():
    assert [fmt_p(p) for p in (0.0234, 1e-7, 0.5, None)] == ["p = 0.023", "p < 0.001", "p = 0.50", "p = –"]
    assert fmt_num(0.12345) == "0.123" and fmt_num(12) == "12"


def test_colour_simulation_matches_the_published_matrices():
    """Machado 2009's rows sum to 1 (white and greys unchanged), pure red goes to the matrix's first column, and
    ΔE of black and white is 100 (L* 0 vs 100)."""
    for matrix in MACHADO_2009.values():
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(simulate("#ff0000", "deuteranopia"), np.clip(MACHADO_2009["deuteranopia"][:, 0], 0, 1))
    assert delta_e("#000000", "#ffffff") == pytest.approx(100.0, abs=0.01)


def test_verdict_colours_and_figure_palette_survive_colour_blindness():
    assert closest_pairs(N.verdict_colours()) == []
    assert closest_pairs(OKABE_ITO) == []
    # the check can fail: the report's old red / amber verdict pair and seaborn's deep palette's blue / purple
    assert closest_pairs(["#aa1111", "#8a5a00"]) != []
    assert any("deuteranopia" in p for p in closest_pairs(["#4c72b0", "#8172b3"]))
    assert MIN_DELTA_E == 10.0


def test_badges_and_grey_text_meet_aa_contrast():
    for colour in N.verdict_colours():
        assert contrast_ratio("#000000", colour) >= 4.5, colour
    for css_text in re.findall(r"\.notrun\{color:(#[0-9a-f]{6})\}", H.CSS):
        assert contrast_ratio(css_text, "#ffffff") >= 4.5


def test_every_verdict_has_a_display_and_a_definition():
    for code in R.VERDICTS:
        assert code in N.DISPLAYS and N.DISPLAYS[code].definition
    assert len({d.label for d in N.DISPLAYS.values()}) == len(N.DISPLAYS)
    legend = H.legend_html()
    assert all(escape(N.DISPLAYS[k].label) in legend for k in N.DISPLAY_ORDER) and "<details" not in legend


@pytest.mark.parametrize("family", [f for f in builtin_families() if f != "arena"])
def test_every_paper_has_its_deviations_with_reasons(family):
    notes = N.load_family_notes(family)
    assert notes["deviations"] and all(d["reason"].strip() for d in notes["deviations"])
    assert notes.get("easy") and notes.get("hard") and notes.get("links", {}).get("paper")


def test_bad_deviations_file_is_one_clear_error(tmp_path):
    (tmp_path / "deviations.yaml").write_text("deviations:\n  - {what: x, from: elsewhere, ours: y, reason: z}\n")
    with pytest.raises(ValueError, match=r"deviations\[0\]\.from must be paper, code or both"):
        N.load_family_notes("x", tmp_path)
