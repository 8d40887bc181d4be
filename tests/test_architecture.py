"""The layering rules, read from the source's own imports (imports inside functions count):

- imports only go down: base (types, errors, fileio, text, memory) < stats < graph < runtime | match | autodiff |
  report < compare < torch < api < session < cli; the packages of one level do not import each other;
- only onnxprobe/torch/ imports torch (the optional extra), and only inside functions;
- cli/ and session/ reach the rest of onnxprobe only through onnxprobe.api, onnxprobe.report and the base
  modules;
- no import cycles between modules;
- no module imports another module's private (``_name``) name;
- no module is over 500 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "onnxprobe"
BASE = {"onnxprobe", "onnxprobe.types", "onnxprobe.errors", "onnxprobe.fileio", "onnxprobe.text", "onnxprobe.memory"}
RANK = {"base": 0, "stats": 1, "graph": 2, "runtime": 3, "match": 3, "autodiff": 3, "report": 3, "compare": 4,
        "torch": 4.5, "api": 5, "torch_facade": 5.5, "session": 6, "cli": 7, "__main__": 8}
# ``import onnxprobe.torch as opt``: the package's own __init__ is a door onto api.torch, above it
FACADES = {"onnxprobe.torch": "torch_facade"}
FRONT_ENDS = {"cli", "session"}
FRONT_END_MAY_USE = {"api", "report", "base"}  # and themselves; `debug` (cli) starts the REPL (session)
MAX_LINES = 500


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def layer(mod: str) -> str:
    if mod in BASE:
        return "base"
    if mod in FACADES:
        return FACADES[mod]
    return mod.split(".")[1]


def imports(mod: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every onnxprobe import of ``mod``."""
    path = MODULES[mod]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("onnxprobe")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            if not base.startswith("onnxprobe"):
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((full, None, node.lineno) if full in MODULES else (base, a.name, node.lineno))
    return out


def edges() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}


def test_imports_only_go_down():
    bad = []
    for m in MODULES:
        for t, _, line in imports(m):
            if t not in MODULES:
                continue
            a, b = layer(m), layer(t)
            if a == b:
                continue
            if RANK[b] > RANK[a] or (RANK[b] == RANK[a] and a != b):
                bad.append(f"{MODULES[m].relative_to(PKG.parent)}:{line} ({a}) imports {t} ({b})")
    assert not bad, "imports that go up or sideways:\n" + "\n".join(bad)


