"""A seeded external shuffle of a stream of rankings, in bounded memory.

``--order shuffle`` asks for the rankings in a uniformly random order, which a stream
cannot give directly. :func:`external_shuffle` is the classic two-step scatter shuffle
([Rao61], [Sandelius62]): every
ranking goes to one of ``B`` bucket files, the bucket drawn uniformly and independently
with a seeded generator; then the buckets are read back one after the other and each is
permuted uniformly in memory. The concatenation is a *uniformly random permutation* of
the whole stream: given the bucket sizes, every assignment of rankings to buckets is
equally likely and so is every order within a bucket, and each permutation arises from
exactly one assignment-and-orders pair per size vector (tested on small streams against
the uniform distribution over all permutations).

Memory: one chunk while scattering, one bucket (about ``N / B`` rankings) while
gathering. Disk: the encoded rankings once (4 bytes per item id plus 16 per ranking),
in a temporary folder removed at the end.

With one bucket no bucket is drawn, and the order is ``rng.permutation(N)``: exactly the
permutation ``fit_online(order="shuffle")`` draws in memory from the same generator, so a
stream that fits one bucket (the command uses one for Parquet up to 2^20 rankings and
CSV up to 16 MiB) is shuffled
bit for bit as in memory (tested). With more buckets the draw is another uniform
permutation than the in-memory one for the same seed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..data import PAD, Rankings

_META = np.dtype([("length", "<i4"), ("worker", "<i4"), ("origin", "<i8")])


def buckets_for(n_estimate: int, bucket_rows: int = 1 << 20, most: int = 512) -> int:
    """How many buckets keep each near ``bucket_rows`` rankings (at least 1, at most
    ``most`` open files)."""
    return int(min(max(1, -(-int(n_estimate) // int(bucket_rows))), most))


def external_shuffle(chunks: Iterable[Rankings], seed: int | np.random.Generator,
                     buckets: int = 16, tmpdir: str | Path | None = None
                     ) -> Iterator[Rankings]:
    """The rankings of ``chunks`` in a uniformly random order (module docstring), yielded
    one bucket at a time as :class:`Rankings` over the stream's final ``items`` and
    ``workers``; ``origin`` keeps each ranking's index in the input stream. ``chunks``
    must extend each other's ``items``/``workers`` (as the streaming reader's do)."""
    if buckets < 1:
        raise ValueError("buckets must be >= 1")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    folder = Path(tempfile.mkdtemp(prefix="crowdrank-shuffle-", dir=tmpdir))
    try:
        last = None
        paths = [folder / f"b{i}.bin" for i in range(buckets)]
        files = [p.open("wb") for p in paths]
        try:
            for chunk in chunks:
                last = chunk
                _scatter(chunk, np.zeros(chunk.n_rankings, dtype=np.int64) if buckets == 1
                         else rng.integers(0, buckets, size=chunk.n_rankings), files)
        finally:
            for f in files:
                f.close()
        if last is None:
            return
        for p in paths:
            part = _gather(p, last)
            if part is not None:
                yield part.subset(rng.permutation(part.n_rankings))
            p.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _scatter(chunk: Rankings, bucket: np.ndarray, files) -> None:
    lengths = chunk.lengths
    flat_all = chunk.order.T[np.arange(chunk.K)[None, :] < lengths[:, None]]
    starts = np.cumsum(lengths) - lengths
    by = np.argsort(bucket, kind="stable")
    counts = np.bincount(bucket, minlength=len(files))
    edges = np.concatenate([[0], np.cumsum(counts)])
    for b in np.flatnonzero(counts).tolist():
        sel = by[edges[b]:edges[b + 1]]
        meta = np.empty(len(sel), dtype=_META)
        meta["length"], meta["worker"], meta["origin"] = (
            lengths[sel], chunk.worker[sel], chunk.origin[sel])
        flat = flat_all[_ranges(starts[sel], lengths[sel])].astype("<i4")
        head = np.array([len(sel), len(flat)], dtype="<i8")
        files[b].write(head.tobytes() + meta.tobytes() + flat.tobytes())


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + k) for s, k in zip(starts, lengths)])``, vectorised."""
    lengths = lengths.astype(np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64) - offsets, lengths) + np.arange(lengths.sum())


def _gather(path: Path, like: Rankings) -> Rankings | None:
    raw = path.read_bytes()
    metas, flats, pos = [], [], 0
    while pos < len(raw):
        n, nf = np.frombuffer(raw, dtype="<i8", count=2, offset=pos)
        pos += 16
        metas.append(np.frombuffer(raw, dtype=_META, count=int(n), offset=pos))
        pos += int(n) * _META.itemsize
        flats.append(np.frombuffer(raw, dtype="<i4", count=int(nf), offset=pos))
        pos += int(nf) * 4
    if not metas:
        return None
    meta = np.concatenate(metas)
    flat = np.concatenate(flats)
    lengths = meta["length"].astype(np.int32)
    K = max(int(lengths.max()), 2)
    order = np.full((K, len(lengths)), PAD, dtype=np.int32)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    pos_in = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    order[pos_in, rows] = flat
    return Rankings(items=like.items, workers=like.workers, order=order, lengths=lengths,
                    worker=meta["worker"], origin=meta["origin"], source=like.source,
                    notes=("shuffled externally",))
