"""Model zoo: exact transformer architectures and their parameter counts per layer.

Counts follow the published architectures: Llama-3 (RMSNorm, grouped-query attention,
SwiGLU MLP, untied embeddings), GPT-2 (LayerNorm and biases, GELU MLP, learned positions,
tied embeddings), Mixtral-style MoE (Llama blocks whose MLP is `experts` SwiGLU experts and a
router), DeepSeek-V3-style MoE (multi-head latent attention, shared + routed experts, dense
first layers). A Hugging Face `config.json` maps onto the same fields, with its explicit head
width (Mistral-Nemo: 128, not 5120 / 32), tied embeddings (Llama-3.2 1B) and projection biases
(Qwen2's q, k, v). The `moe_layer` family is
a bare MoE layer (router + GELU experts with biases; no attention, norms, embedding or head):
the layer `trace capture --workload moe` trains.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError
from ..jsonio import load_json
from ..specs import plain


# Hugging Face model types read here: Llama-style decoders (dense or MoE), DeepSeek's MLA, GPT-2.
HF_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "deepseek_v2", "deepseek_v3", "gpt2")
# Every config.json key `from_hf_config` reads. Hugging Face configs carry many more (rope,
# dropout, token ids), so other keys are allowed, except near-misspellings of these.
HF_KEYS_READ = ("model_type", "_name_or_path", "num_hidden_layers", "hidden_size", "intermediate_size",
                "num_attention_heads", "num_key_value_heads", "vocab_size", "num_local_experts", "n_routed_experts",
                "num_experts_per_tok", "kv_lora_rank", "moe_intermediate_size", "n_shared_experts",
                "first_k_dense_replace", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                "n_layer", "n_embd", "n_inner", "n_head", "n_positions", "head_dim", "tie_word_embeddings",
                "attention_bias", "mlp_bias")
MAX_LAYERS = 4096
MAX_WIDTH = 1 << 24
MODEL_FAMILIES = ("llama", "gpt2", "deepseek", "moe_layer")
# ModelSpec's integer fields and their least value (counts of things every model has start
# at 1; optional parts, such as shared experts or MLA ranks, at 0).
MODEL_INTEGERS = {"layers": 1, "hidden": 1, "ffn": 1, "heads": 1, "kv_heads": 1, "vocab": 1, "experts": 1,
                  "top_k": 1, "shared_experts": 0, "dense_layers": 0, "dense_ffn": 0, "max_positions": 0,
                  "q_lora_rank": 0, "kv_lora_rank": 0, "qk_nope_dim": 0, "qk_rope_dim": 0, "v_head_dim": 0,
                  "attn_head_dim": 0}
# Which attention projections carry a bias (Llama-style blocks; GPT-2's are built in).
ATTENTION_BIASES = ("none", "qkv", "all")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "llama" | "gpt2" | "deepseek" | "moe_layer"
    layers: int
    hidden: int
    ffn: int  # MLP width (per expert for MoE layers)
    heads: int
    kv_heads: int
    vocab: int
    experts: int = 1  # routed experts per MoE layer (1 = dense)
    top_k: int = 1
    shared_experts: int = 0
    dense_layers: int = 0  # leading layers with a dense MLP of width `dense_ffn` (DeepSeek-V3: 3)
    dense_ffn: int = 0
    max_positions: int = 0  # learned position embeddings (GPT-2)
    # Multi-head latent attention (DeepSeek-V3); zero for ordinary attention.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    # Width of one attention head when it is not hidden / heads (Mistral-Nemo: 128 of 5120 / 32).
    attn_head_dim: int = 0
    # The output projection shares the embedding's weights; None: as the family does (GPT-2 ties).
    tied_embeddings: bool | None = None
    attention_bias: str = "none"  # Qwen2: "qkv"; a Llama config's attention_bias: "all"
    mlp_bias: bool = False  # a Llama config's mlp_bias: gate, up and down biases

    def __post_init__(self) -> None:
        # Types and signs first: a string, bool or negative count would give nonsense parameter
        # counts (negative shared experts, negative bytes) rather than fail. Upper limits keep
        # byte counts inside the traces' int64 fields and the per-rank graphs (nodes per layer)
        # inside memory: Llama-3 405B has 126 layers, 16,384 wide.
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"model name {self.name!r}: expected a non-empty string", "name")
        if self.family not in MODEL_FAMILIES:
            raise ConfigError(f"model `{self.name}`: `family` = {self.family!r}: expected one of "
                              f"{', '.join(MODEL_FAMILIES)}", "family")
        for name, low in MODEL_INTEGERS.items():
            object.__setattr__(self, name, plain(getattr(self, name)))  # numpy numbers from a sweep
            v = getattr(self, name)
            high = MAX_LAYERS if name in ("layers", "dense_layers") else MAX_WIDTH
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
                raise ConfigError(f"model `{self.name}`: `{name}` = {v!r}: expected an integer in {low}..{high}", name)
        for name in ("tied_embeddings", "mlp_bias"):
            v = getattr(self, name)
            if not (isinstance(v, bool) or v is None and name == "tied_embeddings"):
                raise ConfigError(f"model `{self.name}`: `{name}` = {v!r}: expected true or false", name)
        if self.attention_bias not in ATTENTION_BIASES:
            raise ConfigError(f"model `{self.name}`: `attention_bias` = {self.attention_bias!r}: expected one of "
                              f"{', '.join(ATTENTION_BIASES)}", "attention_bias")
        check = [
            (self.hidden % self.heads == 0 or self.q_lora_rank > 0 or self.attn_head_dim > 0,
             f"heads ({self.heads}) must divide hidden ({self.hidden}), or the head width be given"),
            (self.kv_heads >= 1 and self.heads % self.kv_heads == 0, f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})"),
            (1 <= self.top_k <= self.experts, f"top_k ({self.top_k}) must be between 1 and experts ({self.experts})"),
            (0 <= self.dense_layers <= self.layers, f"dense_layers ({self.dense_layers}) must be between 0 and layers ({self.layers})"),
            (self.dense_layers == 0 or self.dense_ffn >= 1,
             f"dense_layers ({self.dense_layers}) need their MLP width dense_ffn >= 1, got {self.dense_ffn}"),
        ]
        for ok, why in check:
            if not ok:
                raise ConfigError(f"model `{self.name}`: {why}", "model")

    @property
    def head_dim(self) -> int:
        return self.attn_head_dim or self.hidden // self.heads

    @property
    def ties_embeddings(self) -> bool:
        return self.family == "gpt2" if self.tied_embeddings is None else self.tied_embeddings

    def attention_widths(self) -> tuple[int, int]:
        """Per token, the widths QK^T and AV multiply over, summed across heads."""
        if self.q_lora_rank or self.kv_lora_rank:
            return self.heads * (self.qk_nope_dim + self.qk_rope_dim), self.heads * self.v_head_dim
        return self.heads * self.head_dim, self.heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    def attention_params(self) -> int:
        h = self.hidden
        if self.family == "moe_layer":
            return 0
        if self.family == "gpt2":
            return h * 3 * h + 3 * h + h * h + h  # fused qkv and output projection, with biases
        if self.q_lora_rank:
            qk = self.qk_nope_dim + self.qk_rope_dim
            return (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk
                    + h * (self.kv_lora_rank + self.qk_rope_dim) + self.kv_lora_rank
                    + self.kv_lora_rank * self.heads * (self.qk_nope_dim + self.v_head_dim)
                    + self.heads * self.v_head_dim * h)
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        bias = {"none": 0, "qkv": q + 2 * kv, "all": q + 2 * kv + h}[self.attention_bias]
        return 2 * h * q + 2 * h * kv + bias  # q, o: h x heads*head_dim; k, v: h x kv

    def mlp_params(self, width: int) -> int:
        if self.family in ("gpt2", "moe_layer"):
            return 2 * self.hidden * width + width + self.hidden  # two matrices with biases, GELU
        return 3 * self.hidden * width + (2 * width + self.hidden if self.mlp_bias else 0)  # SwiGLU: gate, up, down

    def norm_params(self) -> int:
        if self.family == "moe_layer":
            return 0
        return 4 * self.hidden if self.family == "gpt2" else 2 * self.hidden  # two norms per block

    def expert_params(self) -> int:
        """One routed expert's parameters."""
        return self.mlp_params(self.ffn)

    def layer_params(self, layer: int = -1) -> int:
        """Parameters of transformer block `layer` (the last block when omitted)."""
        layer = self.layers - 1 if layer < 0 else layer
        p = self.attention_params() + self.norm_params()
        if layer < self.dense_layers:
            return p + self.mlp_params(self.dense_ffn)
        if self.is_moe:
            router = self.hidden * self.experts
            return p + router + (self.experts + self.shared_experts) * self.expert_params()
        return p + self.mlp_params(self.ffn)

    def embedding_params(self) -> int:
        if self.family == "moe_layer":
            return 0
        return self.vocab * self.hidden + self.max_positions * self.hidden

    def final_norm_params(self) -> int:
        if self.family == "moe_layer":
            return 0
        return 2 * self.hidden if self.family == "gpt2" else self.hidden  # LayerNorm has a bias, RMSNorm not

    def head_params(self) -> int:
        """Final norm plus the output projection (none when tied to the embedding, as in GPT-2)."""
        if self.family == "moe_layer":
            return 0
        return self.final_norm_params() + (0 if self.ties_embeddings else self.vocab * self.hidden)

    def total_params(self) -> int:
        return self.embedding_params() + sum(self.layer_params(i) for i in range(self.layers)) + self.head_params()


