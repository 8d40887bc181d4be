"""onnxprobe's speed and memory benchmark, against plain onnxruntime and Polygraphy, in one run.

    python bench/run.py [--models DIR] [--repeat 5] [--json bench/results.json] [--no-polygraphy]

Every figure is a whole process (start, imports, model load, session, run, report) on this machine:
wall time is the median of --repeat runs after one warm-up, peak RSS the median of the runs'
ru_maxrss (each started from a bare interpreter, so that this script's memory is not counted). A model's
commands run in rounds, each command once a round, one after another (after a warm-up round), so that a
ratio compares runs made seconds apart: a ratio is the median over the rounds of the round's own ratio. A
shared or virtual machine runs 20-40 % slower for minutes at a time; measured one command after the other
(every run of plain, then every run of layers), a slow spell that fell on one command and not its baseline
moved a ratio by as much (PP-OCRv4 det 800x608 layers --all: 1.76x in one table, 2.42x in the next, same code).
Ratios are printed against plain inference of the unmodified model (bench/plain.py, default onnxruntime
options) and against Polygraphy doing the same work. Polygraphy is installed into bench/.cache/polygraphy-venv if it
is not there. DIR is the folder that ../shared/models/fetch_models.sh
fills (default: $ONNXPROBE_MODELS); models missing from it are skipped with a note.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
PY = sys.executable
ONNXPROBE = [PY, "-m", "onnxprobe"]

# issue 15's goals: (wall, rss) ratios to plain inference, and how much faster than Polygraphy at least
# layers_all_json: the same goal for `layers --all --json -`, which computes every statistic (the table leaves out
# those it does not show: abs_mean, zero_fraction)
TARGETS = {"layers_all": (2.0, 1.3), "layers_all_json": (2.0, 1.3), "diff_all": (4.0, 2.0)}
POLY_SPEEDUP = {"layers_all": 1.0, "layers": 1.0, "diff_all": 20.0}


# key: (file, the file whose absence means building it, the builder in bench/models.py and its keywords, shapes)
SYNTHETIC = {
    "resnet18": ("resnet18.onnx", "resnet18.onnx", "resnet18", {}, {"input": "1x3x224x224"}),
    # 512 MiB of MatMul weights in an external data file: memory that is the weights', not the activations'
    "big_mlp": ("big_mlp.onnx", "big_mlp.onnx.data", "big_mlp", {}, {"x": "1x4096"}),
    # the same 512 MiB inside the .onnx file, as an exporter writes a model under 2 GB
    "big_mlp_inline": ("big_mlp_inline.onnx", "big_mlp_inline.onnx", "big_mlp", {"external": False}, {"x": "1x4096"}),
    # 6,000 small tensors in a chain of 6,000 nodes: what each tensor and node costs
    "deep_mlp": ("deep_mlp.onnx", "deep_mlp.onnx", "deep_mlp", {}, {"x": "16x96"}),
}
# key: (path under the folder fetch_models.sh fills, shapes)
REAL = {
    "bert_tiny": ("transformers/bert_tiny_random_legacy_op17.onnx", {"input_ids": "1x128", "attention_mask": "1x128"}),
    "ppocr_rec": ("pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx", {"x": "1x3x48x320"}),
    "ppocr_det": ("pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx", {"x": "1x3x480x480"}),
    # the detector at the size issue 15 measured (1,493-node models of this kind: weights in Constants)
    "ppocr_det_800": ("pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx", {"x": "1x3x800x608"}),
}


def models(models_dir: Path | None, only: list[str] | None = None) -> dict[str, tuple[Path, dict[str, str]]]:
    """The models to measure, each (path, input shapes); the synthetic ones are built on first use (only those
    ``only`` names, when given: the big ones take a minute and 1 GB)."""
    sys.path.insert(0, str(HERE))
    import models as builders  # noqa: E402

    CACHE.mkdir(exist_ok=True)
    out = {}
    for key, (name, marker, build, kw, shapes) in SYNTHETIC.items():
        if only and key not in only:
            continue
        if not (CACHE / marker).exists():
            getattr(builders, build)(CACHE / name, **kw)
        out[key] = (CACHE / name, shapes)
    for k, (rel, shapes) in REAL.items() if models_dir else ():
        if only and k not in only:
            continue
        if (models_dir / rel).exists():
            out[k] = (models_dir / rel, shapes)
        else:
            print(f"note: {rel} not in {models_dir}; {k} skipped", file=sys.stderr)
    return out


def model_digest(path: Path) -> str:
    """A digest of the model's bytes and of every external data file it names (a weight changed in the .data file
    leaves the .onnx as it was)."""
    import onnx

    from onnxprobe.graph.external import external_files

    h = hashlib.blake2b(path.read_bytes(), digest_size=8)
    m = onnx.load(str(path), load_external_data=False)
    for f in sorted(external_files(m, path.parent), key=lambda f: f.location):
        h.update(f.location.encode())
        with open(f.path, "rb") as data:
            for block in iter(lambda: data.read(1 << 24), b""):
                h.update(block)
    return h.hexdigest()


def polygraphy_bin() -> list[str] | None:
    venv = CACHE / "polygraphy-venv"
    exe = venv / "bin" / "polygraphy"
    if not exe.exists():
        import onnxruntime

        print("installing Polygraphy into bench/.cache/polygraphy-venv ...", file=sys.stderr)
        subprocess.run([PY, "-m", "venv", str(venv)], check=True)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "polygraphy==0.53.6", f"onnxruntime=={onnxruntime.__version__}",
                            "onnx", "numpy", "colored"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"note: Polygraphy could not be installed ({r.stderr.strip().splitlines()[-1:]}); its columns are skipped", file=sys.stderr)
            return None
    return [str(exe)]


# Each measured process is started by this small launcher, which reports the wall time and the child's own
# peak RSS. Linux carries a process's peak RSS across fork and exec (exec keeps the larger of the old and
# new memory's high-water mark), so a command forked straight from this script (which holds onnx,
# onnxruntime and the models) would report at least this script's RSS: every row read 344 MiB. Forked from
# a bare interpreter (-I -S: about 10 MiB), the floor is that interpreter's, the same for every row.
LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(fd, f"{time.perf_counter() - t0} {usage.ru_maxrss * 1024} {os.waitstatus_to_exitcode(status)}".encode())
"""


