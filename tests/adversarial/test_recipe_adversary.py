"""Adversarial review of `suite validate` (issue 40 part 4): hostile recipes that validated. Each hole
found here is closed (issue 40 part 4): every case must be refused."""

from __future__ import annotations

import contextlib
import io

import pytest
import yaml

from conftest import DEMO_MODEL, DEMO_RECIPE, ROOT
from suite import cli


def validate(tmp_path, mutate) -> tuple[int, str]:
    d = yaml.safe_load(DEMO_RECIPE.read_text())
    d["model"]["id"] = str(DEMO_MODEL)
    d["eval"]["data_dir"] = str(ROOT / "tasks" / "data")
    d["output_dir"] = str(tmp_path / "runs")
    mutate(d)
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(d))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["validate", str(p)])
    return code, err.getvalue()


def env(name, value):
    def m(d):
        d["runtime"] = d.get("runtime") or {}
        d["runtime"]["env"] = {**(d["runtime"].get("env") or {}), name: value}
    return m


def test_control_demo_recipe_validates(tmp_path):
    assert validate(tmp_path, lambda d: None)[0] == 0


@pytest.mark.parametrize("name", ["LD_PRELOAD", "ld_preload", "PYTHONPATH", "PYTHONSTARTUP", "VLLM_PLUGINS",
                                  "SUITE_MANIFEST_KEY", "SUITE_ALLOW_CODE_EXECUTION", "MLFLOW_TRACKING_URI", "PATH",
                                  "GCONV_PATH", "BASH_ENV"])
def test_listed_env_names_are_refused(tmp_path, name):
    code, err = validate(tmp_path, env(name, "/x"))
    assert code == 2 and "runtime.env" in err, err


# Names outside the deny list that still load code or leak the Hugging Face token the stages keep. Shown for
# VLLM_LOGGING_CONFIG_PATH by hand: a JSON dictConfig with {"()": "os.system", "command": ...} ran the command in
# /work/main/.venv's vllm (vllm.logger._configure_vllm_root_logger reads the variable).
CODE_OR_TOKEN = {
    "VLLM_LOGGING_CONFIG_PATH": "logging.config.dictConfig '()' factories call any callable: code in every engine",
    "CUDA_INJECTION64_PATH": "the CUDA driver dlopens this library at cuInit",
    "NCCL_NET_PLUGIN": "NCCL dlopens a network plugin library",
    "NCCL_TUNER_PLUGIN": "NCCL dlopens a tuner plugin library",
    "OPENSSL_CONF": "OpenSSL config can load engine/provider shared objects",
    "TRITON_CACHE_DIR": "Triton loads compiled kernels (.so) from this cache",
    "TORCHINDUCTOR_CACHE_DIR": "Inductor loads compiled modules from this cache",
    "VLLM_CACHE_ROOT": "vLLM's torch.compile cache (compiled code) lives here",
    "XDG_CACHE_HOME": "default root of the Triton/Inductor/vLLM caches above",
    "HF_DATASETS_TRUST_REMOTE_CODE": "lets datasets run loading scripts",
    "HF_ENDPOINT": "sends the kept HF token (Authorization header) to another host",
    "HTTPS_PROXY": "routes the stages' HTTPS (with the HF token) through another host",
    "REQUESTS_CA_BUNDLE": "with a proxy: trusts another CA, so the token is readable",
    "VLLM_USE_MODELSCOPE": "loads the model from another hub than the one named",
}


@pytest.mark.parametrize("name", list(CODE_OR_TOKEN))
def test_env_names_that_load_code_or_leak_tokens_are_refused(tmp_path, name):
    code, err = validate(tmp_path, env(name, "/tmp/x"))
    assert code == 2 and "runtime.env" in err, f"{name}: {CODE_OR_TOKEN[name]}"


@pytest.mark.parametrize("uri", ["http://u:p@h:5000", "http://h:5000/?token=x", "HTTP://%75:%70@h"])
def test_tracking_uri_credentials_refused(tmp_path, uri):
    code, err = validate(tmp_path, lambda d: d.__setitem__("tracking", {"uri": uri}))
    assert code == 2 and "tracking.uri" in err, err


@pytest.mark.parametrize("uri", ["http://h:5000/#access_token=abcdef", "http://h:5000/;password=abcdef",
                                 "http://h:5000/?x=ghp_abcdefghijklmnopqrstuvwxyz0123456789"])
def test_tracking_uri_credentials_in_other_positions_refused(tmp_path, uri):
    code, err = validate(tmp_path, lambda d: d.__setitem__("tracking", {"uri": uri}))
    assert code == 2 and "tracking.uri" in err and "abcdef" not in err, err


@pytest.mark.parametrize("out", ["/tmp/../etc/suite", "/var/tmp/../../etc", "/var/tmp/../lib/x", "/"])
def test_output_dir_system_folders_refused_through_dotdot(tmp_path, out):
    code, err = validate(tmp_path, lambda d: d.__setitem__("output_dir", out))
    assert code == 2 and "output_dir" in err, err


def test_output_dir_inside_the_checkout_refused(tmp_path):
    code, err = validate(tmp_path, lambda d: d.__setitem__("output_dir", str(ROOT / "suite" / "runs")))
    assert code == 2 and "output_dir" in err and "inside the project's checkout" in err, err
