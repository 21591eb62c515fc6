"""The corpus stage: files -> cleaned documents -> chunks.

* :mod:`ragrade.corpus.load` — ``load_corpus(paths, cfg) -> LoadReport`` (txt, md, rst, html, json/jsonl, pdf;
  MkDocs and Sphinx sites through :mod:`ragrade.corpus.site`, snippets, apidoc and myst_include);
* :mod:`ragrade.corpus.demo` — ``build_demo_corpus(limit)`` from the standard library's docstrings;
* :mod:`ragrade.corpus.chunk` — ``create_chunker(strategy, size, overlap)`` (token, recursive, sentence,
  semantic) and ``chunk_documents(docs, chunker)``;
* :mod:`ragrade.corpus.files` — ``read/write_documents``, ``read/write_chunks``.

Submodules are imported on demand so that importing the package stays cheap.
"""
