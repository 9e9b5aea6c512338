"""Found by the adversarial review: ``suite gate --junit FILE`` / ``--json FILE`` write wherever they are pointed
(``outputs/gate_report._write``: mkdir -p of the parent, then a temporary file renamed over the path). Whatever sits at
the path is replaced, not written into: a FIFO or a device node becomes a regular file (run as root in a CI container,
``--json /dev/full`` replaced the device), the run's own summary.json is overwritten by the gate report (the run
folder no longer gates), and missing folders are created anywhere, where ``--out`` and ``output_dir`` refuse system
folders."""

from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import build_gated_run, run_gate
from suite.outputs import gate_report

T1 = "suite_gsm8k"


def passing_run(tmp_path) -> dict:
    s = build_gated_run(tmp_path, {"max_drop": {T1: 0.02}})
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    return s


def test_report_path_that_is_not_a_regular_file_is_refused(tmp_path, capsys):
    s = passing_run(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(fifo))
    # expected: bad input, one line naming --json, and the FIFO left as it was
    assert code == 2 and "--json" in err, out + err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_report_over_the_run_folders_own_files_is_refused(tmp_path, capsys):
    s = passing_run(tmp_path)
    summary = tmp_path / "run" / "summary.json"
    before = summary.read_bytes()
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(summary))
    # expected: a report path inside the run folder being judged (its summary, samples, results) is refused
    assert code == 2 and "--json" in err, out + err
    assert summary.read_bytes() == before


def test_report_temporary_name_does_not_follow_a_link(tmp_path, capsys):
    s = passing_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "report.json.tmp").symlink_to(victim)
    run_gate(tmp_path, capsys, s, "--json", str(tmp_path / "report.json"))
    assert victim.read_text() == "keep me\n"


# The rule as it is kept (outputs/gate_report.place_problem): a new or regular file, outside the run folder and the
# system's folders, written through a new temporary file in its folder. Checked by the pure check: nothing here
# writes to a system folder or a device.
@pytest.mark.parametrize("path, said", [("/dev/full", "is a device"), ("/etc/suite-probe/gate.json", "system folder"),
                                        ("/usr/suite-gate.xml", "system folder"), ("/", "not a regular file")])
def test_a_report_at_a_device_or_in_a_system_folder_is_refused(path, said):
    problem = gate_report.place_problem(path, "--json")
    assert problem is not None and problem.field == "--json" and said in problem.message, problem


def test_a_link_at_the_report_path_is_refused_and_its_target_kept(tmp_path, capsys):
    s = passing_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "gate.json").symlink_to(victim)
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(tmp_path / "gate.json"))
    assert code == 2 and "--json" in err and "a link" in err and victim.read_text() == "keep me\n", out + err


def test_a_report_inside_the_run_folder_is_refused_before_the_gate_judges(tmp_path, capsys):
    s = passing_run(tmp_path)
    code, out, err = run_gate(tmp_path, capsys, s, "--junit", str(tmp_path / "run" / "reports" / "gate.xml"))
    assert code == 2 and "inside the run folder being judged" in err and "gate: PASS" not in out, out + err
    assert not (tmp_path / "run" / "reports").exists()


def test_a_regular_file_is_replaced_and_no_temporary_file_stays(tmp_path, capsys):
    s = passing_run(tmp_path)
    (tmp_path / "ci").mkdir()
    old = tmp_path / "ci" / "gate.json"
    old.write_text("an older report\n")
    code, out, err = run_gate(tmp_path, capsys, s, "--json", str(old), "--junit", str(tmp_path / "ci" / "new" / "g.xml"))
    assert code == 0 and json.loads(old.read_text())["outcome"] == "pass", out + err
    assert sorted(p.name for p in (tmp_path / "ci").rglob("*")) == ["g.xml", "gate.json", "new"]
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o644
