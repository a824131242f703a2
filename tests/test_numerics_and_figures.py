"""The pinned numeric code path (dlgn_lib.numerics), figures that are rewritten only when they
change (dlgn_lib.plots.save_figure), and make verify's comparison (dlgn_lib.record.reproduce)."""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from dlgn_lib import files, locations, numerics  # noqa: E402

from dlgn_lib.record import executed, reproduce
from dlgn_lib.plots import save_figure  # noqa: E402

REPO = locations.REPO_ROOT

# A small training run whose result is hashed to the last bit: the same in every process that runs
# the same code path.
TRAIN = r"""
import hashlib, json, sys
import dlgn_lib as dl
import torch
torch.manual_seed(0)
x = torch.randn(256, 8)
y = torch.sin(3 * x[:, :1]) + x[:, 1:2].exp()
net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Sigmoid(),
                          torch.nn.Linear(64, 1))
opt = torch.optim.Adam(net.parameters(), lr=0.01)
for _ in range(60):
    opt.zero_grad(); loss = ((net(x) - y) ** 2).mean(); loss.backward(); opt.step()
print(json.dumps({"hash": hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest(),
                  **dl.numerics.status()}))
"""


def _fresh_process(code: str, env: dict, timeout: int = 300) -> str:
    """stdout of ``python -c code`` in a fresh process with none of the code-path variables set but ``env``."""
    unset = (*numerics.PINNED, "DLGN_NUMERICS", "DLGN_NUM_THREADS", "GLIBC_TUNABLES")
    environ = {**{k: v for k, v in os.environ.items() if k not in unset}, **env}
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, cwd=REPO,
                          check=True, timeout=timeout).stdout.strip()


def _train(**env) -> dict:
    return json.loads(_fresh_process(TRAIN, env).splitlines()[-1])


def test_the_pin_is_the_default_and_native_turns_it_off():
    pinned, native = _train(), _train(DLGN_NUMERICS="native")
    assert pinned["aten_cpu_capability"] == "DEFAULT" and pinned["mkl_cbwr"] == "COMPATIBLE"
    assert pinned["numerics"] == "pinned" and native["numerics"] == "native"
    assert native["mkl_cbwr"] == "(auto)"


def test_pinned_runs_agree_bit_for_bit_under_other_code_paths_of_the_cpu():
    """Stand-ins for another x86-64 CPU under the pin: AVX2 or AVX-512 requested for ATen, another
    MKL branch (the pin keeps a variable the user set, so these are passed the pinned values
    explicitly, as another CPU's defaults would be replaced), libm without FMA/AVX2."""
    reference = _train()["hash"]
    assert _train(GLIBC_TUNABLES="glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F")["hash"] == reference
    assert _train(OPENBLAS_CORETYPE="Haswell")["hash"] == reference
    # and the native path is another code path: the pin is what makes them agree
    assert _train(DLGN_NUMERICS="native", ATEN_CPU_CAPABILITY="avx2")["hash"] != reference


def test_a_bad_numerics_setting_is_refused_by_name():
    with pytest.raises(files.Refusal, match="DLGN_NUMERICS='fast' is not allowed; use one of pinned, native"):
        numerics.mode({"DLGN_NUMERICS": "fast"})
    env = {"MKL_CBWR": "AVX2"}
    set_now = numerics.pin(env)
    assert env["MKL_CBWR"] == "AVX2", "a variable the user set is kept"
    assert "MKL_CBWR" not in set_now and set_now["ATEN_CPU_CAPABILITY"] == "default"
    assert numerics.pin({"DLGN_NUMERICS": "native"}) == {}


def _figure(value: float):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, value])
    ax.set_title("probe")
    return fig


def test_save_figure_writes_fixed_bytes_and_leaves_an_unchanged_figure_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DLGN_FIGURES_DIR", str(tmp_path))
    fig = _figure(1.0)
    save_figure(fig, "98_probe")
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert sorted(first) == ["98_probe.pdf", "98_probe.png"]
    assert capsys.readouterr().out.startswith("saved ")
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    save_figure(_figure(1.0), "98_probe")          # a new figure with the same content
    assert capsys.readouterr().out.startswith("saved "), "the same line as a write: outputs do not depend on the folder"
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == mtimes, "nothing rewritten"
    (tmp_path / "98_probe.png").unlink()
    save_figure(_figure(1.0), "98_probe")          # rendered again from scratch: the same bytes
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first, "PNG and PDF bytes are fixed"
    save_figure(_figure(-1.0), "98_probe")         # other pixels: rewritten
    assert (tmp_path / "98_probe.png").read_bytes() != first["98_probe.png"]
    assert not list(tmp_path.glob(".*")), "no temporary file left"
    plt.close("all")


def test_figure_rms_against_a_direct_computation(tmp_path):
    import numpy as np
    from matplotlib.image import imread
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _figure(1.0).savefig(a)
    _figure(0.9).savefig(b)
    x = (imread(a)[..., :3] * 255).round()
    y = (imread(b)[..., :3] * 255).round()
    assert reproduce.figure_rms(a, b) == pytest.approx(float(np.sqrt(((x - y) ** 2).mean())))
    assert reproduce.figure_rms(a, a) == 0.0
    fig = _figure(1.0)
    fig.set_size_inches(2.02, 2)            # 1 % wider: compared on the common area
    fig.savefig(tmp_path / "c.png")
    assert math.isfinite(reproduce.figure_rms(a, tmp_path / "c.png"))
    fig.set_size_inches(3, 2)               # 50 % wider: not the same figure
    fig.savefig(tmp_path / "d.png")
    assert reproduce.figure_rms(a, tmp_path / "d.png") == math.inf
    plt.close("all")


