"""Builders for corpus fixtures that are binary or broken on purpose (written at test time)."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "corpus"


def minimal_pdf(lines: list[str]) -> bytes:
    """A valid one-page PDF showing ``lines`` in Helvetica (ASCII only)."""
    ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
    for line in lines:
        esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({esc}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (Pipeline notes) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def build_corpus(root: Path) -> Path:
    """Copy the text fixtures to ``root`` and add PDF, binary, broken-encoding, empty and odd files."""
    shutil.copytree(DATA, root, dirs_exist_ok=True)
    (root / "report.pdf").write_bytes(minimal_pdf(["Exams grade retrieval pipelines.", "IRT finds hard questions."]))
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    (root / "photo.txt").write_bytes(b"\x00\x01\x02binary-in-disguise\x00" * 50)
    (root / "latin1.txt").write_bytes("Café crème brûlée: naïve façade.".encode("cp1252"))
    (root / "garbage.txt").write_bytes(b"\x81\x8d\x8f\x90\x9d\xc3\x28\xa0\xa1" * 40)
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_text("  \n\n\t\n", encoding="utf-8")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (root / "table.xyz").write_text("unsupported", encoding="utf-8")
    (root / ".hidden.txt").write_text("hidden file", encoding="utf-8")
    return root
