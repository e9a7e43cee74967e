"""Decode-time experiment: the glossary told with or without the German words (hidden form)."""
import importlib.util, json, sys
from pathlib import Path
import sacrebleu
import mt_cli
from mt_cli.config.options import TranslateOptions
from mt_cli.text.glossary import Glossary
from mt_cli.text import terms

spec = importlib.util.spec_from_file_location("tt", "/work/main/scripts/term-testset.py")
tt = importlib.util.module_from_spec(spec); spec.loader.exec_module(tt)
run, split, testset_path = sys.argv[1], sys.argv[2], sys.argv[3]
lps = [float(x) for x in sys.argv[4].split(",")]
sources, refs = tt.split_texts(split)
testset = tt.read(Path(testset_path))
pairs = sorted({(s, t) for _, s, t in testset})
glossary = Glossary.parse([f"{s}\t{t}" for s, t in pairs], "glossary", "de", "en")
model = mt_cli.load(run, device="cpu", processes=1, warn=lambda m: None)
def hidden_form(line):
    found = glossary.find(line)
    return terms.annotated(line, [(m, m.target) for m in found], frozenset(range(len(found))))
hidden = [hidden_form(s) for s in sources]
out = {}
for lp in lps:
    for name, lines, g, ph in (("glossary", sources, glossary, None), ("hidden", hidden, None, False), ("none", sources, None, None)):
        texts = [t.text for t in model.translate(lines, TranslateOptions(glossary=g, length_penalty=lp, placeholders=ph))]
        use = tt.use(testset, texts)
        out[f"{name}@{lp}"] = r = {"bleu": round(sacrebleu.corpus_bleu(texts, [refs]).score, 2), **use}
        print(run, split, name, lp, json.dumps(r), flush=True)
        Path(f"/tmp/s39/out/{Path(run).name}-{split}-{name}-{lp}.en").parent.mkdir(exist_ok=True, parents=True)
        Path(f"/tmp/s39/out/{Path(run).name}-{split}-{name}-{lp}.en").write_text("\n".join(texts) + "\n")
