"""Indices over a space's memory: BM25 over node texts, dense tables per node type, multi-view trigger tables."""

from tmem.index.bm25 import BM25Index, tokenize
from tmem.index.dense import DenseTable
from tmem.index.space import SpaceIndex, SpaceRecords, load_space
from tmem.index.views import ViewTable

__all__ = ["BM25Index", "DenseTable", "SpaceIndex", "SpaceRecords", "ViewTable", "load_space", "tokenize"]