def _llama(name: str, layers: int, hidden: int, ffn: int, heads: int, vocab: int = 128256, kv: int = 8) -> ModelSpec:
    return ModelSpec(name, "llama", layers, hidden, ffn, heads, kv, vocab)


def _gpt2(name: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    return ModelSpec(name, "gpt2", layers, hidden, 4 * hidden, heads, heads, 50257, max_positions=1024)


ZOO: dict[str, ModelSpec] = {m.name: m for m in [
    _llama("llama3-8b", 32, 4096, 14336, 32),
    _llama("llama3-70b", 80, 8192, 28672, 64),
    _llama("llama3-405b", 126, 16384, 53248, 128),
    _gpt2("gpt2-small", 12, 768, 12),
    _gpt2("gpt2-medium", 24, 1024, 16),
    _gpt2("gpt2-large", 36, 1280, 20),
    _gpt2("gpt2-xl", 48, 1600, 25),
    # The model `trace capture --workload fsdp2-llama` really trains (traces/workloads/tiny_llama.py).
    ModelSpec("tiny-llama", "llama", 2, 32, 64, 4, 2, 64),
    # The layer `trace capture --workload moe` really trains on 4 ranks (traces/workloads/moe.py):
    # hidden 8, expert width 16, one expert per rank, top-1.
    ModelSpec("tiny-moe", "moe_layer", 1, 8, 16, 1, 1, 1, experts=4, top_k=1),
    ModelSpec("mixtral-8x7b", "llama", 32, 4096, 14336, 32, 8, 32000, experts=8, top_k=2),
    ModelSpec("deepseek-v3", "deepseek", 61, 7168, 2048, 128, 128, 129280, experts=256, top_k=8, shared_experts=1,
              dense_layers=3, dense_ffn=18432, q_lora_rank=1536, kv_lora_rank=512, qk_nope_dim=128, qk_rope_dim=64,
              v_head_dim=128),
]}


def get_model(name: str | Path) -> ModelSpec:
    """A zoo model by name, or a Hugging Face `config.json` path."""
    if isinstance(name, str) and name in ZOO:
        return ZOO[name]
    if not isinstance(name, (str, Path)):
        raise ConfigError(f"model = {name!r}: expected a zoo model name ({', '.join(ZOO)}) or a config.json path", "model")
    path = Path(name)
    if path.suffix == ".json" or path.is_dir():
        return from_hf_config(path)
    raise ConfigError(f"unknown model `{name}`; expected one of: {', '.join(ZOO)}, a config.json path "
                      "or a Hugging Face model folder", "model")


def from_hf_config(path: str | Path) -> ModelSpec:
    """Read a Hugging Face `config.json` (Llama, Mistral/Mixtral, GPT-2 or DeepSeek-V3 style),
    or the one in a model folder as Hugging Face downloads it."""
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"{path}: a folder without config.json; expected a Hugging Face model folder "
                              "or a config.json path", "model")
        path = path / "config.json"
    c = load_json(path, "model")
    if not isinstance(c, dict):
        raise ConfigError(f"{path}: expected a JSON object of model settings, got {type(c).__name__}", "model")

    def integer(k: str, v: Any, minimum: int) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not minimum <= v <= MAX_WIDTH:
            raise ConfigError(f"{path}: field `{k}` must be an integer in {minimum}..{MAX_WIDTH}, got {v!r}", k)
        return v

    def need(*keys: str) -> int:
        for k in keys:
            if k in c:
                return integer(k, c[k], 1)
        raise ConfigError(f"{path}: missing field `{keys[0]}`", keys[0])

    def opt(k: str, default: int, minimum: int = 1) -> int:
        """An optional field: absent or null (as Hugging Face writes it) gives the default."""
        return default if c.get(k) is None else integer(k, c[k], minimum)

    # The model's name prefixes its ET files, so it is one plain file name: the last part of
    # `_name_or_path` (Hugging Face writes "org/model" or a local folder there), else the
    # folder Hugging Face keeps `config.json` in, else the file's own name.
    given = c.get("_name_or_path")
    name = PurePosixPath(given.replace("\\", "/")).name if isinstance(given, str) else ""
    name = name or (path.resolve().parent.name if path.name == "config.json" else path.stem) or "model"
    kind = c.get("model_type")
    if kind is not None and kind not in HF_MODEL_TYPES:
        raise ConfigError(f"{path}: model_type {kind!r} is not a decoder tracefabric models; expected one of "
                          f"{', '.join(HF_MODEL_TYPES)} (or none, read as Llama-style)", "model_type")
    for key in c:  # a misspelt optional key would silently give its default
        near = difflib.get_close_matches(key, HF_KEYS_READ, n=1, cutoff=0.9)
        if key not in HF_KEYS_READ and near and near[0] not in c:
            raise ConfigError(f"{path}: unknown field `{key}`; did you mean `{near[0]}`?", key)
    def flag(k: str, default: bool) -> bool:
        """A true/false field: absent or null gives the default of the model type."""
        v = c.get(k)
        if v is not None and not isinstance(v, bool):
            raise ConfigError(f"{path}: field `{k}` must be true or false, got {v!r}", k)
        return default if v is None else v

    try:
        return _spec_from_hf(c, name, need, opt, flag)
    except ConfigError as e:  # ModelSpec's own checks name the model, not the file
        if str(e).startswith(str(path)):
            raise
        raise e.in_file(path) from None


