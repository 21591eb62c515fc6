"""The fact corpus shared by the retrieval tests."""

from __future__ import annotations

from ragrade.corpus.types import Chunk, Document

FACTS: list[tuple[str, str, str]] = [
    (
        "The lighthouse at Varnholm was painted crimson in 1887 by the carpenter Olaf Brenna.",
        "What colour was the Varnholm lighthouse painted?",
        "lighthouse",
    ),
    (
        "Quinoa exports from the Altiplano plateau doubled after the 2013 harvest festival.",
        "What happened to quinoa exports from the Altiplano after 2013?",
        "quinoa",
    ),
    (
        "The Zephyr-9 delivery drone carries a lithium-sulfur battery rated for 41 minutes of flight.",
        "How long can the Zephyr-9 drone stay in the air on one battery?",
        "drone",
    ),
    (
        "Marisol Eckhart composed the Glass Harbour symphony for seventeen cellos and a foghorn.",
        "Who composed the Glass Harbour symphony?",
        "music",
    ),
    (
        "Copper oxide paint cut barnacle growth on the research ship Kestrel by sixty percent.",
        "Which coating reduced barnacles on the ship Kestrel?",
        "ship",
    ),
    (
        "The Tessaly glacier retreated 340 metres between 1990 and 2020 according to satellite surveys.",
        "How far did the Tessaly glacier retreat?",
        "glacier",
    ),
    (
        "Baker Ingrid Solvang won the national sourdough prize with a rye loaf fermented for three days.",
        "Who won the national sourdough baking prize?",
        "bread",
    ),
    (
        "The Orinth protocol encrypts satellite telemetry with 512-bit keys rotated every hour.",
        "How does the Orinth protocol protect satellite telemetry?",
        "crypto",
    ),
]


def fact_docs() -> list[Document]:
    """One short document per fact."""
    return [
        Document(id=f"fact{i}", text=f"{text}", source=f"facts/{topic}.txt", metadata={"topic": topic})
        for i, (text, _, topic) in enumerate(FACTS)
    ]


def fact_chunks() -> list[Chunk]:
    """One chunk per fact document (no chunker needed)."""
    return [
        Chunk(
            id=f"{d.id}#c0",
            doc_id=d.id,
            text=d.text,
            start=0,
            end=len(d.text),
            strategy="whole",
            source=d.source,
            metadata=d.metadata,
        )
        for d in fact_docs()
    ]
