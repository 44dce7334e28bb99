"""Indices over a space's memory: BM25 over node texts, dense tables per node type, multi-view trigger tables."""

from tmem.index.bm25 import BM25Index, tokenize
from tmem.index.dense import DenseTable

__all__ = ["BM25Index", "DenseTable", "tokenize"]
