"""Checking uploaded encoders: accepted layouts, and every refusal naming its file."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from baseline_support import missing

from baselines.models import ModelLimits, check_model, unpack_model_archive
from evaluation.issues import ValidationError


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        missing(f"transformers/tokenizers are not installed (dev and gpu extras): {exc}")
    from models_support import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("models") / "bert", "bert", pooling="cls")


@pytest.fixture
def model(tiny_bert: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny BERT folder, free to damage."""
    folder = tmp_path / "model"
    for src in tiny_bert.rglob("*"):
        if src.is_file():
            dst = folder / src.relative_to(tiny_bert)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    return folder


def _state(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _codes(check) -> list[tuple[str | None, str]]:
    return [(i.file, i.code) for i in check.issues]


def _edit_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def test_a_tiny_bert_is_described_from_headers_alone(model: Path) -> None:
    import transformers

    check = check_model(model)
    assert check.ok, check.issues
    d = check.description
    assert d is not None
    hf = transformers.BertModel.from_pretrained(str(model), add_pooling_layer=False)
    assert d.n_parameters == sum(p.numel() for p in hf.parameters())
    assert (d.model_type, d.architecture, d.hidden_size, d.layers) == ("bert", "BertModel", 32, 2)
    assert (d.pooling, d.normalize, d.prompt, d.max_seq_length) == ("cls", True, "", 64)
    assert set(d.files) == set(_state(model)) and d.weights_dtype == "F32"


def test_the_digest_covers_every_file(model: Path) -> None:
    before = check_model(model).description
    (model / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}))
    after = check_model(model).description
    assert before is not None and after is not None
    assert after.digest != before.digest and after.pooling == "mean"


def test_form_overrides_prompt_and_pooling(model: Path) -> None:
    d = check_model(model, prompt="query: ", pooling="max").description
    assert d is not None and (d.prompt, d.pooling) == ("query: ", "max")
    assert _codes(check_model(model, pooling="sum")) == [(None, "pooling")]


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "optimizer.pkl",
                                  "1_Pooling/weights.pth"])
def test_pickle_files_are_refused_by_name(model: Path, name: str) -> None:
    (model / name).write_bytes(b"\x80\x04K\x01.")  # a real (tiny) pickle
    before = _state(model)
    check = check_model(model)
    assert not check.ok and check.description is None
    assert (name, "refused-file") in _codes(check)
    assert "pickle" in str(check.issues[0]) and name in str(check.issues[0])
    assert _state(model) == before


def test_code_and_unknown_files_are_refused(model: Path) -> None:
    (model / "modeling_evil.py").write_text("import os\n")
    (model / "notes.dat").write_text("x")
    assert set(_codes(check_model(model))) == {("modeling_evil.py", "refused-file"),
                                               ("notes.dat", "unknown-file")}


def test_auto_map_is_refused(model: Path) -> None:
    _edit_config(model, auto_map={"AutoModel": "modeling_evil.EvilModel"})
    check = check_model(model)
    assert ("config.json", "custom-code") in _codes(check)
    assert "auto_map" in str(check.issues[0])


def test_custom_tokenizer_code_and_modules_are_refused(model: Path) -> None:
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["tok.EvilTokenizer", None]}
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    modules = json.loads((model / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense",
                    "type": "sentence_transformers.models.Dense"})
    (model / "modules.json").write_text(json.dumps(modules))
    assert set(_codes(check_model(model))) == {("tokenizer_config.json", "custom-code"),
                                               ("modules.json", "custom-code")}


@pytest.mark.parametrize("changes", [{"model_type": "llama"},
                                     {"architectures": ["BertForSequenceClassification"]},
                                     {"is_decoder": True}])
def test_unknown_architectures_are_refused(model: Path, changes: dict) -> None:
    _edit_config(model, **changes)
    assert ("config.json", "architecture") in _codes(check_model(model))


@pytest.mark.parametrize(("key", "value"), [("hidden_size", 65536),
                                            ("num_hidden_layers", 1000),
                                            ("vocab_size", 10_000_000),
                                            ("max_position_embeddings", 1 << 20)])
def test_an_oversize_config_is_refused_before_anything_is_built(model: Path, key: str,
                                                                 value: int) -> None:
    _edit_config(model, **{key: value})
    check = check_model(model)
    assert ("config.json", "limit") in _codes(check)
    assert any(key in i.message and "exceeds the limit" in i.message for i in check.issues)


def test_parameters_files_and_sizes_have_limits(model: Path) -> None:
    n = check_model(model).description.n_parameters  # type: ignore[union-attr]
    assert _codes(check_model(model, ModelLimits(max_parameters=n - 1))) == [(None, "limit")]
    assert check_model(model, ModelLimits(max_parameters=n)).ok
    assert ("model.safetensors", "limit") in _codes(
        check_model(model, ModelLimits(max_file_bytes=50_000)))
    assert (None, "limit") in _codes(check_model(model, ModelLimits(max_files=3)))


