# Run from the repository root (scripts/gpu-sweep.sh runs it at the end of a sweep):
#   python scripts/gpu-sweep-summary.py RUNS_DIR NAME... [--val-files SUFFIX...]
"""Summarise a GPU sweep: best val BLEU, val beam, test greedy/beam (docs/results.md).

Val beam columns come from RUNS_DIR/NAME.valSUFFIX.json, one per SUFFIX (gpu-sweep.sh's
VAL_ALPHAS): "1.0 2.5" for two length penalties, "recipe" for the config's own (NAME.val.json).
"""

import json
import sys
from pathlib import Path

args = sys.argv[1:]
suffixes = ["1.0", "2.5"]
if "--val-files" in args:
    at = args.index("--val-files")
    args, suffixes = args[:at], ["" if a == "recipe" else a for a in args[at + 1 :]]
root, names = Path(args[0]), args[1:]


def read(p):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


heads = " ".join(f"{'v-b' + (s or 'eam'):>6}" for s in suffixes)
print(
    f"{'run':10} {'upd':>5} {'min':>5} {'bestval':>7} {'ep':>3} {'lastval':>7} {heads} "
    f"{'t-gr':>6} {'t-beam':>6} best"
)
for name in names:
    d = root / name
    lines = [json.loads(line) for line in open(d / "metrics.jsonl")] if (d / "metrics.jsonl").exists() else []
    vals = [v for v in lines if v.get("event") == "val"]
    if not vals:
        log = root / (name + ".log")
        print(f"{name:10} no validation yet; log: {log.read_text()[-300:] if log.exists() else ''!r}")
        continue
    best = max(vals, key=lambda v: v["bleu"])
    t = read(d / "test.json")
    vb = [read(root / f"{name}.val{s}.json") for s in suffixes]
    vb = " ".join(f"{v['bleu']:6.2f}" if v else "     -" for v in vb)
    head = f"{best['bleu']:7.2f} {best['epoch']:3} {vals[-1]['bleu']:7.2f} {vb}"
    if t:
        beam = [k for k in t["scores"] if k != "greedy"][0]
        greedy, beamed = t["scores"]["greedy"]["bleu"], t["scores"][beam]["bleu"]
        scores = f"{greedy:6.2f} {beamed:6.2f} {Path(t['best_checkpoint']).name}"
        print(f"{name:10} {t['updates']:5} {t['training_minutes']:5.1f} {head} {scores}")
    else:
        print(
            f"{name:10} {vals[-1]['step']:5} {vals[-1]['elapsed'] / 60:5.1f} {head}"
            "      -      - (no test.json)"
        )
