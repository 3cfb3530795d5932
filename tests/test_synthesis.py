"""Trace synthesis: the model zoo's parameter counts, the OFAN §8.4 FSDP layout, closed-form
bytes per rank, Chakra ET files that Chakra's own jsonizer decodes, and bad configs."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tracefabric.errors import ConfigError
from tracefabric.traces.chakra_io import COMM_TYPES, read_trace
from tracefabric.traces.models import ZOO, ModelSpec, from_hf_config, get_model
from tracefabric.traces.synthesis import Plan, synthesize, write


@pytest.mark.parametrize("name,published", [
    ("llama3-8b", 8.03e9), ("llama3-70b", 70.55e9), ("llama3-405b", 405.85e9),
    ("gpt2-small", 124_439_808), ("gpt2-medium", 354_823_168), ("gpt2-large", 774_030_080), ("gpt2-xl", 1_557_611_200),
    ("mixtral-8x7b", 46.70e9), ("deepseek-v3", 671.0e9),
])
def test_zoo_parameter_counts_match_the_published_models(name, published):
    # GPT-2's counts are exact (Hugging Face's num_parameters); the others are published to 3-4 digits.
    assert ZOO[name].total_params() == pytest.approx(published, rel=1e-3)


def llama_block(hidden: int, ffn: int, heads: int, kv_heads: int) -> int:
    """One Llama block from first principles: q and o are hidden x hidden, k and v are
    hidden x (kv_heads * head_dim), SwiGLU has three hidden x ffn matrices, two RMSNorms."""
    head_dim = hidden // heads
    return 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * ffn + 2 * hidden


@pytest.mark.parametrize("name,arch,paper", [
    ("llama3-8b", (4096, 14336, 32, 8), 104),
    ("llama3-70b", (8192, 28672, 64, 8), 418),
    ("llama3-405b", (16384, 53248, 128, 8), 1570),
])
def test_ofan_fsdp_layout_packets_per_inter_server_ring_flow(name, arch, paper):
    """OFAN §8.4: 1,024 GPUs = 128 servers x 8, 8 parallel inter-server rings, FP8, 4 KB payloads.
    An FSDP unit is one block of P parameters (1 byte each). Hierarchically, the intra-server
    step leaves P/8 per GPU, and the 128-server ring moves (P/8)/128 = P/1024 per ring step.
    In backward a gradient reduce-scatter and a weight all-gather share each ring link, so a
    ring flow carries 2P/1024 bytes = 2P/1024/4096 packets: 104.0, 408.0 and 1520.0 by this
    count, within 5 % of the paper's 104 / 418 / 1570 (the paper does not give its count)."""
    s = synthesize(ZOO[name], Plan("fsdp", world=1024, gpus_per_server=8, precision="fp8"))
    ring = s.summary()["inter_server_ring"]
    expected = math.ceil(2 * llama_block(*arch) / 1024 / 4096)
    assert (ring["rings"], ring["members"]) == (8, 128)
    assert ring["backward_flow_packets"] == expected
    assert abs(expected / paper - 1) <= 0.05
    # The traffic pattern: GPU i's inter-server ring neighbour is GPU i + 8 (mod 1024), placed on random servers.
    assert sorted(s.placement) == list(range(1024)) and s.placement != list(range(1024))
    assert all(s.placement[r] % 8 == r % 8 for r in range(1024))


@pytest.mark.parametrize("name,plan", [
    ("gpt2-small", Plan("fsdp", world=8, gpus_per_server=1)),
    ("gpt2-medium", Plan("dp", world=16, gpus_per_server=1)),
    ("llama3-8b", Plan("fsdp", world=64, gpus_per_server=8, precision="fp8")),
    ("mixtral-8x7b", Plan("dp", world=32, gpus_per_server=8, precision="bf16")),
])
def test_bytes_sent_per_rank_equal_the_closed_form(name, plan, tmp_path):
    model = ZOO[name]
    p_bytes = model.total_params() * {"fp8": 1, "bf16": 2}[plan.precision]
    passes = 3 if plan.parallel == "fsdp" else 2  # FSDP: AG fwd + AG bwd + RS; DP: all-reduce = RS + AG
    n, g = plan.world, plan.gpus_per_server
    if g == 1:
        expected = passes * (n - 1) / n * p_bytes  # a ring step over n ranks sends (n-1)/n of the buffer
    else:
        s = n // g
        expected = passes * ((g - 1) / g * p_bytes + (s - 1) / s * p_bytes / g)  # intra-server, then 1/g across
    syn = synthesize(model, plan)
    assert syn.bytes_sent_per_rank()["total"] == pytest.approx(expected, rel=1e-12)
    # The same from the ET files on disk: every rank's collectives cover the whole model `passes` times.
    write(syn, tmp_path)
    meta, nodes = read_trace(tmp_path / f"{name}.{n - 1}.et")
    # An all-gather's comm_size is each rank's shard of the buffer (every collective here spans the world).
    covered = sum(x.attrs["comm_size"] * (n if x.attrs["comm_type"] == COMM_TYPES["ALL_GATHER"] else 1)
                  for x in nodes if x.type == "COMM_COLL_NODE")
    assert covered == (3 if plan.parallel == "fsdp" else 1) * p_bytes
    assert meta["version"] == "0.0.4" and meta["world"] == n


