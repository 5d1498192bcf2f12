"""Necessary bytes per step (mlatui.models.step_bytes) against hand-counted tiny models: a dense
one and a MoE one (DeepSeek-V3 tiny geometry), float32 and 4-bit, and a sparse layer's cache."""

import dataclasses
from math import prod

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from mlatui.bench.attention import attention_layer
from mlatui.measure import bandwidth as census
from mlatui.models import step_bytes
from mlatui.models.families import config_for
from mlatui.stream.phase_rows import EstimateRow, Quantity
from tests.random_models import build_model

F32 = 4
D, INTER, MOE_INTER, EXPERTS, TOP_K, VOCAB = 64, 128, 32, 4, 2, 256
HEADS, Q_LORA, RANK, ROPE, NOPE, V = 2, 64, 512, 64, 128, 128
GROUP = 64


def tensor(shape: tuple[int, ...], bits: int | None) -> int:
    """Bytes of one weight: float32, or packed `bits`-bit values plus a float32 scale and bias
    per group of 64 along the last axis (mlx quantises only where that axis divides by 64)."""
    if bits is None or shape[-1] % GROUP:
        return prod(shape) * F32
    return prod(shape) * bits // 8 + 2 * prod(shape[:-1]) * (shape[-1] // GROUP) * F32


def attention(bits):
    return (
        tensor((Q_LORA, D), bits)  # q_a_proj
        + Q_LORA * F32  # q_a_layernorm
        + tensor((HEADS * (NOPE + ROPE), Q_LORA), bits)  # q_b_proj
        + tensor((RANK + ROPE, D), bits)  # kv_a_proj_with_mqa
        + RANK * F32  # kv_a_layernorm
        + tensor((HEADS, RANK, NOPE), bits)  # embed_q
        + tensor((HEADS, V, RANK), bits)  # unembed_out
        + tensor((D, HEADS * V), bits)  # o_proj
        + 2 * D * F32  # input and post-attention norms
    )


def mlp(inter, bits):
    return 2 * tensor((inter, D), bits) + tensor((D, inter), bits)


def expert(bits):
    return 2 * tensor((MOE_INTER, D), bits) + tensor((D, MOE_INTER), bits)


def moe_whole(bits):
    """A MoE layer's MLP without its routed experts: router (weight + score bias), shared."""
    return EXPERTS * D * F32 + EXPERTS * F32 + mlp(MOE_INTER, bits)


def outside(bits):
    return D * F32 + tensor((VOCAB, D), bits)  # final norm, lm_head


def embedding_row(bits):
    return tensor((VOCAB, D), bits) // VOCAB


def built(first_dense: int, bits: int | None):
    model = build_model("deepseek_v3", "tiny", bits=bits, first_k_dense_replace=first_dense)
    config = config_for("deepseek_v3", "tiny", first_k_dense_replace=first_dense)
    return model, step_bytes.model_bytes(model, F32, config)


@pytest.mark.parametrize("bits", [None, 4])
def test_dense_model_bytes_by_hand(bits):
    model, counted = built(2, bits)
    layer = attention(bits) + mlp(INTER, bits)
    assert counted.layers == (census.LayerWeights(layer), census.LayerWeights(layer))
    for width in (1, 2, 4):
        expected = 2 * layer + outside(bits) + width * embedding_row(bits)
        assert counted.step(width, 100).weights == census.ByteRange(expected, expected)
    actual = sum(a.nbytes for _, a in tree_flatten(model.parameters()))  # evaluated arrays
    assert (
        counted.parameter_bytes == actual == 2 * layer + outside(bits) + VOCAB * embedding_row(bits)
    )


@pytest.mark.parametrize("bits", [None, 4])
def test_moe_model_bytes_by_hand(bits):
    model, counted = built(1, bits)
    dense, moe = attention(bits) + mlp(INTER, bits), attention(bits) + moe_whole(bits)
    assert counted.layers[1].routed == census.RoutedExperts(EXPERTS, expert(bits), TOP_K)
    base = dense + moe + outside(bits)
    for width, fewest, most in ((1, TOP_K, TOP_K), (2, TOP_K, EXPERTS), (4, TOP_K, EXPERTS)):
        weights = counted.step(width, 100).weights
        rows = width * embedding_row(bits)
        assert weights == census.ByteRange(
            base + rows + fewest * expert(bits), base + rows + most * expert(bits)
        )
    actual = sum(a.nbytes for _, a in tree_flatten(model.parameters()))
    assert (
        counted.parameter_bytes
        == actual
        == base + EXPERTS * expert(bits) + VOCAB * embedding_row(bits)
    )


