"""The bundled default model is converted once, atomically, even with concurrent callers
(two real conversions in subprocesses: slow)."""

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_two_processes_preparing_the_model_at_once_share_one_conversion(tmp_path):
    env = {**os.environ, "SPECDEC_HOME": str(tmp_path)}
    code = "from specdec.models import default_model_dir; print(default_model_dir())"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    paths = {o[0].strip() for o in outs}
    assert len(paths) == 1
    model_dir = paths.pop()
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(model_dir))
    leftovers = [n for n in os.listdir(os.path.dirname(model_dir)) if not n.endswith(".lock")]
    assert leftovers == [os.path.basename(model_dir)]  # no half-written staging folders
    # A third call finds the cached folder and rewrites nothing.
    before = os.stat(os.path.join(model_dir, "model.safetensors"))
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    after = os.stat(os.path.join(model_dir, "model.safetensors"))
    assert again.stdout.strip() == model_dir
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