def _spec_from_hf(c: dict[str, Any], name: str, need: Any, opt: Any, flag: Any) -> ModelSpec:
    # Hugging Face's own default for tie_word_embeddings is true, but every model type read
    # here except GPT-2 sets false in its config class, so a config.json may leave it out.
    if c.get("model_type") == "gpt2":
        return ModelSpec(name, "gpt2", need("n_layer"), need("n_embd"), opt("n_inner", 4 * need("n_embd")),
                         need("n_head"), need("n_head"), need("vocab_size"), max_positions=need("n_positions"),
                         tied_embeddings=flag("tie_word_embeddings", True))
    heads = need("num_attention_heads")
    experts = opt("num_local_experts", 0) or opt("n_routed_experts", 1)
    common = dict(layers=need("num_hidden_layers"), hidden=need("hidden_size"), heads=heads,
                  kv_heads=opt("num_key_value_heads", heads), vocab=need("vocab_size"), experts=experts,
                  top_k=opt("num_experts_per_tok", 1), tied_embeddings=flag("tie_word_embeddings", False),
                  mlp_bias=flag("mlp_bias", False))
    if c.get("kv_lora_rank"):
        if flag("attention_bias", False):  # MLA's biased projections differ from Llama's four
            raise ConfigError("field `attention_bias` = true with latent attention (kv_lora_rank) is not modelled; "
                              "expected false", "attention_bias")
        return ModelSpec(name, "deepseek", ffn=need("moe_intermediate_size"), shared_experts=opt("n_shared_experts", 0, 0),
                         dense_layers=opt("first_k_dense_replace", 0, 0), dense_ffn=need("intermediate_size"),
                         q_lora_rank=opt("q_lora_rank", 0, 0), kv_lora_rank=need("kv_lora_rank"),
                         qk_nope_dim=need("qk_nope_head_dim"), qk_rope_dim=need("qk_rope_head_dim"),
                         v_head_dim=need("v_head_dim"), **common)
    # Qwen2 always biases q, k and v (its config has no switch); a Llama config's
    # attention_bias biases all four projections.
    bias = "qkv" if c.get("model_type") == "qwen2" else "all" if flag("attention_bias", False) else "none"
    return ModelSpec(name, "llama", ffn=need("intermediate_size"), attn_head_dim=opt("head_dim", 0),
                     attention_bias=bias, **common)

