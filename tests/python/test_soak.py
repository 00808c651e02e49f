"""The soak (bench/soak.py), bounded: 40 seconds of normal, cancelled, vanished (SIGKILLed client
processes), malformed and oversized requests against a real server, then its end-state checks
(0 blocks in use, no leaked fds or threads, RSS within 5 % of warm-up, every admitted request answered)."""
import subprocess
import sys

from conftest import BUILD, MODEL, REPO


def test_short_soak_ends_clean():
    run = subprocess.run([sys.executable, str(REPO / "bench" / "soak.py"), "--seconds", "40", "--build", str(BUILD),
                          "--model", str(MODEL)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "soak: PASSED" in run.stdout
