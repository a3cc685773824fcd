"""The `uqcal` command's exit path: a pipeline step that succeeded skips Python's teardown (os._exit), so
what it prints and logs must be flushed first."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO, tool_env

PROGRAM = textwrap.dedent("""
    import atexit, logging, sys
    from uqcal.cli import exit_without_teardown
    logging.basicConfig(stream=sys.stderr, format="%(message)s")
    atexit.register(lambda: print("teardown ran"))
    print("stdout without a newline", end="")   # block-buffered: a pipe
    logging.getLogger("uqcal.test").warning("a log line")
    exit_without_teardown()
    print("never reached")
""")


def test_exit_without_teardown_flushes_what_the_step_printed_and_logged():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, env=tool_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    assert proc.stdout == "stdout without a newline"  # flushed; no atexit handler and nothing after the exit
    assert proc.stderr.strip() == "a log line"


def test_a_failing_step_keeps_its_status_and_message(tmp_path):
    # Only success takes the short exit. Bad input (a user error) still ends with status 2 and names the
    # problem, with no traceback (tests/cli/test_cli.py covers each kind of mistake in-process).
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: {qr: {bogus: 1}}\n")
    proc = subprocess.run([sys.executable, "-m", "uqcal.cli", "aggregate", "--config", str(bad), "--family", "qr"],
                          cwd=REPO, env=tool_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "families.qr" in proc.stderr and "bogus" in proc.stderr and "Traceback" not in proc.stderr


def test_python_dash_m_uqcal_is_the_command():
    proc = subprocess.run([sys.executable, "-m", "uqcal", "--version"], cwd=REPO, env=tool_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("uqcal ")
    proc = subprocess.run([sys.executable, "-m", "uqcal", "runs", "--family", "nope"], cwd=REPO, env=tool_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "uqcal runs: error: unknown family 'nope' (not in config/config.yaml); known: metareg, rio, qr, fewshot, bo"]
