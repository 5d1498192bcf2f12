import threading
import time

import mlx.core as mx
import pytest

from mlatui.host import memory
from mlatui.stream.events import MemorySample


def test_sample_is_plain_and_sane():
    s = memory.sample_memory(1.5)
    assert isinstance(s, MemorySample)
    assert s.t == 1.5
    assert s.process_rss_bytes > 0
    assert 0 < s.system_available_bytes <= s.system_total_bytes
    assert s.swap_used_bytes >= 0
    assert s.mlx_peak_bytes >= s.mlx_active_bytes >= 0
    s.to_json()  # plain values only


def test_active_memory_grows_by_array_size():
    before = memory.sample_memory(0.0)
    n_bytes = 8 * 1024 * 1024
    a = mx.ones((n_bytes // 4,), dtype=mx.float32)
    mx.eval(a)
    after = memory.sample_memory(0.0)
    assert after.mlx_active_bytes - before.mlx_active_bytes >= n_bytes
    assert after.mlx_peak_bytes >= after.mlx_active_bytes
    del a
    freed = memory.sample_memory(0.0)
    assert after.mlx_active_bytes - freed.mlx_active_bytes >= n_bytes


def test_queries_work_from_another_thread():
    got = {}
    a = mx.ones((1024 * 1024,), dtype=mx.float32)  # allocated on the main thread
    mx.eval(a)

    def worker():
        got["sample"] = memory.sample_memory(0.0)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got["sample"].mlx_active_bytes >= a.nbytes


@pytest.mark.parametrize(
    "info, expected",
    [
        ({"architecture": "x86_64", "device_name": "AMD EPYC"}, None),
        (
            {"device_name": "NVIDIA H200", "total_memory": 150_000_000_000, "free_memory": 1},
            150_000_000_000,
        ),
        (
            {
                "device_name": "Apple M3 Max",
                "memory_size": 128 << 30,
                "max_recommended_working_set_size": 100 << 30,
            },
            100 << 30,
        ),
    ],
    ids=["cpu", "cuda", "metal"],
)
def test_device_limit_shapes(monkeypatch, info, expected):
    monkeypatch.setattr(mx, "device_info", lambda *a, **k: info)
    assert memory.device_limit_bytes() == expected
    assert memory.sample_memory(0.0).device_limit_bytes == expected
    assert memory.MemorySampler(lambda s: None)._limit_bytes == expected


def test_sampler_emits_at_interval_and_stops():
    samples: list[MemorySample] = []
    t0 = time.monotonic()
    sampler = memory.MemorySampler(
        samples.append, interval_s=0.05, clock=lambda: time.monotonic() - t0
    )
    with sampler:
        assert sampler.running
        time.sleep(0.5)
    assert not sampler.running
    assert not any(t.name == "mlatui-memory" for t in threading.enumerate())
    assert sampler.error is None
    n = len(samples)
    assert 5 <= n <= 13, n  # ~10 expected; loose bounds for a loaded CI box
    ts = [s.t for s in samples]
    assert ts == sorted(ts)
    gaps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False))
    assert 0.03 <= gaps[len(gaps) // 2] <= 0.1
    time.sleep(0.15)
    assert len(samples) == n  # nothing after stop


def test_sampler_records_error_and_rejects_bad_interval():
    def boom(sample):
        raise RuntimeError("sink broke")

    s = memory.MemorySampler(boom, interval_s=0.01).start()
    time.sleep(0.05)
    s.stop()
    assert isinstance(s.error, RuntimeError)
    with pytest.raises(ValueError, match="interval"):
        memory.MemorySampler(lambda s: None, interval_s=0)
