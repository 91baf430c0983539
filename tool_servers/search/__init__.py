"""Semantic code search: chunking, embeddings, the LanceDB index, queries."""