# bytecode as a user's install has it: with PYTHONDONTWRITEBYTECODE set (some CI and sandbox images set it),
# every run would compile onnxprobe's sources again (0.3 s), which the warm-up is there to exclude
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def diff_verdict(err: str) -> bool:
    """Whether an exit code of 1 is onnxprobe diff's FAIL verdict (a result), not an error (exit 1 too: a model it
    refuses, a crash), which says itself on stderr."""
    return "onnxprobe: error:" not in err and "Traceback (most recent call last)" not in err


def polygraphy_verdict(err: str) -> bool:
    """Whether an exit code of 1 is Polygraphy's failed comparison (its last line, which ``poly_diff_all`` sends to
    stderr: "[E] FAILED | Runtime: ..."), not one of its errors (exit 1 too, with a traceback)."""
    last = err.strip().splitlines()[-1:] or [""]
    return "FAILED | Runtime" in last[0] and "Traceback (most recent call last)" not in err


def once(cmd: list[str], verdict=None) -> tuple[float, int]:
    """One whole process of ``cmd``: (wall seconds, peak RSS bytes). It must exit 0; exit 1 counts only where it is a
    comparison's verdict (``verdict(stderr)`` says so: diff's FAIL, Polygraphy's FAILED). Any other exit, or a
    traceback, is a RuntimeError: a crashed or refused run timed as a result made a baseline of a process that did
    nothing (plain.py crashing on a float16 input read as a 1.1 s baseline)."""
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, str(w), *cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, pass_fds=(w,), env=CHILD_ENV)
    os.close(w)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    p.wait()
    p.stderr.close()
    with os.fdopen(r, "rb") as f:
        report = f.read().decode().split()
    if p.returncode != 0 or len(report) != 3:
        raise RuntimeError(f"{' '.join(cmd[:6])}...: the launcher failed ({err.strip().splitlines()[-1:]})")
    wall, rss, code = float(report[0]), int(report[1]), int(report[2])
    result = code == 0 or (code == 1 and verdict is not None and verdict(err))
    if not result or "Traceback (most recent call last)" in err:
        last = err.strip().splitlines()[-1] if err.strip() else "nothing on stderr"
        raise RuntimeError(f"{' '.join(cmd[:6])}... exited {code}: {last}")
    return wall, rss


