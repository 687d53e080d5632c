"""A mutation campaign (sim/mutate/campaign.py) on the skid buffer: a mutant its test notices is
killed (the failing test named), a no-op edit survives, a mutant that cannot elaborate is stillborn;
the project's own files are never changed, and a baseline that fails stops the campaign."""

import dataclasses
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sim.mutate import campaign
from sim.mutate.__main__ import ROOT
from sim.mutate.mutants import mutants
from sim.mutate.sandbox import Sandbox, project_files
from sim.mutate.targets import Target

PATH = "hdl/skid_buffer.py"
NARROW = Target(("tests/hdl/test_skid_buffer.py::test_skid_buffer",), ("skid_buffer",))


def test_sandbox_copies_links_build_and_restores(tmp_path):
    box = Sandbox(ROOT, project_files(ROOT), tmp_path / "box", tmp_path / "shared")
    assert (box.where / PATH).read_text() == (ROOT / PATH).read_text()
    assert (box.where / "build").resolve() == (tmp_path / "shared").resolve()
    box.mutate(PATH, "changed")
    assert (box.where / PATH).read_text() == "changed" and (ROOT / PATH).read_text() != "changed"
    box.restore(PATH)
    assert (box.where / PATH).read_text() == (ROOT / PATH).read_text()
    box.remove()
    assert not box.where.exists()


def test_killed_survived_stillborn(tmp_path, monkeypatch):
    monkeypatch.setitem(campaign.TARGETS, PATH, NARROW)
    before = (ROOT / PATH).read_text()
    real = mutants(PATH, ROOT)[0]                                      # ready = skid_valid: stalls forever
    noop = dataclasses.replace(real, new=real.old)                     # the same text: nothing changes
    broken = dataclasses.replace(real, new="~1.5 *")                   # ~float: TypeError while elaborating
    results = {r["new"]: r for r in campaign.run(ROOT, [real, noop, broken], jobs=2, work=tmp_path)}
    assert results[real.new]["status"] == "killed"
    assert results[real.new]["detail"].startswith("tests/hdl/test_skid_buffer.py::test_skid_buffer")
    assert results[real.new]["tiny_netlist_changed"] is True
    assert results[noop.new]["status"] == "survived" and results[noop.new]["tiny_netlist_changed"] is False
    assert results[broken.new]["status"] == "stillborn" and "TypeError" in results[broken.new]["detail"]
    assert (ROOT / PATH).read_text() == before


def test_failing_baseline_stops_the_campaign(tmp_path, monkeypatch):
    monkeypatch.setitem(campaign.TARGETS, PATH, Target(("tests/hdl/test_skid_buffer.py::no_such_test",),
                                                       ("skid_buffer",)))
    with pytest.raises(RuntimeError, match="do not pass"):
        campaign.run(ROOT, mutants(PATH, ROOT)[:1], jobs=1, work=tmp_path)


def test_a_hang_is_ended_with_everything_it_started(tmp_path):
    """A child past its time limit is a timeout, and the processes it started (a simulator under
    cocotb) end with it: here a stand-in ``sim.mutate.child`` that starts a sleeper and hangs."""
    fake = tmp_path / "box" / "sim" / "mutate"
    fake.mkdir(parents=True)
    for pkg in (fake.parent, fake):
        (pkg / "__init__.py").write_text("")
    pid_file = tmp_path / "sleeper.pid"
    (fake / "child.py").write_text(
        "import pathlib, subprocess, time\n"
        f"p = subprocess.Popen(['sleep', '300'])\npathlib.Path({str(pid_file)!r}).write_text(str(p.pid))\n"
        "time.sleep(300)\n")
    outcome, seconds = campaign._child(SimpleNamespace(where=tmp_path / "box"), NARROW, 0, time_limit=5)
    assert outcome is None and 5 <= seconds < 60
    stat = Path(f"/proc/{pid_file.read_text()}/stat")
    time.sleep(0.2)
    # Gone, or a zombie waiting for the init process to reap it.
    assert not stat.exists() or stat.read_text().rpartition(")")[2].split()[0] == "Z"
