"""The sampler's sidecars read back from bytes the test wrote by the documented format.

docs/worker-file.md: a 64-byte little-endian header (magic "LPSMPL01", u32 version 1, u32
header_bytes, u32 row_words = 12 + 2 * n_gpu, u32 n_gpu, u64 interval_ns, u64 pid, u64
start_unix_ns), then rows of row_words signed 64-bit words; the ``.tags`` file holds one
``[id, [names...]]`` JSON line per tag. Every expected value is what the test packed itself.
"""

from __future__ import annotations

import struct

import pytest

from lineprofiler.runfile.samples import (
    MAX_GPUS,
    SamplesError,
    read_samples,
    read_sidecar,
    read_tags,
    sidecar_name_ok,
)

MAGIC = b"LPSMPL01"


def header(n_gpu: int = 0, *, version: int = 1, hb: int = 64, words: int | None = None,
           magic: bytes = MAGIC, interval_ns: int = 250_000_000, pid: int = 4242,
           start: int = 1_796_226_000_000_000_000) -> bytes:  # fmt: skip
    words = 12 + 2 * n_gpu if words is None else words
    head = magic + struct.pack("<IIII", version, hb, words, n_gpu)
    head += struct.pack("<QQQ", interval_ns, pid, start)
    return head + bytes(hb - len(head)) if hb >= len(head) else head[:hb]


def rows(values: list[list[int]]) -> bytes:
    return b"".join(struct.pack(f"<{len(r)}q", *r) for r in values)


def test_rows_come_back_as_the_columns_written(tmp_path):
    # two rows with one GPU: 14 words each; a third row cut short by a kill
    r1 = list(range(1, 15))
    r2 = [-(k * 1000) for k in range(1, 15)]
    p = tmp_path / "w.samples"
    p.write_bytes(header(1) + rows([r1, r2]) + rows([r1])[:40])
    t = read_samples(p)
    assert (t.pid, t.interval_ns, t.n_gpu, t.start_unix_ns, t.rows) == (
        4242,
        250_000_000,
        1,
        1_796_226_000_000_000_000,
        2,
    )
    assert len(t.cols) == 14
    for k in range(14):
        assert list(t.cols[k]) == [r1[k], r2[k]], k


def test_a_longer_header_is_skipped_by_its_declared_size(tmp_path):
    p = tmp_path / "w.samples"
    r = [7] * 12
    p.write_bytes(header(0, hb=96) + rows([r]))
    t = read_samples(p)
    assert t.rows == 1 and [c[0] for c in t.cols] == r


def test_a_header_alone_has_no_rows(tmp_path):
    p = tmp_path / "w.samples"
    p.write_bytes(header(0))
    assert read_samples(p).rows == 0


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(header(0)[:63], id="short-header"),
        pytest.param(header(0, magic=b"LPSMPL02") + rows([[0] * 12]), id="magic"),
        pytest.param(b"x" + header(0)[1:], id="magic-first-byte"),
        pytest.param(header(0, version=2) + rows([[0] * 12]), id="version"),
        pytest.param(header(0, version=0) + rows([[0] * 12]), id="version-0"),
        pytest.param(header(0, words=13) + rows([[0] * 13]), id="words"),
        pytest.param(header(1, words=12) + rows([[0] * 12]), id="words-gpu"),
        pytest.param(header(0)[:12] + struct.pack("<I", 63) + header(0)[16:], id="hb-small"),
        pytest.param(header(0)[:12] + struct.pack("<I", 200) + header(0)[16:], id="hb-past-end"),
        pytest.param(
            MAGIC + struct.pack("<IIII", 1, 64, 12 + 2 * (MAX_GPUS + 1), MAX_GPUS + 1) + bytes(40),
            id="gpus",
        ),
    ],
)
def test_anything_but_a_samples_file_is_refused(tmp_path, data):
    p = tmp_path / "w.samples"
    p.write_bytes(data)
    with pytest.raises(SamplesError) as exc:
        read_samples(p)
    assert str(exc.value).startswith("w.samples: ")


def test_the_largest_gpu_count_and_the_exact_header_size_are_accepted(tmp_path):
    p = tmp_path / "w.samples"
    p.write_bytes(header(MAX_GPUS, hb=64))
    t = read_samples(p)
    assert t.n_gpu == MAX_GPUS and t.rows == 0 and len(t.cols) == 12 + 2 * MAX_GPUS
    q = tmp_path / "h.samples"
    q.write_bytes(header(0))  # header_bytes == the file's size: valid, no rows
    assert read_samples(q).rows == 0


def test_read_sidecar_names_the_file_and_respects_the_limit(tmp_path):
    p = tmp_path / "w.tags"
    p.write_bytes(b"0123456789")
    assert read_sidecar(p, 10) == b"0123456789"
    with pytest.raises(SamplesError) as exc:
        read_sidecar(p, 9)
    assert str(exc.value).startswith("w.tags: ")
    with pytest.raises(SamplesError) as exc:
        read_sidecar(tmp_path / "missing.tags", 100)
    assert str(exc.value).startswith("missing.tags: ")


def test_tags_map_ids_to_paths_and_skip_lines_the_sampler_did_not_write(tmp_path):
    p = tmp_path / "w.tags"
    p.write_text(
        '[1, ["step"]]\n'
        '[2, ["step", "load"]]\n'
        '[3, ["cut short"\n'  # a write cut by a kill
        '[4, "not a list"]\n'
        '[5, ["ok", 7]]\n'
        "[]\n"
        '["6", ["id as text"]]\n'
        '[7, ["caf\\u00e9"]]\n'
    )
    assert read_tags(p) == {
        0: (),
        1: ("step",),
        2: ("step", "load"),
        6: ("id as text",),
        7: ("café",),
    }


def test_bytes_that_are_not_utf8_in_a_tags_file_are_replaced_not_fatal(tmp_path):
    p = tmp_path / "w.tags"
    p.write_bytes(b'[1, ["caf\xe9"]]\n[2, ["ok"]]\n')
    assert read_tags(p) == {0: (), 1: ("caf\ufffd",), 2: ("ok",)}


def test_missing_tags_leave_only_the_no_phase_tag(tmp_path):
    assert read_tags(tmp_path / "absent.tags") == {0: ()}


@pytest.mark.parametrize(
    "name, ok",
    [
        ("w_x_1_0000.samples", True),
        ("a", True),
        ("x" * 255, True),
        ("x" * 256, False),
        ("", False),
        (".", False),
        ("..", False),
        ("../w.samples", False),
        ("sub/w.samples", False),
        ("w\0.samples", False),
        (None, False),
        (7, False),
        (["w.samples"], False),
    ],
)
def test_sidecar_names_are_plain_names_beside_the_worker_file(name, ok):
    assert sidecar_name_ok(name) is ok