def verdict_of(op: str):
    """How an exit code of 1 of ``op`` is told from an error: diff's and Polygraphy's comparisons end with 1 when
    they find a difference; nothing else may."""
    return polygraphy_verdict if op == "poly_diff_all" else diff_verdict if op.startswith("diff") else None


def measure(ops: dict[str, list[str]], repeat: int, label: str = "") -> dict[str, dict]:
    """Each command of ``ops`` in rounds: a warm-up round (file cache, compiled bytecode, the plan cache's
    entries), then ``repeat`` rounds, each running every command once, in order. {op: {"wall_s", "rss_bytes"
    (medians), "runs", "rounds" ({round: [wall, rss]})}}, or {op: {"error"}} for a command that failed
    (it is not run again)."""
    got: dict[str, dict[int, tuple[float, int]]] = {op: {} for op in ops}
    failed: dict[str, str] = {}
    for r in range(repeat + 1):
        print(f"{label}{'warm-up' if r == 0 else f'round {r}/{repeat}'} ...", file=sys.stderr, flush=True)
        for op, cmd in ops.items():
            if op in failed:
                continue
            try:
                run = once(cmd, verdict_of(op))
            except RuntimeError as e:
                failed[op] = str(e)
                print(f"  {op} failed: {e}", file=sys.stderr)
                continue
            if r:
                got[op][r] = run
    out: dict[str, dict] = {}
    for op, rounds in got.items():
        if op in failed:
            out[op] = {"error": failed[op]}
        else:
            out[op] = {"wall_s": statistics.median(w for w, _ in rounds.values()),
                       "rss_bytes": int(statistics.median(m for _, m in rounds.values())), "runs": len(rounds),
                       "rounds": {r: list(v) for r, v in rounds.items()}}
    return out


def paired(r: dict, base: dict) -> tuple[float, float] | None:
    """(wall, rss) of ``r`` over ``base``: the medians of the ratios of the rounds both ran in."""
    both = sorted(set(r.get("rounds", {})) & set(base.get("rounds", {})))
    if not both:
        return None
    return (statistics.median(r["rounds"][k][0] / base["rounds"][k][0] for k in both),
            statistics.median(r["rounds"][k][1] / base["rounds"][k][1] for k in both))


def shape_flags(shapes: dict[str, str]) -> list[str]:
    return [a for k, v in shapes.items() for a in ("--shape", f"{k}={v}")]


def poly_shapes(shapes: dict[str, str]) -> list[str]:
    ints = [f"{k}:[0,100]" for k in shapes if "ids" in k or "mask" in k]  # integer inputs: the same range as ours
    return (["--input-shapes", *[f"{k}:[{v.replace('x', ',')}]" for k, v in shapes.items()]] if shapes else []) + (
        ["--val-range", *ints] if ints else [])


def default_probes(model: Path) -> list[str]:
    from onnxprobe import api

    m = api.load(model)
    return [r.name for r in api.select(m.inferred, api.Selection())] if hasattr(api, "select") else \
        [p.ref.name for p in api.plan(m).probes]


