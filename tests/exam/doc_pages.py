"""Small documentation pages with the traps of real docs for the offline cloze generator.

Each page has facts worth asking about, and: a sentence that introduces a code block and ends with ':', a
sentence that points at an example it does not show, an issue number and a repository reference, a link
target, the same admonition and footer as the other pages (template boilerplate), and a sentence of lorem
ipsum filler holding a number (placeholder text).
"""

from __future__ import annotations

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.formats import read_markdown
from ragrade.corpus.types import Chunk, Document

FOOTER = "This page is maintained by the Kestrel Docs Team and was last reviewed in March 2024."
ADMONITION = "Note: Support for Python 3.8 ends in October 2025, so upgrade to Python 3.12 before then."

_PAGES = [
    ("workers", "Ada Lovelace", "May 2019", "worker_concurrency", 16, 4821, "Redis"),
    ("retries", "Grace Hopper", "June 2018", "retry_backoff", 32, 5170, "RabbitMQ"),
    ("scheduling", "Alan Turing", "July 2017", "beat_interval", 64, 6043, "Postgres"),
    ("storage", "Barbara Liskov", "August 2016", "result_ttl", 128, 7312, "MongoDB"),
    ("logging", "Donald Knuth", "April 2015", "log_format", 256, 8890, "Graylog"),
    ("security", "Leslie Lamport", "September 2014", "tls_ciphers", 512, 9321, "Vault"),
]


def page(i: int) -> str:
    """The Markdown text of page ``i``."""
    topic, person, when, option, number, issue, backend = _PAGES[i]
    return f"""# Kestrel {topic}

The {topic} subsystem of Kestrel was designed by {person} in {when} and handles {number} tasks per node.

Nam quis purus {i + 3} varius luctus, sed pretium tellus tempor vitae in {when.split()[1]} lacinia.

To configure `{option}` for the {topic} subsystem, set the following:

```toml
[{topic}]
{option} = {number}
```

The default value of `{option}_limit` is shown in this example and applies to every queue on the node.

Since release {i + 2}.{i + 1} the {topic} subsystem stores its state in {backend} instead of local files.

The old behaviour was removed after a long discussion in kestrel/kestrel#{issue} by the core developers.

Read `notes/{option}.md` or kestrel.example.org before changing how the {topic} subsystem stores state.

{ADMONITION}

{FOOTER}
"""


def doc_chunks(size: int = 60) -> list[Chunk]:
    """The pages, read as Markdown and cut into chunks of about ``size`` tokens."""
    chunker = create_chunker("recursive", size=size, overlap=0, min_size=0)
    out: list[Chunk] = []
    for i, (topic, *_rest) in enumerate(_PAGES):
        text = read_markdown(page(i)).text
        doc = Document(id=f"kestrel-{topic}", text=text, source=f"docs/{topic}.md", metadata={"title": topic})
        out.extend(chunker.chunk(doc))
    return out