def test_front_ends_use_only_the_api_and_reports():
    bad = []
    for m in MODULES:
        if layer(m) not in FRONT_ENDS:
            continue
        for t, _, line in imports(m):
            if t in MODULES and layer(t) not in FRONT_END_MAY_USE | FRONT_ENDS:
                bad.append(f"{MODULES[m].relative_to(PKG.parent)}:{line} imports {t}")
    assert not bad, "cli/ and session/ reach around onnxprobe.api:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan's algorithm, iteratively safe for this size
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strongconnect(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_private_names_across_modules():
    bad = [f"{MODULES[m].relative_to(PKG.parent)}:{line} imports {t}.{name}"
           for m in MODULES for t, name, line in imports(m)
           if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert not bad, "\n".join(bad)


def test_every_imported_name_exists():
    """Each ``from onnxprobe.X import name``, inside functions too, names something X defines: a name that
    one change removed and another, merged beside it, still imports fails only when that line runs (a
    lazy import inside a function: ``diff --vs-reference`` once stopped on ``graph.constants.size_of``)."""
    import importlib

    bad = []
    for m in MODULES:
        for t, name, line in imports(m):
            if name is None or name == "*" or t not in MODULES:
                continue
            target = importlib.import_module(t)
            if not hasattr(target, name) and f"{t}.{name}" not in MODULES:
                bad.append(f"{MODULES[m].relative_to(PKG.parent)}:{line} imports {name} from {t}, which has no such name")
    assert not bad, "\n".join(bad)


def test_modules_are_small():
    big = {str(p.relative_to(PKG.parent)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_a_models_values_are_read_through_tensor_data():
    """A weight the lazy read left in its file (graph.weight_files) has no bytes in its proto: numpy_helper.to_array
    reads it as no data ("cannot reshape array of size 0"). Every reader of a model tensor's values goes through
    graph.tensor_data (to_array, tensor_values, tensor_bytes), which reads such a weight from its file; only
    tensor_data itself and weight_files (a tensor it knows is not left) call numpy_helper's own."""
    allowed = {"onnxprobe.graph.tensor_data", "onnxprobe.graph.weight_files"}
    bad = [name for name, path in MODULES.items() if name not in allowed
           for node in ast.walk(ast.parse(path.read_text()))
           if isinstance(node, ast.Attribute) and node.attr == "to_array"
           and isinstance(node.value, (ast.Name, ast.Attribute)) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "numpy_helper"]
    assert not bad, f"numpy_helper.to_array outside graph.tensor_data: {sorted(set(bad))}"


@pytest.mark.parametrize("name", ["api", "report", "types", "errors", "fileio", "text"])
def test_what_front_ends_may_use_exists(name):
    assert f"onnxprobe.{name}" in MODULES


def test_only_the_torch_package_imports_torch():
    """torch is an optional extra: the rest of onnxprobe never imports it, and onnxprobe/torch/ only
    inside functions (through ``require_torch``), so that every command starts without it."""
    bad = []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if not any(n == "torch" or n.startswith("torch.") for n in names):
                continue
            if layer(m) not in ("torch", "torch_facade") or id(node) in top:
                bad.append(f"{m}:{node.lineno}")
    assert not bad, f"torch imported outside onnxprobe/torch/ functions: {bad}"


def test_help_imports_no_numerical_library():
    """`onnxprobe --help` (the command line's import) loads no numerical or runtime library: they are
    imported by the commands that use them, so help and usage errors come fast."""
    import subprocess
    import sys

    heavy = ("numpy", "onnx", "onnxruntime", "torch", "ray", "openvino", "tensorrt", "plotly")
    code = ("import sys, onnxprobe.cli.main; "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported at start: {r.stdout.strip()}"


def test_the_api_names_one_table_and_resolves_every_name():
    """onnxprobe.api imports its workflows on first use: its table (``_WHERE``), its TYPE_CHECKING imports
    and ``__all__`` name the same objects, each name resolves to the object its module defines, and the
    functions named like their modules (diff, grad...) stay functions once those modules are imported."""
    import importlib
    import sys

    from onnxprobe import api

    tree = ast.parse(MODULES["onnxprobe.api"].read_text())
    checked = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                for a in imp.names:
                    checked[a.asname or a.name] = (imp.module, a.name)
    assert checked == api._NAMES and sorted(checked) == api.__all__
    for name, (mod, src) in checked.items():
        assert getattr(api, name) is getattr(importlib.import_module(mod), src), name
    # api.diff is api.diff_lean's (a cached request's run started before onnx is imported), which calls api.diff's
    for mod, home in (("diff", "diff_lean"), ("grad", "grad"), ("grad_plan", "grad_plan"), ("diff_dataset", "diff_dataset"),
                      ("grad_dataset", "grad_dataset")):
        importlib.import_module(f"onnxprobe.api.{mod}")
        assert getattr(api, mod) is getattr(sys.modules[f"onnxprobe.api.{home}"], mod)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        api.nope  # noqa: B018


def test_every_public_api_name_explains_itself():
    """help() of a public function or class says what it is (QA: DiffResult, TensorStats, RunConfig...
    showed only their generated signatures)."""
    import inspect

    from onnxprobe import api

    bare = []
    for name in api.__all__:
        obj = getattr(api, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        doc = inspect.getdoc(obj) or ""
        if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):  # dataclass's own signature
            bare.append(name)
    assert not bare, bare


def test_layers_imports_only_what_it_runs(tmp_path):
    """A `layers` run never imports the diff, gradient, surgery, torch or Ray modules."""
    import subprocess
    import sys

    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    code = ("import sys\nfrom onnxprobe.cli.main import app\n"
            f"try:\n    app(['layers', {str(path)!r}, '--device', 'cpu'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('onnxprobe.'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = r.stdout.split()[-1000:]
    unwanted = ("onnxprobe.api.diff", "onnxprobe.api.grad", "onnxprobe.api.surgery", "onnxprobe.api.torch", "onnxprobe.compare",
                "onnxprobe.autodiff", "onnxprobe.torch", "onnxprobe.match", "onnxprobe.graph.mark")
    assert "onnxprobe.api.core" in loaded
    assert not [m for m in loaded if m.startswith(unwanted)], loaded


def test_layers_with_every_input_given_loads_no_openssl(tmp_path):
    """numpy.random's first use imports hashlib, which loads OpenSSL's libcrypto (3.5 MB resident): a
    `layers` run whose inputs are all given draws nothing, so neither is loaded (runtime.feeds)."""
    import subprocess
    import sys

    import numpy as np
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    np.save(tmp_path / "x.npy", np.array([-1.0, 2.0], np.float32))
    code = ("import sys\nfrom onnxprobe.cli.main import app\n"
            f"try:\n    app(['layers', {str(path)!r}, '--input', 'x={tmp_path / 'x.npy'}', '--device', 'cpu', '--no-cache'], standalone_mode=False)\n"
            "except SystemExit:\n    pass\n"
            "print('LOADED', ' '.join(m for m in ('_hashlib', 'hashlib', 'secrets') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "LOADED", r.stdout[-500:]
