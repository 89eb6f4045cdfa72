"""KV caches: what `update` returns and keeps, `reorder` (beam search) for the growing, static and
cross-attention caches, and that the check of the static cache's decoding step as one graph that
never recompiles (what CUDA graphs replay; tests/models/test_decoding_rows.py, every causal family
and position scheme) can fail."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import zoo
from tests.conftest import tiny
from zoo.nn.cache import KVCache, LayerCache, StaticKVCache

B, HKV, DH = 3, 2, 4


def _kv(T: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    k, v = torch.randn(B, HKV, T, DH, generator=g), torch.randn(B, HKV, T, DH, generator=g)
    positions = torch.randint(0, 50, (B, T), generator=g)
    return k, v, positions


@pytest.mark.parametrize("kind", ["growing", "static"])
def test_update_appends_and_reorder_selects_keys_values_and_positions(kind):
    cache = KVCache() if kind == "growing" else StaticKVCache(capacity=12)
    k1, v1, p1 = _kv(5, 0)
    k2, v2, p2 = _kv(1, 1)
    cache.update(k1, v1, p1)
    k, v, p = cache.update(k2, v2, p2)
    assert cache.length == 6
    torch.testing.assert_close(k[:, :, :6], torch.cat([k1, k2], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(v[:, :, :6], torch.cat([v1, v2], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(p[:, :6], torch.cat([p1, p2], dim=1), rtol=0, atol=0)
    before = (
        [t.clone() for t in (cache.k, cache.v, cache.positions)]
        if kind == "growing"
        else [t.clone() for t in (cache._k, cache._v, cache._positions)]
    )
    index = torch.tensor([2, 0, 0])
    addresses = [cache._k.data_ptr(), cache._v.data_ptr()]
    cache.reorder(index)
    after = (cache.k, cache.v, cache.positions) if kind == "growing" else (cache._k, cache._v, cache._positions)
    for old, new in zip(before, after):
        torch.testing.assert_close(new, old[index], rtol=0, atol=0)  # keys, values and positions alike
    if kind == "static":  # in place: a CUDA graph that reads these buffers still reads them
        assert [cache._k.data_ptr(), cache._v.data_ptr()] == addresses


def test_cross_attention_cache_reorders_keys_and_values():
    k, v, _ = _kv(7, 2)
    layer = LayerCache(cross_kv=(k.clone(), v.clone()))
    index = torch.tensor([1, 1, 0])
    layer.reorder(index)
    torch.testing.assert_close(layer.cross_kv[0], k[index], rtol=0, atol=0)
    torch.testing.assert_close(layer.cross_kv[1], v[index], rtol=0, atol=0)


def test_static_cache_refuses_to_overflow():
    cache = StaticKVCache(capacity=4)
    cache.update(*_kv(3, 0))
    with pytest.raises(ValueError, match="holds 4 positions"):
        cache.update(*_kv(2, 1))


def test_a_changing_python_number_in_the_step_is_caught():
    """The check can fail: a step that reads the cache's length as a Python int recompiles."""
    torch.manual_seed(0)
    model = zoo.build_model(tiny("decoder_only", "rope", max_seq_len=40)).eval()
    cache = model.new_cache(capacity=12)
    with torch.no_grad():
        model(torch.randint(4, 37, (2, 5)), cache=cache, use_cache=True)

        def step(tokens, n: int):
            return model(tokens, cache=cache, use_cache=True).logits * n

        torch._dynamo.reset()
        compiled = torch.compile(step, backend="eager", fullgraph=True, dynamic=False)
        with torch._dynamo.config.patch(error_on_recompile=True), pytest.raises(Exception, match="(?i)recompil"):
            for _ in range(3):
                compiled(torch.randint(4, 37, (2, 1)), cache.length)
