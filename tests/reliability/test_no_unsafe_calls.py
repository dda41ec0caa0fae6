"""Model outputs and checkpoints are untrusted: no eval/exec/pickle anywhere in the source tree.

Scans every Python file of src/, benchmarks/ and examples/ with `ast`, so a call that creeps back in
fails this test with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [ROOT / "src", ROOT / "benchmarks", ROOT / "examples", ROOT / "scripts"]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _kw(call: ast.Call, key: str):
    for kw in call.keywords:
        if kw.arg == key:
            return kw.value
    return None


def unsafe_calls(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        where = f"{filename}:{node.lineno}"
        if name in {"eval", "exec", "builtins.eval", "builtins.exec", "compile"}:
            found.append(f"{where}: {name}()")
        elif name in {"pickle.load", "pickle.loads", "cPickle.load", "dill.load", "marshal.loads"}:
            found.append(f"{where}: {name}()")
        elif name.endswith("torch.load"):
            wo = _kw(node, "weights_only")
            if not (isinstance(wo, ast.Constant) and wo.value is True):
                found.append(f"{where}: torch.load() without weights_only=True")
        elif name in {"yaml.load", "yaml.unsafe_load", "yaml.full_load"}:
            loader = _kw(node, "Loader")
            if name != "yaml.load" or loader is None or "Safe" not in _name(loader):
                found.append(f"{where}: {name}() (use yaml.safe_load)")
        elif name in {"np.load", "numpy.load"}:
            ap = _kw(node, "allow_pickle")
            if isinstance(ap, ast.Constant) and ap.value is True:
                found.append(f"{where}: np.load(allow_pickle=True)")
        elif name.startswith("subprocess.") or name in {"os.system", "os.popen"}:
            shell = _kw(node, "shell")
            if name in {"os.system", "os.popen"} or (
                isinstance(shell, ast.Constant) and shell.value is True
            ):
                found.append(f"{where}: {name}() through a shell")
    return found


def test_source_tree_has_no_unsafe_calls():
    problems = []
    for base in SCANNED:
        for path in sorted(base.rglob("*.py")) if base.exists() else []:
            problems += unsafe_calls(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not problems, "unsafe calls:\n" + "\n".join(problems)


def test_the_scanner_finds_what_it_looks_for():
    bad = """
import pickle, torch, yaml, numpy as np, subprocess, os
eval("1+1")
exec("x = 1")
pickle.loads(b"")
torch.load("m.pt")
torch.load("m.pt", weights_only=False)
yaml.load(open("f"))
np.load("a.npy", allow_pickle=True)
subprocess.run("ls", shell=True)
os.system("ls")
"""
    found = unsafe_calls(bad, "bad.py")
    assert len(found) == 9, found
    good = """
import torch, yaml, numpy as np, subprocess
torch.load("m.pt", weights_only=True)
yaml.safe_load(open("f"))
yaml.load(open("f"), Loader=yaml.SafeLoader)
np.load("a.npz", allow_pickle=False)
subprocess.run(["ls"])
model.eval()
"""
    assert unsafe_calls(good, "good.py") == []
