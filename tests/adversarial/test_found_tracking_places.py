"""Found by the adversarial review: docs/07 says a recipe cannot write into system folders or the checkout (only its
git-ignored runs/), and ``output_dir`` and ``--out`` are held to that; ``tracking.uri`` is checked for credentials only,
so a recipe's ``sqlite:////etc/x.db`` or ``file:///usr/lib/x`` (MLflow creates the database or the file store there, as
root in a CI container) or a database inside the checkout's package validates with exit 0."""

from __future__ import annotations

import pytest

from conftest import ROOT
from test_recipe_adversary import validate


@pytest.mark.parametrize("uri", ["sqlite:////etc/suite-probe/mlflow.db", "file:///usr/lib/suite-probe",
                                 "sqlite:////tmp/../etc/mlflow.db", f"sqlite:///{ROOT}/suite/mlflow.db"])
def test_tracking_uri_into_a_system_folder_or_the_checkout_is_refused(tmp_path, uri):
    code, err = validate(tmp_path, lambda d: d.__setitem__("tracking", {"uri": uri}))
    assert code == 2 and "tracking.uri" in err, err


def test_sync_uri_into_the_checkout_is_refused(tmp_path, capsys, monkeypatch):
    import json

    from conftest import build_gated_run, stamp_summary
    from suite import cli

    s = build_gated_run(tmp_path, {"max_drop": {"suite_gsm8k": 0.02}})
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(stamp_summary(run, s)))
    db = ROOT / "suite" / f"probe-{tmp_path.name}.db"  # inside the package: refused as an output_dir
    monkeypatch.chdir(tmp_path)
    try:
        code = cli.main(["sync", str(run), "--uri", f"sqlite:///{db}"])
        err = capsys.readouterr().err
        assert code == 2 and "--uri" in err and not db.exists(), err
    finally:
        db.unlink(missing_ok=True)
