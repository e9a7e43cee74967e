"""Summarise a GPU sweep: best val BLEU, val beam at two length penalties, test greedy/beam (docs/experiments.md)."""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
print(f"{'run':10} {'upd':>5} {'min':>5} {'bestval':>7} {'ep':>3} {'lastval':>7} {'v-b1.0':>6} {'v-b2.5':>6} {'t-gr':>6} {'t-beam':>6} best")
def read(p):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None
for name in sys.argv[2:]:
    d = root / name
    lines = [json.loads(line) for line in open(d / "metrics.jsonl")] if (d / "metrics.jsonl").exists() else []
    vals = [v for v in lines if v.get("event") == "val"]
    if not vals:
        log = root / (name + ".log")
        print(f"{name:10} no validation yet; log: {log.read_text()[-300:] if log.exists() else ''!r}")
        continue
    best = max(vals, key=lambda v: v["bleu"])
    t = read(d / "test.json")
    vb = [read(root / f"{name}.val{lp}.json") for lp in ("1.0", "2.5")]
    vb = [f"{v['bleu']:6.2f}" if v else "     -" for v in vb]
    if t:
        beam = [k for k in t["scores"] if k != "greedy"][0]
        tail = f"{t['updates']:5} {t['training_minutes']:5.1f} {best['bleu']:7.2f} {best['epoch']:3} {vals[-1]['bleu']:7.2f} {vb[0]} {vb[1]} {t['scores']['greedy']['bleu']:6.2f} {t['scores'][beam]['bleu']:6.2f} {Path(t['best_checkpoint']).name}"
    else:
        tail = f"{vals[-1]['step']:5} {vals[-1]['elapsed'] / 60:5.1f} {best['bleu']:7.2f} {best['epoch']:3} {vals[-1]['bleu']:7.2f} (running)"
    print(f"{name:10} {tail}")
