"""Checking an uploaded sentence encoder without building it: file names, config, headers.

Only `config.json`, the sentence-transformers JSON files, `tokenizer.json` and the safetensors
headers (8-byte length + JSON) are read; no tensor data is loaded and no code is imported, so a
check costs milliseconds and cannot execute anything the team wrote.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from baselines.models.bounds import config_issues
from baselines.models.facts import MAX_PROMPT_CHARS
from evaluation import jsonbound
from evaluation.issues import Issue
from evaluation.textfiles import file_sha256

# model_type → (transformers class that builds it, accepted `architectures` entries)
ARCHITECTURES: dict[str, tuple[str, frozenset[str]]] = {
    "bert": ("BertModel", frozenset({"BertModel", "BertForMaskedLM", "BertForPreTraining"})),
    "xlm-roberta": ("XLMRobertaModel",
                    frozenset({"XLMRobertaModel", "XLMRobertaForMaskedLM"})),
    "roberta": ("RobertaModel", frozenset({"RobertaModel", "RobertaForMaskedLM"})),
    "mpnet": ("MPNetModel", frozenset({"MPNetModel", "MPNetForMaskedLM"})),
}
# models whose position ids start after the padding index (fairseq numbering)
PADDING_OFFSET_TYPES = frozenset({"xlm-roberta", "roberta", "mpnet"})

# weights in these formats are pickles (or may hold one): loading them can run code
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz",
                   ".h5", ".msgpack", ".ot")
CODE_SUFFIXES = (".py", ".pyc", ".so", ".sh", ".ipynb")
# files read by the check or the encoder, and harmless documentation
KNOWN_FILES = frozenset({
    "config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "modules.json",
    "config_sentence_transformers.json", "sentence_bert_config.json", "1_Pooling/config.json",
    "README.md", "LICENSE", "LICENSE.txt", "LICENSE.md", ".gitattributes", "vocab.txt",
    "sentencepiece.bpe.model", "merges.txt", "vocab.json", "added_tokens.json",
})
SHARD_NAME = re.compile(r"^model-\d{5}-of-\d{5}\.safetensors$")
# sentence-transformers modules that are pure configuration (no weights, no code of the team)
ST_MODULES = {
    "sentence_transformers.models.Transformer": "transformer",
    "sentence_transformers.base.modules.transformer.Transformer": "transformer",
    "sentence_transformers.base.modules.Transformer": "transformer",
    "sentence_transformers.models.Pooling": "pooling",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling": "pooling",
    "sentence_transformers.sentence_transformer.modules.Pooling": "pooling",
    "sentence_transformers.models.Normalize": "normalize",
    "sentence_transformers.sentence_transformer.modules.normalize.Normalize": "normalize",
    "sentence_transformers.sentence_transformer.modules.Normalize": "normalize",
}
POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len_tokens", "lasttoken")
_LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                   "pooling_mode_max_tokens": "max",
                   "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                   "pooling_mode_weightedmean_tokens": "weightedmean",
                   "pooling_mode_lasttoken": "lasttoken"}
SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                      "I8": 1, "U8": 1, "BOOL": 1}
# tokenizer classes transformers builds for the accepted architectures (`tokenizer_class` of
# tokenizer_config.json): the encoder asks transformers for the folder's tokenizer, as
# sentence-transformers does, so the class (never code) comes from this list
TOKENIZER_CLASSES = frozenset({
    f"{base}{fast}" for base in ("BertTokenizer", "XLMRobertaTokenizer", "RobertaTokenizer",
                                 "MPNetTokenizer", "PreTrainedTokenizer") for fast in ("", "Fast")
} | {"TokenizersBackend"})
MAX_JSON_BYTES = 64 << 20  # tokenizer.json of a 250k-piece vocabulary is ~17 MB
MAX_HEADER_BYTES = 16 << 20


@dataclass(frozen=True)
class ModelLimits:
    """What the organiser's host accepts; checked before anything is allocated."""

    max_files: int = 64
    max_file_bytes: int = 5 << 30
    max_total_bytes: int = 6 << 30
    max_parameters: int = 1_000_000_000
    max_hidden: int = 2048
    max_layers: int = 48
    max_vocab: int = 300_000
    max_positions: int = 8194  # max_position_embeddings, XLM-R style offset included
    max_seq_length: int = 8192
    max_intermediate: int = 16384
    max_memory_bytes: int = 16 << 30  # what config.json implies: weights + one batch
    max_tokenizer_bytes: int = 32 << 20  # tokenizer.json (a 250k vocabulary is ~17 MB)


