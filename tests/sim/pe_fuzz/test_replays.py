"""Replay files: written and read back whole, and run again by ``python -m bench.pe_fuzz --replay FILE``
(here with the RTL's run replaced by a model's results)."""

import json

import pytest

from bench.pe_fuzz import main
from sim.pe_fuzz import replays
from sim.pe_fuzz.replays import describe, read_replay, write_replay
from sim.pe_fuzz.rtl import model_results
from sim.pe_fuzz.shrinker import FlipAddModel


def test_replay_file_holds_the_program(synthetic_mismatch, tmp_path):
    path, command = write_replay(synthetic_mismatch, ["words: ..."], tmp_path / "case.json")
    assert read_replay(path) == synthetic_mismatch
    assert json.loads(path.read_text())["diffs"] == ["words: ..."]
    assert command == f"python -m bench.pe_fuzz --replay {path}"
    (tmp_path / "other.json").write_text(json.dumps({"program": synthetic_mismatch}))
    with pytest.raises(ValueError, match="not a pe_fuzz replay file"):
        read_replay(tmp_path / "other.json")


@pytest.mark.parametrize("rtl", ["golden", "wrong"])
def test_bench_replays_a_file(synthetic_mismatch, tmp_path, monkeypatch, capsys, rtl):
    """The command lists the program and the differences the RTL (here the golden model, or
    ``FlipAddModel``) shows against the golden model; its exit status is 1 when there are any."""
    model_cls = FlipAddModel if rtl == "wrong" else None
    monkeypatch.setattr(replays, "run_rtl", lambda progs, exps, name: model_results(progs, model_cls))
    path, _ = write_replay(synthetic_mismatch, [], tmp_path / "case.json")
    status = main(["--replay", str(path)])
    out = capsys.readouterr().out
    assert out.startswith(describe(synthetic_mismatch) + "\n")
    if rtl == "wrong":
        assert status == 1 and "\nwords: color " in out, out
    else:
        assert status == 0 and out.rstrip().endswith("RTL == model: no difference"), out