def test_a_truncated_or_lying_safetensors_file_is_refused(model: Path) -> None:
    path = model / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    check = check_model(model)
    assert _codes(check) == [("model.safetensors", "bad-weights")]
    path.write_bytes((1 << 40).to_bytes(8, "little") + data[8:])
    assert "header length" in str(check_model(model).issues[0])


def test_missing_weights_and_tokenizer_are_named(model: Path) -> None:
    (model / "model.safetensors").unlink()
    (model / "tokenizer.json").unlink()
    assert {c for _, c in _codes(check_model(model))} == {"no-weights", "no-tokenizer"}


def test_sharded_weights_are_read_through_the_index(model: Path) -> None:
    from safetensors.numpy import load_file, save_file

    n = check_model(model).description.n_parameters  # type: ignore[union-attr]
    tensors = load_file(str(model / "model.safetensors"))
    (model / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(model / shard))
    index = {"weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    check = check_model(model)
    assert check.ok and check.description is not None and check.description.n_parameters == n
    (model / "model-00002-of-00002.safetensors").unlink()
    assert ("model.safetensors.index.json", "bad-index") in _codes(check_model(model))


def _zip_folder(folder: Path, archive: Path, top: str = "my-model") -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, f"{top}/{p.relative_to(folder).as_posix()}")
    return archive


def test_a_zip_unpacks_to_the_same_model(model: Path, tmp_path: Path) -> None:
    archive = _zip_folder(model, tmp_path / "upload.zip")
    out = unpack_model_archive(archive, tmp_path / "unpacked")
    a, b = check_model(model).description, check_model(out).description
    assert a is not None and b is not None and a.digest == b.digest


def test_a_zip_bomb_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf, \
            zf.open("model.safetensors", "w") as out:
        block = bytes(1 << 20)
        for _ in range(101):  # 101 MiB of zeros: ~100 KiB compressed, past 100x
            out.write(block)
    assert archive.stat().st_size < 1 << 20
    with pytest.raises(ValidationError) as err:
        unpack_model_archive(archive, tmp_path / "unpacked")
    assert err.value.issues[0].code == "archive-too-large"
    assert "bomb.zip" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.zip"]


def test_a_zip_with_a_pickle_or_a_parent_path_is_refused(model: Path, tmp_path: Path) -> None:
    (model / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(ValidationError) as err:
        unpack_model_archive(_zip_folder(model, tmp_path / "a.zip"), tmp_path / "out")
    assert err.value.issues[0].file == "pytorch_model.bin"
    evil = tmp_path / "b.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../config.json", "{}")
    with pytest.raises(ValidationError, match="parent"):
        unpack_model_archive(evil, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValidationError, match="not a readable zip"):
        unpack_model_archive(model / "config.json", tmp_path / "out")


def _with_prompts(model: Path, default: str | None = None) -> None:
    (model / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "passage": "passage: "},
         "default_prompt_name": default}))


def test_prompts_follow_sentence_transformers_and_can_be_chosen(model: Path) -> None:
    _with_prompts(model)  # prompts but no default: sentence-transformers applies none
    d = check_model(model).description
    assert d is not None and (d.prompt, d.prompt_source, d.prompt_name) == ("", "none", None)
    _with_prompts(model, "query")
    d = check_model(model).description
    assert d is not None and (d.prompt, d.prompt_source, d.prompt_name) == (
        "query: ", "default", "query")
    d = check_model(model, prompt_name="passage").description
    assert d is not None and (d.prompt, d.prompt_b, d.prompt_source) == (
        "passage: ", None, "named")
    d = check_model(model, prompt_name="query,passage").description
    assert d is not None and (d.prompt, d.prompt_b, d.prompt_name_b) == (
        "query: ", "passage: ", "passage")
    d = check_model(model, prompt="").description  # an explicit empty prompt: none
    assert d is not None and (d.prompt, d.prompt_source) == ("", "none")
    unknown = check_model(model, prompt_name="document")
    assert _codes(unknown) == [("config_sentence_transformers.json", "prompt")]
    assert "query" in str(unknown.issues[0]) and "passage" in str(unknown.issues[0])
    assert _codes(check_model(model, prompt="x", prompt_name="query")) == [(None, "prompt")]


@pytest.mark.parametrize(("changes", "words"), [
    ({"tokenizer_class": "LlamaTokenizer"}, "tokenizer_class 'LlamaTokenizer'"),
    ({"tokenizer_file": "/etc/passwd"}, "tokenizer_file"),
    ({"vocab_file": "../vocab.txt"}, "vocab_file")])
def test_tokenizer_config_names_an_accepted_class_and_no_file(model: Path, changes: dict,
                                                              words: str) -> None:
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg.update(changes)
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    check = check_model(model)
    assert _codes(check) == [("tokenizer_config.json", "bad-tokenizer")]
    assert words in str(check.issues[0])