def test_synthesized_traces_decode_with_chakras_own_jsonizer(tmp_path):
    syn = synthesize(ZOO["gpt2-small"], Plan("fsdp", world=4, gpus_per_server=2))
    write(syn, tmp_path)
    exe = shutil.which("chakra_jsonizer")
    assert exe, "mlc-chakra's chakra_jsonizer is not installed"
    out = tmp_path / "rank0.json"
    subprocess.run([exe, "--input_filename", str(tmp_path / "gpt2-small.0.et"), "--output_filename", str(out)], check=True)
    text = out.read_text()
    # The jsonizer writes concatenated JSON objects: metadata first, then one per node.
    decoder, pos, objs = json.JSONDecoder(), 0, []
    while pos < len(text):
        obj, pos = decoder.raw_decode(text, pos)
        objs.append(obj)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    assert objs[0]["version"] == "0.0.4"
    nodes = objs[1:]
    # 14 units (embedding, 12 blocks, head), 5 nodes each: AG + compute forward; AG, compute, RS backward.
    assert len(nodes) == len(syn.nodes) == 5 * 14
    colls = [n for n in nodes if n["type"] == "COMM_COLL_NODE"]
    assert len(colls) == 3 * 14
    gathers = [n for n in colls if any(a["name"] == "comm_type" and a.get("int64Val") == "2" for a in n["attr"])]
    assert len(gathers) == 2 * 14  # comm_type 2 = ALL_GATHER in Chakra's CollectiveCommType


def test_hugging_face_config_reproduces_the_zoo_model(tmp_path):
    cfg = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert from_hf_config(path).total_params() == ZOO["llama3-8b"].total_params()
    assert get_model(str(path)).layers == 32
    # Keys the reader does not use are fine (Llama-3's own config.json carries these) ...
    extra = {"head_dim": 128, "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 128000, "mlp_bias": False}
    path.write_text(json.dumps({**cfg, **extra}))
    assert from_hf_config(path).total_params() == ZOO["llama3-8b"].total_params()
    # ... but a misspelt one would silently give its default (8 KV heads would become 32).
    typo = {k: v for k, v in cfg.items() if k != "num_key_value_heads"} | {"num_key_value_head": 8}
    path.write_text(json.dumps(typo))
    with pytest.raises(ConfigError, match=r"config\.json: unknown field `num_key_value_head`; did you mean "
                                          r"`num_key_value_heads`\?") as e:
        from_hf_config(path)
    assert e.value.field == "num_key_value_head"


# Published configs and parameter counts; the sums by hand are in the comments.
HF_PUBLISHED = {
    # Mistral-Nemo: head width 128 given, not 5120 / 32 = 160. Per layer q, o 2 * 5120 * 4096, k, v
    # 2 * 5120 * 1024, MLP 3 * 5120 * 14336, norms 2 * 5120; untied 131072 x 5120 twice, final norm.
    "Mistral-Nemo-Base-2407": ({"model_type": "mistral", "num_hidden_layers": 40, "hidden_size": 5120,
                                "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                                "head_dim": 128, "vocab_size": 131072, "tie_word_embeddings": False},
                               40 * (2 * 5120 * 4096 + 2 * 5120 * 1024 + 3 * 5120 * 14336 + 2 * 5120)
                               + 2 * 131072 * 5120 + 5120),
    # Llama-3.2 1B ties its output projection to the embedding: 1,235,814,400 (model card: 1.24 B).
    "Llama-3.2-1B": ({"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048, "intermediate_size": 8192,
                      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
                      "tie_word_embeddings": True}, 1_235_814_400),
    # Qwen2-0.5B: tied, and q, k, v carry biases (896 + 2 * 128 per layer): 494,032,768 (model card: 0.49 B).
    "Qwen2-0.5B": ({"model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "intermediate_size": 4864,
                    "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
                    "tie_word_embeddings": True}, 494_032_768),
}


@pytest.mark.parametrize("name", list(HF_PUBLISHED))
def test_hugging_face_head_width_tied_embeddings_and_biases_give_the_published_size(name, tmp_path):
    # The head width and tie_word_embeddings were ignored: Nemo read as 12.77 B, Llama-3.2 1B as 1.50 B.
    cfg, published = HF_PUBLISHED[name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert from_hf_config(path).total_params() == published
    # A Llama config's attention_bias and mlp_bias add biases to all four projections and the MLP.
    if name == "Llama-3.2-1B":
        path.write_text(json.dumps({**cfg, "attention_bias": True, "mlp_bias": True}))
        q, kv = 32 * 64, 8 * 64
        assert from_hf_config(path).total_params() == published + 16 * (q + 2 * kv + 2048 + 2 * 8192 + 2048)
        path.write_text(json.dumps({**cfg, "mlp_bias": "yes"}))
        with pytest.raises(ConfigError, match=r"field `mlp_bias` must be true or false, got 'yes'"):
            from_hf_config(path)


def test_attention_flops_follow_the_head_widths():
    # QK^T and AV multiply over heads x head width (DeepSeek-V3's MLA: 128 x (128 + 64) and
    # 128 x 128), not over the hidden size (7168), which undercounted MLA by 2.9x.
    from tracefabric.traces.synthesis import units
    plan = Plan(world=8, seq=4096, micro_batch=1)
    m = ZOO["deepseek-v3"]
    assert m.attention_widths() == (128 * 192, 128 * 128)
    first = units(m, plan)[1]  # a dense block: everything but attention is 2 FLOPs per parameter and token
    assert first.forward_flops == 2.0 * m.layer_params(0) * 4096 + 2.0 * 4096 * 4096 * (128 * 192 + 128 * 128)
    nemo = ModelSpec("nemo", "llama", 1, 5120, 14336, 32, 8, 131072, attn_head_dim=128)
    assert nemo.attention_widths() == (4096, 4096)


def test_a_hugging_face_model_name_is_a_plain_file_name(tmp_path, monkeypatch):
    # The name prefixes the ET files: "org/model" wrote into a missing folder, and a bare
    # `config.json` (its folder's name read as "") wrote hidden `.0.et` files no reader found.
    base = {"num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128}
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**base, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}))
    monkeypatch.chdir(folder)
    assert from_hf_config(Path("config.json")).name == "Meta-Llama-3-8B"
    (folder / "config.json").write_text(json.dumps(base))
    model = from_hf_config(Path("./config.json"))
    assert model.name == "my-llama"
    summary = write(synthesize(model, Plan("dp", world=2, gpus_per_server=2)), tmp_path / "out")
    assert summary["model"] == "my-llama" and sorted(p.name for p in (tmp_path / "out").glob("*.et")) == \
        ["my-llama.0.et", "my-llama.1.et"]
    with pytest.raises(ConfigError, match=r"ET prefix 'a/b': expected a plain file name"):
        write(synthesize(model, Plan("dp", world=2, gpus_per_server=2)), tmp_path / "out", prefix="a/b")


@pytest.mark.parametrize("make,needle", [
    (lambda: ModelSpec("bad", "llama", 2, 1000, 4000, 7, 7, 100), "heads (7) must divide hidden (1000)"),
    (lambda: ModelSpec("bad", "llama", 2, 1024, 4000, 16, 5, 100), "kv_heads (5) must divide heads (16)"),
    (lambda: ModelSpec("bad", "llama", 2, 1024, 4000, 16, 8, 100, experts=4, top_k=8), "top_k (8) must be between 1 and experts (4)"),
    (lambda: Plan("fsdp", world=12, gpus_per_server=8), "world (12) must be a multiple of gpus_per_server (8)"),
    (lambda: Plan("fsdp", precision="fp4"), "precision `fp4` unknown"),
    (lambda: Plan("zero9"), "parallel `zero9` is not supported"),
    (lambda: Plan("fsdp", world=10**8, gpus_per_server=8), "`world`: at most 131072"),
    (lambda: Plan("fsdp", world=8, pp=2, microbatches=10**8), "`microbatches`: at most 4096"),
    (lambda: Plan("fsdp", world=8, gpus_per_server=-1), "gpus_per_server must be >= 1, got -1"),
    (lambda: Plan("fsdp", world=8, seed=-1), "seed must be >= 0, got -1"),
    (lambda: get_model("llama-9000"), "unknown model `llama-9000`"),
    (lambda: get_model(None), "model = None: expected a zoo model name (llama3-8b"),
])
def test_bad_model_configs_name_the_constraint(make, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_hugging_face_config_missing_or_ill_typed_field(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2}))
    with pytest.raises(ConfigError, match="missing field `hidden_size`"):
        from_hf_config(path)
    path.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": "two", "num_attention_heads": 2}))
    with pytest.raises(ConfigError, match="field `num_hidden_layers` must be an integer"):
        from_hf_config(path)
    # Optional fields: null means the default (as Hugging Face writes it); 0 or a string is
    # refused instead of silently becoming the default (0 KV heads used to mean `heads`).
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128}
    path.write_text(json.dumps({**base, "num_key_value_heads": None}))
    assert from_hf_config(path).kv_heads == 4
    # 2^70 wide used to fail in the protobuf writer; 10^7 layers filled memory.
    for field, value in (("num_key_value_heads", 0), ("num_key_value_heads", "2"), ("num_experts_per_tok", 0),
                         ("hidden_size", 2**70)):
        path.write_text(json.dumps({**base, field: value}))
        with pytest.raises(ConfigError, match=rf"field `{field}` must be an integer in 1\.\.16777216, got {value!r}"):
            from_hf_config(path)
    path.write_text(json.dumps({**base, "num_hidden_layers": 10**7}))
    with pytest.raises(ConfigError, match=r"`layers` = 10000000: expected an integer in 1\.\.4096"):
        from_hf_config(path)
    path.write_text("[1]")
    with pytest.raises(ConfigError, match="expected a JSON object of model settings, got list"):
        from_hf_config(path)
    # An encoder used to be built as a Llama; a model's own constraint named the folder.
    path.write_text(json.dumps({**base, "model_type": "bert"}))
    with pytest.raises(ConfigError, match=r"config\.json: model_type 'bert' is not a decoder tracefabric models"):
        from_hf_config(path)
    other = tmp_path / "heads3.json"
    other.write_text(json.dumps({**base, "num_attention_heads": 3}))
    with pytest.raises(ConfigError, match=r"heads3\.json: model `heads3`: heads \(3\) must divide hidden \(64\)"):
        from_hf_config(other)


