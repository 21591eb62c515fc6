"""The retrieval stage: BM25, dense (persisted vector stores), hybrid fusion, reranking, metrics.

Importing this package registers the retrievers (kind ``retriever``); embedders and
vector stores register from :mod:`ragrade.embedding.embed` and :mod:`ragrade.retrieval.store`.
"""

from ragrade.retrieval import retrievers as _retrievers  # noqa: F401  (registration)
