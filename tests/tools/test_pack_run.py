"""tools/pack_run.py: a run folder packed for the next machine keeps what `suite run --resume` reads."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile

from conftest import ROOT
from suite.analysis.paired import item_scores

spec = importlib.util.spec_from_file_location("pack_run", ROOT / "tools" / "pack_run.py")
pack_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pack_run)


def test_pack_drops_only_the_prompts_and_keeps_the_rest_byte_for_byte(tmp_path):
    out = tmp_path / "runs-x"
    run = out / "20261202-000000-x"
    ev = run / "variants" / "bf16" / "evaluate"
    ev.mkdir(parents=True)
    rows = [{"task": "suite_mmlu_a", "doc_id": i, "doc": {"question": f"q{i}"}, "filter": "none",
             "arguments": {"gen_args_0": {"arg_0": "five-shot context " * 50, "arg_1": " A"}},
             "resps": [[[-1.5, False]]], "filtered_resps": [[-1.5, False]], "prompt_hash": "p", "acc": float(i % 2)}
            for i in range(5)]
    samples = ev / "samples_suite_mmlu.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"half a line')
    (run / "variants" / "bf16" / "evaluate.result.json").write_text('{"wall_s": 1}')
    (run / "run.log").write_bytes(b"log line\n")
    (out / "mlflow.db").write_bytes(b"sqlite")
    (out / "checkpoints").mkdir()  # not the run's: rebuilt from its content key on the next machine
    (out / "checkpoints" / "big.safetensors").write_bytes(b"x" * 100)

    buf = io.BytesIO()
    names = pack_run.pack(out, run.name, buf)
    assert not any(n.startswith("checkpoints") for n in names) and "mlflow.db" in names
    dest = tmp_path / "there"
    buf.seek(0)
    with tarfile.open(fileobj=buf, mode="r:gz") as tar:
        tar.extractall(dest, filter="data")

    packed = dest / run.name / "variants" / "bf16" / "evaluate" / "samples_suite_mmlu.jsonl"
    lines = packed.read_text().splitlines()
    assert lines[-1] == '{"half a line'  # a line still being written is kept as it was
    kept = [json.loads(line) for line in lines[:-1]]
    assert [{k: v for k, v in r.items() if k != "arguments"} for r in rows] == kept
    assert packed.stat().st_size < samples.stat().st_size / 5
    # the suite's readers see the same items
    whole = samples.with_name("whole.jsonl")
    whole.write_text("".join(json.dumps(r) + "\n" for r in rows))
    slim = packed.with_name("whole.jsonl")
    slim.write_text("\n".join(lines[:-1]) + "\n")
    assert item_scores(slim, "acc") == item_scores(whole, "acc") and len(item_scores(whole, "acc")) == 5
    for name in ("variants/bf16/evaluate.result.json", "run.log"):
        assert (dest / run.name / name).read_bytes() == (run / name).read_bytes()
    assert (dest / "mlflow.db").read_bytes() == b"sqlite"
    assert pack_run.main([str(out), "no-such-run"]) == 2