def test_cache_bytes_by_hand():
    _, counted = built(1, None)
    step = counted.step(2, 100)
    rows = 102  # the cache after the step's update
    assert step.cache == census.ByteRange(
        2 * rows * (RANK + ROPE) * F32, 2 * rows * (RANK + ROPE) * F32
    )
    assert step.materialised_extra == 2 * 2 * rows * HEADS * (NOPE + V) * F32
    assert step.total == step.weights + step.cache


def test_sparse_layer_reads_index_keys_and_selected_rows():
    model = build_model("deepseek_v32", "tiny", evaluate=False)
    counted = step_bytes.model_bytes(model, 2, config_for("deepseek_v32", "tiny"))
    index_dim, topk = 128, 32  # family_configs.DSV32
    rows, per_row = 1002, (RANK + ROPE) * 2
    keys = rows * index_dim * 2
    assert counted.step(2, 1000).cache == census.ByteRange(
        2 * (keys + topk * per_row), 2 * (keys + 2 * topk * per_row)
    )
    # a short cache: every row is selected
    assert counted.step(1, 10).cache.high == 2 * (11 * index_dim * 2 + 11 * per_row)


def test_one_attention_layer_full_glm_flash():
    """The forced-branch benchmark's layer: its weights whole plus latent + rope rows; at 32K in
    bf16 about 82 MB (docs: one absorbed layer at L = 2)."""
    attn = attention_layer("glm4_moe_lite", "full", dtype=mx.bfloat16)
    counted = step_bytes.attention_bytes(attn, 2)
    weights = sum(a.nbytes for _, a in tree_flatten(attn.parameters()))
    step = counted.step(2, 32768)
    assert step.weights.low == weights
    assert step.cache.low == 32770 * (512 + 64) * 2
    assert 80e6 < step.total.low < 84e6


def test_published_bandwidth_of_known_devices():
    from mlatui.measure.bandwidth import published

    assert published("NVIDIA H100 80GB HBM3").gb_s == 3350
    assert published("NVIDIA H100 PCIe").gb_s == 2000
    assert published("NVIDIA H200").gb_s == 4800
    assert published("Apple M3 Max").gb_s == 400 and published("Apple M3").gb_s == 100
    assert published("Apple M2 Ultra").gb_s == 800 and published("Apple M4 Pro").gb_s == 273
    assert published("Intel(R) Xeon(R) Processor") is None


def test_measured_limit_is_probed_once_per_device(monkeypatch, tmp_path):
    from mlatui import store

    monkeypatch.setenv("MLATUI_CACHE_DIR", str(tmp_path))
    calls = []
    real = store.probe

    def probe(size):  # the real probe, small: kept as if of `size`
        calls.append(size)
        return dataclasses.replace(real(1 << 20, reps=2), probe_bytes=size)

    monkeypatch.setattr(store, "probe", probe)
    monkeypatch.setattr(store, "cache_sizes", lambda: [260 << 20])
    monkeypatch.setattr(store, "available_bytes", lambda: 22 << 30)
    monkeypatch.delenv(store.PROBE_MB_ENV)
    env = {"backend": "cpu", "device_name": "box", "device_memory_bytes": 24 << 30}
    first = store.device_bandwidth(env)
    again = store.device_bandwidth(env)
    assert calls == [1040 << 20] and first == again
    assert first["measured_read_gb_s"] > 0 and first["published_gb_s"] is None
    assert (
        store.device_bandwidth({**env, "device_name": "NVIDIA H200", "backend": "cuda"})[
            "published_gb_s"
        ]
        == 4800
    )
    assert len(calls) == 2  # another device: probed again


def test_moe_step_mbu_spans_the_routing_range():
    """A MoE step's MBU over its fewest bytes (`mbu`) and its most (`mbu_most`), from the same
    rounds' step time; an L = 1 step has one figure."""
    from mlatui.measure.bandwidth import StepBandwidth

    _, counted = built(1, None)
    bandwidth = StepBandwidth(counted, limit_gb_s=10.0)
    rows = [
        EstimateRow(
            quantity=Quantity.STEP_MS, arm="patched", width=w, median=2.0, low=1.0, high=4.0, n=6
        )
        for w in (1, 4)
    ]
    out = {(r.quantity, r.width): r for r in bandwidth.rows(100, rows)}
    for width in (1, 4):
        needed = counted.step(width, 100).total
        assert out["gb_s", width].median == pytest.approx(needed.low / 2.0 / 1e6)
        assert out["mbu", width].low == pytest.approx(needed.low / 4.0 / 1e6 / 10.0)
        assert out["mbu_most", width].median == pytest.approx(needed.high / 2.0 / 1e6 / 10.0)
    assert out["mbu", 1].median == out["mbu_most", 1].median
    assert out["mbu", 4].median < out["mbu_most", 4].median
    assert bandwidth.step_bytes(100, [4])["4"] == counted.step(4, 100).to_dict()
