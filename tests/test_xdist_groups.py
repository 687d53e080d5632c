"""make test's scheduling (pytest-xdist ``--dist loadgroup``): the tests of one ``xdist_group``
run on one worker, so a Verilator build shared by a group is made once while the other worker
works on the rest (docs/verification.md#simulators)."""

import os
import subprocess
import sys

GROUPED = '''
import os, pytest
A, B = pytest.mark.xdist_group("a"), pytest.mark.xdist_group("b")

def record(name):
    with open(os.environ["WORKERS_LOG"], "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("g", [pytest.param(g, marks=A if g == "a" else B) for g in "abababab"])
def test_param(g):
    record(g)

@pytest.mark.parametrize("i", range(8))
def test_free(i):
    record("free")

@A
def test_a():
    record("a")
'''


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    log = tmp_path / "workers.log"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadgroup", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "WORKERS_LOG": str(log)})
    assert out.returncode == 0, out.stdout + out.stderr
    workers = {}
    for line in log.read_text().splitlines():
        group, worker = line.split()
        workers.setdefault(group, set()).add(worker)
    assert len(workers["a"]) == 1 and len(workers["b"]) == 1, f"groups split across workers: {workers}"