def test_corrupt_trace_is_refused_with_the_file_and_position(tmp_path):
    syn = synthesize(ZOO["gpt2-small"], Plan("dp", world=2, gpus_per_server=1))
    write(syn, tmp_path)
    path = tmp_path / "gpt2-small.0.et"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ConfigError, match=r"gpt2-small\.0\.et: truncated message at byte"):
        read_trace(path)


def test_tensor_parallel_bytes_per_rank_equal_the_closed_form():
    """Llama-3 8B, 64 GPUs = 8 servers x 8, TP = 8 inside each server, FSDP across servers.
    Megatron TP all-reduces the block's activation (seq x hidden, bf16) after attention and
    after the MLP, in forward and backward: 4 ring all-reduces per block inside the server.
    FSDP gathers/scatters each rank's TP shard (matrices / 8, norms whole) over 8 ranks on 8
    servers: 3 x 7/8 of it, all across servers."""
    h, ffn, layers, vocab, seq = 4096, 14336, 32, 128256, 4096
    plan = Plan("fsdp", world=64, gpus_per_server=8, precision="bf16", tp=8, seq=seq)
    act = seq * h * 2
    tp_allreduce = 4 * layers * 2 * 7 / 8 * act
    shard = (vocab * h) // 8 + layers * ((llama_block(h, ffn, 32, 8) - 2 * h) // 8 + 2 * h) + (vocab * h) // 8 + h
    fsdp = 3 * 7 / 8 * shard * 2
    sent = synthesize(ZOO["llama3-8b"], plan).bytes_sent_per_rank(rank=13)
    assert sent["scale_up"] == pytest.approx(tp_allreduce, rel=1e-12)
    assert sent["scale_out"] == pytest.approx(fsdp, rel=1e-12)