def compile_bytecode() -> None:
    """Write onnxprobe's bytecode, as every installed copy has it: pip compiles a package when it installs
    it, and Python caches each module on its first import, but not under PYTHONDONTWRITEBYTECODE=1 (set on
    some machines, this one included), where each command would compile onnxprobe's modules from source
    again (measured: +0.11 s a command, tiny BERT layers --all). numpy, onnxruntime and Polygraphy come
    from pip with theirs."""
    where = subprocess.run([PY, "-c", "import os, onnxprobe; print(os.path.dirname(onnxprobe.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([PY, "-m", "compileall", "-q", where], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=Path, default=Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=HERE / "results.json")
    ap.add_argument("--no-polygraphy", action="store_true")
    ap.add_argument("--only", nargs="*", help="model keys to run")
    ap.add_argument("--readme", action="store_true", help="write the table into README.md (between its bench markers)")
    args = ap.parse_args()
    # refused before anything is measured: a run of minutes lost to a typo, or a README table cut to a part
    unknown = sorted(set(args.only or ()) - set(SYNTHETIC) - set(REAL))
    if unknown:
        ap.error(f"--only: no model {', '.join(unknown)}; the models are {', '.join([*SYNTHETIC, *REAL])}")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give at least 1 round (the medians are of the timed rounds)")
    if args.readme and (args.only or args.no_polygraphy or args.models is None):
        ap.error("--readme writes the README's whole table: run every model (no --only), with Polygraphy and --models "
                 "(or $ONNXPROBE_MODELS)")
    if not args.json.parent.is_dir():
        ap.error(f"--json {args.json}: folder {args.json.parent} does not exist")
    sys.path.insert(0, str(HERE))
    from models import check_perturbed, perturbed  # noqa: E402

    compile_bytecode()
    poly = None if args.no_polygraphy else polygraphy_bin()
    results: dict = {"machine": os.uname().machine, "cpus": os.cpu_count(), "repeat": args.repeat, "models": {}}
    for key, (path, shapes) in models(args.models, args.only).items():
        # named by the source's bytes, its external data's too: a model changed since (another version fetched,
        # big_mlp's weights made again beside an unchanged .onnx) gets its own copy
        pert = CACHE / f"{key}_{model_digest(path)}_perturbed.onnx"
        if not pert.exists():
            perturbed(path, pert)
        print(f"{key}: {check_perturbed(path, pert, {k: tuple(int(d) for d in v.split('x')) for k, v in shapes.items()})}",
              file=sys.stderr)
        ops = {
            "plain": [PY, str(HERE / "plain.py"), str(path), *[f"{k}={v}" for k, v in shapes.items()]],
            "layers": [*ONNXPROBE, "layers", str(path), *shape_flags(shapes), "--device", "cpu"],
            "layers_all": [*ONNXPROBE, "layers", str(path), "--all", *shape_flags(shapes), "--device", "cpu"],
            "layers_all_json": [*ONNXPROBE, "layers", str(path), "--all", *shape_flags(shapes), "--device", "cpu", "--json", "-"],
            "layers_all_no_cache": [*ONNXPROBE, "layers", str(path), "--all", *shape_flags(shapes), "--device", "cpu", "--no-cache"],
            "diff_all": [*ONNXPROBE, "diff", str(path), str(pert), "--all", *shape_flags(shapes), "--device", "cpu"],
            "diff_all_no_cache": [*ONNXPROBE, "diff", str(path), str(pert), "--all", *shape_flags(shapes), "--device", "cpu", "--no-cache"],
        }
        if poly:
            probes = default_probes(path)
            base = [*poly, "run", "--onnxrt", *poly_shapes(shapes)]
            out_json = str(CACHE / f"{key}_poly_outputs.json")
            ops["poly_layers"] = [*base[:2], str(path), *base[2:], "--onnx-outputs", *probes]
            ops["poly_layers_all"] = [*base[:2], str(path), *base[2:], "--onnx-outputs", "mark", "all"]
            # Polygraphy compares two models in two processes: save A's outputs (which must succeed), then run B
            # against them; B exits 1 when the outputs differ, as ours does, and on its errors too: its last line
            # (on stderr here) tells them apart (polygraphy_verdict). Every word quoted for the shell (shlex).
            save = shlex.join([*base[:2], str(path), *base[2:], "--onnx-outputs", "mark", "all", "--save-outputs", out_json])
            load = shlex.join([*base[:2], str(pert), *base[2:], "--onnx-outputs", "mark", "all", "--load-outputs", out_json])
            ops["poly_diff_all"] = ["bash", "-c", f"set -o pipefail; {save} || exit 90; {load} | tail -n 1 >&2"]
        res = measure(ops, args.repeat, label=f"{key}: ")
        with_ratios(res)
        results["models"][key] = res
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    report(results)
    if args.readme:
        write_readme(results, HERE.parent / "README.md")
    print(f"\nwritten: {args.json}")


def with_ratios(res: dict) -> None:
    """Each command's wall and rss over plain inference's, and over Polygraphy's doing the same (``poly_`` + op), in
    place: the medians of the per-round ratios (``paired``) of the rounds both ran in."""
    plain = res.get("plain", {})
    for op, r in res.items():
        ratio = paired(r, plain)
        if ratio:
            r["wall_vs_plain"], r["rss_vs_plain"] = ratio
        ratio = paired(r, res.get("poly_" + op, {}))
        if ratio:
            r["wall_vs_polygraphy"], r["rss_vs_polygraphy"] = ratio


def goal(op: str, r: dict) -> str:
    """The goal of ``op`` and whether ``r`` meets it, in words."""
    out = []
    if op in TARGETS and "wall_vs_plain" in r:
        w, m = TARGETS[op]
        ok = r["wall_vs_plain"] <= w and (m is None or r["rss_vs_plain"] <= m)
        out.append(f"{'met' if ok else 'MISSED'} (<={w}x wall" + (f", <={m}x rss)" if m else ")"))
    if op in POLY_SPEEDUP and "wall_vs_polygraphy" in r:
        need = POLY_SPEEDUP[op]
        ok = r["wall_vs_polygraphy"] <= 1 / need
        out.append(f"{'met' if ok else 'MISSED'}: " + ("faster than Polygraphy" if need == 1 else f">={need:g}x faster than Polygraphy"))
    return "; ".join(out)


def rows(results: dict) -> list[list[str]]:
    out = []
    for key, res in results["models"].items():
        for op, r in res.items():
            if "error" in r:
                out.append([key, op, "error", "", "", "", "", "", r["error"][:60]])
                continue

            def f(k, fmt="{:.2f}"):
                if k not in r:
                    return ""
                # a ratio just over its goal keeps a third digit: "2.00" beside MISSED (<=2.0x) read as a contradiction
                goals = TARGETS.get(op, (None, None))
                limit = goals[0] if k == "wall_vs_plain" else goals[1] if k == "rss_vs_plain" else None
                close = limit is not None and r[k] != limit and fmt.format(r[k]) == fmt.format(limit)
                return ("{:.3f}" if close else fmt).format(r[k])

            out.append([key, op, f("wall_s", "{:.3f}"), f"{r['rss_bytes'] / 2**20:.0f}", f("wall_vs_plain"), f("rss_vs_plain"),
                        f("wall_vs_polygraphy"), f("rss_vs_polygraphy"), goal(op, r)])
    return out


HEADERS = ("model", "operation", "wall s", "peak MB", "wall/plain", "rss/plain", "wall/polygraphy", "rss/polygraphy", "goal")


def report(results: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="onnxprobe benchmark (whole processes; ratios < 1 are better than the reference)")
    for c in HEADERS:
        t.add_column(c, justify="left" if c in ("model", "operation", "goal") else "right")
    for row in rows(results):
        t.add_row(*row)
    Console(width=170).print(t)


def markdown(results: dict) -> str:
    lines = [f"Measured by `python bench/run.py` on {results['cpus']} CPUs ({results['machine']}), median of "
             f"{results['repeat']} rounds (each command once a round; a ratio is the median of the rounds' ratios):", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows(results)]
    return "\n".join(lines)


def write_readme(results: dict, readme: Path) -> None:
    """Put the table between the README's bench markers."""
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    text = readme.read_text()
    if start not in text or end not in text:
        print(f"note: {readme} has no {start} ... {end} markers; table not written", file=sys.stderr)
        return
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + start + "\n" + markdown(results) + "\n" + end + tail)


if __name__ == "__main__":
    main()
