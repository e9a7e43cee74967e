"""A rule-based sentence splitter in MiniSBD's format, for Argos Translate packages.

Argos Translate splits every paragraph into sentences with MiniSBD before translating, and MiniSBD
downloads a model from GitHub unless the package carries one (``minisbd/*.onnx``): a package
without it does not work offline. MiniSBD's own models (Stanza tokenizers in ONNX) exist only
for download, so the package carries this small ONNX graph instead, which MiniSBD runs like
its own.

What MiniSBD feeds the graph and reads back (``minisbd/modules``): ``units`` (paragraphs, batch
by characters, int64) are the characters' ids in the vocabulary stored in the file's metadata,
``features`` the per-character features its config names (none here); the output is a score per
character and label, of which the best is taken: 0 inside a word, 1 a word ends here, 2 a
sentence ends here. MiniSBD itself ends the last sentence at the paragraph's last character.

The rules: a word ends before whitespace or the end of the paragraph; a sentence ends at a word
ending in ``!``, ``?``, ``…`` or ``.``, or in a closing quote or bracket right after one of them,
but not at a period after a one-character word or an initial (``z. B.``, ``E.S.E.``, ``3.``).
Other abbreviations (``Dr.``, ``usw.``) do end a sentence, unlike with a trained model.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onnx import GraphProto, NodeProto

OPSET = 13  # ONNX Runtime 1.8 (2021) on: any Argos Translate with MiniSBD loads the graph
IR_VERSION = 7

# Character classes; a character not in the vocabulary (MiniSBD's <UNK>) is OTHER.
OTHER, SPACE, PERIOD, MARK, CLOSER = range(5)
CLASS_OF_CHARACTER = {
    "<PAD>": SPACE,  # after the paragraph's end; MiniSBD pads every paragraph with at least one
    "<UNK>": OTHER,
    " ": SPACE,  # MiniSBD turns every whitespace character into a space before the lookup
    ".": PERIOD,
    **dict.fromkeys("!?…", MARK),
    **dict.fromkeys("\"'”“’»«)]", CLOSER),
}
LABELS = 3  # inside a word, word end, sentence end


def sentence_splitter(lang: str) -> bytes:
    """The serialized ONNX model, with the metadata MiniSBD's ``create_session`` reads."""
    import onnx

    model = onnx.helper.make_model(
        _graph(),
        opset_imports=[onnx.helper.make_opsetid("", OPSET)],
        producer_name="mt",
        doc_string="A rule-based sentence splitter for MiniSBD (mt export --format argos)",
    )
    model.ir_version = IR_VERSION
    onnx.helper.set_model_props(model, _metadata(lang))
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def _metadata(lang: str) -> dict[str, str]:
    units = list(CLASS_OF_CHARACTER)
    vocab = {
        "lang": lang,
        "idx": 0,
        "cutoff": 0,
        "lower": False,
        "_id2unit": units,
        "_unit2id": {unit: i for i, unit in enumerate(units)},
    }
    config = {"feat_funcs": [], "use_dictionary": False, "num_dict_feat": 0, "batch_size": 32}
    return {
        "lang_code": lang,
        "config": json.dumps(config),
        "vocab": json.dumps(vocab, ensure_ascii=False),
        "lexicon": "null",
    }


class _Nodes:
    """The graph's nodes in order, each output named after its node (t0, t1, ...)."""

    def __init__(self) -> None:
        self.nodes: list[NodeProto] = []

    def __call__(self, op_type: str, *inputs: str, **attributes) -> str:
        import onnx

        name = f"t{len(self.nodes)}"
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), [name], name=name, **attributes))
        return name

    def const(self, value: object) -> str:
        import onnx

        return self("Constant", value=onnx.numpy_helper.from_array(np.asarray(value, dtype=np.int64)))


def _graph() -> GraphProto:
    import onnx

    g = _Nodes()
    table = [CLASS_OF_CHARACTER[unit] for unit in CLASS_OF_CHARACTER]
    cls = g("Gather", g.const(table), "units")  # (batch, chars): each character's class
    # Two columns before the text (SPACE: a paragraph starts a word) and one after it (OTHER: a
    # chunk of a paragraph over MiniSBD's max_seqlen may go on past its end), so that
    # neighbours are slices: column 2 + k of ``padded`` is each character's neighbour at k.
    padded = g("Pad", cls, g.const([0, 2, 0, 0]), g.const(SPACE))  # pads: begin dims 0, 1; end dims 0, 1
    padded = g("Pad", padded, g.const([0, 0, 0, 1]), g.const(OTHER))

    def neighbour(k: int) -> str:
        end = k - 1 if k < 1 else np.iinfo(np.int64).max  # the padding after the text is 1 column
        return g("Slice", padded, g.const([2 + k]), g.const([end]), g.const([1]))

    def either(*flags: str) -> str:
        return functools.reduce(lambda a, b: g("Or", a, b), flags)

    def is_class(tensor: str, *classes: int) -> str:
        return either(*(g("Equal", tensor, g.const(c)) for c in classes))

    before2, before, after = neighbour(-2), neighbour(-1), neighbour(1)
    word_end = g("And", g("Not", is_class(cls, SPACE)), is_class(after, SPACE))
    initial = g("And", is_class(before, OTHER), is_class(before2, SPACE, PERIOD))
    full_stop = g("And", is_class(cls, PERIOD), g("Not", initial))
    quoted = g("And", is_class(cls, CLOSER), is_class(before, PERIOD, MARK))
    sentence_end = g("And", word_end, either(full_stop, is_class(cls, MARK), quoted))
    label = g("Add", *(g("Cast", flag, to=onnx.TensorProto.INT64) for flag in (word_end, sentence_end)))
    one_hot = g("Equal", g("Unsqueeze", label, g.const([-1])), g.const(range(LABELS)))
    g.nodes.append(onnx.helper.make_node("Cast", [one_hot], ["scores"], to=onnx.TensorProto.FLOAT))

    return onnx.helper.make_graph(
        g.nodes,
        "sentence_splitter",
        inputs=[
            onnx.helper.make_tensor_value_info("units", onnx.TensorProto.INT64, ["batch", "chars"]),
            onnx.helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, ["batch", "chars", 0]),
        ],
        outputs=[
            onnx.helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, ["batch", "chars", LABELS])
        ],
    )
