"""A small psycopg adapter for pgvector's ``vector`` type (no ``pgvector`` package needed).

numpy float32 arrays are sent in pgvector's binary form (uint16 dimension, uint16 unused, big-endian float4 values)
and ``vector`` values come back as float32 arrays, in text or binary results. Binary transfer is exact and avoids
printing and parsing 384 decimal numbers per vector (about 1.5 ms a vector in Python on the development box).
Registered once per pooled connection (:func:`ensure_registered`), after the migrations created the extension.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import Connection, pq
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.types import TypeInfo

from tmem.errors import StoreError

_HEAD = struct.Struct(">HH")
# pgvector's hnsw.ef_search for every pooled connection (pgvector's own default is 40). 400 is the lowest value measured
# to reach recall@50 >= 0.98 against exact search at 100k views (0.989; 200 gave 0.967): bench/results/scale.md.
DEFAULT_EF_SEARCH = 400
_registered: weakref.WeakSet[Connection[Any]] = weakref.WeakSet()


def _finite(arr: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    if not np.all(np.isfinite(arr)):
        raise StoreError("A vector with NaN or infinite values cannot be stored; re-embed the text.")
    return arr


class _VectorDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        arr = _finite(np.asarray(obj, dtype=np.float32).reshape(-1))
        return _HEAD.pack(arr.shape[0], 0) + arr.astype(">f4").tobytes()


class _VectorBinaryLoader(Loader):
    format = pq.Format.BINARY

    def load(self, data: Buffer) -> npt.NDArray[np.float32]:
        dim, _ = _HEAD.unpack_from(data)
        return np.frombuffer(data, dtype=">f4", count=dim, offset=_HEAD.size).astype(np.float32)


class _VectorTextLoader(Loader):
    format = pq.Format.TEXT

    def load(self, data: Buffer) -> npt.NDArray[np.float32]:
        body = bytes(data).strip()[1:-1]
        return np.array(body.split(b","), dtype=np.float32) if body else np.zeros(0, dtype=np.float32)


def ensure_registered(conn: Connection[Any]) -> None:
    """Teach ``conn`` the ``vector`` type (numpy arrays in, numpy arrays out); a no-op when already done."""
    if conn in _registered:
        return
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise StoreError(
            "PostgreSQL has no 'vector' type: the pgvector extension is missing. Install pgvector on the server "
            "(https://github.com/pgvector/pgvector) and rerun, so that the migrations can CREATE EXTENSION vector."
        )
    info.register(conn)
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, _VectorTextLoader)
    _registered.add(conn)


def configure_session(conn: Connection[Any]) -> None:
    """Session settings of every pooled connection, committed so that no later rollback undoes them: HNSW scans
    continue past ``ef_search`` until their LIMIT is met under a filter (iterative scan, pgvector >= 0.8), with a
    wider first pass than pgvector's default. Unknown to a server without pgvector, they stay inert placeholders."""
    conn.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), set_config('hnsw.ef_search', %s, false)",
        (str(DEFAULT_EF_SEARCH),),
    )
    conn.commit()
