"""Embeddings: the encoders (sentence-transformers, OpenVINO), their saved tokenizer, batching, and the content-addressed cache."""