@dataclass
class ModelDescription:
    """What a checked model is: the facts a run records about the weights that produced it."""

    digest: str  # sha256 over every file's path and sha256 (see model_digest)
    files: dict[str, str]  # path → sha256
    total_bytes: int
    model_type: str
    architecture: str  # the transformers class that builds it
    n_parameters: int
    hidden_size: int
    layers: int
    vocab_size: int
    max_seq_length: int  # where texts are cut: the model's own, a phase's limit or a choice
    weights_dtype: str
    pooling: str
    normalize: bool
    prompt: str  # the prefix put before every text (the first text of a pair, see prompt_b)
    prompts: dict[str, str] = field(default_factory=dict)  # all prompts the folder names
    # where the prompt came from: "default" (default_prompt_name), "named", "given" or "none"
    prompt_source: str = "none"
    prompt_name: str | None = None  # the folder's name of the prompt in use
    prompt_b: str | None = None  # the second text's prefix when it differs (one per side)
    prompt_name_b: str | None = None
    tokenizer_class: str | None = None
    do_lower_case: bool = False
    pad_token_id: int = 0
    tokenizer_sha256: str = ""
    model_max_seq_length: int = 0  # the folder's own length (sentence_bert_config, positions)
    weights_sha256: str | None = None  # model.safetensors' sha256 (weights_digest)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class ModelCheck:
    """The outcome of checking a model folder: issues, and the description when there are none."""

    issues: list[Issue]
    description: ModelDescription | None

    @property
    def ok(self) -> bool:
        """True when the model may be encoded."""
        return not self.issues and self.description is not None


