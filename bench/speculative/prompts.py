"""The prompts of the speculative measurements (measure.py, measure_draft.py,
grounding.py), from ../shared's held-out text: a passage repeated, or
repeated with every ninth word dropped, then its first 80 characters
(input-grounded: the continuation can quote the prompt), and a stretch of
other text (free)."""


def heldout_text(shared):
    """The held-out text, with shared the folder holding data/text."""
    return (shared / "data" / "text" / "heldout.txt").read_text(encoding="utf-8")


def grounding_passage(shared):
    """The passage the input-grounded prompts repeat."""
    return heldout_text(shared)[1000:1600]


def spec_prompts(shared):
    """{kind: prompt}."""
    text = heldout_text(shared)
    passage = grounding_passage(shared)
    edited = " ".join(w for i, w in enumerate(passage.split(" ")) if i % 9 != 4)
    return {
        "input-grounded (repeated)": passage + "\n\n" + passage + "\n\n" + passage[:80],
        "input-grounded (edited)": passage + "\n\n" + edited + "\n\n" + passage[:80],
        "free text": text[5000:5400],
    }