def test_verify_catches_a_planted_number_and_a_flipped_check(tmp_path):
    """make verify's comparison on copies of a committed notebook: equal, a number moved far
    outside its tolerance, and a check turned from pass to FAIL."""
    committed = REPO / "notebooks" / "01_paths.ipynb"
    figures = tmp_path / "figures"
    shutil.copytree(REPO / "figures", figures, ignore=lambda d, names: [n for n in names if not n.startswith("01_")])
    record = reproduce.load_record()

    def copy_with(change):
        nb = nbformat.read(committed, as_version=4)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and "[pass]" in output["text"]:
                    output["text"] = change(output["text"])
        path = tmp_path / "notebooks" / committed.name
        path.parent.mkdir(exist_ok=True)
        nbformat.write(nb, path)
        return path

    same = reproduce.compare_quick("01", committed, copy_with(lambda t: t), figures, record)
    assert same.ok and same.numbers > 20 and same.figures == same.figures_equal == 3

    planted = reproduce.compare_quick("01", committed, copy_with(lambda t: t.replace("e-15", "e-11", 1)), figures, record)
    assert not planted.ok and planted.outside == 1 and planted.verdicts_equal

    flipped = reproduce.compare_quick("01", committed, copy_with(lambda t: t.replace("[pass]", "[FAIL]", 1)), figures, record)
    assert not flipped.ok and flipped.text_differences == 1 and not flipped.verdicts_equal
    name = next(c.name for v in executed.verdicts_of(nbformat.read(committed, as_version=4)) for c in v.checks)
    fragile_record = {"notebooks": {"01": {"summary": {"fragile_checks": [name]}}}}
    known = reproduce.compare_quick("01", committed, copy_with(lambda t: t.replace("[pass]", "[FAIL]", 1)), figures,
                                 fragile_record)
    assert known.verdicts_equal and known.fragile_flips == 1, "a recorded fragile check may flip"
    table = reproduce.verify_table([same, planted, flipped], "quick")
    assert "verify (quick): 1 of 3 notebooks agree" in table


def _describe(**env) -> str:
    return _fresh_process("import dlgn_lib; print(dlgn_lib.numerics.describe())", env, timeout=120)


def test_a_pinned_variable_set_by_the_user_is_named_not_blamed_on_the_import_order():
    assert " ".join(_describe().split()).startswith("numerics: pinned (ATen DEFAULT, MKL_CBWR COMPATIBLE")
    text = " ".join(_describe(ATEN_CPU_CAPABILITY="avx2").split())   # wrapped to the book's column
    assert text.startswith("numerics: pinned except ATEN_CPU_CAPABILITY=avx2 as set in the environment (ATen AVX2")
    assert "imported before" not in text and "only within tolerance" in text
    assert "pinned except MKL_CBWR=AVX2" in _describe(MKL_CBWR="AVX2")
    assert numerics.overrides({"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2"}) == {"ATEN_CPU_CAPABILITY": "avx2"}


KEY = r"""
import json
import dlgn_lib as dl
cfg = dl.config.RunConfig(dl.config.DataSpec.make("circle", target="steps"), dl.config.ModelSpec.make("dlgn", (8, 8)))
print(json.dumps({"key": cfg.key(), "tag": dl.numerics.cache_tag(), "about": cfg.to_dict(), "code": dl.config.CODE_VERSION}))
"""


def _key(**env) -> dict:
    return json.loads(_fresh_process(KEY, env, timeout=120).splitlines()[-1])


def test_the_run_cache_key_names_the_code_path_off_the_pin():
    # A run trained on one code path must not be served to a process on another (their last bits
    # differ and training magnifies them): the key carries the path, except on the pinned one,
    # whose key is the hash of the config and the code version alone.
    pinned = _key()
    text = json.dumps({"config": pinned["about"], "code": pinned["code"]}, sort_keys=True, default=list)
    assert pinned["tag"] is None and pinned["key"] == hashlib.sha256(text.encode()).hexdigest()
    others = {"native": _key(DLGN_NUMERICS="native"), "avx2": _key(ATEN_CPU_CAPABILITY="avx2"),
              "threads": _key(DLGN_NUM_THREADS="2")}
    assert "threads=1" in others["native"]["tag"] and "MKL_CBWR=(auto)" in others["native"]["tag"]
    assert "ATEN_CPU_CAPABILITY=avx2" in others["avx2"]["tag"] and "MKL_CBWR=COMPATIBLE" in others["avx2"]["tag"]
    assert "ATEN_CPU_CAPABILITY=default" in others["threads"]["tag"] and "threads=2" in others["threads"]["tag"]
    keys = {pinned["key"], *(o["key"] for o in others.values())}
    assert len(keys) == 4, "each code path has its own key"
