"""Sentence embedders (the bundled MiniLM over ONNX or sentence-transformers, and registered specs).

A model-access service below the stages, beside :mod:`ragrade.llm`: chunking, exam generation,
retrieval, judging and the offline LLM all embed text through :mod:`ragrade.embedding.embed`;
:class:`~ragrade.embedding.base.Embedder` is the protocol they accept.
"""