def model_digest(files: Mapping[str, str]) -> str:
    """One sha256 over all files: sorted `path NUL sha256 LF` lines, so names count too."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(f"{path}\0{files[path]}\n".encode())
    return h.hexdigest()


def weights_digest(files: Mapping[str, str]) -> str | None:
    """The sha256 of the weights: model.safetensors' own, or for a sharded model one digest
    over its shards (as model_digest makes it over every file); None without weights."""
    if "model.safetensors" in files:
        return files["model.safetensors"]
    shards = {p: h for p, h in files.items() if SHARD_NAME.match(p)}
    return model_digest(shards) if shards else None


def _list_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() or p.is_symlink())


def refused_name(path: str) -> str | None:
    """Why a file name is refused before its content is read (pickles, code), else None."""
    lower = path.lower()
    if lower.endswith(PICKLE_SUFFIXES):
        return ("pickle-format weights are refused (loading a pickle can run code): upload "
                "the weights as model.safetensors")
    if lower.endswith(CODE_SUFFIXES):
        return "code files are refused: no participant code is ever run"
    return None


def _read_json(folder: Path, rel: str, issues: list[Issue]) -> dict[str, Any] | None:
    path = folder / rel
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            issues.append(Issue(rel, None, f"larger than {MAX_JSON_BYTES >> 20} MiB", "too-large"))
            return None
        data = jsonbound.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(Issue(rel, None, f"cannot be read ({exc})", "unreadable"))
        return None
    except json.JSONDecodeError as exc:
        issues.append(Issue(rel, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})",
                            "bad-json"))
        return None
    if not isinstance(data, dict):
        issues.append(Issue(rel, None, "must hold a JSON object", "bad-json"))
        return None
    return data


def safetensors_header(path: Path, rel: str) -> tuple[dict[str, Any], list[Issue]]:
    """The tensor table of a safetensors file (name → dtype, shape), checked against its size."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        head = stream.read(8)
        if len(head) < 8:
            return {}, [Issue(rel, None, "not a safetensors file (shorter than 8 bytes)",
                              "bad-weights")]
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER_BYTES, size - 8):
            return {}, [Issue(rel, None, f"not a safetensors file (header length {n} does not "
                              f"fit the file's {size} bytes)", "bad-weights")]
        try:
            table = jsonbound.loads(stream.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return {}, [Issue(rel, None, f"safetensors header is not JSON ({exc})",
                              "bad-weights")]
    if not isinstance(table, dict):
        return {}, [Issue(rel, None, "safetensors header is not a JSON object", "bad-weights")]
    table.pop("__metadata__", None)
    data_bytes = size - 8 - n
    tensors: dict[str, Any] = {}
    for name, info in table.items():
        try:
            dtype, shape, (start, stop) = info["dtype"], info["shape"], info["data_offsets"]
            count = 1
            for dim in shape:
                if not isinstance(dim, int) or dim < 0:
                    raise ValueError(f"bad dimension {dim!r}")
                count *= dim
        except (KeyError, TypeError, ValueError) as exc:
            return {}, [Issue(rel, None, f"tensor {name!r} has a malformed header entry ({exc})",
                              "bad-weights")]
        if dtype not in SAFETENSORS_DTYPES:
            return {}, [Issue(rel, None, f"tensor {name!r} has unsupported dtype {dtype!r}",
                              "bad-weights")]
        if not (0 <= start <= stop <= data_bytes
                and stop - start == count * SAFETENSORS_DTYPES[dtype]):
            return {}, [Issue(rel, None, f"tensor {name!r}: offsets {start}..{stop} do not fit "
                              f"its shape {shape} or the file", "bad-weights")]
        tensors[name] = {"dtype": dtype, "shape": shape, "count": count,
                         "span": (start, stop)}
    # tensors may not share bytes: overlapping views would load as aliased weights
    reach, holder = 0, ""  # the furthest byte a tensor so far covers, and that tensor
    for (start, stop), name in sorted((t.pop("span"), name) for name, t in tensors.items()):
        if stop > start and start < reach:
            return {}, [Issue(rel, None, f"tensors {holder!r} and {name!r} overlap (bytes "
                              f"{start}..{min(stop, reach)})", "bad-weights")]
        if stop > reach:
            reach, holder = stop, name
    return tensors, []


def _weight_files(folder: Path, names: list[str], issues: list[Issue]) -> list[str]:
    """The safetensors files holding the weights: one file, or the shards of the index."""
    if "model.safetensors" in names:
        return ["model.safetensors"]
    if "model.safetensors.index.json" not in names:
        issues.append(Issue(None, None, "no weights: upload model.safetensors (or sharded "
                            "model-0000k-of-0000n.safetensors with model.safetensors.index.json)",
                            "no-weights"))
        return []
    index = _read_json(folder, "model.safetensors.index.json", issues)
    if index is None:
        return []
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        issues.append(Issue("model.safetensors.index.json", None, "has no weight_map object",
                            "bad-index"))
        return []
    shards = sorted(set(map(str, weight_map.values())))
    for shard in shards:
        if not SHARD_NAME.match(shard):
            issues.append(Issue("model.safetensors.index.json", None,
                                f"names shard {shard!r}; shards must be named "
                                "model-0000k-of-0000n.safetensors", "bad-index"))
        elif shard not in names:
            issues.append(Issue("model.safetensors.index.json", None,
                                f"names shard {shard!r}, which was not uploaded", "bad-index"))
    return [s for s in shards if s in names and SHARD_NAME.match(s)]


def _config_int(cfg: Mapping[str, Any], key: str, issues: list[Issue]) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        issues.append(Issue("config.json", None, f"{key} must be a positive integer, not "
                            f"{value!r}", "bad-config"))
        return 0
    return value


def _check_config(cfg: dict[str, Any], limits: ModelLimits,
                  issues: list[Issue]) -> tuple[str, str]:
    """model_type and the class that builds it; refusals for custom code and oversize shapes."""
    if "auto_map" in cfg:
        issues.append(Issue("config.json", None, "auto_map names custom model code; only the "
                            "listed architectures are built, with transformers' own classes",
                            "custom-code"))
    model_type = cfg.get("model_type")
    if model_type not in ARCHITECTURES:
        issues.append(Issue("config.json", None, f"model_type {model_type!r} is not supported "
                            f"(supported: {', '.join(sorted(ARCHITECTURES))})", "architecture"))
        return str(model_type), ""
    cls, accepted = ARCHITECTURES[model_type]
    archs = cfg.get("architectures") or [cls]
    if not isinstance(archs, list) or any(a not in accepted for a in archs):
        issues.append(Issue("config.json", None, f"architectures {archs!r} are not supported for "
                            f"{model_type} (accepted: {', '.join(sorted(accepted))})",
                            "architecture"))
    if cfg.get("is_decoder") or cfg.get("add_cross_attention"):
        issues.append(Issue("config.json", None, "decoder configurations are not sentence "
                            "encoders (is_decoder / add_cross_attention)", "architecture"))
    for key, limit in (("hidden_size", limits.max_hidden), ("num_hidden_layers", limits.max_layers),
                       ("vocab_size", limits.max_vocab),
                       ("max_position_embeddings", limits.max_positions)):
        value = _config_int(cfg, key, issues)
        if value > limit:
            issues.append(Issue("config.json", None, f"{key} {value:,} exceeds the limit "
                                f"{limit:,}", "limit"))
    heads = _config_int(cfg, "num_attention_heads", issues)
    hidden = cfg.get("hidden_size")
    if heads and isinstance(hidden, int) and hidden % heads:
        issues.append(Issue("config.json", None, f"hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {heads}", "bad-config"))
    return model_type, cls


def _pooling(folder: Path, names: list[str], issues: list[Issue]) -> tuple[str, bool]:
    """Pooling mode and normalisation from modules.json and 1_Pooling/config.json (mean, no)."""
    pooling, normalize = "mean", False  # what sentence-transformers does for a plain folder
    if "modules.json" in names:
        modules = None
        try:
            modules = jsonbound.loads((folder / "modules.json").read_bytes())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            issues.append(Issue("modules.json", None, f"not valid JSON ({exc})", "bad-json"))
        if modules is not None:
            if not isinstance(modules, list):
                issues.append(Issue("modules.json", None, "must hold a JSON list", "bad-json"))
                modules = []
            for m in modules:
                kind = ST_MODULES.get(str(m.get("type"))) if isinstance(m, dict) else None
                if kind is None:
                    issues.append(Issue("modules.json", None, f"module {m!r} is not supported "
                                        "(only Transformer, Pooling and Normalize: no Dense "
                                        "layers or custom modules)", "custom-code"))
                elif kind == "transformer" and m.get("path", "") not in ("", "."):
                    issues.append(Issue("modules.json", None, "the Transformer module must sit "
                                        "at the top of the folder (path \"\")", "layout"))
                normalize = normalize or kind == "normalize"
    if "1_Pooling/config.json" in names:
        cfg = _read_json(folder, "1_Pooling/config.json", issues) or {}
        mode = cfg.get("pooling_mode")
        if mode is None:
            modes = [m for k, m in _LEGACY_POOLING.items() if cfg.get(k)]
            mode = modes[0] if len(modes) == 1 else (modes or ["mean"])
        if isinstance(mode, list) and len(mode) == 1:
            mode = mode[0]
        if mode not in POOLING_MODES:
            issues.append(Issue("1_Pooling/config.json", None, f"pooling {mode!r} is not "
                                f"supported (one of: {', '.join(POOLING_MODES)})", "pooling"))
        else:
            pooling = str(mode)
        if cfg.get("include_prompt") is False:
            issues.append(Issue("1_Pooling/config.json", None, "include_prompt false is not "
                                "supported: the prompt's tokens are pooled", "pooling"))
    return pooling, normalize


def _prompts(folder: Path, names: list[str], issues: list[Issue]
             ) -> tuple[dict[str, str], str | None]:
    """The folder's prompts and the name of the default one (None when none is)."""
    if "config_sentence_transformers.json" not in names:
        return {}, None
    cfg = _read_json(folder, "config_sentence_transformers.json", issues) or {}
    prompts = cfg.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        issues.append(Issue("config_sentence_transformers.json", None,
                            "prompts must map names to strings", "bad-config"))
        return {}, None
    long = sorted(k for k, v in prompts.items() if len(v) > MAX_PROMPT_CHARS or len(k) > 200)
    if long:
        issues.append(Issue("config_sentence_transformers.json", None,
                            f"prompt(s) {', '.join(repr(k[:40]) for k in long[:5])}: a prompt "
                            f"has at most {MAX_PROMPT_CHARS:,} characters (and its name 200)",
                            "prompt"))
        return {}, None
    default = cfg.get("default_prompt_name")
    if default is not None and default not in prompts:
        issues.append(Issue("config_sentence_transformers.json", None,
                            f"default_prompt_name {default!r} is not among the prompts",
                            "bad-config"))
        return prompts, None
    return prompts, default or None


def prompt_problem(prompt: str | None, prompt_name: str | None) -> str | None:
    """Why a prompt or prompt name given at upload is refused (None: it is not): both are
    bounded, and stored with the model and its run."""
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        return f"the prompt has {len(prompt):,} characters; at most {MAX_PROMPT_CHARS:,}"
    if prompt_name is not None and len(prompt_name) > 401:
        return "the prompt name has more than 400 characters (two names of 200 at most)"
    return None


def choose_prompts(prompts: Mapping[str, str], default: str | None, *, prompt: str | None,
                   prompt_name: str | None, issues: list[Issue]) -> dict[str, Any]:
    """The prompt of each side, as sentence-transformers picks it: a given text, else a named
    prompt of the folder ("name", or "name_a,name_b" for one per side), else the folder's
    default_prompt_name, else none. The ModelDescription fields prompt, prompt_b, their names
    and prompt_source."""
    if prompt is not None and prompt_name:
        issues.append(Issue(None, None, "give a prompt or a prompt name, not both", "prompt"))
    problem = prompt_problem(prompt, prompt_name)
    if problem is not None:
        issues.append(Issue(None, None, problem, "prompt"))
        return {"prompt": "", "prompt_source": "none"}
    if prompt is not None:
        return {"prompt": prompt, "prompt_source": "given" if prompt else "none"}
    if prompt_name:
        chosen = [n.strip() for n in prompt_name.split(",")]
        unknown = [n for n in chosen if n not in prompts]
        if len(chosen) > 2 or unknown:
            known = ", ".join(sorted(prompts)) or "none"
            issues.append(Issue("config_sentence_transformers.json", None,
                                f"prompt name {prompt_name!r}: give one of the folder's prompt "
                                f"names, or two separated by a comma (one per side); the "
                                f"folder names: {known}", "prompt"))
            return {"prompt": "", "prompt_source": "none"}
        a, b = chosen[0], chosen[-1]
        return {"prompt": prompts[a], "prompt_name": a, "prompt_source": "named",
                "prompt_b": prompts[b] if b != a else None, "prompt_name_b": b if b != a else None}
    if default is not None:
        return {"prompt": prompts[default], "prompt_name": default, "prompt_source": "default"}
    return {"prompt": "", "prompt_source": "none"}


def _tokenizer(folder: Path, cfg: Mapping[str, Any], names: list[str],
                issues: list[Issue], max_vocab: int | None = None
                ) -> tuple[int | None, str | None]:
    """Checks tokenizer.json (and tokenizer_config.json); model_max_length when it says one,
    and the tokenizer class."""
    if "tokenizer.json" not in names:
        issues.append(Issue(None, None, "no tokenizer.json: upload the fast tokenizer file "
                            "(tokenizer.save_pretrained writes it)", "no-tokenizer"))
        return None, None
    tok = _read_json(folder, "tokenizer.json", issues)
    if tok is not None:
        model = tok.get("model")
        vocab = model.get("vocab") if isinstance(model, dict) else None
        # WordPiece and BPE map token → id; Unigram lists (piece, score) in id order
        ids = (list(vocab.values()) if isinstance(vocab, dict)
               else list(range(len(vocab))) if isinstance(vocab, list) else [])
        ids += [t.get("id") for t in tok.get("added_tokens") or [] if isinstance(t, dict)]
        ids = [i for i in ids if isinstance(i, int)]
        if not ids:
            issues.append(Issue("tokenizer.json", None, "has no vocabulary", "bad-tokenizer"))
        elif max_vocab is not None and len(ids) > max_vocab:
            issues.append(Issue("tokenizer.json", None, f"holds {len(ids):,} vocabulary "
                                f"entries, over the limit of {max_vocab:,}", "limit"))
        elif isinstance(cfg.get("vocab_size"), int) and max(ids) >= cfg["vocab_size"]:
            issues.append(Issue("tokenizer.json", None, f"token id {max(ids):,} does not fit "
                                f"the model's vocab_size {cfg['vocab_size']:,}",
                                "bad-tokenizer"))
    max_len, tok_class = None, None
    if "tokenizer_config.json" in names:
        tcfg = _read_json(folder, "tokenizer_config.json", issues) or {}
        if "auto_map" in tcfg:
            issues.append(Issue("tokenizer_config.json", None, "auto_map names custom tokenizer "
                                "code, which is refused", "custom-code"))
        tok_class = tcfg.get("tokenizer_class")
        if tok_class is not None and tok_class not in TOKENIZER_CLASSES:
            issues.append(Issue("tokenizer_config.json", None, f"tokenizer_class {tok_class!r} "
                                "is not accepted (one of: "
                                f"{', '.join(sorted(TOKENIZER_CLASSES))})", "bad-tokenizer"))
        # transformers opens a file named in the config: it must be the folder's own
        named = sorted(k for k, v in tcfg.items() if k.endswith("_file") and v is not None)
        if named:
            issues.append(Issue("tokenizer_config.json", None, f"{', '.join(named)}: file "
                                "paths are refused; the folder's own files are used",
                                "bad-tokenizer"))
        value = tcfg.get("model_max_length")
        if isinstance(value, int) and 0 < value < 1 << 30:
            max_len = value
    return max_len, tok_class if isinstance(tok_class, str) else None


def check_model(folder: Path, limits: ModelLimits | None = None, *, prompt: str | None = None,
                prompt_name: str | None = None, pooling: str | None = None,
                normalize: bool | None = None, max_seq_length: int | None = None
                ) -> ModelCheck:
    """Check a model folder in the Hugging Face layout; `prompt` (a text), `prompt_name` (the
    folder's prompt names, see choose_prompts) and `pooling` override its files;
    `max_seq_length` the length texts are cut at (at most the positions the model has and
    `limits.max_seq_length`; None: the model's own, capped by that limit).

    Reads names, JSON files and safetensors headers only. Every problem is an Issue naming the
    file; the description (digest over all files, architecture, parameters, pooling, prompt)
    is returned only when there is none.
    """
    limits = limits or ModelLimits()
    folder = Path(folder)
    issues: list[Issue] = []
    if not folder.is_dir():
        return ModelCheck([Issue(str(folder), None, "not a folder", "not-found")], None)
    names = _list_files(folder)
    if len(names) > limits.max_files:
        issues.append(Issue(None, None, f"{len(names)} files; at most {limits.max_files} are "
                            "accepted", "limit"))
    total = 0
    for rel in names:
        path = folder / rel
        if path.is_symlink():
            issues.append(Issue(rel, None, "symbolic links are refused", "layout"))
            continue
        why = refused_name(rel)
        if why:
            issues.append(Issue(rel, None, why, "refused-file"))
        elif rel not in KNOWN_FILES and not SHARD_NAME.match(rel) and not rel.startswith(
                "2_Normalize/"):
            issues.append(Issue(rel, None, "not a file of a sentence encoder in the Hugging "
                                "Face layout; remove it", "unknown-file"))
        size = path.stat().st_size
        total += size
        if size > limits.max_file_bytes:
            issues.append(Issue(rel, None, f"{size:,} bytes exceeds the limit of "
                                f"{limits.max_file_bytes:,} per file", "limit"))
    if total > limits.max_total_bytes:
        issues.append(Issue(None, None, f"{total:,} bytes in all exceeds the limit of "
                            f"{limits.max_total_bytes:,}", "limit"))
    if issues:  # nothing below reads a refused or oversize file
        return ModelCheck(issues, None)
    if "config.json" not in names:
        return ModelCheck([Issue(None, None, "no config.json", "no-config")], None)
    cfg = _read_json(folder, "config.json", issues)
    if cfg is None:
        return ModelCheck(issues, None)
    model_type, cls = _check_config(cfg, limits, issues)
    n_params, dtypes = 0, set()
    for rel in _weight_files(folder, names, issues):
        tensors, problems = safetensors_header(folder / rel, rel)
        issues.extend(problems)
        n_params += sum(t["count"] for t in tensors.values())
        dtypes |= {t["dtype"] for t in tensors.values()}
    if n_params > limits.max_parameters:
        issues.append(Issue(None, None, f"{n_params:,} parameters exceed the limit of "
                            f"{limits.max_parameters:,}", "limit"))
    if cls and not issues:
        issues.extend(config_issues(cfg, weights_parameters=n_params,
                                    max_parameters=limits.max_parameters,
                                    max_intermediate=limits.max_intermediate,
                                    max_memory_bytes=limits.max_memory_bytes))
    if "tokenizer.json" in names and (
            folder / "tokenizer.json").stat().st_size > limits.max_tokenizer_bytes:
        issues.append(Issue("tokenizer.json", None, f"larger than the limit of "
                            f"{limits.max_tokenizer_bytes >> 20} MiB", "limit"))
        return ModelCheck(issues, None)
    st_pooling, st_normalize = _pooling(folder, names, issues)
    prompts, default_prompt = _prompts(folder, names, issues)
    chosen = choose_prompts(prompts, default_prompt, prompt=prompt, prompt_name=prompt_name,
                            issues=issues)
    tok_max, tok_class = _tokenizer(folder, cfg, names, issues, limits.max_vocab)
    if pooling is not None and pooling not in POOLING_MODES:
        issues.append(Issue(None, None, f"pooling {pooling!r} is not one of "
                            f"{', '.join(POOLING_MODES)}", "pooling"))
    sbert: dict[str, Any] = {}
    if "sentence_bert_config.json" in names:
        sbert = _read_json(folder, "sentence_bert_config.json", issues) or {}
    if issues or not cls:
        return ModelCheck(issues, None)
    pad = cfg.get("pad_token_id")
    pad = pad if isinstance(pad, int) and pad >= 0 else 0
    # fairseq-style models number positions from pad + 1: fewer usable positions
    usable = cfg["max_position_embeddings"] - (pad + 1 if model_type in PADDING_OFFSET_TYPES
                                               else 0)
    own = min(v for v in (usable, tok_max, sbert.get("max_seq_length"))
              if isinstance(v, int) and v > 0)
    max_seq = min(own, limits.max_seq_length)  # truncate at the host's limit, not refuse
    if max_seq_length is not None:
        most = min(usable, limits.max_seq_length)
        if not 1 <= max_seq_length <= most:
            return ModelCheck([Issue(None, None, f"max_seq_length {max_seq_length:,}: this "
                                     f"model takes at most {most:,} tokens here (its "
                                     f"positions: {usable:,}; the limit: "
                                     f"{limits.max_seq_length:,})", "max-seq-length")], None)
        max_seq = max_seq_length
    files = {rel: file_sha256(folder / rel) for rel in names}
    desc = ModelDescription(
        digest=model_digest(files), files=files, total_bytes=total, model_type=model_type,
        architecture=cls, n_parameters=n_params, hidden_size=cfg["hidden_size"],
        layers=cfg["num_hidden_layers"], vocab_size=cfg["vocab_size"], max_seq_length=max_seq,
        model_max_seq_length=own,
        weights_dtype=",".join(sorted(dtypes)), pooling=pooling or st_pooling,
        normalize=st_normalize if normalize is None else normalize,
        prompts=prompts, do_lower_case=bool(sbert.get("do_lower_case", False)),
        pad_token_id=pad, tokenizer_sha256=files["tokenizer.json"], tokenizer_class=tok_class,
        weights_sha256=weights_digest(files), **chosen)
    return ModelCheck([], desc)
