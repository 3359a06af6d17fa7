"""Run in the mteb venv (tests/baselines/mteb_env.py): MTEB's own STS evaluation of a
sentence-transformers folder on given sentences and gold, no hub download.

stdin: JSON {"folder", "prompt", "datasets": {name: {"s1": [...], "s2": [...], "gold": [...]}}};
stdout: JSON {name: {"pearson", "spearman", "cosine_pearson", "cosine_spearman", "cosines"}}
plus "mteb"; "cosines" are the per-pair cosines mteb's evaluator scored (its predictions file).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main() -> None:
    """Score each dataset with mteb's STS12 task class given the dataset's pairs."""
    import mteb
    from datasets import Dataset
    from mteb.models import SentenceTransformerEncoderWrapper
    from mteb.tasks.sts.eng.sts12_sts import STS12STS
    from sentence_transformers import SentenceTransformer

    request = json.load(sys.stdin)
    st = SentenceTransformer(request["folder"], device="cpu", local_files_only=True)
    if request.get("prompt") is not None:  # mteb passes no prompt of its own for STS12
        st.default_prompt_name = None
        st.prompts = {"query": request["prompt"]}
        st.default_prompt_name = "query"
    model = SentenceTransformerEncoderWrapper(st)
    out: dict[str, object] = {"mteb": mteb.__version__}
    for name, data in request["datasets"].items():
        task = STS12STS()
        task.dataset = {"default": {"test": Dataset.from_dict(
            {"sentence1": data["s1"], "sentence2": data["s2"], "score": data["gold"]})}}
        task.data_loaded = True
        with tempfile.TemporaryDirectory() as tmp:
            scores = task.evaluate(model, "test", prediction_folder=Path(tmp),
                                   encode_kwargs={"batch_size": 64, "show_progress_bar": False})
            saved = json.loads(next(Path(tmp).glob("*.json")).read_text())
        row = scores["default"]
        out[name] = {k: float(row[k]) for k in ("pearson", "spearman", "cosine_pearson",
                                                 "cosine_spearman")}
        out[name]["cosines"] = [float(c) for c in saved["default"]["test"]["cosine_scores"]]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