def test_expert_parallel_all_to_all_and_gradient_bytes_equal_the_closed_form(tmp_path):
    """Mixtral 8x7B, 16 GPUs = 2 servers x 8, EP = 8 (one expert per GPU, an EP group per
    server), plain DP. Per MoE block: dispatch and combine all-to-alls in forward and again in
    backward, each sending 7/8 of seq x top_k x hidden (bf16) to the 7 peers of its server,
    after a forward exchange of token counts (one int64 per expert, 7/8 of them to peers).
    Gradients: the non-expert part (attention, norms, router) is all-reduced over all 16 ranks
    (hierarchically: 7/8 inside, 1/2 of an eighth across), each rank's expert over the 2 ranks
    that own the same expert (one per server)."""
    h, ffn, layers, experts, top_k, seq, vocab = 4096, 14336, 32, 8, 2, 4096, 32000
    plan = Plan("dp", world=16, gpus_per_server=8, precision="bf16", ep=8, seq=seq)
    syn = synthesize(ZOO["mixtral-8x7b"], plan)
    dispatch = seq * top_k * h * 2
    a2a = 4 * layers * 7 / 8 * dispatch + layers * 7 / 8 * experts * 8
    expert = 3 * h * ffn
    non_expert = layers * (llama_block(h, ffn, 32, 8) - 3 * h * ffn + h * experts) + 2 * vocab * h + h
    up = a2a + 2 * 7 / 8 * non_expert * 2
    out = 2 * 1 / 2 * non_expert * 2 / 8 + 2 * 1 / 2 * layers * expert * 2
    sent = syn.bytes_sent_per_rank(rank=5)
    assert sent["scale_up"] == pytest.approx(up, rel=1e-12)
    assert sent["scale_out"] == pytest.approx(out, rel=1e-12)
    # Per-peer split sizes are in the ET (the `comm_split_sizes` attribute), equal when balanced.
    write(syn, tmp_path)
    _, nodes = read_trace(tmp_path / "mixtral-8x7b.5.et")
    a2as = [n for n in nodes if n.name.endswith(".dispatch")]
    assert len(a2as) == 2 * layers and all(n.attrs["comm_split_sizes"] == [dispatch // 8] * 8 for n in a2as)
    groups = json.loads((tmp_path / "comm_groups.json").read_text())
    assert [5, 13] in groups.values() and list(range(8)) in groups.values()  # rank 5's expert-data and EP groups


def test_skewed_expert_routing_keeps_totals_and_varies_peers(tmp_path):
    plan = Plan("dp", world=8, gpus_per_server=8, ep=8, imbalance=0.5, seq=512)
    syn = synthesize(ZOO["mixtral-8x7b"], plan)
    node = next(n for n in syn.graphs[3] if n.name.endswith(".dispatch"))
    splits = node.attrs["comm_split_sizes"]
    assert sum(splits) == node.attrs["comm_size"] == 512 * 2 * 4096 * 2 and len(set(splits)) > 1
    # Weights 1 +- 0.5: a peer's share is at most 1.5 / (1.5 + 7 x 0.5) and at least
    # 0.5 / (0.5 + 7 x 1.5) of the total (whole bytes: 1e-6 of slack).
    mean = sum(splits) / 8
    assert max(splits) / mean <= 8 * 1.5 / 5 + 1e-6 and min(splits) / mean >= 8 * 0.5 / 11 - 1e-6
    # The combine sends back what each peer dispatched here: the dispatch matrix transposed.
    dispatch = [next(n for n in g if n.name == "layer5.fwd.dispatch").attrs["comm_split_sizes"] for g in syn.graphs]
    combine = next(n for n in syn.graphs[3] if n.name == "layer5.fwd.combine").attrs["comm_split_sizes"]
    assert combine == [row[3] for row in dispatch]
    # Every rank's receive splits are its peers' send splits (the validator's send/recv check).
    from tracefabric.traces import validate as v
    write(syn, tmp_path, prefix="trace")
    traces, groups = v.load(tmp_path)
    assert v.problems(traces, groups) == []


def test_expert_and_tensor_parallel_together_bytes_per_rank_equal_the_closed_form(tmp_path):
    """Mixtral 8x7B, 16 GPUs = 2 servers x 8, TP = 2, EP = 4, plain DP (dp = 8 per TP index).
    TP: per block, forward all-reduce after attention (2 x 1/2 act) and an all-gather of the
    experts' output over the TP pair (1/2 act); backward the same two mirrored: 3 act per block.
    EP: each TP rank routes seq/2 tokens x top_k, dispatch + combine in both passes, 3/4 to the
    peers of its EP group (ranks 0, 2, 4, 6: same server), plus 3/4 of the 8 x 8 B counts.
    Gradients: the non-expert TP shard all-reduced over dp = 8 (4 per server x 2 servers); the
    rank's 2 experts over the 4 ranks holding them (both TP ranks of EP slots d and d + 4)."""
    h, ffn, layers, experts, top_k, seq, vocab = 4096, 14336, 32, 8, 2, 4096, 32000
    syn = synthesize(ZOO["mixtral-8x7b"], Plan("dp", world=16, gpus_per_server=8, precision="bf16", tp=2, ep=4, seq=seq))
    act = seq * h * 2
    dispatch = seq // 2 * top_k * h * 2
    tp_bytes = layers * 3 * act
    ep_bytes = layers * (4 * 3 / 4 * dispatch + 3 / 4 * experts * 8)
    attention = 2 * h * h + 2 * h * 1024
    non_expert = layers * (attention // 2 + h * experts + 2 * h) + 2 * (vocab * h // 2) + h  # TP shard, norms whole
    expert = 2 * 3 * h * ffn
    dense_ar = 2 * (3 / 4 * non_expert * 2), 2 * (1 / 2 * non_expert * 2 / 4)  # (inside, across)
    expert_ar = 2 * (1 / 2 * layers * expert * 2), 2 * (1 / 2 * layers * expert * 2 / 2)
    sent = syn.bytes_sent_per_rank(rank=4)
    assert sent["scale_up"] == pytest.approx(tp_bytes + ep_bytes + dense_ar[0] + expert_ar[0], rel=1e-12)
    assert sent["scale_out"] == pytest.approx(dense_ar[1] + expert_ar[1], rel=1e-12)
    assert [4, 5, 12, 13] in syn.groups.values() and [4, 6, 0, 2] not in syn.groups.values()
    assert [0, 2, 4, 6] in syn.groups.values()  # rank 4's EP group: its TP index, its server
    # Every rank's all-to-all splits mirror its peers', and every group issues the same sequence.
    from tracefabric.traces import validate as v
    write(syn, tmp_path, prefix="trace")
    assert v.problems(*v.load(tmp_path)) == []


def test_routing_matrix_sets_every_split_and_is_checked():
    routing = [[3, 1, 0, 4], [0, 8, 0, 0], [2, 2, 2, 2], [1, 0, 6, 1]]  # tokens member i sends to member j
    model = get_model("tiny-moe")
    syn = synthesize(model, Plan("dp", world=4, gpus_per_server=1, precision="fp32", seq=8, ep=4, routing=routing))
    row = model.hidden * 4
    for rank in range(4):
        names = {n.name: n.attrs for n in syn.collectives(rank)}
        assert names["layer0.fwd.dispatch"]["comm_split_sizes"] == [t * row for t in routing[rank]]
        assert names["layer0.fwd.combine"]["comm_split_sizes"] == [routing[i][rank] * row for i in range(4)]
        assert names["layer0.bwd.combine"]["comm_split_sizes"] == [t * row for t in routing[rank]]
        # The layer's input is raw data: its gradient (the dispatch's backward) is never sent.
        assert "layer0.bwd.dispatch" not in names
    with pytest.raises(ConfigError, match=r"routing row 1 sums to 7 tokens; expected seq x micro_batch / tp x top_k = 8"):
        synthesize(model, Plan("dp", world=4, gpus_per_server=1, seq=8, ep=4, routing=[[8, 0, 0, 0], [7, 0, 0, 0]] + routing[2:]))
    with pytest.raises(ConfigError, match=r"routing must be an ep x ep matrix \(4 x 4\)"):
        Plan("dp", world=4, gpus_per_server=1, seq=8, ep=4, routing=[[8, 0, 0]] * 4)
    with pytest.raises(ConfigError, match="routing must be an ep x ep matrix of token counts, got 5"):
        Plan("dp", world=4, gpus_per_server=1, seq=8, ep=4, routing=5)
    with pytest.raises(ConfigError, match="routing entries must be non-negative integers"):
        Plan("dp", world=4, gpus_per_server=1, seq=8, ep=4, routing=[[9, -1, 0, 0]] * 4)


@pytest.mark.parametrize("model,plan,needle", [
    ("llama3-8b", Plan("fsdp", world=24, gpus_per_server=8, tp=3), "tp (3) must divide heads (32)"),
    ("llama3-8b", Plan("fsdp", world=16, gpus_per_server=8, ep=2), "needs a mixture-of-experts model"),
    ("mixtral-8x7b", Plan("fsdp", world=48, gpus_per_server=8, ep=3), "ep (3) must divide the experts (8)"),
])
def test_parallel_plans_that_do_not_fit_the_model_are_refused(model, plan, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        synthesize(ZOO[model], plan)


def test_plan_shape_constraints_are_refused():
    with pytest.raises(ConfigError, match=r"world \(12\) must be a multiple of tp \(8\)"):
        Plan("fsdp", world=12, gpus_per_server=4, tp=8)
    with pytest.raises(ConfigError, match=r"with tp and ep, tp \(2\) must divide the tokens per micro-batch"):
        Plan("fsdp", world=16, gpus_per_server=8, tp=2, ep=2, seq=33)
    # Wrong types are named, not TypeErrors deep inside (or a fractional size in a trace).
    for field, value in (("world", "2"), ("seq", 2.5), ("world", 2**70), ("micro_batch", None), ("tp", True)):
        with pytest.raises(ConfigError, match=rf"`{field}`: expected an integer below 2\^40") as e:
            Plan("fsdp", **{field: value})
        assert e.value.field == field
    with pytest.raises(ConfigError, match=r"`imbalance`: expected a number, got nan"):
        Plan("fsdp", imbalance=float("nan"))


def one_f_one_b(stage: int, stages: int, m: int) -> list[tuple[str, int]]:
    """The 1F1B order written out independently: warm-up forwards, alternate, drain backwards."""
    warm = min(stages - stage - 1, m)
    fwd, bwd, order = list(range(m)), list(range(m)), []
    order += [("fwd", fwd.pop(0)) for _ in range(warm)]
    while fwd:
        order += [("fwd", fwd.pop(0)), ("bwd", bwd.pop(0))]
    order += [("bwd", b) for b in bwd]
    return order


def test_pipeline_runs_1f1b_with_matching_sends_and_receives():
    pp, m, world = 4, 6, 8
    syn = synthesize(ZOO["llama3-8b"], Plan("fsdp", world=world, gpus_per_server=8, pp=pp, microbatches=m, seq=1024))
    sends, recvs = set(), set()
    for rank, graph in enumerate(syn.graphs):
        stage = rank // (world // pp)
        first_block = next(n.name for n in graph if n.type == "COMP_NODE").split(".")[0]
        seen = [(n.name.split(".")[1], int(n.name.split(".mb")[1].split(".")[0])) for n in graph
                if n.type == "COMP_NODE" and n.name.startswith(first_block + ".") and n.name.count(".") >= 2]
        assert seen == one_f_one_b(stage, pp, m), rank
        for n in graph:
            if n.type == "COMM_SEND_NODE":
                sends.add((rank, n.attrs["comm_dst"], n.attrs["comm_tag"], n.attrs["comm_size"]))
            if n.type == "COMM_RECV_NODE":
                recvs.add((n.attrs["comm_src"], rank, n.attrs["comm_tag"], n.attrs["comm_size"]))
    assert sends == recvs and len(sends) == 2 * (pp - 1) * m * (world // pp)
    # Each stage holds 32/4 blocks; the first also the embedding, the last the head.
    blocks = lambda r: {n.name.split(".")[0] for n in syn.graphs[r] if n.name.startswith("layer")}
    assert blocks(0) == {f"layer{i}" for i in range(8)} and blocks(7) == {f"layer{i}" for i in range(24, 32)}


def test_pipeline_bytes_per_rank_equal_the_closed_form():
    """A middle stage sends m activations forward and m gradients back (seq x micro_batch x
    hidden, bf16), and with FSDP gathers its stage once and reduce-scatters it once per
    iteration over its dp = 2 replicas: 2 x 1/2 of the stage's parameters."""
    h, ffn, seq, m = 4096, 14336, 1024, 6
    syn = synthesize(ZOO["llama3-8b"], Plan("fsdp", world=8, gpus_per_server=8, pp=4, microbatches=m, seq=seq))
    act = seq * h * 2
    stage_params = 8 * llama_block(h, ffn, 32, 8)
    assert syn.bytes_sent_per_rank(rank=2)["total"] == pytest.approx(2 * m * act + 2 * 1 / 2 * stage_params * 2, rel=1e-12)


def test_pipeline_shapes_that_do_not_fit_are_refused():
    with pytest.raises(ConfigError, match=r"pp \(5\) must divide the layers \(32\)"):
        synthesize(ZOO["llama3-8b"], Plan("fsdp", world=10, gpus_per_server=2, pp=5, microbatches=5))
    with pytest.raises(ConfigError, match=r"microbatches must be >= 1, and 1 without pipeline parallelism"):
        Plan("fsdp", world=8, microbatches=4)


def test_cli_synthesizes_with_a_routing_file_and_names_bad_ones(tmp_path):
    """(The CLI's entry point turns these errors into one line and exit status 2.)"""
    from typer.testing import CliRunner

    from tracefabric.cli import app

    routing = [[3, 1, 0, 4], [0, 8, 0, 0], [2, 2, 2, 2], [1, 0, 6, 1]]
    (tmp_path / "routing.json").write_text(json.dumps({"routing": routing}))
    args = ["trace", "synthesize", "--model", "tiny-moe", "--world", "4", "--gpus-per-server", "1", "--precision", "fp32",
            "--parallel", "dp", "--ep", "4", "--seq", "8", "--out", str(tmp_path / "out")]
    res = CliRunner().invoke(app, [*args, "--routing", str(tmp_path / "routing.json")])
    assert res.exit_code == 0, res.output
    _, nodes = read_trace(tmp_path / "out" / "tiny-moe.2.et")
    dispatch = next(n for n in nodes if n.name == "layer0.fwd.dispatch")
    assert dispatch.attrs["comm_split_sizes"] == [t * 8 * 4 for t in routing[2]]  # tokens x hidden x fp32
    assert dispatch.attrs["comm_recv_split_sizes"] == [routing[i][2] * 8 * 4 for i in range(4)]
    res = CliRunner().invoke(app, [*args, "--routing", str(tmp_path / "missing.json")])
    assert isinstance(res.exception, ConfigError) and "missing.json: file not found" in str(res.exception)
    (tmp_path / "bad.json").write_text('{"routing": 5}')
    res = CliRunner().invoke(app, [*args, "--routing", str(tmp_path / "bad.json")])
    assert isinstance(res.exception, ConfigError) and "expected a list of rows of token counts" in str(res.exception)
    # A key beside "routing" was skipped without a word.
    (tmp_path / "extra.json").write_text(json.dumps({"routing": routing, "imbalance": 0.3}))
    res = CliRunner().invoke(app, [*args, "--routing", str(tmp_path / "extra.json")])
    assert isinstance(res.exception, ConfigError) and res.exception.field == "imbalance"
    assert str(res.exception) == f"{tmp_path / 'extra.json'}: unknown key 'imbalance'; expected only \"routing\""
    # The shape and the row sums are checked against the plan: those errors name the file too.
    (tmp_path / "short.json").write_text(json.dumps({"routing": [row[:3] for row in routing]}))
    (tmp_path / "sums.json").write_text(json.dumps({"routing": [[7, 0, 0, 0]] + routing[1:]}))
    for name, want in (("short.json", r"routing must be an ep x ep matrix \(4 x 4\)"),
                       ("sums.json", r"routing row 0 sums to 7 tokens; expected seq x micro_batch / tp x top_k = 8")):
        res = CliRunner().invoke(app, [*args, "--routing", str(tmp_path / name)])
        assert isinstance(res.exception, ConfigError) and res.exception.field == "routing"
        assert re.match(rf"{re.escape(str(tmp_path / name))}: {want}", str(res.exception)), str(res.exception)


@pytest.mark.parametrize("name,plan", [
    ("mixtral-8x7b", Plan("dp", world=32, gpus_per_server=8, tp=2, ep=4, seq=512)),
    ("deepseek-v3", Plan("fsdp", world=32, gpus_per_server=8, ep=8, seq=256, imbalance=0.3)),
    ("llama3-8b", Plan("fsdp", world=32, gpus_per_server=8, tp=4, seq=512)),
])
def test_shared_graphs_write_the_same_bytes_as_building_every_rank(name, plan, tmp_path):
    """Ranks of one class share a template whose group ids are swapped per rank; building every
    rank's graph on its own must give byte-identical ET files."""
    write(synthesize(ZOO[name], plan), tmp_path / "shared", prefix="t")
    write(synthesize(ZOO[name], plan, share_graphs=False), tmp_path / "each", prefix="t")
    for rank in range(plan.world):
        f = f"t.{rank}.et"
        assert (tmp_path / "shared" / f).read_bytes() == (tmp_path / "each" / f).read_bytes(), f


def test_queue_pairs_per_rank_follow_the_algorithms():
    """OFAN FSDP layout: one ring neighbour inside the server, one across (GPU i -> i + 8).
    Mixtral EP 8 + DP on 2 servers: the direct all-to-all reaches the 7 server peers (which
    include the intra-server ring neighbour); the across-server rings of the dense and expert
    gradients both go to the same GPU of the other server. Pipeline: the stage neighbours."""
    fsdp = synthesize(ZOO["llama3-8b"], Plan("fsdp", world=1024, gpus_per_server=8, precision="fp8"))
    assert fsdp.queue_pairs(rank=13) == {"scale_up": 1, "scale_out": 1}
    assert fsdp.summary()["queue_pairs_per_rank"] == {"scale_up": 1, "scale_out": 1}
    moe = synthesize(ZOO["mixtral-8x7b"], Plan("dp", world=16, gpus_per_server=8, ep=8, seq=256))
    assert moe.queue_pairs(rank=5) == {"scale_up": 7, "scale_out": 1}
    pipe = synthesize(ZOO["llama3-8b"], Plan("dp", world=8, gpus_per_server=2, pp=4, microbatches=2, seq=256))
    # rank 2 (stage 1 of 4, dp 2): sends activations to 4, gradients to 0, all-reduces with 3 in its server.
    assert pipe.queue_pairs(rank=2) == {"scale_up": 1, "scale_out": 2}


def test_rescaling_an_expert_parallel_trace_equals_synthesizing_the_larger_world(tmp_path):
    """tiny-moe on 4 ranks, EP 2 (blocks [0,1], [2,3]), DP over all 4, expert gradients over the
    strided pairs [0,2], [1,3]. Rescaled to 8, EP blocks are copied (routing kept), the world and
    strided groups widen: exactly what synthesizing 8 ranks with the same routing gives."""
    from tracefabric.traces import validate as v
    from tracefabric.traces.chakra_io import comm_type_name
    from tracefabric.traces.rescale import RescaleError, rescale

    plan = lambda world: Plan("dp", world=world, gpus_per_server=1, precision="fp32", seq=8, ep=2,  # noqa: E731
                              routing=[[5, 3], [2, 6]])
    write(synthesize(get_model("tiny-moe"), plan(4)), tmp_path / "w4", prefix="trace")
    report = rescale(tmp_path / "w4", 8, tmp_path / "r8")
    assert sorted(g["shape"] for g in report["groups"].values()) == ["block", "block", "strided", "strided", "world"]
    write(synthesize(get_model("tiny-moe"), plan(8)), tmp_path / "w8", prefix="trace")

    def seq(folder, rank):
        groups = json.loads((folder / "comm_groups.json").read_text())
        return [(comm_type_name(n.attrs["comm_type"]), groups[str(n.attrs["pg_name"])], n.attrs["comm_size"],
                 n.attrs.get("comm_split_sizes")) for n in read_trace(folder / f"trace.{rank}.et")[1] if n.type == "COMM_COLL_NODE"]

    for rank in range(8):
        assert seq(tmp_path / "r8", rank) == seq(tmp_path / "w8", rank)
    assert [x for x in seq(tmp_path / "r8", 5) if x[0] == "ALL_TO_ALL"][1][1:] == ([4, 5], 256, [2 * 32, 6 * 32])
    assert v.problems(*v.load(tmp_path / "r8")) == []
    with pytest.raises(RescaleError, match=r"repeats every 2 ranks; ranks \(7\) must be a multiple of 2"):
        rescale(tmp_path / "w4", 7, tmp_path / "r7")


def test_rescaling_astra_sims_own_trace_without_group_names_keeps_world_collectives(tmp_path, shared):
    """ASTRA-sim's example ET names no process group (`pg_name` absent: the whole world). Each of
    8 ranks all-reduces 1 MiB; rescaled to 12, every rank still all-reduces 1 MiB over the world."""
    from tracefabric.traces import validate as v
    from tracefabric.traces.chakra_io import comm_type_name
    from tracefabric.traces.rescale import rescale

    report = rescale(shared / "fixtures/astra-sim/workloads/8npus_1MB", 12, tmp_path / "r12")
    assert report["groups"] == {} and report["resized_on_rank0"] == []
    for rank in range(12):
        colls = [n for n in read_trace(tmp_path / "r12" / f"trace.{rank}.et")[1] if n.type == "COMM_COLL_NODE"]
        assert [(comm_type_name(n.attrs["comm_type"]), n.attrs["comm_size"], "pg_name" in n.attrs) for n in colls] == \
            [("ALL_REDUCE", 1 << 20, False)]
    assert v.problems(*v.load(tmp_path / "r12")) == []


def test_rescale_recognises_group_shapes_and_the_cli_refuses_malformed_workload_options(tmp_path):
    from typer.testing import CliRunner

    from tracefabric.cli import app
    from tracefabric.traces.rescale import _shape

    assert _shape([0, 1, 2, 3, 4, 5], 6) == ("world", 6)
    assert _shape([3, 4, 5], 6) == ("block", 3)
    assert _shape([1, 4], 6) == ("strided", 3)
    assert _shape([1, 2], 6) == ("other", 0)  # not aligned to a block of 2
    assert _shape([0, 2, 5], 6) == ("other", 0)
    res = CliRunner().invoke(app, ["trace", "capture", "--workload", "moe", "--option", "ep3", "--out", str(tmp_path)])
    assert isinstance(res.exception, ConfigError) and "--option must be KEY=VALUE (got 'ep3')" in str(res.exception)


def test_a_smaller_synthesis_into_the_same_folder_leaves_no_stale_ranks(tmp_path):
    # 8 ranks, then 4 into the same folder: ranks 4-7 used to stay and be read as the workload's.
    write(synthesize(ZOO["gpt2-small"], Plan("dp", world=8, gpus_per_server=1)), tmp_path)
    (tmp_path / "other.9.et").write_bytes(b"")  # another prefix's files are not touched
    write(synthesize(ZOO["gpt2-small"], Plan("dp", world=4, gpus_per_server=1)), tmp_path)
    assert sorted(p.name for p in tmp_path.glob("gpt2-small.*.et")) == [f"gpt2-small.{r}.et" for r in range(4)]
    assert (tmp_path / "other.9.et").exists()


def test_a_smaller_rescale_or_microbenchmark_into_the_same_folder_leaves_no_stale_ranks(tmp_path):
    # As for synthesis: rescaling to 8 then to 4 ranks left trace.4-7.et, and validate then
    # failed with "rank 4 is not a member of group '0'"; a microbenchmark read as 8 ranks.
    from tracefabric.collectives.microbenchmark import write_microbenchmark
    from tracefabric.traces import validate as v
    from tracefabric.traces.rescale import RescaleError, rescale

    write(synthesize(ZOO["gpt2-small"], Plan("dp", world=2, gpus_per_server=1)), tmp_path / "w2", prefix="trace")
    for ranks in (8, 4):
        rescale(tmp_path / "w2", ranks, tmp_path / "r")
    traces, groups = v.load(tmp_path / "r")
    assert [t.rank for t in traces] == [0, 1, 2, 3] and v.problems(traces, groups) == []
    for ranks in (8, 4):
        write_microbenchmark(tmp_path / "m", ranks, "all_reduce", 1 << 20)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [f"all_reduce.{r}.et" for r in range(4)]
    # One file per rank, as synthesis caps its world: 2^24 ranks started writing 16.7 M files.
    with pytest.raises(RescaleError, match=r"rescale: ranks must be an integer in 1\.\.131072 \(got 131074\)"):
        rescale(tmp_path / "w2", 131074, tmp_path / "big")
    assert not (tmp_path / "big").exists()


@pytest.mark.parametrize("plan", [dict(imbalance=0.5), dict(routing=[[256]])])
@pytest.mark.parametrize("model", ["gpt2-small", "mixtral-8x7b"])
def test_routing_skew_without_expert_parallelism_is_refused_not_ignored(model, plan):
    # With ep = 1 there is no all-to-all to skew: the option was dropped without a word.
    name = next(iter(plan))
    with pytest.raises(ConfigError, match=rf"^{name} shapes the expert-parallel all-to-alls, but ep = 1 has none") as e:
        synthesize(ZOO[model], Plan(world=8, seq=256, **plan))
    assert e.value.field == name


def test_tokens_past_the_traces_int64_num_ops_are_named_as_seq_times_micro_batch():
    # It blamed an internal node: "node 3 ('layer0.fwd'): attribute 'num_ops' = 5668...: expected int64".
    plan = Plan(world=8, seq=1 << 24, micro_batch=1 << 16)
    flops = 2 * (2.0 * ZOO["llama3-8b"].layer_params(0) * 2**40 + 2.0 * 2**40 * 2**24 * 2 * 4096)
    with pytest.raises(ConfigError, match=rf"seq x micro_batch = 16777216 x 65536 tokens give layer0 of `llama3-8b` "
                                          rf"{re.escape(f'{flops:.3g}')} FLOPs in backward, past the traces' int64 num_ops") as e:
        synthesize(ZOO["llama3-8b"], plan)
    assert e.value.field == "seq"


def test_a_plan_past_synthesis_memory_is_refused_before_it_is_built(monkeypatch):
    # 4096 micro-batches on 64 pipeline ranks ran 70 s into a MemoryError.
    import tracefabric.traces.synthesis as syn
    monkeypatch.setattr(syn, "memory_budget", lambda: 4 << 30)
    with pytest.raises(ConfigError, match=r"^`llama3-8b` on 64 ranks: 64 distinct rank graphs of ~\d+ nodes need ~9\.\d GiB, "
                                          r"past the 4\.0 GiB free for synthesis") as e:
        synthesize(ZOO["llama3-8b"], Plan(world=64, pp=2, microbatches=4096, seq=128))
    assert e.value.field == "world"


@pytest.mark.parametrize("model,plan", [("llama3-8b", dict(world=16, pp=2, microbatches=8)),
                                        ("llama3-70b", dict(world=256, tp=8)),
                                        ("mixtral-8x7b", dict(world=32, ep=8)),
                                        ("mixtral-8x7b", dict(world=32, ep=8, imbalance=0.2))])
def test_the_memory_estimate_bounds_what_synthesis_holds(model, plan, monkeypatch):
    import tracemalloc

    import tracefabric.traces.synthesis as syn
    seen = []
    monkeypatch.setattr(syn, "_check_memory", lambda m, p, first, distinct, shared: seen.append(
        syn.memory_estimate(p, first, distinct, shared)))
    tracemalloc.start()
    try:
        synthesize(ZOO[model], Plan(seq=128, **plan))
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # An upper bound (nodes measured at 0.5-1.1 KB; DeepSeek's long split lists are the heavy end), not a wild one.
    assert held <= seen[0] <= 3 * held, (held, seen[0])