def test_a_model_runs_signature_says_prompt_and_mapping() -> None:
    from baselines.signature import baseline_signature, prompt_label

    meta = {"system": "model", "model_id": "BertModel", "weights_sha256": "a" * 64,
            "tokenizer": "tokenizer.json", "dtype": "float32", "device_class": "cpu",
            "score_mapping": "linear", "prompt": "", "prompt_b": None}
    assert baseline_signature(meta).endswith("|prompt:none|map:linear")
    meta |= {"prompt": "query: ", "prompt_name": "query", "score_mapping": "clip"}
    assert baseline_signature(meta).endswith('|prompt:query="query: "|map:clip')
    meta |= {"prompt_b": "a|b", "prompt_name_b": None}
    assert prompt_label(meta) == 'query="query: ","a\\u007cb"'  # '|' never splits a field
    baseline = {k: v for k, v in meta.items() if k != "score_mapping"}
    assert "prompt:" not in baseline_signature(baseline)  # baseline runs' signatures unchanged


def test_clipping_is_counted_and_summed_for_the_board() -> None:
    import numpy as np

    from baselines.models.job import clipped_pairs, cosine_to_scores
    from semboard.services.boards.leaderboard import model_summary

    cos = np.array([-0.4, -0.1, 0.0, 0.3, 1.0])
    assert clipped_pairs(cos, "clip") == 2 and clipped_pairs(cos, "linear") == 0
    assert list(cosine_to_scores(cos, 0, 5, "clip")[:2]) == [0.0, 0.0]  # what was moved
    row = model_summary({"system": "model", "score_mapping": "clip", "prompt": "query: ",
                         "prompt_name": "query", "clipped_pairs": {"MSRvid": 2, "MSRpar": 1}})
    assert row is not None and row["clipped"] == 3 and row["prompt_label"] == 'query="query: "'


def _rewrite_header(path: Path, change) -> None:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    text = change(header) if callable(change) else change
    raw = (text if isinstance(text, str) else json.dumps(text)).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n:])


def test_overlapping_tensors_are_refused_at_the_check(model: Path) -> None:
    """Two tensors sharing bytes load as aliased weights: refused before any job."""
    def overlap(header):
        sizes: dict[int, str] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, stop = info["data_offsets"]
            if stop - start in sizes:
                header[name]["data_offsets"] = header[sizes[stop - start]]["data_offsets"]
                return header
            sizes[stop - start] = name
        raise AssertionError("no two tensors of one size")

    _rewrite_header(model / "model.safetensors", overlap)
    check = check_model(model)
    assert _codes(check) == [("model.safetensors", "bad-weights")]
    assert "overlap" in str(check.issues[0])


@pytest.mark.parametrize("where", ["config.json", "model.safetensors", "modules.json"])
def test_deeply_nested_json_is_an_issue_not_a_recursion_error(model: Path, where: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    if where == "model.safetensors":
        _rewrite_header(model / where, '{"__metadata__": ' + deep + "}")
    else:
        (model / where).write_text('{"x": ' + deep + "}")
    check = check_model(model)
    assert not check.ok
    assert any(i.file == where and "nested" in i.message for i in check.issues), check.issues


@pytest.mark.parametrize("kind", ["bert", "xlm-roberta", "mpnet"])
def test_the_config_estimate_counts_the_weights(tmp_path: Path, kind: str) -> None:
    """The estimate from config.json alone equals the tensors' count of a real folder."""
    from models_support import write_tiny_model

    from baselines.models.bounds import parameter_estimate

    folder = write_tiny_model(tmp_path / kind, kind)
    check = check_model(folder)
    assert check.ok and check.description is not None
    cfg = json.loads((folder / "config.json").read_text())
    assert parameter_estimate(cfg) == check.description.n_parameters


@pytest.mark.parametrize(("change", "message"), [
    ({"intermediate_size": 10**9}, "intermediate_size 1,000,000,000 exceeds the limit"),
    ({"intermediate_size": 16000, "num_hidden_layers": 40}, "but the weights hold"),
    ({"type_vocab_size": 10**8}, "type_vocab_size must be an integer"),
])
def test_config_sizes_are_bounded_before_anything_is_built(model: Path, change, message
                                                           ) -> None:
    """A tiny zip whose config.json describes a huge model is refused at the check, before a
    job would build it (transformers allocates from config.json first)."""
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, **change}))
    check = check_model(model)
    assert not check.ok and any(message in i.message for i in check.issues), check.issues


def test_the_memory_estimate_and_tokenizer_limits(model: Path) -> None:
    assert not check_model(model, ModelLimits(max_memory_bytes=1 << 20)).ok
    assert check_model(model, ModelLimits(max_memory_bytes=1 << 30)).ok
    size = (model / "tokenizer.json").stat().st_size
    small = check_model(model, ModelLimits(max_tokenizer_bytes=size - 1))
    assert ("tokenizer.json", "limit") in _codes(small)
    few = check_model(model, ModelLimits(max_vocab=10))
    assert any("vocabulary entries, over the limit of 10" in i.message for i in few.issues)
