"""Document retrieval over a corpus (BM25 or dense embeddings), with indexes cached on disk."""
